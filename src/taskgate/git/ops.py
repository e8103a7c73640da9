"""Named git operations for the task lifecycle: ancestry, commits, refs, merges (all plumbing)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from taskgate.git.cmd import git, git_out, ok, split_z

ZERO = "0" * 40
_AGENT_TAG = re.compile(r"^\[agent:([A-Za-z0-9._-]+)\]")


def agent_of(message: str) -> str | None:
    """The agent named by a commit message's leading `[agent:A]` tag (R-WTB-06)."""
    match = _AGENT_TAG.match(message)
    return match.group(1) if match else None


@dataclass(frozen=True)
class Commit:
    """One commit as the audit trail records it (R-AUD-03)."""

    sha: str
    subject: str
    parents: tuple[str, ...]
    created: tuple[str, ...] = field(default_factory=tuple)
    modified: tuple[str, ...] = field(default_factory=tuple)
    deleted: tuple[str, ...] = field(default_factory=tuple)

    @property
    def files(self) -> tuple[str, ...]:
        """Every path the commit touched."""
        return self.created + self.modified + self.deleted


def is_ancestor(repo: Path, ancestor: str, descendant: str) -> bool:
    """True when `ancestor` is reachable from `descendant` (equal counts)."""
    return ok("merge-base", "--is-ancestor", ancestor, descendant, cwd=repo)


def rev_list(repo: Path, *args: str) -> list[str]:
    """`git rev-list ARGS` (oldest first)."""
    return git_out("rev-list", "--reverse", *args, "--", cwd=repo).split()


def tree_of(repo: Path, rev: str) -> str:
    """The tree id of a commit."""
    return git_out("rev-parse", f"{rev}^{{tree}}", cwd=repo)


def commit(repo: Path, sha: str) -> Commit:
    """Subject, parents and touched files of one commit (first-parent diff for merges)."""
    head = git_out("log", "-1", "--format=%P%x00%s", sha, cwd=repo)
    parents_text, _, subject = head.partition("\0")
    parents = tuple(parents_text.split())
    changes: dict[str, list[str]] = {"A": [], "M": [], "D": []}
    if len(parents) <= 1:
        out = git(
            "diff-tree", "--root", "--no-commit-id", "-r", "--name-status", "-z", sha, cwd=repo
        ).stdout
        fields = split_z(out)
        i = 0
        while i + 1 < len(fields):
            status = fields[i][:1]
            step = 3 if status in ("R", "C") else 2
            path = fields[i + step - 1]
            changes["A" if status in ("A", "C", "R") else "D" if status == "D" else "M"].append(
                path
            )
            i += step
    return Commit(
        sha, subject, parents, tuple(changes["A"]), tuple(changes["M"]), tuple(changes["D"])
    )


def subjects(repo: Path, *revs: str, paths: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(sha, subject) for `git log REVS -- PATHS` (oldest first)."""
    out = git("log", "--reverse", "--format=%H%x00%s", *revs, "--", *paths, cwd=repo).stdout
    result = []
    for line in out.splitlines():
        sha, _, subject = line.partition("\0")
        result.append((sha, subject))
    return result


def changed_paths(repo: Path, old: str, new: str) -> list[str]:
    """Paths that differ between two commits."""
    return split_z(git("diff", "--name-only", "-z", old, new, cwd=repo).stdout)


def commit_tree(repo: Path, tree: str, parents: list[str], message: str, *, date: str) -> str:
    """A new commit object (nothing checked out changes); `date` makes it reproducible."""
    args = ["commit-tree", tree]
    for parent in parents:
        args += ["-p", parent]
    env = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    return git(*args, cwd=repo, stdin=message, env=env).stdout.strip()


def update_ref(repo: Path, ref: str, new: str, old: str) -> bool:
    """Compare-and-swap a ref (old = ZERO: create only); False when it held something else."""
    return ok("update-ref", ref, new, old, cwd=repo)


def delete_ref(repo: Path, ref: str, old: str) -> bool:
    """Delete a ref only while it still points at `old` (never deletes newer work)."""
    return ok("update-ref", "-d", ref, old, cwd=repo)


def remotes(repo: Path) -> list[str]:
    """Configured remote names."""
    return git_out("remote", cwd=repo).split()


def conflicted_files(worktree: Path) -> list[str]:
    """Unmerged paths during a conflicted merge or rebase."""
    out = git("diff", "--name-only", "--diff-filter=U", "-z", cwd=worktree).stdout
    return sorted(set(split_z(out)))


def all_paths(repo: Path, rev: str) -> set[str]:
    """Every file path in a commit's tree."""
    return set(split_z(git("ls-tree", "-r", "--name-only", "-z", rev, cwd=repo).stdout))


def is_tracked(worktree: Path, path: str) -> bool:
    """True when `path` is in the worktree's index."""
    return bool(git("ls-files", "-z", "--", f":(literal){path}", cwd=worktree).stdout)
