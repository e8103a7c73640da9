"""`taskgate complete`: archival, squash, ff-only merge into main, journaled (RULES §13)."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest

from conftest import Repo, git, make_repo
from flow import PASSING_BUILD, approve_changes, commit_in, copy_repo, to_awaiting

TASK = "add-login"
_TEMPLATES: dict[str, Path] = {}


def approved_repo(factory: pytest.TempPathFactory, dest: Path, *, approved: bool = True) -> Repo:
    """A copy of a repository whose task waits at AWAITING_USER_APPROVAL (built once)."""
    key = "approved" if approved else "awaiting"
    if key not in _TEMPLATES:
        base = factory.mktemp(f"template-{key}") / "repo"
        repo = make_repo(base, config=PASSING_BUILD)
        to_awaiting(repo, TASK)
        if approved:
            approve_changes(repo, TASK)
        _TEMPLATES[key] = base
    return copy_repo(_TEMPLATES[key], dest)


@pytest.fixture
def arepo(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Repo:
    """add-login approved at AWAITING_USER_APPROVAL."""
    return approved_repo(tmp_path_factory, tmp_path / "repo")


def assert_completed(repo: Repo, main_before: str) -> None:
    """R-CMP-04: exactly one new commit on main with code + todo.md + changelog.md."""
    new = git(repo.path, "rev-list", f"{main_before}..main").split()
    assert len(new) == 1
    files = set(git(repo.path, "show", "--name-only", "--format=", new[0]).split())
    assert {"src/auth/login.py", "todo.md", "changelog.md"} <= files
    assert git(repo.path, "rev-list", "--parents", "-1", "main").split()[1:] == [main_before]
    assert f"## {TASK}:" not in git(repo.path, "show", "main:todo.md")
    assert f"## {TASK}: Add a login page" in git(repo.path, "show", "main:changelog.md")
    assert "Notes for humans stay untouched." in git(repo.path, "show", "main:todo.md")
    assert git(repo.path, "rev-parse", TASK) == new[0]
    assert git(repo.worktree(TASK), "status", "--porcelain") == ""
    status = repo.ok("status", TASK, "--json").json()
    assert status["state"] == "COMPLETE"
    assert status["pending"] is None
    assert (repo.task_dir(TASK) / "archival-complete.flag").exists()


def test_complete_end_to_end(arepo: Repo) -> None:
    main_before = arepo.git("rev-parse", "main")
    out = arepo.ok("complete", TASK, "--json").json()
    assert_completed(arepo, main_before)
    assert out["merged_sha"] == arepo.git("rev-parse", "main")
    assert out["unblocked"] == ["needs-login"]  # Depends: add-login
    todo = {r["task"]: r["availability"] for r in arepo.ok("todo", "--json").json()}
    assert todo["needs-login"] == "available" and TASK not in todo
    trail = json.loads((arepo.task_dir(TASK) / "audit-trail.json").read_text())
    commits = trail["commits"]
    assert [c["agent"] for c in commits[:1]] == ["quality"]  # R-WTB-06: from the [agent:] tag
    assert any(c.get("archival") for c in commits)
    assert commits[-1]["sha"] == out["merged_sha"]
    again = arepo.ok("complete", TASK, "--json").json()  # R-CMP-10: idempotent
    assert again["already_complete"] is True
    assert arepo.git("rev-parse", "main") == out["merged_sha"]


def test_complete_needs_change_approval(tmp_path_factory: pytest.TempPathFactory,
                                        tmp_path: Path) -> None:  # fmt: skip
    repo = approved_repo(tmp_path_factory, tmp_path / "r", approved=False)
    main_before = repo.git("rev-parse", "main")
    result = repo.run("complete", TASK)
    assert result.code == 1 and "R-CKP-12" in result.err
    assert repo.git("rev-parse", "main") == main_before
    assert repo.ok("status", TASK, "--json").json()["pending"] is None


def test_complete_refused_when_head_moved_after_approval(arepo: Repo) -> None:
    commit_in(arepo.worktree(TASK), "late.txt", "late\n", "[agent:quality] late")
    head = git(arepo.worktree(TASK), "rev-parse", "HEAD")
    result = arepo.run("complete", TASK)
    assert result.code == 1 and "R-CKP-13" in result.err
    assert git(arepo.worktree(TASK), "rev-parse", "HEAD") == head


@pytest.mark.parametrize(
    "point",
    [
        "complete:after-begin",
        "complete:archival-staged",
        "complete:archival-committed",
        "complete:after-archival",
        "complete:squash-created",
        "complete:squash-ref-moved",
        "complete:after-squash",
        "complete:main-merged",
        "complete:after-merge",
        "step:before-commit",
        "step:after-commit",
    ],
)
def test_kill_at_every_step_then_resume(arepo: Repo, point: str) -> None:
    main_before = arepo.git("rev-parse", "main")
    crashed = arepo.run("complete", TASK, env={"TASKGATE_FAILPOINT": point})
    assert crashed.code == -signal.SIGKILL
    arepo.ok("complete", TASK)
    assert_completed(arepo, main_before)


def test_dirty_main_worktree_is_refused(arepo: Repo) -> None:
    (arepo.path / "README.md").write_text("edited by the user\n")
    main_before = arepo.git("rev-parse", "main")
    task_head = git(arepo.worktree(TASK), "rev-parse", "HEAD")
    result = arepo.run("complete", TASK)
    assert result.code == 1 and "R-CMP-07" in result.err and "README.md" in result.err
    assert "git stash" in result.err
    assert arepo.git("rev-parse", "main") == main_before
    assert git(arepo.worktree(TASK), "rev-parse", "HEAD") == task_head  # nothing archived
    assert (arepo.path / "README.md").read_text() == "edited by the user\n"
    git(arepo.path, "checkout", "--", "README.md")
    arepo.ok("complete", TASK)
    assert_completed(arepo, main_before)


def test_detached_main_worktree_is_refused(arepo: Repo) -> None:
    main_before = arepo.git("rev-parse", "main")
    arepo.git("checkout", "-q", "--detach")
    result = arepo.run("complete", TASK)
    assert result.code == 1 and "detached HEAD" in result.err and "git switch main" in result.err
    assert arepo.ok("status", TASK, "--json").json()["state"] == "AWAITING_USER_APPROVAL"
    arepo.git("checkout", "-q", "main")
    arepo.ok("complete", TASK)
    assert_completed(arepo, main_before)


def test_task_branch_behind_main_is_refused_with_recovery_path(arepo: Repo) -> None:
    commit_in(arepo.path, "other.txt", "another task landed\n", "other work on main")
    main_before = arepo.git("rev-parse", "main")
    task_head = git(arepo.worktree(TASK), "rev-parse", "HEAD")
    result = arepo.run("complete", TASK)
    assert result.code == 1 and "R-CMP-06" in result.err
    assert "git rebase main" in result.err and "present" in result.err  # C-36 recovery path
    assert arepo.git("rev-parse", "main") == main_before  # never a merge commit, never forced
    assert git(arepo.worktree(TASK), "rev-parse", "HEAD") == task_head
    assert arepo.ok("status", TASK, "--json").json()["state"] == "AWAITING_USER_APPROVAL"


def test_interrupted_rebase_in_task_worktree_is_refused(arepo: Repo) -> None:
    gitdir = Path(git(arepo.worktree(TASK), "rev-parse", "--absolute-git-dir"))
    (gitdir / "rebase-merge").mkdir()  # as left by someone's interrupted `git rebase -i`
    result = arepo.run("complete", TASK)
    assert result.code == 1 and "unfinished rebase" in result.err and "--abort" in result.err
    assert (gitdir / "rebase-merge").is_dir()  # left for its owner
    assert arepo.ok("status", TASK, "--json").json()["pending"] is None


def test_main_moving_mid_completion_is_refused_then_recoverable(arepo: Repo) -> None:
    crashed = arepo.run("complete", TASK, env={"TASKGATE_FAILPOINT": "complete:after-squash"})
    assert crashed.code == -signal.SIGKILL
    commit_in(arepo.path, "other.txt", "another task landed\n", "other work on main")
    main_now = arepo.git("rev-parse", "main")
    result = arepo.run("complete", TASK)
    assert result.code == 1 and "R-CMP-06" in result.err
    assert arepo.git("rev-parse", "main") == main_now
    recover_by_rebase(arepo)  # the squashed, archived commit is rebased and completes as is


def test_push_to_remote_at_checkpoint(tmp_path: Path) -> None:
    """R-CKP-10 / R-WTB-07: the task branch is pushed before AWAITING_USER_APPROVAL."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    repo = make_repo(tmp_path / "r", config=PASSING_BUILD)
    repo.git("remote", "add", "origin", str(remote))
    to_awaiting(repo, TASK)
    status = repo.ok("status", TASK, "--json").json()
    head = git(repo.worktree(TASK), "rev-parse", "HEAD")
    assert status["checkpoint"]["pushed_to"] == f"origin/{TASK}"
    assert git(remote, "rev-parse", TASK) == head == status["checkpoint"]["commit_sha"]


def test_the_push_does_not_hold_the_store_lock(tmp_path: Path) -> None:
    """A slow remote must not stall every other taskgate process: while the checkpoint push
    runs, the store's write lock is free (the remote side checks it during the push)."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    repo = make_repo(tmp_path / "r", config=PASSING_BUILD)
    repo.git("remote", "add", "origin", str(remote))
    mark = tmp_path / "lock-during-push"
    probe = tmp_path / "receive-pack"
    db = repo.path / ".taskgate" / "state.db"
    probe.write_text(
        "#!/bin/sh\n"
        f"{sys.executable} -c \"import sqlite3; c = sqlite3.connect('{db}', timeout=0, "
        "isolation_level=None); c.execute('BEGIN IMMEDIATE'); c.execute('ROLLBACK')\" "
        f"&& echo free > {mark} || echo held > {mark}\n"
        'exec git-receive-pack "$@"\n'
    )
    probe.chmod(0o755)
    repo.git("config", "remote.origin.receivepack", str(probe))
    to_awaiting(repo, TASK)
    assert mark.read_text().strip() == "free"
    status = repo.ok("status", TASK, "--json").json()
    assert status["checkpoint"]["pushed_sha"] == status["checkpoint"]["commit_sha"]


def test_no_remote_skips_push_cleanly(arepo: Repo) -> None:
    checkpoint = arepo.ok("status", TASK, "--json").json()["checkpoint"]
    assert "no remote 'origin'" in checkpoint["push_skipped"]


def test_missing_configured_remote_is_refused(tmp_path: Path) -> None:
    config = PASSING_BUILD + '[workspace]\nremote = "upstream"\n'
    repo = make_repo(tmp_path / "r", config=config)
    from flow import agents_of, to_review

    to_review(repo, TASK)
    for agent in agents_of(repo, TASK):
        repo.ok("agent", "verdict", TASK, agent, "APPROVED")
    result = repo.run("transition", TASK, "AWAITING_USER_APPROVAL")
    assert result.code == 1 and "R-WTB-07" in result.err and "git remote add upstream" in result.err
    assert repo.ok("status", TASK, "--json").json()["state"] == "REVIEW"


def test_recovery_path_after_non_fast_forward(arepo: Repo) -> None:
    """C-36: rebase, validate again, present again, then complete lands on the new main."""
    commit_in(arepo.path, "other.txt", "another task landed\n", "other work on main")
    assert arepo.run("complete", TASK).code == 1
    recover_by_rebase(arepo)


def recover_by_rebase(arepo: Repo) -> None:
    """Follow the R-CMP-06 hint to the end and check the result."""
    from flow import agents_of

    arepo.ok("transition", TASK, "IMPLEMENTATION", "--reason", "rebase onto main (R-CMP-06)")
    git(arepo.worktree(TASK), "rebase", "-q", "main")
    for agent in agents_of(arepo, TASK):
        arepo.ok("agent", "set", TASK, agent, "COMPLETE", "--done")
    arepo.ok("transition", TASK, "VALIDATION")
    arepo.ok("validate", TASK)
    arepo.ok("transition", TASK, "REVIEW")
    for agent in agents_of(arepo, TASK):
        arepo.ok("agent", "verdict", TASK, agent, "APPROVED")
    arepo.ok("transition", TASK, "AWAITING_USER_APPROVAL")
    approve_changes(arepo, TASK)
    main_before = arepo.git("rev-parse", "main")
    arepo.ok("complete", TASK)
    assert_completed(arepo, main_before)


def test_untracked_file_in_main_worktree_is_never_overwritten(arepo: Repo) -> None:
    stray = arepo.path / "src" / "auth" / "login.py"
    stray.parent.mkdir(parents=True)
    stray.write_text("# the user's own draft\n")
    main_before = arepo.git("rev-parse", "main")
    result = arepo.run("complete", TASK)
    assert result.code == 1 and "src/auth/login.py" in result.err and "R-CMP-07" in result.err
    assert stray.read_text() == "# the user's own draft\n"
    assert arepo.git("rev-parse", "main") == main_before
    stray.unlink()
    arepo.ok("complete", TASK)
    assert_completed(arepo, main_before)


@pytest.mark.parametrize("point", ["complete:archival-committed", "complete:after-archival",
                                   "complete:after-squash"])  # fmt: skip
def test_present_and_approve_during_a_pending_complete_refuse(arepo: Repo, point: str) -> None:
    """Issue 16 (torture): a checkpoint while `complete` is journaled would bind to taskgate's
    own archival commit and revoke the person's approval; it refuses and says how to resume."""
    main_before = arepo.git("rev-parse", "main")
    approved = git(arepo.worktree(TASK), "rev-parse", "HEAD")
    crashed = arepo.run("complete", TASK, env={"TASKGATE_FAILPOINT": point})
    assert crashed.code == -signal.SIGKILL
    assert git(arepo.worktree(TASK), "rev-parse", "HEAD") != approved  # ours is on T now
    before = arepo.ok("status", TASK, "--json").json()
    attempts = (
        ("present", TASK),
        ("approve", TASK, "changes"),
        ("say", TASK, "approved"),
        ("request-changes", TASK, "rename the login helper"),  # back to work on our commit
    )
    for args in attempts:
        result = arepo.run(*args)
        assert result.code == 1, (args, result.code, result.err)
        assert "R-CMP-09" in result.err and f"taskgate complete {TASK}" in result.err, result.err
    after = arepo.ok("status", TASK, "--json").json()
    assert after["state"] == before["state"] == "AWAITING_USER_APPROVAL"
    assert after["checkpoint"] == before["checkpoint"]  # still bound to the approved commit
    assert after["checkpoint"]["commit_sha"] == approved
    assert after["approvals"] == before["approvals"]  # the person's approval is not revoked
    arepo.ok("complete", TASK)
    assert_completed(arepo, main_before)
    status = arepo.ok("status", TASK, "--json").json()
    changes = [a for a in status["approvals"] if a["kind"] == "changes"]
    assert [a["bound_to"] for a in changes] == [approved]
    assert all(a["revoked_at"] is None for a in changes)
    arepo.ok("audit", TASK)
