"""kill -9 inside protocol steps: the store opens, the state is old or new, the log matches,
and the views are re-rendered by the next command (R-TRN-04, R-TRN-05). On both stores:
SQLite and a real PostgreSQL server (tests/store_kinds.py)."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import random
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from conftest import Repo, make_repo
from flow import to_requirements
from store_kinds import kind_fixture  # noqa: F401
from taskgate.cli.main import main


def status_in_process(task: str) -> dict[str, object]:
    """`taskgate status T --json` through main() in this process (no interpreter start)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["status", task, "--json"]) == 0
    data: dict[str, object] = json.loads(out.getvalue())
    return data


def check_invariants(repo: Repo, task: str, *, in_process: bool = False) -> str:
    """Store consistent and the log a chain ending in the state; returns the state. Read
    through the workspace's own store, so the suite also runs on PostgreSQL (-p pg_plugin)."""
    from taskgate.engine.workspace import find_workspace
    from taskgate.store.select import open_store

    ws = find_workspace(repo.path)
    if not ws.uses_database_server:
        db = sqlite3.connect(ws.db_path)
        try:
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        finally:
            db.close()
    store = open_store(ws, timeout=30, read_only=True)
    try:
        with store.read() as tx:
            row = tx.task(task)
            assert row is not None
            state, seq = row.state, row.seq
            log = [(t.source, t.target) for t in tx.transitions(task)]
    finally:
        store.close()
    if log:
        assert log[0][0] == "INIT"
        for (_, to), (frm, _) in itertools.pairwise(log):
            assert to == frm  # R-TRN-05
        assert log[-1][1] == state
    else:
        assert state == "INIT"
    status = status_in_process(task) if in_process else repo.ok("status", task, "--json").json()
    view = json.loads((repo.task_dir(task) / "task.json").read_text())
    assert view["state"] == state == status["state"]
    assert view["_seq"] == status["_seq"] >= seq
    return state


@pytest.mark.parametrize("point", ["step:before-commit", "step:after-commit", "views:mid"])
def test_failpoints_in_a_transition(tmp_path: Path, point: str, store_kind: str) -> None:
    repo = make_repo(tmp_path / "r")
    to_requirements(repo, "add-login")
    crashed = repo.run(
        "transition", "add-login", "CLASSIFIED", "--reason", "blocker",
        env={"TASKGATE_FAILPOINT": point},
    )  # fmt: skip
    assert crashed.code == -signal.SIGKILL
    state = check_invariants(repo, "add-login")
    expected = "REQUIREMENTS" if point == "step:before-commit" else "CLASSIFIED"
    assert state == expected


@pytest.mark.parametrize("point", ["claim:after-insert", "setup:after-worktree"])
def test_failpoints_in_start_resume(tmp_path: Path, point: str, store_kind: str) -> None:
    repo = make_repo(tmp_path / "r")
    crashed = repo.run("start", "add-login", env={"TASKGATE_FAILPOINT": point})
    assert crashed.code == -signal.SIGKILL
    other = repo.run("start", "add-login", session="s2")
    assert other.code == 3  # the claim stands: "may be initializing"
    resumed = repo.ok("start", "add-login", "--json").json()
    assert resumed["action"] == "resumed"
    assert (repo.worktree("add-login") / ".git").exists()
    assert check_invariants(repo, "add-login") == "INIT"


@pytest.mark.parametrize("point", ["classify:after-transition", "classify:after-worktrees"])
def test_failpoints_in_classify(tmp_path: Path, point: str, store_kind: str) -> None:
    repo = make_repo(tmp_path / "r")
    repo.ok("start", "add-login")
    wt = repo.worktree("add-login")
    crashed = repo.run("classify", "add-login", cwd=wt, env={"TASKGATE_FAILPOINT": point})
    assert crashed.code == -signal.SIGKILL
    repo.ok("classify", "add-login", cwd=wt)  # resumes the journaled step
    status = repo.ok("status", "add-login", "--json").json()
    assert status["pending"] is None
    for agent in status["required_agents"]:
        assert (repo.task_dir("add-login") / "agents" / agent / "code" / ".git").exists()
    assert (repo.task_dir("add-login") / "task.md").exists()
    repo.ok("transition", "add-login", "REQUIREMENTS", cwd=wt)


def test_random_kills_over_many_rounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store_kind: str
) -> None:
    """Fork the CLI in-process and SIGKILL it at random moments (fast: no interpreter start)."""
    repo = make_repo(tmp_path / "r")
    to_requirements(repo, "add-login")
    monkeypatch.setenv("TASKGATE_SESSION", "s1")
    monkeypatch.chdir(repo.worktree("add-login"))
    rng = random.Random(1234)
    # A round on PostgreSQL takes about five times as long: fewer by default, the same kills.
    default = "40" if store_kind == "postgres" else "150"
    rounds = int(os.environ.get("TASKGATE_CRASH_ROUNDS", default))
    states_seen = set()
    # A step on PostgreSQL (-p pg_plugin) takes longer than 60 ms: kill across all of it.
    span = 0.3 if os.environ.get("TASKGATE_DATABASE_URL") else 0.06
    for _ in range(rounds):
        state = check_invariants(repo, "add-login", in_process=True)
        states_seen.add(state)
        argv = (
            ["transition", "add-login", "CLASSIFIED", "--reason", "round trip"]
            if state == "REQUIREMENTS"
            else ["transition", "add-login", "REQUIREMENTS"]
        )
        pid = os.fork()
        if pid == 0:  # child: run the real CLI entry point, then exit without cleanup
            code = 1
            try:
                code = main(argv)
            finally:
                os._exit(code)
        time.sleep(rng.uniform(0, span))
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    check_invariants(repo, "add-login")
    assert states_seen == {"REQUIREMENTS", "CLASSIFIED"}
