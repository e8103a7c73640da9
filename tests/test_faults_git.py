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
