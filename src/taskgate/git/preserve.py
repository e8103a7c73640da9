"""What removing a worktree or deleting a branch would make unreachable, and how to keep it.

Git keeps an object while a ref, a reflog entry, a worktree's HEAD or a worktree's index
reaches it. Removing a worktree drops its HEAD (detached ones too), its per-worktree refs and
reflog and its index; deleting a branch drops the branch and its reflog. Everything those
reached that the delivered history does not contain is gathered here (`holdings`) and kept
under one quarantine ref whose commit has them as parents (`keep_commit`): the worktree's
files (tracked, untracked and ignored, except configured disposable build caches) as its tree,
and the commit message as the note saying what was kept and why. Nested repositories carry
their own object store and are moved aside whole instead (`move_nested`).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from taskgate.git import repo as gitrepo
from taskgate.git.cmd import git, split_z
from taskgate.git.disposable import is_disposable

# Pseudo-refs a worktree keeps beside HEAD (per-worktree, removed with it).
_PSEUDO_REFS = ("ORIG_HEAD", "MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "REBASE_HEAD")
ZERO = "0" * 40


@dataclass(frozen=True)
class Holdings:
    """What one branch + worktree reach that the delivered history does not contain."""

    branch: str
    worktree: Path
    head: str | None  # the worktree's HEAD commit (None: no worktree or unborn)
    visible: tuple[str, ...]  # undelivered commits reachable from the branch tip or HEAD
    hidden: tuple[str, ...]  # undelivered commits reachable only from reflogs/per-worktree refs
    roots: tuple[str, ...]  # the undelivered starting points (parents for the keep commit)
    staged: str | None  # a tree of the worktree's index when it differs from HEAD's
    ignored: tuple[str, ...]  # ignored paths that are not disposable
    nested: tuple[str, ...]  # nested repositories (relative paths)

    @property
    def silent(self) -> bool:
        """Something git status does not show would be lost (kept without asking)."""
        return bool(self.hidden or self.staged or self.ignored or self.nested)


def _reflog_shas(log: Path) -> list[str]:
    """Every old and new SHA in a reflog file (missing file: none)."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    shas = []
    for line in text.splitlines():
        parts = line.split(" ", 2)
        shas += [s for s in parts[:2] if len(s) == 40 and s != ZERO]
    return shas


def existing_commits(repo: Path, shas: list[str]) -> list[str]:
    """The SHAs among `shas` that name commit objects present in the repository (in order)."""
    unique = list(dict.fromkeys(shas))
    if not unique:
        return []
    out = git(
        "cat-file", "--batch-check=%(objectname) %(objecttype)", cwd=repo, stdin="\n".join(unique)
    ).stdout
    found = {line.split()[0] for line in out.splitlines() if line.endswith(" commit")}
    return [s for s in unique if s in found]


def worktree_refs(worktree: Path) -> tuple[str | None, list[str]]:
    """HEAD and every other commit the worktree alone reaches: pseudo-refs, per-worktree refs
    (refs/worktree, refs/bisect) and its HEAD reflog."""
    gitdir = gitrepo.git_dir(worktree)
    if gitdir is None:
        return None, []
    head, *pseudo = gitrepo.rev_parse_many(worktree, ("HEAD", *_PSEUDO_REFS))
    others = [s for s in pseudo if s]
    out = git(
        "for-each-ref", "--format=%(objectname)", "refs/worktree", "refs/bisect",
        cwd=worktree, check=False,
    ).stdout  # fmt: skip
    others += out.split()
    others += _reflog_shas(gitdir / "logs" / "HEAD")
    return head, others


def _undelivered(repo: Path, starts: list[str], delivered: list[str]) -> list[str]:
    if not starts:
        return []
    out = git("rev-list", *starts, "--not", *delivered, "--", cwd=repo).stdout
    return out.split()


def independent(repo: Path, shas: list[str]) -> list[str]:
    """The commits among `shas` that no other one contains (merge-base --independent)."""
    unique = list(dict.fromkeys(shas))
    if len(unique) < 2:
        return unique
    return git("merge-base", "--independent", *unique, cwd=repo).stdout.split()


def nested_repos(worktree: Path) -> list[str]:
    """Directories below the worktree holding their own `.git` (relative, sorted)."""
    found = []
    for top, dirs, files in os.walk(worktree):
        here = Path(top)
        if here != worktree and (".git" in dirs or ".git" in files):
            found.append(here.relative_to(worktree).as_posix())
            dirs[:] = []
            continue
        dirs[:] = [d for d in dirs if not (here == worktree and d == ".git")]
    return sorted(found)


def ignored_paths(worktree: Path, disposable: tuple[str, ...], nested: list[str]) -> list[str]:
    """Ignored files and directories worth keeping (not disposable, not nested repositories)."""
    out = git(
        "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory",
        cwd=worktree,
    ).stdout  # fmt: skip
    skip = {n.rstrip("/") for n in nested}
    return [
        p for p in split_z(out)
        if p.rstrip("/") not in skip and not is_disposable(p, disposable)
    ]  # fmt: skip


def holdings(
    repo: Path,
    branch: str,
    worktree: Path,
    delivered: list[str],
    disposable: tuple[str, ...],
) -> Holdings:
    """Everything deleting `branch` and removing `worktree` would make unreachable."""
    tip = gitrepo.rev_parse(repo, f"refs/heads/{branch}")
    head: str | None = None
    others: list[str] = []
    staged = None
    ignored: list[str] = []
    nested: list[str] = []
    if gitrepo.is_worktree(worktree):
        head, others = worktree_refs(worktree)
        staged = _staged_tree(worktree, head)
        nested = nested_repos(worktree)
        ignored = ignored_paths(worktree, disposable, nested)
    common = gitrepo.git_dir(repo)
    branch_log = _reflog_shas(common / "logs" / "refs" / "heads" / branch) if common else []
    main_starts = [s for s in (tip, head) if s]
    visible = _undelivered(repo, main_starts, delivered)
    rest = existing_commits(repo, others + branch_log)
    everything = _undelivered(repo, main_starts + rest, delivered)
    seen = set(visible)
    hidden = [s for s in everything if s not in seen]
    undelivered = set(everything)
    roots = independent(repo, [s for s in main_starts + rest if s in undelivered])
    return Holdings(
        branch, worktree, head, tuple(visible), tuple(hidden), tuple(roots), staged,
        tuple(ignored), tuple(nested),
    )  # fmt: skip


def _staged_tree(worktree: Path, head: str | None) -> str | None:
    """The tree of the worktree's own index when it differs from HEAD's (staged work)."""
    result = git("write-tree", cwd=worktree, check=False)  # fails on unmerged entries
    if not result.ok:
        return None
    tree = result.stdout.strip()
    head_tree = git("rev-parse", f"{head}^{{tree}}", cwd=worktree).stdout.strip() if head else ""
    return None if tree == head_tree else tree


def snapshot_tree(worktree: Path, head: str | None, ignored: tuple[str, ...],
                  nested: tuple[str, ...]) -> str:  # fmt: skip
    """A tree of the worktree's files (tracked, untracked, the kept ignored ones), built with a
    private index so the worktree and its own index are not touched."""
    gitdir = gitrepo.git_dir(worktree)
    assert gitdir is not None
    index = gitdir / "taskgate-quarantine.index"
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        index.unlink(missing_ok=True)
        if head:
            git("read-tree", head, cwd=worktree, env=env)
        excludes = [f":(exclude,literal){n}" for n in nested]
        git("add", "-A", "--", ".", *excludes, cwd=worktree, env=env)
        if ignored:
            git(
                "add", "-f", "--pathspec-from-file=-", "--pathspec-file-nul",
                cwd=worktree, env=env, stdin="\0".join(ignored) + "\0",
            )  # fmt: skip
        return git("write-tree", cwd=worktree, env=env).stdout.strip()
    finally:
        index.unlink(missing_ok=True)


def move_nested(worktree: Path, nested: tuple[str, ...], dest: Path) -> list[str]:
    """Move nested repositories (with their own objects) to `dest`; idempotent after a crash."""
    moved = []
    for rel in nested:
        source, target = worktree / rel, dest / rel
        if source.exists() and not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(source), str(target))
        if target.exists():
            moved.append(str(target))
    return moved
