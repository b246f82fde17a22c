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


def module_name(path: Path) -> str:
    """``plait/spec.py`` -> ``plait.spec``; a package's ``__init__.py`` -> the package."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """The product modules ``path`` imports (lazy imports included): for
    ``from a.b import c`` the module ``a.b.c`` when it is one, else ``a.b``;
    relative imports resolved against ``path``'s package."""
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            for alias in node.names:
                out.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {m for m in out if m in known and m != here}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(cycles)


def test_import_cycles_are_found():
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_product_modules(gc_paused):
    paths = {module_name(p): p for package in LAYER for p in sorted((ROOT / package).rglob("*.py"))}
    graph = {name: imported_modules(path, set(paths)) for name, path in paths.items()}
    assert import_cycles(graph) == []


#: Product packages the private-name fence covers.
FENCED = ("alerting", "api", "plait", "streams", "schedules", "sinks", "ops", "producers")

#: Third-party and standard-library internals a module may touch, by
#: (path, name), each for a reason the library gives no public way around.
THIRD_PARTY_INTERNALS = {
    # Version-named patches of Faust/aiokafka internals, each smoke-tested in
    # tests/kernel/test_patches.py; _plait_* are the patch's own marks.
    ("plait/patches.py", "._create_worker_consumer"),
    ("plait/patches.py", "._fetch_max_wait_ms"),
    ("plait/patches.py", "._plait_tuned"),
    ("plait/patches.py", "._plait_wait"),
    ("plait/patches.py", "._current_event"),
    ("plait/patches.py", "._sentinel_task"),
    # os._exit is public (documented in the os module) despite its name.
    ("plait/agent.py", "._exit"),
    # librdkafka's client-wide error codes are named with a leading underscore.
    ("producers/sdk.py", "._ALL_BROKERS_DOWN"),
    # python-docx has no public handle on a row's <w:tr> (repeat-header flag).
    ("sinks/writers/docx_writer.py", "._tr"),
    # zipfile's write handle: deflated chunks go straight to the archive with
    # the CRC-32 and sizes kept as ZipFile's own write keeps them.
    ("sinks/writers/xlsx_native.py", "._compresslevel"),
    ("sinks/writers/xlsx_native.py", "._fileobj"),
    ("sinks/writers/xlsx_native.py", "._compress_size"),
    ("sinks/writers/xlsx_native.py", "._file_size"),
    ("sinks/writers/xlsx_native.py", "._crc"),
    ("alerting/matchers.py", "._Regexp"),  # google-re2: compile without its shared cache
    # Faust's producer has no public partition count: aiokafka's partitions_for
    # (checked in tests/kernel/test_patches.py, in-place internals).
    ("plait/agent.py", "._ensure_producer"),
}


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_reach_ins(source: str) -> list[tuple[int, str]]:
    """(line, what) of every ``from m import _name`` and every ``x._name``
    whose ``x`` is not the bare name ``self`` or ``cls``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            out += [(node.lineno, f"from {node.module} import {a.name}")
                    for a in node.names if private(a.name)]
        elif isinstance(node, ast.Attribute) and private(node.attr):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                out.append((node.lineno, f".{node.attr}"))
    return out


def test_private_reach_ins_are_found():
    source = ("from a.b import _c, d\nself._e\ncls._f\nother._g\nf()._h\nx.__len__\n"
              "from .m import _i\n")
    assert sorted(private_reach_ins(source)) == [
        (1, "from a.b import _c"), (4, "._g"), (5, "._h"), (7, "from m import _i")]


def test_no_module_reaches_into_another_modules_private_names(gc_paused):
    found, seen = [], set()
    for package in FENCED:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for line, what in private_reach_ins(path.read_text(encoding="utf-8")):
                seen.add((rel, what))
                if (rel, what) not in THIRD_PARTY_INTERNALS:
                    found.append(f"{rel}:{line} {what}")
    assert found == [], found
    assert THIRD_PARTY_INTERNALS <= seen, sorted(THIRD_PARTY_INTERNALS - seen)
