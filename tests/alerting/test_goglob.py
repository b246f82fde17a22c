"""Alertmanager's ``templates`` globs read the files Go's ``filepath.Glob`` would
(``alerting.goglob``): Go's pattern syntax (``filepath.Match``'s grammar), its errors for malformed
patterns, its order, and its treatment of dotfiles."""
from __future__ import annotations

import pytest

from alerting.goglob import BAD_PATTERN, compile_name, glob


@pytest.mark.parametrize("pattern,name,matches", [
    ("*", ".hidden", True),            # Go hides nothing: * matches a leading dot
    ("?hidden", ".hidden", True),
    ("ab[^c]", "abc", False),          # ^ negates a class
    ("ab[^e-g]", "abc", True),
    ("[!a]", "!", True),               # ! is a plain char in Go
    ("[!a]", "b", False),
    ("a\\*b", "a*b", True),            # backslash escapes
    ("a\\*b", "axb", False),
    ("[\\]a]", "]", True),
    ("[x\\-]", "-", True),
    ("[z-a]", "m", False),             # an empty range matches nothing
    ("[^z-a]", "m", True),
    ("a?b", "a☺b", True),              # ? is one rune
    ("[a-ζ]*", "αβ", True),
    ("a*", "ab/c", False),             # * stays within a name
])
def test_go_pattern_semantics(pattern, name, matches):
    assert bool(compile_name(pattern).fullmatch(name)) is matches


@pytest.mark.parametrize("pattern", ["[", "[^", "[^bc", "a[", "[]a]", "[-]", "[x-]", "[-x]",
                                     "[a-b-c]", "\\", "tmpl/[a"])
def test_malformed_patterns_are_errors_not_empty_matches(tmp_path, pattern):
    with pytest.raises(ValueError, match=BAD_PATTERN):
        glob(str(tmp_path / pattern))


def test_levels_in_name_order_a_plain_path_itself(tmp_path):
    for d in ("a", "a-c"):
        (tmp_path / d).mkdir()
        for f in ("y.tmpl", "x.tmpl", ".z.tmpl"):
            (tmp_path / d / f).write_text("")
    got = glob(str(tmp_path / "a*" / "*.tmpl"))
    # Go walks each directory level in name order: a/ before a-c/ (a byte sort of the
    # whole paths would put a-c/ first, '-' < '/')
    assert [p[len(str(tmp_path)) + 1:] for p in got] == [
        "a/.z.tmpl", "a/x.tmpl", "a/y.tmpl", "a-c/.z.tmpl", "a-c/x.tmpl", "a-c/y.tmpl"]
    assert glob(str(tmp_path / "a" / "x.tmpl")) == [str(tmp_path / "a" / "x.tmpl")]
    assert glob(str(tmp_path / "a" / "none.tmpl")) == []
