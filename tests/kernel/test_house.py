"""House rules of docs/architecture.md, "Reading the code": no product function over
80 lines, and docstrings plus comments under 20% of the product's non-blank lines."""
from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("alerting", "api", "ops", "plait", "producers", "schedules", "sinks", "streams")
MAX_FUNCTION_LINES = 80
MAX_PROSE_SHARE = 0.20


def product_files() -> list[Path]:
    return sorted(p for package in PRODUCT for p in (ROOT / package).rglob("*.py"))


def prose_lines(source: str) -> tuple[int, int]:
    """(docstring or comment lines, non-blank lines) of one module's ``source``."""
    prose: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            prose.update(range(body[0].lineno, body[0].end_lineno + 1))
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            prose.add(token.start[0])
    lines = [n for n, text in enumerate(source.splitlines(), 1) if text.strip()]
    return len(prose.intersection(lines)), len(lines)


def test_prose_lines_counts_docstrings_and_comments_only():
    source = 'def f():\n    """Doc\n    two."""\n\n    # why\n    return 1  # trailing\n'
    assert prose_lines(source) == (4, 5)


def test_no_product_function_is_longer_than_80_lines():
    long = []
    for path in product_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = node.end_lineno - node.lineno + 1
                if size > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({size} lines)")
    assert long == [], long


def test_prose_is_under_a_fifth_of_product_lines():
    prose = total = 0
    for path in product_files():
        p, t = prose_lines(path.read_text(encoding="utf-8"))
        prose, total = prose + p, total + t
    assert prose / total < MAX_PROSE_SHARE, f"{prose} of {total} lines are prose"
