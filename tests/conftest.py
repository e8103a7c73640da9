"""Shared fixtures: hermetic temporary git repositories and a runner for the real CLI."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"

TODO = """\
# Tasks

Notes for humans stay untouched.

## add-login: Add a login page
- Purpose: users cannot sign in yet
- Scope: the login form and session handling in src/auth
- Components: form, session store, tests
- Files: src/auth/login.py, tests/test_login.py

## fix-typo: Fix a typo in the guide
- Purpose: the guide misspells the product name
- Scope: docs/guide.md only
- Components: documentation
- Files: docs/guide.md

## needs-login: Use the login page
- Purpose: show the user name
- Scope: header
- Components: header
- Depends: add-login

## vague: A task without scope
- Purpose: something
"""


@pytest.fixture(autouse=True)
def _hermetic(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the real home directory or the developer's git configuration."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in ("TASKGATE_SESSION", "CLAUDECODE", "TASKGATE_AGENT", "TASKGATE_FAKE_NOW"):
        monkeypatch.delenv(var, raising=False)
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Test\n\temail = test@example.com\n"
        "[init]\n\tdefaultBranch = main\n[commit]\n\tgpgsign = false\n"
    )


@pytest.fixture(scope="session", autouse=True)
def _no_server_left(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """At the end of the run, stop every `taskgate serve` started under its base temp (a
    SessionStart hook, `hooks status` or a bench script started it; tests/servers_left.py),
    even when a test forgot one: SIGTERM, then SIGKILL after a grace period."""
    yield
    from servers_left import stop_servers_under

    stop_servers_under(tmp_path_factory.getbasetemp())


def git(cwd: Path, *args: str) -> str:
    """Run git in a test repository and return stdout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    result = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def edit_store(repo: Repo, statement: str, *params: Any) -> None:
    """Edit the store behind taskgate's back, like a person with the sqlite3 shell would."""
    conn = sqlite3.connect(repo.path / ".taskgate" / "state.db")
    try:
        conn.execute(statement, params)
        conn.commit()
    finally:
        conn.close()


@dataclass
class Run:
    """A finished CLI run."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        """stdout parsed as JSON."""
        return json.loads(self.out)


@dataclass
class Repo:
    """A temporary repository with taskgate initialised and a CLI runner."""

    path: Path

    def run(
        self,
        *args: str,
        session: str | None = "s1",
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        stdin: str | None = None,
    ) -> Run:
        """Run `python -m taskgate ARGS` as a subprocess, like a user would."""
        full_env = dict(os.environ)
        full_env["PYTHONPATH"] = str(SRC)
        full_env.pop("TASKGATE_SESSION", None)
        if session is not None:
            full_env["TASKGATE_SESSION"] = session
        full_env.update(env or {})
        proc = subprocess.run(
            [sys.executable, "-m", "taskgate", *args],
            cwd=cwd or self.path,
            env=full_env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return Run(proc.returncode, proc.stdout, proc.stderr)

    def ok(self, *args: str, **kw: Any) -> Run:
        """Run and assert exit 0."""
        result = self.run(*args, **kw)
        assert result.code == 0, f"{args} -> {result.code}\n{result.out}\n{result.err}"
        return result

    def worktree(self, task: str) -> Path:
        """The task worktree path."""
        return self.path / ".taskgate" / "tasks" / task / "code"

    def task_dir(self, task: str) -> Path:
        """The task directory."""
        return self.path / ".taskgate" / "tasks" / task

    def git(self, *args: str) -> str:
        """git in the main worktree."""
        return git(self.path, *args)


def make_repo(path: Path, todo: str = TODO, config: str = "") -> Repo:
    """Create a repository with one commit, todo.md and `taskgate init` done."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    (path / "todo.md").write_text(todo)
    (path / "README.md").write_text("sample\n")
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "initial")
    repo = Repo(path)
    repo.ok("init")
    if config:
        (path / "taskgate.toml").write_text(config)
    return repo


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Repo]:
    """A fresh repository with taskgate initialised."""
    yield make_repo(tmp_path / "repo")


TYPE_CHECKING = False
if TYPE_CHECKING:
    import pgserver


@pytest.fixture(scope="session")
def pg() -> Iterator[pgserver.PgServer]:
    """One throwaway PostgreSQL cluster for the whole run (tests/pgserver.py), started on first
    use; a test takes a database of its own with `pg.fresh_database()` (store_kinds.py,
    pg_plugin.py and the team suites do)."""
    import pgserver

    server = pgserver.start_server()
    try:
        yield server
    finally:
        pgserver.remove(server)
