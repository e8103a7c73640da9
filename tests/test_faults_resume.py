"""No dead ends after a kill (issue 16): each case the reliability review found stuck for
ever is reproduced with a failpoint SIGKILL and must resume to CLEANUP through the documented
commands (run T, run --all, next, complete, recover --repair), with one squash on main and
`audit` PASSED.

The cases built from `sample` run on both stores (SQLite and a real PostgreSQL server,
tests/store_kinds.py; issue 20); the ones copied from test_complete.py's template repository
stay on SQLite (the copy's views are ahead of a fresh database: exit 5, by design).
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from conftest import Repo, git
from store_kinds import kind_fixture  # noqa: F401
from test_complete import TASK, approved_repo
from test_run import main_commits, sample, state

SLUG = "add-slugify"


def _finished(repo: Repo, task: str, *, commits: int, session: str = "run") -> None:
    assert state(repo, task, session) == "CLEANUP"
    assert len(main_commits(repo)) == commits
    branches = repo.git("for-each-ref", "--format=%(refname:short)", "refs/heads").split()
    assert not [b for b in branches if b == task or b.startswith(f"{task}-")], branches
    assert task not in repo.git("worktree", "list")
    audit = repo.run("audit", task, "--json", session=session)
    assert audit.code == 0, audit.out
    git(repo.path, "fsck", "--no-progress")


def test_kill_between_a_verdict_and_the_completion_record(tmp_path: Path, store_kind: str) -> None:
    """The verdict is recorded, the completion is not (the kill's window); the next run
    closes the dead invocation instead of refusing CLEANUP for ever ("still running")."""
    repo = sample(tmp_path)
    killed = repo.run("run", SLUG, "--yes", session="run", env={"TASKGATE_FAILPOINT": "run:REVIEW"})
    assert killed.code == -signal.SIGKILL
    reviewer = repo.ok("status", SLUG, "--json", session="run").json()["required_agents"][0]
    repo.ok("agent", "set", SLUG, reviewer, "WORKING", session="run")
    repo.ok("agent", "verdict", SLUG, reviewer, "APPROVED", session="run")
    repo.ok("run", SLUG, "--yes", session="run")
    _finished(repo, SLUG, commits=2)
    trail = repo.ok("audit", SLUG, "--json", session="run").out
    assert "still running" not in trail


def test_release_force_during_complete_then_adopt_resumes(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """complete killed after main got the squash, then a person's release --force: the
    journal survives the release, and the adopting session's `complete` finishes it."""
    repo = approved_repo(tmp_path_factory, tmp_path / "repo")
    before = repo.git("rev-parse", "main")
    killed = repo.run("complete", TASK, env={"TASKGATE_FAILPOINT": "complete:after-merge"})
    assert killed.code == -signal.SIGKILL
    assert repo.git("rev-list", "--count", f"{before}..main") == "1"
    repo.ok("release", TASK, "--force", "--reason", "the session crashed", session=None)
    repo.ok("start", TASK, "--adopt", session="s2")
    done = repo.ok("complete", TASK, "--json", session="s2").json()
    assert done["state"] == "COMPLETE"
    assert repo.git("rev-list", "--count", f"{before}..main") == "1"  # one squash, not two
    repo.ok("cleanup", TASK, session="s2")
    assert repo.run("audit", TASK, session="s2").code == 0


@pytest.mark.parametrize("entry", ["run", "run --all", "next", "recover --repair"])
def test_interrupted_cleanup_is_finished_by_every_entry_point(
    tmp_path: Path, entry: str, store_kind: str
) -> None:
    repo = sample(tmp_path)
    killed = repo.run("run", SLUG, "--yes", session="run",
                      env={"TASKGATE_FAILPOINT": "cleanup:after-transition"})  # fmt: skip
    assert killed.code == -signal.SIGKILL
    assert state(repo, SLUG) == "CLEANUP"
    diag = repo.run("recover", SLUG, "--json", session="run")
    assert "cleanup interrupted" in diag.out
    args = {
        "run": ["run", SLUG, "--yes"],
        "run --all": ["run", "--all", "--yes"],
        "next": ["next"],
        "recover --repair": ["recover", SLUG, "--repair"],
    }[entry]
    result = repo.run(*args, session="run")
    assert result.code == 0, result.err
    _finished(repo, SLUG, commits=len(main_commits(repo)))


@pytest.mark.parametrize("entry", ["run --all", "run --next", "next"])
def test_task_whose_squash_is_on_main_is_resumed(
    tmp_path: Path, entry: str, store_kind: str
) -> None:
    """main's todo.md no longer lists the task once the squash is merged: the session's own
    task is still resumed first (not R-LCK-19 for ever)."""
    repo = sample(tmp_path)
    killed = repo.run("run", SLUG, "--yes", session="run",
                      env={"TASKGATE_FAILPOINT": "complete:after-merge"})  # fmt: skip
    assert killed.code == -signal.SIGKILL
    assert f"## {SLUG}" not in repo.git("show", "main:todo.md")
    args = {"run --all": ["run", "--all", "--yes"], "run --next": ["run", "--next", "--yes"],
            "next": ["next", "--json"]}[entry]  # fmt: skip
    result = repo.run(*args, session="run")
    assert result.code == 0, result.err
    if entry == "next":
        assert result.json()["task"] == SLUG
        repo.ok("run", SLUG, "--yes", session="run")
    _finished(repo, SLUG, commits=len(main_commits(repo)))
    log = repo.git("log", "--format=%s", "main")
    assert log.count(SLUG) >= 1 and len(set(log.splitlines())) == len(log.splitlines())


def test_kill_inside_the_archival_write_leaves_no_temp_file_behind(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """Found by the whole-lifecycle torture: a kill between atomic_write's temp file and its
    rename left `.todo.md.<hex>.tmp` in the task worktree, and cleanup refused it for ever."""
    repo = approved_repo(tmp_path_factory, tmp_path / "repo")
    killed = repo.run("complete", TASK, env={"TASKGATE_FAILPOINT": "atomic_write:todo.md"})
    assert killed.code == -signal.SIGKILL
    wt = repo.worktree(TASK)
    assert list(wt.glob(".todo.md.*.tmp"))
    repo.ok("complete", TASK)
    assert not list(wt.glob(".*.tmp"))
    repo.ok("cleanup", TASK)
    assert repo.run("audit", TASK).code == 0


def test_complete_task_released_by_a_person_is_adopted_and_cleaned_up(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """Found by the whole-lifecycle torture: COMPLETE + release --force was 'already
    completed' for every session, so nobody could ever run its cleanup."""
    repo = approved_repo(tmp_path_factory, tmp_path / "repo")
    repo.ok("complete", TASK)
    repo.ok("release", TASK, "--force", "--reason", "owner went home", session=None)
    asked = repo.run("start", TASK, session="s2")
    assert asked.code == 4 and "--adopt" in asked.err  # R-LCK-05, not R-LCK-23
    repo.ok("start", TASK, "--adopt", session="s2")
    repo.ok("cleanup", TASK, session="s2")
    assert repo.ok("status", TASK, "--json", session="s2").json()["state"] == "CLEANUP"
    assert repo.run("audit", TASK, session="s2").code == 0


def test_resumed_archival_commits_the_blob_the_killed_run_staged(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """Found by the whole-lifecycle torture's reachability invariant: the redone changelog
    entry carried a new timestamp, so the blob a killed run had staged became unreachable."""
    repo = approved_repo(tmp_path_factory, tmp_path / "repo")
    day1 = {
        "TASKGATE_FAILPOINT": "complete:archival-staged",
        "TASKGATE_FAKE_NOW": "2026-01-01T00:00:00Z",
    }
    killed = repo.run("complete", TASK, env=day1)
    assert killed.code == -signal.SIGKILL
    staged = git(repo.worktree(TASK), "ls-files", "-s", "changelog.md").split()[1]
    repo.ok("complete", TASK, env={"TASKGATE_FAKE_NOW": "2026-01-02T00:00:00Z"})
    log = git(repo.path, "log", "-g", "--format=%H %s", TASK).splitlines()
    archival = next(line.split()[0] for line in log if "[agent:main] archive" in line)
    assert git(repo.path, "rev-parse", f"{archival}:changelog.md") == staged
