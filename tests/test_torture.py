"""Crash consistency under SIGKILL and SIGSTOP: the bounded whole-lifecycle torture run (issues
8 and 16) and the pause test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import SRC, Repo, make_repo
from store_kinds import kind_fixture  # noqa: F401

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import torture  # bench/torture.py holds the harness; the bench runs it longer

TASK = "add-login"

# A long-lived owner (like `taskgate run`): claims with its pid and fence, then waits for a
# line on stdin before it tries to write (classify), and prints what happened.
OWNER = """
import os, sys
from pathlib import Path
from taskgate.engine import flow, lifecycle
from taskgate.engine.core import Engine
from taskgate.engine.workspace import find_workspace
from taskgate.errors import TaskgateError

repo, task, session, adopt = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "adopt"
ws = find_workspace(Path(repo))
engine = Engine(ws, session_id=session, owner_pid=os.getpid(), cwd=ws.task_worktree(task))
lifecycle.start(engine, task, adopt=adopt)
print("claimed", engine.fence, flush=True)
sys.stdin.readline()
try:
    flow.classify_task(engine, task)
    print("wrote", flush=True)
except TaskgateError as exc:
    print("refused", exc.exit_code, exc.message, flush=True)
"""


def test_torture_bounded(tmp_path: Path, store_kind: str) -> None:
    """SIGKILL workers at random moments; every invariant holds after every round. On both
    stores (tests/store_kinds.py: a real PostgreSQL server for the second)."""
    repo = make_repo(tmp_path / "r", todo=torture.TODO, config=torture.CONFIG)
    rounds = int(os.environ.get("TASKGATE_TORTURE_ROUNDS", "12"))
    assert (repo.path / ".taskgate" / "state.db").exists() == (store_kind == "sqlite")
    report = torture.torture(repo.path, rounds, seed=int(os.environ.get("TASKGATE_SEED", "8")))
    assert report.violations == []
    assert report.rounds == rounds and report.kills > 0
    assert all(report.states.get(t) for t in torture.TASKS)
    # The whole lifecycle: every slot's task reached CLEANUP (killed or drained at the end),
    # with one squash on main each and audit PASSED (checked by the harness).
    assert len(report.finished) >= torture.SLOTS


@contextmanager
def owner(repo: Repo, session: str, *, adopt: bool = False) -> Iterator[subprocess.Popen[str]]:
    env = dict(os.environ, PYTHONPATH=str(SRC))
    proc = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(repo.path), TASK, session, "adopt" if adopt else "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line:
        assert proc.stderr is not None
        pytest.fail(f"owner said nothing; stderr: {proc.stderr.read()}")
    return line


def _continue(proc: subprocess.Popen[str]) -> str:
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    return _line(proc)


def _state(repo: Repo) -> dict[str, object]:
    data: dict[str, object] = repo.ok("status", TASK, "--json", session="observer").json()
    return data


@pytest.mark.parametrize("taker", ["other-session", "same-session"])
def test_paused_lease_holder_is_fenced_out(tmp_path: Path, taker: str, store_kind: str) -> None:
    """SIGSTOP a long-lived owner, force-release, take over, SIGCONT: its write is rejected."""
    repo = make_repo(tmp_path / "r")
    with owner(repo, "run-1") as old:
        assert _line(old) == "claimed 1"
        os.kill(old.pid, signal.SIGSTOP)
        repo.ok("release", TASK, "--force", "--reason", "owner hung", session="human")
        if taker == "other-session":
            repo.ok("start", TASK, "--adopt", session="s2")
            new_fence = _state(repo)["lock"]
        else:  # the same session id in a new process: only the fence tells them apart
            with owner(repo, "run-1", adopt=True) as new:
                assert _line(new) == "claimed 2"
                new_fence = _state(repo)["lock"]
        assert isinstance(new_fence, dict) and new_fence["fence"] == 2
        before = _state(repo)
        os.kill(old.pid, signal.SIGCONT)
        answer = _continue(old)
    assert answer.startswith("refused 3 ")  # exit 3: owned by another session / fenced out
    if taker == "same-session":
        assert "superseded (fence 1 -> 2)" in answer
    else:
        assert "Cannot update lock owned by s2" in answer
    after = _state(repo)
    assert after["_seq"] == before["_seq"] and after["state"] == "INIT"  # nothing was written
    assert repo.run("audit", TASK, session="observer").code == 0


def test_dead_long_lived_owner_is_diagnosed_and_taken_over(tmp_path: Path, store_kind: str) -> None:
    """P1: the owner process was killed; recover says so and `start` takes over (fence + 1)."""
    repo = make_repo(tmp_path / "r")
    with owner(repo, "run-1") as old:
        assert _line(old) == "claimed 1"
        old.kill()
        old.wait()
    result = repo.run("recover", TASK, "--json", session="s2")
    assert result.code == 0, result.err
    (d,) = result.json()
    assert d["procedure"] == "P1" and "is gone" in d["summary"]
    assert any(f"taskgate start {TASK}" in a for a in d["actions"])
    taken = repo.ok("start", TASK, "--json", session="s2").json()
    assert taken["action"] == "took-over"
    lock = _state(repo)["lock"]
    assert isinstance(lock, dict) and lock["fence"] == 2 and lock["session_id"] == "s2"


def test_the_drain_gives_back_a_task_the_slot_s_session_took_from_another_slot(
    tmp_path: Path,
) -> None:
    """A worker's `start <another slot's task>` claims it when its lock was released; its
    session then holds one task (R-LCK-19) and cannot start its own slot's task. The drain (a
    person, by the refusal's hint) releases the other slot's task first: both finish."""
    import random

    repo = make_repo(tmp_path / "r", todo=torture.TODO, config=torture.CONFIG)
    repo.ok("start", "task-1", session="w0")  # slot 0's session holds slot 1's task
    report = torture.Report()
    stuck = torture.drain(repo.path, ["task-0", "task-1"], report, random.Random(1))
    assert stuck == [], stuck
    assert report.drained == 2
