"""`cleanup` records the build on main with the move into CLEANUP in one store step (issue 18;
two steps before). Killed before that step commits, nothing of it is written and the next
`cleanup` verifies main again and finishes; killed after it, the record and the move stand."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from conftest import Repo
from store_kinds import query
from test_faults_resume import SLUG, _finished
from test_run import sample


def _at_complete(tmp_path: Path) -> Repo:
    repo = sample(tmp_path)
    killed = repo.run("run", SLUG, "--yes", session="run",
                      env={"TASKGATE_FAILPOINT": "run:COMPLETE"})  # fmt: skip
    assert killed.code == -signal.SIGKILL
    assert repo.ok("status", SLUG, "--json", session="run").json()["state"] == "COMPLETE"
    return repo


def _events(repo: Repo, after: int = 0) -> list[tuple[str, dict[str, object]]]:
    sql = "SELECT kind, payload FROM events WHERE task = ? AND seq > ? ORDER BY seq"
    return [(r["kind"], json.loads(r["payload"])) for r in query(repo.path, sql, SLUG, after)]


def _main_builds(repo: Repo) -> list[dict[str, object]]:
    return [p for k, p in _events(repo) if k == "validation" and p.get("on_main")]


def test_the_main_build_and_the_move_are_one_step(tmp_path: Path) -> None:
    repo = _at_complete(tmp_path)
    top = len(_events(repo))
    # Killed right after the command's first commit: both are in it (before issue 18 that
    # commit held the main build's record only, and the task was still COMPLETE).
    killed = repo.run("cleanup", SLUG, session="run",
                      env={"TASKGATE_FAILPOINT": "step:after-commit"})  # fmt: skip
    assert killed.code == -signal.SIGKILL
    assert repo.ok("status", SLUG, "--json", session="run").json()["state"] == "CLEANUP"
    assert [k for k, _ in _events(repo)][top:] == ["validation", "transition"]
    assert len(_main_builds(repo)) == 1
    repo.ok("cleanup", SLUG, session="run")
    assert len(_main_builds(repo)) == 1
    _finished(repo, SLUG, commits=2)


@pytest.mark.parametrize("point", ["step:before-commit", "cleanup:after-transition"])
def test_killed_around_the_step_nothing_is_lost(tmp_path: Path, point: str) -> None:
    repo = _at_complete(tmp_path)
    killed = repo.run("cleanup", SLUG, session="run", env={"TASKGATE_FAILPOINT": point})
    assert killed.code == -signal.SIGKILL
    state = repo.ok("status", SLUG, "--json", session="run").json()["state"]
    if point == "step:before-commit":  # neither the record nor the move
        assert state == "COMPLETE" and _main_builds(repo) == []
    else:
        assert state == "CLEANUP" and len(_main_builds(repo)) == 1
    repo.ok("cleanup", SLUG, session="run")
    assert len(_main_builds(repo)) == 1
    _finished(repo, SLUG, commits=2)
