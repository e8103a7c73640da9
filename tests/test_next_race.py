"""Concurrent `taskgate next` / `start` (R-LCK-01/04/11/19): every session claims a task of
its own or is told plainly that none is left; a lost race is never an error, on either store
and on a team of machines (issue 20). Everything runs through the real CLI.

Two races seen under load, made exact with TASKGATE_WAIT (taskgate/failpoints.py):
- a session read the store before a concurrent winner committed its claim, then saw the
  winner's new branch T: "a branch named 'T' already exists" (exit 1, R-WTB-01), or its new
  worktree: "worktree exists without a lock" (exit 4, R-LCK-05), instead of a foreign task;
- on a team, `git fetch` beside another session's `git worktree add` on the same clone failed
  its connectivity check on the half-added worktree's null HEAD ("fatal: bad object
  worktrees/code/HEAD ... did not send all necessary objects", exit 6).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import pgserver
from conftest import SRC, Repo, git, make_repo
from store_kinds import kind_fixture, query  # noqa: F401
from test_team import TASKS as TEAM_TASKS
from test_team import Machine, db, make_team

SESSIONS = 8


def _todo(count: int) -> str:
    return "".join(
        f"## t{i}: Task {i}\n- Purpose: p\n- Scope: s\n- Components: c\n- Files: docs/t{i}.md\n\n"
        for i in range(1, count + 1)
    )


def _popen(path: Path, session: str, *args: str, env: dict[str, str] | None = None) -> Any:
    full = dict(os.environ, PYTHONPATH=str(SRC), TASKGATE_SESSION=session, **(env or {}))
    return subprocess.Popen([sys.executable, "-m", "taskgate", *args, "--json"], cwd=path,
                            env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip


def _claimed(procs: dict[str, Any]) -> dict[str, str]:
    """Every session exited 0 with a task of its own: session -> task."""
    results = {s: (*p.communicate(timeout=600), p.returncode) for s, p in procs.items()}
    failed = {s: r for s, r in results.items() if r[2] != 0}
    assert not failed, failed
    got = {s: json.loads(out)["task"] for s, (out, _, _) in results.items()}
    assert len(set(got.values())) == len(got), got  # R-LCK-01: one owner per task
    return got


def _consistent(repo: Repo, got: dict[str, str], url: str | None = None) -> None:
    """The store, the audit trail and git agree with what each session was told (`url`: a
    team's database, else the store of the test's kind)."""
    env = {"TASKGATE_DATABASE_URL": url} if url else None
    rows = repo.ok("status", "--json", env=env).json()
    assert {r["task_name"]: r["session_id"] for r in rows} == {t: s for s, t in got.items()}
    assert not any(r["released"] for r in rows)
    sql = "SELECT task FROM events WHERE kind = 'claimed'"
    claims = [r[0] for r in db(url, sql)] if url else [r["task"] for r in query(repo.path, sql)]
    assert sorted(claims) == sorted(got.values())  # one claim per task


def _audited(repo: Repo, tasks: list[str], url: str | None = None) -> None:
    """`taskgate audit T` passes for each task on the machine that claimed it."""
    env = {"TASKGATE_DATABASE_URL": url} if url else None
    for task in tasks:
        audit = repo.run("audit", task, "--json", env=env)
        assert audit.code == 0, audit.out[-3000:] + audit.err
        checks = [c for t in audit.json()["tasks"] for c in t["checks"]]
        assert checks and all(c["passed"] for c in checks)


def _worktrees_on_their_branches(path: Path, tasks: list[str]) -> None:
    listed = git(path, "worktree", "list", "--porcelain")
    for task in tasks:
        wt = path / ".taskgate" / "tasks" / task / "code"
        assert f"worktree {wt}\n" in listed + "\n"
        assert git(wt, "rev-parse", "--abbrev-ref", "HEAD") == task  # R-WTB-01
    assert listed.count("worktree ") == len(tasks) + 1
    git(path, "fsck", "--no-progress")


def test_R_LCK_11_every_concurrent_next_gets_its_own_task(tmp_path: Path, store_kind: str) -> None:
    """As many `next` at once as there are tasks: every session exits 0 with its own task."""
    repo = make_repo(tmp_path / "r", todo=_todo(SESSIONS))
    got = _claimed({f"s{i}": _popen(repo.path, f"s{i}", "next") for i in range(SESSIONS)})
    assert sorted(got.values()) == sorted(f"t{i}" for i in range(1, SESSIONS + 1))
    _consistent(repo, got)
    _audited(repo, sorted(got.values()))
    _worktrees_on_their_branches(repo.path, sorted(got.values()))


def test_R_LCK_11_every_concurrent_next_on_a_team_gets_its_own_task(
    pg: pgserver.PgServer, tmp_path: Path
) -> None:
    """Three machines (clones of one remote, one database), two sessions each, six tasks:
    the two sessions of a machine fetch and add worktrees on the same clone at once."""
    _, machines, url = make_team(pg, tmp_path)
    procs = {f"s{i}": _popen(machines[i % 3].path, f"s{i}", "next", env=machines[i % 3].env)
             for i in range(TEAM_TASKS)}  # fmt: skip
    got = _claimed(procs)
    _consistent(machines[0], got, url)
    for i, m in enumerate(machines):  # each machine made exactly its own sessions' worktrees
        mine = sorted(t for s, t in got.items() if int(s[1:]) % 3 == i)
        _audited(m, mine, url)
        _worktrees_on_their_branches(m.path, mine)


def _arrive(gate: Path, proc: Any) -> None:
    """Until `proc` waits at its TASKGATE_WAIT point."""
    deadline = time.monotonic() + 120
    while not list(gate.parent.glob(f"{gate.name}.*.arrived")):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)


@pytest.mark.parametrize("command", ["start", "next"])
def test_R_LCK_04_a_claim_made_after_this_session_read_the_store_is_foreign(
    tmp_path: Path, store_kind: str, command: str
) -> None:
    """s1 reads the store, then s2 claims t1 (row, branch t1, worktree): s1's `start t1` is
    told t1 is foreign (exit 3, not "a branch named 't1' already exists" or "ask the user"),
    and its `next` takes t2."""
    repo = make_repo(tmp_path / "r", todo=_todo(2))
    gate = tmp_path / "go"
    args = ("start", "t1") if command == "start" else ("next",)
    slow = _popen(repo.path, "s1", *args, env={"TASKGATE_WAIT": f"start:after-read={gate}"})
    _arrive(gate, slow)
    assert repo.ok("start", "t1", session="s2").code == 0
    gate.touch()
    out, err = slow.communicate(timeout=120)
    if command == "start":
        assert slow.returncode == 3, out + err  # ForeignTask: select another (R-LCK-04)
        assert json.loads(out)["error"] == "foreign", out
        assert "next available task: t2" in out, out
        assert not repo.task_dir("t2").exists()  # nothing else touched
    else:
        assert slow.returncode == 0, out + err
        assert json.loads(out)["task"] == "t2"
    assert query(repo.path, "SELECT session_id FROM tasks WHERE name = 't1'") == [
        {"session_id": "s2"}
    ]
    assert git(repo.worktree("t1"), "rev-parse", "--abbrev-ref", "HEAD") == "t1"


def test_a_fetch_beside_a_half_added_worktree_is_run_again(
    pg: pgserver.PgServer, tmp_path: Path
) -> None:
    """A linked worktree whose HEAD is still git's null placeholder (`git worktree add` in
    flight on this clone) fails a team claim's `git fetch`; taskgate runs it again once the
    add is over (under the repository lock) instead of reporting the remote unreachable."""
    _, machines, _ = make_team(pg, tmp_path)
    alpha: Machine = machines[0]
    busy = tmp_path / "busy"
    git(alpha.path, "worktree", "add", "-q", "--detach", str(busy))
    head = alpha.path / ".git" / "worktrees" / "busy" / "HEAD"
    real = head.read_text()
    head.write_text("0" * 40 + "\n")  # what `git worktree add` writes first
    gate = tmp_path / "go"
    proc = _popen(alpha.path, "s1", "start", "t1",
                  env={**alpha.env, "TASKGATE_WAIT": f"remote:local-retry={gate}"})  # fmt: skip
    _arrive(gate, proc)  # the first fetch failed on the placeholder
    head.write_text(real)  # the add finished
    gate.touch()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    assert json.loads(out)["task"] == "t1"
    assert git(alpha.worktree("t1"), "rev-parse", "--abbrev-ref", "HEAD") == "t1"
