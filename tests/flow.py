"""Helpers that drive a task through the protocol with the real CLI (used by several tests)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from conftest import Repo, git, make_repo

PLAN = """
## Implementation Plan

### Files to Create
- src/auth/login.py

### API Design
`def login(user: str, password: str) -> Session`

### Behavior Specifications
A wrong password raises AuthError; a right one returns a Session.

### Test Cases
- test_login_ok, test_login_wrong_password

### Implementation Sequence
1. quality implements login.py; 2. test writes the tests.

### Decision Log
- Sessions are in memory for now.
"""

REPORT = "Requirements report.\n" + "The login form must validate input and hash passwords. " * 3


def agents_of(repo: Repo, task: str) -> list[str]:
    """The task's required agents from `status --json`."""
    return list(repo.ok("status", task, "--json").json()["required_agents"])


def to_classified(repo: Repo, task: str, *extra: str, session: str = "s1") -> None:
    """start + classify (from the task worktree, R-TRN-09)."""
    repo.ok("start", task, session=session)
    repo.ok("classify", task, *extra, session=session, cwd=repo.worktree(task))


def to_requirements(repo: Repo, task: str, *extra: str) -> None:
    """... -> REQUIREMENTS."""
    to_classified(repo, task, *extra)
    repo.ok("transition", task, "REQUIREMENTS", cwd=repo.worktree(task))


def write_reports(repo: Repo, task: str) -> None:
    """Every agent writes a valid report and reports COMPLETE."""
    for agent in agents_of(repo, task):
        (repo.task_dir(task) / f"{task}-{agent}-requirements.md").write_text(REPORT)
        repo.ok("agent", "set", task, agent, "COMPLETE")


def to_synthesis(repo: Repo, task: str, *extra: str) -> None:
    """... -> SYNTHESIS with a complete plan in task.md."""
    to_requirements(repo, task, *extra)
    write_reports(repo, task)
    repo.ok("transition", task, "SYNTHESIS", cwd=repo.worktree(task))
    task_md = repo.task_dir(task) / "task.md"
    task_md.write_text(task_md.read_text() + PLAN)


def approve_plan(repo: Repo, task: str) -> None:
    """present + approve plan."""
    repo.ok("present", task)
    repo.ok("approve", task, "plan")


def commit_in(worktree: Path, name: str, text: str, message: str) -> str:
    """Write a file and commit it in a worktree; returns the new HEAD."""
    target = worktree / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    git(worktree, "add", name)
    git(worktree, "commit", "-q", "-m", message)
    return git(worktree, "rev-parse", "HEAD")


def to_implementation(repo: Repo, task: str, *extra: str) -> None:
    """... -> IMPLEMENTATION."""
    to_synthesis(repo, task, *extra)
    approve_plan(repo, task)
    repo.ok("transition", task, "IMPLEMENTATION")


def to_validation(repo: Repo, task: str, *extra: str) -> None:
    """... -> VALIDATION with a commit on the task branch."""
    to_implementation(repo, task, *extra)
    commit_in(repo.worktree(task), "src/auth/login.py", "def login():\n    pass\n",
              "[agent:quality] login")  # fmt: skip
    for agent in agents_of(repo, task):  # R-TRN-14: a commit on T, or "no change needed"
        why = () if agent == "quality" else ("--no-change", f"nothing for {agent} to change")
        repo.ok("agent", "set", task, agent, "COMPLETE", "--done", *why)
    repo.ok("transition", task, "VALIDATION")


def to_review(repo: Repo, task: str) -> None:
    """... -> REVIEW after a passing validation."""
    to_validation(repo, task)
    repo.ok("validate", task)
    repo.ok("transition", task, "REVIEW")


def to_awaiting(repo: Repo, task: str) -> None:
    """... -> AWAITING_USER_APPROVAL after unanimous approval."""
    to_review(repo, task)
    for agent in agents_of(repo, task):
        repo.ok("agent", "verdict", task, agent, "APPROVED")
    repo.ok("transition", task, "AWAITING_USER_APPROVAL")


PASSING_BUILD = '[validation]\ncommands = ["python3 -c \\"print(1)\\""]\n'


def approve_changes(repo: Repo, task: str) -> None:
    """present + approve changes (at AWAITING_USER_APPROVAL)."""
    repo.ok("present", task)
    repo.ok("approve", task, "changes")


def implement_to_presented_changes(repo: Repo, task: str, keep: Callable[[str], None]) -> None:
    """An approved plan (SYNTHESIS) -> AWAITING_USER_APPROVAL with the change presented,
    calling `keep(stage)` at each stop: IMPLEMENTATION, VALIDATION, REVIEW,
    AWAITING_USER_APPROVAL, AWAITING_USER_APPROVAL-presented (PASSING_BUILD's validation)."""
    repo.ok("transition", task, "IMPLEMENTATION")
    keep("IMPLEMENTATION")
    commit_in(repo.worktree(task), "src/auth/login.py", "def login():\n    pass\n",
              "[agent:quality] login")  # fmt: skip
    for agent in agents_of(repo, task):
        why = () if agent == "quality" else ("--no-change", f"nothing for {agent} to do")
        repo.ok("agent", "set", task, agent, "COMPLETE", "--done", *why)
    repo.ok("transition", task, "VALIDATION")
    keep("VALIDATION")
    repo.ok("validate", task)
    repo.ok("transition", task, "REVIEW")
    keep("REVIEW")
    for agent in agents_of(repo, task):
        repo.ok("agent", "verdict", task, agent, "APPROVED")
    repo.ok("transition", task, "AWAITING_USER_APPROVAL")
    keep("AWAITING_USER_APPROVAL")
    repo.ok("present", task)
    keep("AWAITING_USER_APPROVAL-presented")


def to_complete(repo: Repo, task: str) -> None:
    """... -> COMPLETE: change approval, archival, squash, ff-merge into main (issue 4)."""
    to_awaiting(repo, task)
    approve_changes(repo, task)
    repo.ok("complete", task)


def copy_repo(src: Path, dest: Path) -> Repo:
    """Copy a repository with its worktrees (a prepared template) and relink the worktrees."""
    import gc
    import shutil

    # A sqlite3 connection a test left open (`with sqlite3.connect(...)` only commits; the
    # connection is a reference cycle) is closed by the collector, and closing the last one
    # checkpoints and removes the store's WAL: never in the middle of the copy.
    gc.collect()
    shutil.copytree(src, dest, symlinks=True)
    # Both sides of each worktree link hold absolute paths into `src` (which still exists,
    # so `git worktree repair` sees nothing to repair): rewrite them to point into `dest`.
    for admin in (dest / ".git" / "worktrees").glob("*"):
        gitdir_file = admin / "gitdir"
        dot_git = Path(gitdir_file.read_text().strip().replace(str(src), str(dest), 1))
        gitdir_file.write_text(f"{dot_git}\n")
        dot_git.write_text(f"gitdir: {admin}\n")
    return Repo(dest)


def module_home(mp: pytest.MonkeyPatch, factory: pytest.TempPathFactory) -> None:
    """A HOME of its own with a git identity, for module fixtures (they run outside the
    per-test hermetic HOME of conftest.py); `mp` undoes it when its context ends."""
    home = factory.mktemp("home")
    mp.setenv("HOME", str(home))
    mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
    (home / ".gitconfig").write_text(
        "[user]\n\tname = T\n\temail = t@example.com\n[init]\n\tdefaultBranch = main\n"
    )


@contextmanager
def implementation_template(
    factory: pytest.TempPathFactory, name: str, task: str, *, second: bool = True
) -> Iterator[Repo]:
    """A module-wide template: `task` in IMPLEMENTATION (session s1) and, with `second`,
    fix-typo held by session s2; built under a HOME of its own (module fixtures run outside
    the per-test hermetic one). Tests copy it with copy_repo."""
    with pytest.MonkeyPatch.context() as mp:
        module_home(mp, factory)
        repo = make_repo(factory.mktemp(name) / "repo")
        to_implementation(repo, task)
        if second:
            repo.ok("start", "fix-typo", session="s2")
        yield repo


def implementation_fixtures(name: str, task: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """A module's fixtures: `implementation`, a template with `task` in IMPLEMENTATION (s1)
    and fix-typo held by s2, and `impl`, a private copy of it for each test. Bind them under
    those names: `implementation, impl = implementation_fixtures("x", TASK)`."""

    @pytest.fixture(scope="module")
    def implementation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
        with implementation_template(tmp_path_factory, name, task, second=True) as repo:
            yield repo.path

    @pytest.fixture
    def impl(implementation: Path, tmp_path: Path) -> Repo:
        return copy_repo(implementation, tmp_path / "repo")

    return implementation, impl
