"""Many processes racing for tasks: exactly one owner each, no session holding two (R-LCK-01/19),
on either store (SQLite, and a real PostgreSQL server: tests/store_kinds.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import SRC, git, make_repo
from store_kinds import kind_fixture  # noqa: F401


def _spawn(repo: Path, session: str, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(SRC), TASKGATE_SESSION=session)
    return subprocess.Popen(
        [sys.executable, "-m", "taskgate", *args, "--json"],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(procs: list[subprocess.Popen[str]]) -> list[tuple[int, str, str]]:
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        results.append((proc.returncode, out, err))
    return results


def test_R_LCK_01_twenty_four_processes_race_for_one_task(tmp_path: Path, store_kind: str) -> None:
    repo = make_repo(tmp_path / "r")
    procs = [_spawn(repo.path, f"s{i}", "start", "add-login") for i in range(24)]
    results = _finish(procs)
    codes = sorted(code for code, _, _ in results)
    assert codes.count(0) == 1, results
    assert codes.count(3) == 23, results  # everyone else: owned by another session
    status = repo.ok("status", "add-login", "--json").json()
    winner = next(i for i, (code, _, _) in enumerate(results) if code == 0)
    assert status["session_id"] == f"s{winner}"
    assert git(repo.path, "worktree", "list", "--porcelain").count("worktree ") == 2


def test_R_LCK_19_twenty_sessions_race_for_ten_tasks(tmp_path: Path, store_kind: str) -> None:
    todo = "".join(
        f"## task-{i}: Task {i}\n- Purpose: p\n- Scope: s\n- Components: c\n\n" for i in range(10)
    )
    repo = make_repo(tmp_path / "r", todo=todo)
    procs = [_spawn(repo.path, f"s{i}", "next") for i in range(20)]
    results = _finish(procs)
    claimed = [code for code, _, _ in results if code == 0]
    assert len(claimed) == 10, results
    assert all(code == 1 for code, _, _ in results if code != 0), results
    rows = repo.ok("status", "--json").json()
    assert sorted(r["task_name"] for r in rows) == sorted(f"task-{i}" for i in range(10))
    owners = [r["session_id"] for r in rows]
    assert len(set(owners)) == 10  # no session holds two tasks
    listed = git(repo.path, "worktree", "list", "--porcelain")
    assert listed.count("worktree ") == 11
    git(repo.path, "fsck", "--no-progress")
    assert (repo.path / ".taskgate" / "state.db").exists() == (store_kind == "sqlite")
