"""Input validation whose messages name the problem (issue 16): todo.md byte order marks and
Unicode line separators, dependency cycles and unknown dependencies, config keys and paths,
--reason size, non-UTF-8 stdin."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SRC, TODO, Repo, make_repo

CYCLES = """# Tasks

## alpha: A
- Purpose: a
- Scope: a
- Components: a
- Depends: beta

## beta: B
- Purpose: b
- Scope: b
- Components: b
- Depends: alpha

## gamma: C
- Purpose: c
- Scope: c
- Components: c
- Depends: no-such-task
"""


def _todo(repo: Repo) -> dict[str, dict[str, str]]:
    return {r["task"]: r for r in repo.ok("todo", "--json").json()}


def test_bom_hides_no_task(tmp_path: Path) -> None:
    first = "## add-x: X\n- Purpose: p\n- Scope: s\n- Components: c\n\n"
    repo = make_repo(tmp_path / "r", todo="\ufeff" + first + TODO)
    names = list(_todo(repo))
    assert names[0] == "add-x" and "add-login" in names


@pytest.mark.parametrize("char", ["\u2028", "\u2029", "\x85"])
def test_unicode_line_separators_are_refused_naming_the_line(tmp_path: Path, char: str) -> None:
    todo = TODO.replace("## fix-typo: Fix a typo in the guide", f"## fix-typo: Fix{char}## evil: x")
    repo = make_repo(tmp_path / "r")
    (repo.path / "todo.md").write_text(todo, encoding="utf-8")
    result = repo.run("todo")
    assert result.code == 2
    line = todo.split("\n").index(next(x for x in todo.split("\n") if char in x)) + 1
    assert f"todo.md line {line}" in result.err and "U+" in result.err
    assert "evil" not in repo.run("next").out


def test_cycles_and_unknown_dependencies_say_why(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", todo=CYCLES)
    rows = _todo(repo)
    assert rows["alpha"]["availability"] == "blocked"
    assert "dependency cycle: alpha -> beta -> alpha" in rows["alpha"]["reason"]
    assert "no-such-task" in rows["gamma"]["reason"]
    assert "which no task in todo.md or changelog.md is called" in rows["gamma"]["reason"]
    result = repo.run("start", "gamma")
    assert result.code == 1 and "no-such-task" in result.err


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ("[run]\nparalel = 3\n", "[run]: unknown key(s) paralel"),
        ("[hooks]\nstrict = true\n", "[hooks]: unknown key(s) strict"),
        ('[workspace]\ntodo = "/etc/passwd"\n', "is absolute"),
        ('[workspace]\nchangelog = "../elsewhere.md"\n', "'..'"),
        ('[workspace]\ntasks_root = ""\n', "is empty"),
        ('[workspace]\ntasks_root = ".git/tasks"\n', "into .git"),
        ('[workspace]\ntodo = "docs/"\n', "must name a file"),
        ('[cleanup]\ndisposable = [""]\n', "non-empty patterns"),
    ],
)
def test_config_errors_name_the_key(tmp_path: Path, config: str, words: str) -> None:
    repo = make_repo(tmp_path / "r")
    (repo.path / "taskgate.toml").write_text(config)
    result = repo.run("todo")
    assert result.code == 2, result.err
    assert words in result.err


def test_reason_has_a_size_limit(repo: Repo) -> None:
    repo.ok("start", "add-login")
    result = repo.run("release", "add-login", "--force", "--reason", "x" * 5000, session=None)
    assert result.code == 2 and "the limit is 2000" in result.err
    assert repo.ok("status", "add-login", "--json").json()["lock"]["released_at"] is None


def test_non_utf8_stdin_to_say_is_a_usage_error(repo: Repo) -> None:
    repo.ok("start", "add-login")
    env = dict(os.environ, PYTHONPATH=str(SRC), TASKGATE_SESSION="s1")
    proc = subprocess.run(
        [sys.executable, "-m", "taskgate", "say", "add-login", "-"],
        cwd=repo.path, env=env, input=b"caf\xe9 approved\n", capture_output=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert b"not UTF-8" in proc.stderr and b"0xe9" in proc.stderr
