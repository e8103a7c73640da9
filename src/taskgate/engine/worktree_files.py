"""Files a new worktree receives from the main worktree (issue 21).

Untracked files named by `.worktreeinclude` (gitignore syntax, matched by git itself) are
copied with their permissions; heavy directories are linked or copied with reflinks. Whatever
is placed must stay ignored by git in the worktree, so it can never be staged or committed:
a placed path that git does not ignore is added, anchored, to `.git/info/exclude`, and one that
even then is not ignored (a `.gitignore` re-includes it) is taken out again and reported.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from taskgate.engine.worktree_config import WorktreeConfig
from taskgate.fsutil import atomic_write_json, read_json
from taskgate.git import repo as gitrepo
from taskgate.git.cmd import git, split_z
from taskgate.process import run

INCLUDE_FILE = ".worktreeinclude"
MARKER = "taskgate-setup.json"
_EXCLUDE_HEADER = "# taskgate: kept out of git in task and agent worktrees ([worktree], issue 21)"
_CHUNK = 200  # pathspecs per git call


@dataclass
class Placed:
    """What was put into one worktree, by path relative to its root (never content)."""

    copied: list[str] = field(default_factory=list)  # files from .worktreeinclude / include
    linked: list[str] = field(default_factory=list)  # symlinks to the main worktree's dirs
    copied_dirs: list[str] = field(default_factory=list)  # [worktree] copy
    excluded: list[str] = field(default_factory=list)  # patterns added to info/exclude
    skipped: list[str] = field(default_factory=list)  # "path: why"

    def paths(self) -> list[str]:
        """Every top-level path taskgate placed (copies, links, copied directories)."""
        return [*self.copied, *self.linked, *self.copied_dirs]


def included_files(repo: Path, cfg: WorktreeConfig, skip_dirs: Sequence[str]) -> list[str]:
    """Untracked files of the main worktree matched by .worktreeinclude and `include`.

    git does the matching (`ls-files --others --ignored` with only these patterns as the
    exclude list), so the gitignore syntax is git's own. Paths under `skip_dirs` (taskgate's
    state and task directories) are never copied.
    """
    include = repo / INCLUDE_FILE
    args = ["ls-files", "-z", "--others", "--ignored"]
    if include.is_file():
        args.append(f"--exclude-from={include}")
    elif not cfg.include:
        return []
    for pattern in cfg.include:
        args.append(f"--exclude={pattern}")
    found = split_z(git(*args, cwd=repo).stdout)
    prefixes = tuple(d.rstrip("/") + "/" for d in skip_dirs)
    return sorted(p for p in found if not p.startswith(prefixes) and p != INCLUDE_FILE)


def _inside(worktree: Path, target: Path) -> bool:
    """True when `target`'s parent resolves inside the worktree (no escape through a link)."""
    root = worktree.resolve()
    parent = target.parent.resolve()
    return parent == root or root in parent.parents


def _same_file(src: Path, dst: Path) -> bool:
    """Same kind, bytes (or link target) and permission bits."""
    try:
        a, b = os.lstat(src), os.lstat(dst)
    except OSError:
        return False
    if stat.S_IFMT(a.st_mode) != stat.S_IFMT(b.st_mode):
        return False
    if stat.S_ISLNK(a.st_mode):
        return os.readlink(src) == os.readlink(dst)
    if stat.S_IMODE(a.st_mode) != stat.S_IMODE(b.st_mode) or a.st_size != b.st_size:
        return False
    with src.open("rb") as f1, dst.open("rb") as f2:
        while True:
            c1, c2 = f1.read(1 << 16), f2.read(1 << 16)
            if c1 != c2:
                return False
            if not c1:
                return True


def copy_file(src: Path, dst: Path) -> None:
    """Copy one file or symlink keeping its permission bits and times.

    The temporary file is created with the source's mode from the start (a 0600 secret is
    never readable by others, not even for a moment) and renamed into place, so a crash never
    leaves half a file under the real name.
    """
    info = os.lstat(src)
    tmp = dst.parent / f".{dst.name}.taskgate-{os.urandom(4).hex()}.tmp"
    if stat.S_ISLNK(info.st_mode):
        os.symlink(os.readlink(src), tmp)
    else:
        mode = stat.S_IMODE(info.st_mode)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode & 0o700)
        try:
            with os.fdopen(fd, "wb") as out, src.open("rb") as source:
                shutil.copyfileobj(source, out)
            os.chmod(tmp, mode)  # exact bits, whatever the umask
            os.utime(tmp, ns=(info.st_atime_ns, info.st_mtime_ns))
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    os.replace(tmp, dst)


def _copy_dir(src: Path, dst: Path, mode: str) -> str:
    """Copy a directory tree with reflinks (or hard links); '' on success, else the error."""
    if sys.platform == "darwin":
        attempts = [
            ["cp", "-c", "-R", "-p", str(src), str(dst)],
            ["cp", "-R", "-p", str(src), str(dst)],
        ]
    elif mode == "hardlink":
        attempts = [["cp", "-a", "-l", str(src), str(dst)]]
    else:
        attempts = [["cp", "-a", "--reflink=auto", str(src), str(dst)]]
    error = ""
    for cmd in attempts:
        result = run(cmd)
        if result.ok:
            return ""
        error = (result.stderr or result.stdout).strip()[-300:]
        if dst.exists() or dst.is_symlink():
            shutil.rmtree(dst, ignore_errors=True)
    return error or "cp failed"


def place(
    main: Path, worktree: Path, cfg: WorktreeConfig, files: Sequence[str], common_dir: Path
) -> Placed:
    """Copy the included files, link and copy the configured directories, keep them ignored.

    Idempotent: a path that already holds what would be placed counts as placed (a crash
    after the copy), anything else already there is left alone and reported.
    """
    placed = Placed()
    shared = (*cfg.symlink, *cfg.copy)
    for rel in shared:
        try:
            if rel in cfg.symlink:
                _link(main, worktree, rel, placed)
            else:
                _copy_tree(main, worktree, rel, cfg.copy_mode, placed)
        except OSError as exc:  # e.g. a file where its parent directory should be
            placed.skipped.append(f"{rel}: {exc.strerror or exc}")
    for rel in files:
        if any(rel == d or rel.startswith(d + "/") for d in shared):
            continue  # the directory itself is shared or copied
        src, dst = main / rel, worktree / rel
        if not _inside(worktree, dst):
            placed.skipped.append(f"{rel}: its directory leads outside the worktree")
            continue
        if dst.is_symlink() or dst.exists():
            if _same_file(src, dst):
                placed.copied.append(rel)
            else:
                placed.skipped.append(f"{rel}: the worktree already has a different file")
            continue
        try:
            dst.parent.mkdir(parents=True, exist_ok=True)
            copy_file(src, dst)
        except OSError as exc:
            placed.skipped.append(f"{rel}: {exc.strerror or exc}")
            continue
        placed.copied.append(rel)
    keep_ignored(worktree, common_dir, placed)
    return placed


def _link(main: Path, worktree: Path, rel: str, placed: Placed) -> None:
    src, dst = main / rel, worktree / rel
    if not src.exists():
        placed.skipped.append(f"{rel}: not in the main worktree (nothing to link yet)")
        return
    if dst.is_symlink() and os.readlink(dst) == str(src):
        placed.linked.append(rel)
        return
    if dst.is_symlink() or dst.exists():
        placed.skipped.append(f"{rel}: the worktree already has it (tracked or made by setup)")
        return
    if not _inside(worktree, dst):
        placed.skipped.append(f"{rel}: its directory leads outside the worktree")
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(src, dst, target_is_directory=src.is_dir())
    placed.linked.append(rel)


def _copy_tree(main: Path, worktree: Path, rel: str, mode: str, placed: Placed) -> None:
    src, dst = main / rel, worktree / rel
    if not src.is_dir():
        placed.skipped.append(f"{rel}: not a directory in the main worktree")
        return
    if dst.is_symlink() or dst.exists():
        placed.skipped.append(f"{rel}: the worktree already has it")
        return
    if not _inside(worktree, dst):
        placed.skipped.append(f"{rel}: its directory leads outside the worktree")
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    error = _copy_dir(src, dst, mode)
    if error:
        placed.skipped.append(f"{rel}: copy failed: {error}")
    else:
        placed.copied_dirs.append(rel)


# -- keeping placed paths out of git ------------------------------------------------------------


def not_ignored(worktree: Path, paths: Sequence[str]) -> list[str]:
    """Of `paths` (files, links or directories), those git would stage with `git add -A`."""
    found: list[str] = []
    for i in range(0, len(paths), _CHUNK):
        chunk = paths[i : i + _CHUNK]
        out = git("--literal-pathspecs", "ls-files", "-z", "--others", "--exclude-standard",
                  "--", *chunk, cwd=worktree).stdout  # fmt: skip
        found += split_z(out)
    return found


def _escape(rel: str) -> str:
    """An anchored gitignore pattern that matches exactly `rel`."""
    text = "".join("\\" + c if c in "*?[\\" else c for c in rel)
    if text.startswith(("#", "!")):
        text = "\\" + text
    if text.endswith(" "):
        text = text[:-1] + "\\ "
    return "/" + text


def add_excludes(common_dir: Path, patterns: Iterable[str]) -> list[str]:
    """Append patterns to the repository's info/exclude (shared by its worktrees) under the
    repository lock; returns those that were new."""
    wanted = list(dict.fromkeys(patterns))
    if not wanted:
        return []
    exclude = common_dir / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    with gitrepo.repo_lock(common_dir):
        text = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
        lines = text.splitlines()
        new = [p for p in wanted if p not in lines]
        if new:
            with exclude.open("a", encoding="utf-8") as handle:
                if text and not text.endswith("\n"):
                    handle.write("\n")
                if _EXCLUDE_HEADER not in lines:
                    handle.write(_EXCLUDE_HEADER + "\n")
                handle.write("".join(p + "\n" for p in new))
    return new


def _owner(rel: str, placed: Placed) -> str | None:
    """The top-level placed entry that `rel` (a path git reported) belongs to."""
    for top in placed.paths():
        if rel == top or rel.startswith(top + "/"):
            return top
    return None


def keep_ignored(worktree: Path, common_dir: Path, placed: Placed) -> None:
    """Make every placed path ignored in the worktree; remove what cannot be (never staged)."""
    loose = not_ignored(worktree, placed.paths())
    if not loose:
        return
    tops = {t for t in (_owner(p, placed) for p in loose) if t is not None}
    patterns = [_escape(t) + ("/" if t in placed.copied_dirs else "") for t in sorted(tops)]
    placed.excluded += add_excludes(common_dir, patterns)
    for rel in sorted(
        {t for t in (_owner(p, placed) for p in not_ignored(worktree, sorted(tops))) if t}
    ):
        target = worktree / rel
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            target.unlink(missing_ok=True)
        for bucket in (placed.copied, placed.linked, placed.copied_dirs):
            if rel in bucket:
                bucket.remove(rel)
        placed.skipped.append(f"{rel}: removed again, a .gitignore rule re-includes it")


def exclude_new_untracked(
    worktree: Path, common_dir: Path, before: frozenset[str], after: frozenset[str]
) -> list[str]:
    """Keep what a setup command created (build metadata, caches) out of git: untracked paths
    that were not there before it ran, by their topmost new directory, go to info/exclude."""
    if not after - before:
        return []
    entries = split_z(
        git("ls-files", "-z", "--others", "--exclude-standard", "--directory", cwd=worktree).stdout
    )
    tops: list[str] = []
    for entry in entries:
        if not entry.endswith("/"):
            if entry not in before:
                tops.append(entry)
        elif not any(b.startswith(entry) for b in before):
            tops.append(entry)
        else:  # a directory that already held untracked work: only the new files in it
            inside = split_z(
                git("--literal-pathspecs", "ls-files", "-z", "--others", "--exclude-standard",
                    "--", entry, cwd=worktree).stdout
            )  # fmt: skip
            tops += [f for f in inside if f not in before]
    patterns = [_escape(t.rstrip("/")) + ("/" if t.endswith("/") else "") for t in tops]
    add_excludes(common_dir, patterns)
    return tops


@dataclass(frozen=True)
class TreeState:
    """One `git status` of a worktree, to tell what a setup command changed."""

    untracked: frozenset[str]  # files `git add -A` would stage
    ignored: frozenset[str]  # ignored files and directories (a matching directory is one entry)
    changed: tuple[str, ...]  # tracked paths with changes


def tree_state(worktree: Path) -> TreeState:
    """The worktree's untracked, ignored and changed paths, from one `git status`."""
    out = git("status", "--porcelain", "-z", "--untracked-files=all", "--ignored=matching",
              cwd=worktree).stdout  # fmt: skip
    untracked: set[str] = set()
    ignored: set[str] = set()
    changed: list[str] = []
    fields = out.split("\0")
    i = 0
    while i < len(fields):
        entry = fields[i]
        i += 1
        if len(entry) < 4:
            continue
        code, path = entry[:2], entry[3:]
        if code[0] in "RC":
            i += 1  # a rename's or copy's source path follows
        if code == "??":
            untracked.add(path)
        elif code == "!!":
            ignored.add(path)
        else:
            changed.append(path)
    return TreeState(frozenset(untracked), frozenset(ignored), tuple(changed))


def disposable(main: Path, worktree: Path, placed: Sequence[str]) -> list[str]:
    """Of the paths taskgate placed in a worktree, those still exactly what was placed: links
    to the main worktree, and copies identical to the main worktree's file. Cleanup may drop
    these; a copy an agent edited is work and is not listed."""
    result = []
    for rel in placed:
        dst = worktree / rel
        if dst.is_symlink() and os.readlink(dst) == str(main / rel):
            result.append(rel)
        elif dst.is_dir() and not dst.is_symlink():
            result.append(rel)  # a copied heavy directory ([worktree] copy): a cache
        elif _same_file(main / rel, dst):
            result.append(rel)
    return result


# -- the per-worktree marker --------------------------------------------------------------------


def _marker_path(worktree: Path) -> Path | None:
    """In the worktree's private git dir: it dies with the worktree (a recreated one starts
    afresh)."""
    gitdir = gitrepo.git_dir(worktree)
    return gitdir / MARKER if gitdir is not None else None


def read_marker(worktree: Path) -> dict[str, Any]:
    """What was done in this worktree: {"placed": [...paths], "done": [[cmd], ...]}."""
    path = _marker_path(worktree)
    data = read_json(path) if path is not None else None
    return data if isinstance(data, dict) else {}


def write_marker(worktree: Path, data: dict[str, Any]) -> None:
    """Record what was done in this worktree (atomically)."""
    path = _marker_path(worktree)
    if path is not None:
        atomic_write_json(path, data)


def placed_paths(worktree: Path) -> list[str]:
    """The paths taskgate copied or linked into a worktree (for cleanup's disposable list)."""
    return [str(p) for p in read_marker(worktree).get("placed") or []]
