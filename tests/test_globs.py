"""Gitignore-style globs for risk patterns (R-RSK-07)."""

from __future__ import annotations

import pytest

from taskgate.protocol.globs import compile_glob, normalize_pattern, pattern_problem


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("*.md", "sub/notes.md", True),  # no '/': basename at any depth
        ("CLAUDE.md", "sub/CLAUDE.md", True),
        ("docs/*.md", "docs/a.md", True),  # with '/': anchored at the root
        ("docs/*.md", "x/docs/a.md", False),
        ("docs/*.md", "docs/sub/a.md", False),  # '*' does not cross '/'
        ("**/pom.xml", "pom.xml", True),  # '**' spans zero directories
        ("**/pom.xml", "a/b/pom.xml", True),
        ("src/**/*.java", "src/A.java", True),
        ("src/**/*.java", "src/a/b/A.java", True),
        (".github/**", ".github/workflows/ci.yml", True),  # trailing '/**': everything below
        (".github/**", ".github", False),
        ("build/", "a/build/x.o", True),  # trailing '/': a directory at any depth
        ("test_?.py", "t/test_a.py", True),
        ("*.[ch]", "x.h", True),
        ("*.[!ch]", "x.o", True),
        ("*.[!ch]", "x.c", False),
        ("**", "any/thing", True),
        ("./docs/**", "docs/x", True),
    ],
)
def test_R_RSK_07_gitignore_globs(pattern: str, path: str, matches: bool) -> None:
    assert bool(compile_glob(pattern).match(path)) is matches


@pytest.mark.parametrize(
    ("pattern", "normal"), [("./docs/**", "docs/**"), ("a//b/", "a/b/"), ("./x/./y", "x/y")]
)
def test_normalize_pattern(pattern: str, normal: str) -> None:
    assert normalize_pattern(pattern) == normal and pattern_problem(pattern) is None


@pytest.mark.parametrize("bad", ["", "/abs", "../x", "!x", "a\\b", "[ab", "./"])
def test_pattern_problem(bad: str) -> None:
    assert pattern_problem(bad) is not None
    with pytest.raises(ValueError):
        compile_glob(bad)
