"""Fixtures of the kernel tests."""
from __future__ import annotations

import gc

import pytest


@pytest.fixture
def gc_paused():
    """The cyclic garbage collector off while a test parses every source file
    with ``ast``. On CPython 3.11 a finalizer the collector runs in the middle
    of ``ast.parse`` (an earlier test's asyncio task whose exception nobody
    retrieved is logged with its traceback, and 3.11's traceback calls
    ``ast.parse`` for its carets) breaks the parser's shared recursion count:
    ``SystemError: AST constructor recursion depth mismatch``, seen once with
    ``-n 2``. The tasks found doing it (pages prepared ahead, left running
    by export unit tests) are now waited for (tests/export_unit/conftest.py);
    this guards against the next one."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
