"""Small named git operations: discovery, branches, worktrees, and the per-repository lock."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from taskgate.errors import UsageError
from taskgate.git.cmd import git, git_out, ok, split_z


@dataclass(frozen=True)
class RepoPaths:
    """Where a repository lives: its common git dir and its main worktree."""

    common_dir: Path
    main_worktree: Path


def _read_gitdir_file(dot_git: Path) -> Path | None:
    try:
        text = dot_git.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    target = Path(text[len("gitdir:") :].strip())
    return target if target.is_absolute() else (dot_git.parent / target).resolve()


def _common_dir_of(gitdir: Path) -> Path:
    commondir = gitdir / "commondir"
    try:
        rel = commondir.read_text(encoding="utf-8").strip()
    except OSError:
        return gitdir
    path = Path(rel)
    return path if path.is_absolute() else (gitdir / path).resolve()


def discover(start: Path) -> RepoPaths:
    """Find the repository containing `start` by reading .git files (no subprocess, fast)."""
    current = start.resolve()
    for candidate in (current, *current.parents):
        dot_git = candidate / ".git"
        if dot_git.is_dir():
            return RepoPaths(dot_git, candidate)
        if dot_git.is_file():
            gitdir = _read_gitdir_file(dot_git)
            if gitdir is None:
                break
            common = _common_dir_of(gitdir)
            return RepoPaths(common, common.parent)
    raise UsageError(
        f"not inside a git repository: {start}",
        hint="run taskgate inside your repository, or pass --repo PATH",
    )


def head_ref(worktree: Path) -> str | None:
    """The branch checked out in `worktree` (read from its HEAD file), None when detached."""
    dot_git = worktree / ".git"
    gitdir = dot_git if dot_git.is_dir() else _read_gitdir_file(dot_git)
    if gitdir is None:
        return None
    try:
        head = (gitdir / "HEAD").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    prefix = "ref: refs/heads/"
    return head[len(prefix) :] if head.startswith(prefix) else None


def is_worktree(path: Path) -> bool:
    """True when `path` is a checked-out worktree (has a .git file or directory)."""
    return (path / ".git").exists()


def rev_parse(repo: Path, ref: str) -> str | None:
    """The commit SHA of `ref`, or None when it does not resolve."""
    result = git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", cwd=repo, check=False)
    return result.stdout.strip() if result.ok else None


def branch_exists(repo: Path, name: str) -> bool:
    """True when refs/heads/<name> exists."""
    return ok("show-ref", "--verify", "--quiet", f"refs/heads/{name}", cwd=repo)


def current_branch(repo: Path) -> str:
    """The branch checked out in the main worktree (refuses a detached HEAD)."""
    ref = head_ref(repo)
    if ref is None:
        raise UsageError(
            f"the main worktree {repo} has a detached HEAD",
            hint="check out your main branch, or set main_branch in taskgate.toml",
        )
    return ref


def worktree_paths(repo: Path) -> dict[Path, str | None]:
    """Registered worktrees and their branches, from `git worktree list --porcelain -z`."""
    out = git("worktree", "list", "--porcelain", "-z", cwd=repo).stdout
    result: dict[Path, str | None] = {}
    current: Path | None = None
    for field in split_z(out):
        if field.startswith("worktree "):
            current = Path(field[len("worktree ") :])
            result[current] = None
        elif field.startswith("branch ") and current is not None:
            result[current] = field[len("branch ") :].removeprefix("refs/heads/")
    return result


def add_worktree(repo: Path, path: Path, branch: str, base: str) -> None:
    """Create `path` on `branch`, creating the branch at `base` when it does not exist yet."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if branch_exists(repo, branch):
        git("worktree", "add", str(path), branch, cwd=repo)
    else:
        git("worktree", "add", "-b", branch, str(path), base, cwd=repo)


def ensure_worktree(repo: Path, path: Path, branch: str, base: str) -> bool:
    """Idempotently make `path` a worktree on `branch`; False when it already was one."""
    if is_worktree(path) and head_ref(path) == branch:
        return False
    if path.exists() and any(path.iterdir()):
        raise UsageError(
            f"worktree path {path} is occupied and is not a worktree on branch {branch}",
            hint="move the directory away or run 'taskgate recover'",
        )
    git("worktree", "prune", cwd=repo)
    add_worktree(repo, path, branch, base)
    return True


def dirty_files(worktree: Path) -> list[str]:
    """Paths with uncommitted changes or untracked files in `worktree`."""
    out = git("status", "--porcelain", "-z", "--untracked-files=all", cwd=worktree).stdout
    return [entry[3:] for entry in split_z(out) if len(entry) > 3]


def head_sha(worktree: Path) -> str | None:
    """HEAD commit of a worktree, or None for an unborn branch / missing worktree."""
    if not is_worktree(worktree):
        return None
    return rev_parse(worktree, "HEAD")


def config_value(repo: Path, key: str) -> str | None:
    """A git config value, or None when unset."""
    result = git("config", "--get", key, cwd=repo, check=False)
    return result.stdout.strip() if result.ok else None


def toplevel(path: Path) -> Path:
    """The worktree root that contains `path`."""
    return Path(git_out("rev-parse", "--show-toplevel", cwd=path))


@contextmanager
def repo_lock(common_dir: Path) -> Iterator[None]:
    """Serialise worktree add/remove/prune and merges into main for one repository.

    Concurrent `git worktree add` calls race on .git/worktrees; an flock is released by the
    kernel when its holder dies, so a crash never leaves it held.
    """
    lock_path = common_dir / "taskgate-repo.lock"
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
