"""git's own lock files and unfinished operations get their own diagnosis (issue 16)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import Repo, git
from test_complete import TASK, approved_repo


@pytest.fixture
def arepo(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Repo:
    return approved_repo(tmp_path_factory, tmp_path / "repo")


def test_stale_index_lock_in_main_is_named_with_what_to_do(arepo: Repo) -> None:
    lock = arepo.path / ".git" / "index.lock"
    lock.write_text("")
    before = arepo.git("rev-parse", "main")
    result = arepo.run("complete", TASK, "--json")
    assert result.code == 6, result.err
    data = result.json()
    assert data["error"] == "git-busy"
    assert "index.lock exists" in data["message"] and "rm '" in data["hint"]
    assert arepo.git("rev-parse", "main") == before
    lock.unlink()  # what the hint says
    assert arepo.ok("complete", TASK, "--json").json()["state"] == "COMPLETE"
    assert arepo.git("rev-list", "--count", f"{before}..main") == "1"


def test_main_in_the_middle_of_a_rebase(arepo: Repo) -> None:
    main = arepo.path
    git(main, "checkout", "-q", "-b", "side", "HEAD")
    (main / "README.md").write_text("side\n")
    git(main, "commit", "-qam", "side")
    git(main, "checkout", "-q", "main")
    (main / "README.md").write_text("main\n")
    git(main, "commit", "-qam", "main")
    git(main, "checkout", "-q", "side")
    rebase = arepo.run("status")  # keep the fixture's session files untouched
    assert rebase.code == 0
    failed = __import__("subprocess").run(
        ["git", "rebase", "main"], cwd=main, capture_output=True, text=True
    )
    assert failed.returncode != 0  # stopped on the conflict: a rebase in progress
    result = arepo.run("complete", TASK)
    assert result.code == 1
    assert "rebase" in result.err and "--abort" in result.err
    assert "move the files" not in result.err


def test_detached_task_worktree_at_complete_has_a_way_out(arepo: Repo) -> None:
    wt = arepo.worktree(TASK)
    git(wt, "checkout", "-q", "--detach")
    result = arepo.run("complete", TASK)
    assert result.code == 1 and "detached HEAD" in result.err
    assert f"git switch {TASK}" in result.err and "recover" not in result.err
    git(wt, "switch", "-q", TASK)  # what the hint says
    assert arepo.ok("complete", TASK, "--json").json()["state"] == "COMPLETE"


def test_deleted_task_worktree_at_complete_is_recreated_by_recover(arepo: Repo) -> None:
    import shutil

    shutil.rmtree(arepo.worktree(TASK))
    result = arepo.run("complete", TASK)
    assert result.code == 1 and "is missing" in result.err
    assert f"taskgate recover {TASK} --repair" in result.err
    arepo.ok("recover", TASK, "--repair")
    assert arepo.ok("complete", TASK, "--json").json()["state"] == "COMPLETE"
