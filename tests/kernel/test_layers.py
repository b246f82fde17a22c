"""The layers of docs/architecture.md, "Packages and layers": a package imports
only from packages below it (lazy imports inside functions included)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYER = {"plait": 1, "sinks": 2, "alerting": 2, "schedules": 3, "streams": 4, "producers": 4,
         "api": 5, "ops": 6}


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, top-level package) of every import in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name.split(".")[0]) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module.split(".")[0]))
    return out


def test_every_import_goes_to_the_same_package_or_a_lower_layer(gc_paused):
    upward = []
    for package, layer in LAYER.items():
        for path in sorted((ROOT / package).rglob("*.py")):
            for line, target in imports(path):
                if target in LAYER and target != package and LAYER[target] >= layer:
                    upward.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert upward == [], upward
