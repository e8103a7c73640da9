"""Leases that mean what the docs say (issue 16, DESIGN.md State, R-LCK-21), on both stores
(SQLite and a real PostgreSQL server, tests/store_kinds.py; issue 20).

A `run` that stops at a checkpoint leaves the lease to its session without a pid, so no other
session can "take over" a task whose owner merely stopped; the take-over of a really dead
owner is a compare-and-swap inside the write transaction: of racing sessions exactly one wins.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from conftest import SRC, Repo
from store_kinds import kind_fixture, query  # noqa: F401
from taskgate.process import hostname
from test_run import sample, state

TASK = "add-slugify"


def _row(repo: Repo, task: str) -> dict[str, Any]:
    return query(repo.path, "SELECT * FROM tasks WHERE name = ?", task)[0]


def _events(repo: Repo, task: str, kind: str) -> int:
    sql = "SELECT COUNT(*) AS n FROM events WHERE task = ? AND kind = ?"
    return int(query(repo.path, sql, task, kind)[0]["n"])


def test_checkpoint_stop_keeps_the_lease_for_its_session(tmp_path: Path, store_kind: str) -> None:
    repo = sample(tmp_path, auto=False)
    stopped = repo.run("run", TASK, session="run")
    assert stopped.code == 4, stopped.err
    row = _row(repo, TASK)
    assert row["session_id"] == "run" and row["owner_pid"] is None
    assert row["lock_released_at"] is None
    assert _events(repo, TASK, "lease_kept") == 1
    other = repo.run("start", TASK, session="intruder")
    assert other.code == 3, other.err  # foreign, not "took-over"
    assert _row(repo, TASK)["session_id"] == "run"
    assert _events(repo, TASK, "took-over") == 0
    repo.ok("approve", TASK, "plan", session="run")
    again = repo.run("run", TASK, session="run")  # the session itself resumes
    assert again.code == 4 and state(repo, TASK) == "AWAITING_USER_APPROVAL"
    repo.ok("release", TASK, "--force", "--reason", "hand over", session=None)
    taken = repo.ok("start", TASK, "--adopt", "--json", session="intruder").json()
    assert taken["action"] == "adopted"
    assert _row(repo, TASK)["session_id"] == "intruder"


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _racer(repo: Repo, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "taskgate", "start", TASK],
        cwd=repo.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_racing_take_overs_of_a_dead_owner_exactly_one_wins(
    tmp_path: Path, store_kind: str
) -> None:
    repo = sample(tmp_path)
    repo.ok("start", TASK, session="crashed")
    fence = _row(repo, TASK)["fence"]
    query(
        repo.path,
        "UPDATE tasks SET owner_pid = ?, owner_started = '1', host = ? WHERE name = ?",
        _dead_pid(), hostname(), TASK,
    )  # fmt: skip
    barrier = tmp_path / "go"
    env = dict(os.environ, PYTHONPATH=str(SRC), TASKGATE_WAIT=f"claim:before-transaction={barrier}")
    racers = 6
    procs = [_racer(repo, env | {"TASKGATE_SESSION": f"racer{i}"}) for i in range(racers)]
    for _ in range(3000):  # every racer has read the dead owner and waits at the barrier
        if len(list(tmp_path.glob("go.*.arrived"))) == racers:
            break
        time.sleep(0.02)
    assert len(list(tmp_path.glob("go.*.arrived"))) == racers
    barrier.touch()
    results = [(p.wait(timeout=120), *p.communicate()) for p in procs]
    codes = sorted(code for code, _, _ in results)
    assert codes == [0] + [3] * (racers - 1), results
    assert _events(repo, TASK, "took-over") == 1
    row = _row(repo, TASK)
    assert row["fence"] == fence + 1 and row["session_id"].startswith("racer")
    losers = [err for code, _, err in results if code == 3]
    assert all("taken over by another session" in err for err in losers), losers
