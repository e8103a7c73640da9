"""Small named git operations: discovery, branches, worktrees, and the per-repository lock."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from taskgate.dataclass_lite import dataclass
from taskgate.errors import UsageError

TYPE_CHECKING = False  # typing stays unimported on the command path (issue 18)
if TYPE_CHECKING:
    from taskgate.git.cmd import git as git
    from taskgate.git.cmd import git_out as git_out
    from taskgate.git.cmd import ok as ok
    from taskgate.git.cmd import split_z as split_z
else:  # git.cmd (with taskgate.process) is imported on the first git command: a plain
    # transition runs none, and importing them was 0.3 ms of it (issue 18)

    def git(*args, **kwargs):
        from taskgate.git.cmd import git

        return git(*args, **kwargs)

    def git_out(*args, **kwargs):
        from taskgate.git.cmd import git_out

        return git_out(*args, **kwargs)

    def ok(*args, **kwargs):
        from taskgate.git.cmd import ok

        return ok(*args, **kwargs)

    def split_z(text):
        from taskgate.git.cmd import split_z

        return split_z(text)


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


def git_dir(worktree: Path) -> Path | None:
    """The private git dir of a worktree (`.git` or `.git/worktrees/X`), None when absent."""
    dot_git = worktree / ".git"
    if dot_git.is_dir():
        return dot_git
    return _read_gitdir_file(dot_git)


def head_ref(worktree: Path) -> str | None:
    """The branch checked out in `worktree` (read from its HEAD file), None when detached."""
    gitdir = git_dir(worktree)
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


def rev_parse_many(repo: Path, refs: Sequence[str]) -> list[str | None]:
    """rev_parse of each of `refs` in one git process (`cat-file --batch-check`): the commit
    SHA, or None where the ref does not resolve to a commit (issue 18: one process per ref
    made up most of cleanup's git calls)."""
    if not refs:
        return []
    if any(not r or r.isspace() or "\n" in r for r in refs):
        return [rev_parse(repo, r) for r in refs]
    result = git(
        "cat-file", "--batch-check=%(objectname) %(objecttype)", cwd=repo, check=False,
        stdin="".join(f"{r}^{{commit}}\n" for r in refs),
    )  # fmt: skip
    lines = result.stdout.splitlines()
    if not result.ok or len(lines) != len(refs):
        return [rev_parse(repo, r) for r in refs]
    return [line[:-7] if line.endswith(" commit") else None for line in lines]


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


# `git worktree add` writes a registration (.git/worktrees/ID/gitdir, commondir, HEAD) one file
# at a time: a `git worktree list` in that moment dies ("fatal: failed to read
# .git/worktrees/code4/commondir: Success"). Taskgate registers worktrees under repo_lock;
# a reader without it (classify's check, cleanup's, audit, hooks status) asks again after these
# pauses, then reports the failure.
HALF_REGISTERED = ("failed to read", "worktrees/")
REREAD_PAUSES_S = (0.05, 0.2, 0.5)


def worktree_paths(repo: Path) -> dict[Path, str | None]:
    """Registered worktrees and their branches, from `git worktree list --porcelain -z`."""
    from taskgate.git.cmd import again_while, raise_for

    args = ("worktree", "list", "--porcelain", "-z")
    listed = again_while(
        git(*args, cwd=repo, check=False),
        lambda failed: all(part in failed.stderr for part in HALF_REGISTERED),
        lambda: git(*args, cwd=repo, check=False),
        REREAD_PAUSES_S,
        "git:worktree-list-again",  # tests: the registration is complete
    )
    if not listed.ok:
        raise_for(("git", *args), listed, repo)
    out = listed.stdout
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
        if is_populated(path):
            return False
        # `git worktree add` was killed before its checkout wrote the index: nothing was ever
        # handed out from it, so it is removed and added again (issue 8, test_torture.py).
        git("worktree", "remove", "--force", "--force", str(path), cwd=repo)
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


def repo_lock(common_dir: Path) -> AbstractContextManager[None]:
    """Serialise worktree add/remove/prune and merges into main for one repository.

    Concurrent `git worktree add` calls race on .git/worktrees.
    """
    return _flock(common_dir / "taskgate-repo.lock")


@contextmanager
def _flock(lock_path: Path) -> Iterator[None]:
    """An exclusive flock; the kernel releases it when its holder dies, so a crash never
    leaves it held."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


# -- several worktrees at once ------------------------------------------------------------------


@dataclass(frozen=True)
class WorktreeSpec:
    """A worktree to exist at `path` on `branch`; the branch is created at `base` if missing."""

    path: Path
    branch: str
    base: str


def branch_tips(repo: Path) -> dict[str, str]:
    """Every local branch and its commit, from one `git for-each-ref`."""
    out = git("for-each-ref", "--format=%(refname)%00%(objectname)", "refs/heads", cwd=repo).stdout
    tips: dict[str, str] = {}
    for line in out.splitlines():
        ref, _, sha = line.partition("\0")
        tips[ref.removeprefix("refs/heads/")] = sha
    return tips


def is_populated(worktree: Path) -> bool:
    """True once the worktree's files were checked out (its private index exists)."""
    gitdir = git_dir(worktree)
    return gitdir is not None and (gitdir / "index").exists()


def plan_worktrees(
    repo: Path, specs: Sequence[WorktreeSpec], *, adopt_foreign_branches: bool = False
) -> list[tuple[WorktreeSpec, str]]:
    """What `ensure_worktrees` would do for each spec ("ready", "populate", "add", "add-new");
    raises UsageError, before anything changes, when a spec cannot be satisfied safely."""
    tips = branch_tips(repo)
    # Registrations whose directory is gone are pruned before adding, so they do not count.
    checked_out = {b: p for p, b in worktree_paths(repo).items() if b and p.exists()}
    plan: list[tuple[WorktreeSpec, str]] = []
    for spec in specs:
        if is_worktree(spec.path) and head_ref(spec.path) == spec.branch:
            plan.append((spec, "ready" if is_populated(spec.path) else "populate"))
            continue
        if spec.path.exists() and any(spec.path.iterdir()):
            raise UsageError(
                f"worktree path {spec.path} is occupied and is not a worktree on branch "
                f"{spec.branch} (R-WTB-02)",
                hint=f"move {spec.path} away (nothing was changed), or run 'taskgate recover'",
            )
        elsewhere = checked_out.get(spec.branch)
        if elsewhere is not None:
            raise UsageError(
                f"branch '{spec.branch}' is already checked out in {elsewhere}",
                hint=f"finish the work there and remove it (git worktree remove {elsewhere}), "
                "or run 'taskgate recover'; nothing was changed",
            )
        if spec.branch not in tips:
            plan.append((spec, "add-new"))
            continue
        # A branch we created descends from its base; anything else is someone's work that
        # merely shares the name (recovery passes adopt_foreign_branches=True).
        if not adopt_foreign_branches and not ok(
            "merge-base", "--is-ancestor", spec.base, spec.branch, cwd=repo
        ):
            raise UsageError(
                f"a branch named '{spec.branch}' already exists and was not created from "
                f"'{spec.base}' (R-WTB-02)",
                hint=f"rename it (git branch -m {spec.branch} <other>); nothing was changed",
            )
        plan.append((spec, "add"))
    return plan


def ensure_worktrees(
    repo: Path,
    common_dir: Path,
    specs: Sequence[WorktreeSpec],
    *,
    jobs: int = 8,
    adopt_foreign_branches: bool = False,
) -> list[Path]:
    """Idempotently create or recreate worktrees; returns the paths that were (re)populated.

    Every spec is checked before any is created (`plan_worktrees`). Registration (`git worktree
    add --no-checkout`, which writes .git/worktrees and creates the branch) is serialised on the
    repository lock: concurrent adds corrupt .git/worktrees. The checkout, the slow part,
    touches only each worktree's own index and files, so it runs in parallel. A crash between
    the two leaves a worktree without an index, which the next call populates; an existing
    branch is reused (recovery recreates missing worktrees from it).
    """
    pending: list[Path] = []
    with repo_lock(common_dir):
        plan = plan_worktrees(repo, specs, adopt_foreign_branches=adopt_foreign_branches)
        if any(action.startswith("add") for _, action in plan):
            git("worktree", "prune", cwd=repo)  # forget directories deleted by hand
        for spec, action in plan:
            if action == "ready":
                continue
            if action != "populate":
                spec.path.parent.mkdir(parents=True, exist_ok=True)
                new = ("-b", spec.branch, str(spec.path), spec.base)
                old = (str(spec.path), spec.branch)
                git("worktree", "add", "--no-checkout", *(new if action == "add-new" else old),
                    cwd=repo)  # fmt: skip
            pending.append(spec.path)
    if len(pending) > 1 and jobs > 1:
        from concurrent.futures import ThreadPoolExecutor  # only here: it costs ~6 ms to import

        with ThreadPoolExecutor(max_workers=min(jobs, len(pending))) as pool:
            list(pool.map(_checkout, pending))
    else:
        for path in pending:
            _checkout(path)
    return pending


def _checkout(worktree: Path) -> None:
    """Populate a registered worktree. taskgate's checkouts of one worktree hold its flock, so
    an index.lock found under that flock in a worktree that has no index yet was left by a
    checkout that was killed: it is removed instead of failing every later resume."""
    gitdir = git_dir(worktree)
    if gitdir is None:
        raise UsageError(f"{worktree} is not a registered worktree", hint="run 'taskgate recover'")
    with _flock(gitdir / "taskgate-checkout.lock"):
        stale = gitdir / "index.lock"
        if stale.exists() and not (gitdir / "index").exists():
            stale.unlink()
        git("read-tree", "--reset", "-u", "HEAD", cwd=worktree)


def in_progress(worktree: Path) -> str | None:
    """An unfinished merge, rebase, cherry-pick or revert in `worktree`, None when there is none."""
    gitdir = git_dir(worktree)
    if gitdir is None:
        return None
    for name, what in (
        ("rebase-merge", "rebase"),
        ("rebase-apply", "rebase"),
        ("MERGE_HEAD", "merge"),
        ("CHERRY_PICK_HEAD", "cherry-pick"),
        ("REVERT_HEAD", "revert"),
    ):
        if (gitdir / name).exists():
            return what
    return None


def tracked_changes(worktree: Path) -> list[str]:
    """Staged or unstaged changes to tracked files (untracked files are not counted)."""
    out = git("status", "--porcelain", "-z", "--untracked-files=no", cwd=worktree).stdout
    return [entry[3:] for entry in split_z(out) if len(entry) > 3]


def remove_worktree(repo: Path, path: Path) -> bool:
    """Unregister and delete a worktree (caller proved it clean); False when already gone."""
    registered = worktree_paths(repo)
    if not path.exists() or path.resolve() not in {p.resolve() for p in registered}:
        git("worktree", "prune", cwd=repo)
        return False
    git("worktree", "remove", "--force", str(path), cwd=repo)
    return True
