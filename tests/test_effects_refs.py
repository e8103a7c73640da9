"""The net watches refs (issue 15): while the main agent of add-login may not write, a move or
deletion of another task's branch or of an agent's branch, whatever git spelling made it, is
found, put back (the moved-to commit kept under the quarantine ref), recorded as an
effect_violation and fails `taskgate audit` until the person resolves it. Moves an agent's
own work makes in its own worktree are not violations. Real hooks, real git, the real CLI."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import Repo
from flow import agents_of, implementation_fixtures
from test_hooks_corpus_effects import (
    TASK,
    audit_failed_on_effects,
    events,
    git,
    post,
    pre,
    quarantine_refs,
)

implementation, impl = implementation_fixtures("refs", TASK)


MOVES = {  # spelling -> the command that moves {b} to the commit `forged` points at
    "update-ref": "git update-ref refs/heads/{b} forged",
    "update-ref --stdin": "echo update refs/heads/{b} $(git rev-parse forged) | git update-ref --stdin",  # noqa: E501
    "fetch -u into the branch": "git fetch -q -u . forged:{b}",
    "fetch +refspec --update-head-ok": (
        "git fetch -q --update-head-ok . +refs/heads/forged:refs/heads/{b}"
    ),
    "force push to the repository's path": (
        "git -C {R} config receive.denyCurrentBranch ignore && git push -q -f {R} forged:{b}"
    ),
    "made symbolic": "git symbolic-ref refs/heads/{b} refs/heads/forged",
    "deleted": "git update-ref -d refs/heads/{b}",
}  # fmt: skip
DETACHED = {  # the branch is not checked out anywhere: git's porcelain moves it too
    "branch -f": "git branch -f {b} forged",
    "branch -M": "git branch -M forged {b}",
    "push to a local path": "git push -q -f {R} forged:{b}",
}


def forge(repo: Repo, branch: str) -> str:
    """A commit on top of `branch`, under the unwatched branch `forged`."""
    sha = git(repo.path, "commit-tree", f"{branch}^{{tree}}", "-p", branch, "-m", "not approved")
    git(repo.path, "branch", "-f", "forged", sha)
    return sha


def targets(repo: Repo) -> dict[str, str]:
    """Another task's branch, and an agent branch of the task itself."""
    return {"other task": "fix-typo", "own agent": f"{TASK}-{agents_of(repo, TASK)[0]}"}


def assert_put_back(repo: Repo, branch: str, before: str, found: str | None) -> None:
    """Restored, kept, recorded, failing audit until resolved."""
    assert git(repo.path, "rev-parse", f"refs/heads/{branch}") == before
    symbolic = subprocess.run(["git", "symbolic-ref", "-q", f"refs/heads/{branch}"],
                              cwd=repo.path, capture_output=True)  # fmt: skip
    assert symbolic.returncode != 0  # a plain branch again
    [violation] = events(repo, "effect_violation")
    assert violation["rule"] == "R-LCK-09"
    assert violation["refs"][branch][0] == before
    if found is not None:
        [ref] = quarantine_refs(repo)
        assert ref == f"{violation['quarantine']}/refs/heads/{branch}"
        assert git(repo.path, "rev-parse", ref) == found
    assert audit_failed_on_effects(repo)
    repo.ok("violations", TASK, "--resolve", "all", "--reason", "seen")
    assert not audit_failed_on_effects(repo)


@pytest.mark.parametrize("target", ["other task", "own agent"])
@pytest.mark.parametrize("spelling", sorted(MOVES))
def test_a_move_of_a_watched_branch_is_put_back(impl: Repo, spelling: str, target: str) -> None:
    branch = targets(impl)[target]
    before = git(impl.path, "rev-parse", branch)
    forged = forge(impl, branch)
    assert pre(impl, "make -n") == ("allow", "")
    command = MOVES[spelling].format(b=branch, R=impl.path)
    subprocess.run(["bash", "-c", command], cwd=impl.worktree(TASK), check=True)
    assert (
        git(impl.path, "for-each-ref", f"refs/heads/{branch}") == ""
        or git(impl.path, "rev-parse", branch) != before
    )  # it did move
    text = post(impl, "make -n")
    assert text.startswith("[R-LCK-09]"), text
    assert branch in text and "moved aside" in text
    kept = None if spelling in ("made symbolic", "deleted") else forged
    assert_put_back(impl, branch, before, kept)


@pytest.mark.parametrize("spelling", sorted(DETACHED))
def test_porcelain_moves_of_a_branch_checked_out_nowhere(impl: Repo, spelling: str) -> None:
    """fix-typo's worktree left its branch (detached HEAD): `branch -f`, `branch -M` and a
    push move it without any refusal from git; the net puts it back all the same."""
    other = impl.worktree("fix-typo")
    git(other, "checkout", "-q", "--detach")
    before = git(impl.path, "rev-parse", "fix-typo")
    forged = forge(impl, "fix-typo")
    assert pre(impl, "make -n") == ("allow", "")
    command = DETACHED[spelling].format(b="fix-typo", R=impl.path)
    subprocess.run(["bash", "-c", command], cwd=impl.worktree(TASK), check=True)
    text = post(impl, "make -n")
    assert text.startswith("[R-LCK-09]"), text
    assert_put_back(impl, "fix-typo", before, forged)


def test_an_agents_commit_in_its_own_worktree_is_not_a_violation(impl: Repo) -> None:
    """Sub-agents commit while the main agent waits (its Task call): their branches move by
    work in their own worktrees, and so does another task's branch in its worktree."""
    agent = agents_of(impl, TASK)[0]
    own = impl.task_dir(TASK) / "agents" / agent / "code"
    assert pre(impl, "make -n") == ("allow", "")
    for tree in (own, impl.worktree("fix-typo")):
        (tree / "work.py").write_text("x = 1\n")
        git(tree, "add", "work.py")
        git(tree, "commit", "-qm", f"[agent:{agent}] work")
    assert post(impl, "make -n") == ""
    assert events(impl, "effect_violation") == []
    assert git(impl.path, "rev-parse", f"{TASK}-{agent}") == git(own, "rev-parse", "HEAD")
    assert not audit_failed_on_effects(impl)


def test_a_move_after_an_agents_commit_goes_back_to_the_agents_commit(impl: Repo) -> None:
    """The agent committed (legitimate), then something moved its branch from outside: the
    branch goes back to the agent's commit, not to the older baseline; nothing is lost."""
    agent = agents_of(impl, TASK)[0]
    branch = f"{TASK}-{agent}"
    own = impl.task_dir(TASK) / "agents" / agent / "code"
    assert pre(impl, "make -n") == ("allow", "")
    (own / "work.py").write_text("x = 1\n")
    git(own, "add", "work.py")
    git(own, "commit", "-qm", f"[agent:{agent}] work")
    committed = git(own, "rev-parse", "HEAD")
    forged = forge(impl, "main")
    git(impl.path, "update-ref", f"refs/heads/{branch}", forged)
    text = post(impl, "make -n")
    assert text.startswith("[R-LCK-09]"), text
    assert git(impl.path, "rev-parse", branch) == committed
    [ref] = quarantine_refs(impl)
    assert git(impl.path, "rev-parse", ref) == forged


def test_a_move_outside_any_hook_is_caught_by_the_next_taskgate_command(impl: Repo) -> None:
    """Another terminal moves fix-typo: the next taskgate step on add-login puts it back."""
    before = git(impl.path, "rev-parse", "fix-typo")
    assert pre(impl, "git status") == ("allow", "")
    forged = forge(impl, "fix-typo")
    git(impl.path, "update-ref", "refs/heads/fix-typo", forged)
    impl.ok("agent", "set", TASK, agents_of(impl, TASK)[0], "WORKING")
    [violation] = events(impl, "effect_violation")
    assert violation["source"] == "taskgate command"
    assert_put_back(impl, "fix-typo", before, forged)


def test_the_baseline_leaves_an_index_whose_stat_data_git_can_trust(impl: Repo) -> None:
    """A worktree checked out within the second its index was written has entries git must
    re-read on every status ("racily clean"), and the comparisons' status never writes the
    index. The baseline refreshes it once (bench/hook_latency.py: a 3 x dearer status)."""
    tree = impl.worktree(TASK)
    index = Path(git(tree, "rev-parse", "--git-path", "index"))
    index = index if index.is_absolute() else tree / index
    files = [tree / p for p in git(tree, "ls-files").splitlines()]
    newest = max(int(f.lstat().st_mtime) for f in files)
    assert pre(impl, "make -n") == ("allow", "")
    assert int(index.stat().st_mtime) > newest
