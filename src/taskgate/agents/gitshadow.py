"""An agent's private git namespace inside the sandbox (DESIGN.md Trust, layer 1).

Inside the sandbox the repository's common git dir is replaced by a private *shadow*:

    objects/        empty; info/alternates names the real object store, mounted read-only
    refs/, packed-refs   copies: moving `main` or deleting a branch changes only the copy
    logs/           empty (reflogs of the copy)
    worktrees/<n>   the agent worktree's real git dir (index, HEAD), read-write; its
                    `commondir` and `gitdir` files read-only
    everything else (config, hooks, info, ...)   the real entries, read-only

So every git command the agent runs works as usual, and nothing it does reaches another ref
or the object store. After the agent exits, taskgate imports what it may keep: the objects it
wrote (each one checked against its name) and the new tip of its own branch (after a
connectivity check, compare-and-swap). A ref the agent moved, created or deleted in its copy
is reported as a violation; none of it reaches the repository.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import zlib
from dataclasses import dataclass
from pathlib import Path

from taskgate.git import repo as gitrepo
from taskgate.git.cmd import git

MAIN_OBJECTS = "taskgate-main-objects"  # where the real object store appears inside the shadow
_MAX_OBJECT_BYTES = 256 * 1024 * 1024
_MAX_REFS = 100_000
_HEX = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")
# Refs the agent may change in its copy without it being a violation: they never leave it.
_PRIVATE_REFS = ("refs/stash",)


class ShadowError(Exception):
    """The repository cannot be given a private namespace (layout taskgate does not know)."""


@dataclass(frozen=True)
class Mount:
    """One bubblewrap mount: `op` is bind, ro-bind."""

    op: str
    src: Path
    dest: Path


@dataclass
class GitShadow:
    """The shadow of one invocation, and what it needs to import the agent's work afterwards."""

    common: Path  # the real common git dir
    shadow: Path  # the host directory mounted at `common` inside the sandbox
    gitdir: Path  # the agent worktree's real git dir (.git/worktrees/<name>)
    branch: str
    tip: str | None  # the branch's commit before the agent ran
    algo: str  # sha1 or sha256
    mounts: tuple[Mount, ...]
    refs_before: dict[str, str]
    head_before: bytes
    reflog_before: bytes  # the worktree's logs/HEAD
    # False for the project's own commands (validation, setup): no ref of theirs is kept, a
    # commit on the worktree's branch is a violation like any other ref change.
    keep_branch: bool = True

    def import_back(self) -> list[str]:
        """Import the agent's objects and its branch tip; return the violations found."""
        violations: list[str] = []
        head_file = self.gitdir / "HEAD"
        head_after = _read_bytes(head_file)
        detached = not self.head_before.startswith(b"ref:")  # set so by the backend (codex)
        if detached and _HEX.fullmatch(head_after.decode("ascii", "replace").strip()):
            pass  # commits on a detached HEAD move it: the backend attaches it afterwards
        elif head_after != self.head_before:
            head_file.write_bytes(self.head_before)
            shown = head_after.decode("utf-8", "replace").strip()[:80]
            violations.append(
                f"the worktree's HEAD was changed to {shown!r}; restored to "
                f"{self.branch} (R-WTB-02)"
            )
        after = ref_map(self.shadow)
        own = f"refs/heads/{self.branch}" if self.keep_branch else ""
        for ref in sorted(set(self.refs_before) | set(after)):
            if ref == own or ref.startswith(_PRIVATE_REFS):
                continue
            old, new = self.refs_before.get(ref), after.get(ref)
            if old != new:
                what = "created" if old is None else "deleted" if new is None else "moved"
                violations.append(
                    f"{ref} {what} by the agent: discarded, the repository is unchanged "
                    "(an agent moves only its own branch, R-WTB-02)"
                )
        if not self.keep_branch:
            return violations
        violations += self._import_objects()
        new_tip = after.get(own)
        refused: list[str] = []
        if new_tip is None:
            refused.append(f"{own} deleted by the agent: discarded")
        elif new_tip != self.tip:
            refused += self._move_branch(own, new_tip)
        reflog = self.gitdir / "logs" / "HEAD"
        if refused and reflog.parent.is_dir():  # it must not name commits the repo lacks
            reflog.write_bytes(self.reflog_before)
        return violations + refused

    def _import_objects(self) -> list[str]:
        """Copy the loose objects the agent wrote into the real store, each checked."""
        problems: list[str] = []
        objects = self.shadow / "objects"
        real = self.common / "objects"
        width = 40 if self.algo == "sha1" else 64
        for fan in sorted(objects.iterdir()) if objects.is_dir() else ():
            if fan.name == "pack" and any(fan.glob("*.pack")):
                problems += _import_packs(fan, self.common)
                continue
            if len(fan.name) != 2 or fan.is_symlink() or not fan.is_dir():
                continue
            for item in sorted(fan.iterdir()):
                name = fan.name + item.name
                if len(name) != width or not _HEX.fullmatch(name):
                    continue
                target = real / fan.name / item.name
                if target.exists():
                    continue
                raw = _read_regular(item)
                if raw is None or not _valid_object(raw, name, self.algo):
                    problems.append(f"object {name} written by the agent is corrupt: ignored")
                    continue
                target.parent.mkdir(exist_ok=True)
                tmp = target.parent / f"tmp_obj_taskgate_{os.urandom(6).hex()}"
                tmp.write_bytes(raw)
                tmp.chmod(0o444)
                os.replace(tmp, target)
        return problems

    def _move_branch(self, ref: str, new_tip: str) -> list[str]:
        """Compare-and-swap the real branch to the agent's tip, when its history is complete."""
        if new_tip.startswith("ref:") or not _HEX.fullmatch(new_tip):
            return [f"{ref} was made to point at {new_tip[:80]!r}: discarded"]
        repo = self.common
        check = ["rev-list", "--objects", "--quiet", new_tip]
        if self.tip:
            check += ["--not", self.tip]
        kind = git("cat-file", "-t", new_tip, cwd=repo, check=False).stdout.strip()
        if kind != "commit" or not git(*check, cwd=repo, check=False).ok:
            return [f"{ref} -> {new_tip[:12]}: the commit or its history is missing: discarded"]
        moved = git(
            "update-ref", "-m", "taskgate: the agent's commits (sandbox)",
            ref, new_tip, self.tip or "", cwd=repo, check=False,
        )  # fmt: skip
        if not moved.ok:
            return [f"{ref} could not be moved to {new_tip[:12]}: {moved.stderr.strip()}"]
        return []


def prepare(worktree: Path, branch: str, scratch: Path) -> GitShadow:
    """Build the shadow of `worktree`'s repository in `scratch` (the mounts are returned)."""
    gitdir = gitrepo.git_dir(worktree)
    if gitdir is None or (worktree / ".git").is_dir():
        raise ShadowError(f"{worktree} is not a linked worktree (git worktree add)")
    common = gitrepo.discover(worktree).common_dir
    if (common / "reftable").exists():
        raise ShadowError("the repository stores refs in a reftable; only files refs are known")
    if gitdir.parent != common / "worktrees":
        raise ShadowError(f"{worktree}'s git dir {gitdir} is not under {common}/worktrees")
    out = git(
        "rev-parse", "--show-object-format", "--verify", "-q", f"refs/heads/{branch}",
        cwd=worktree, check=False,
    ).stdout.split()  # fmt: skip
    algo = out[0] if out else "sha1"
    tip = out[1] if len(out) > 1 else None
    shadow = scratch / "git"
    shadow.mkdir(parents=True)
    mounts = [Mount("bind", shadow, common)]
    for entry in sorted(os.scandir(common), key=lambda e: e.name):
        name = entry.name
        if name.endswith(".lock"):
            continue
        if name == "objects":
            _objects_dir(shadow / "objects", common)
            (shadow / MAIN_OBJECTS).mkdir()
            mounts.append(Mount("ro-bind", common / "objects", common / MAIN_OBJECTS))
        elif name == "refs":
            _copy_refs(common / "refs", shadow / "refs")
        elif name in ("packed-refs", "HEAD"):
            shutil.copyfile(common / name, shadow / name)
        elif name == "logs":
            (shadow / "logs").mkdir()
        elif name == "worktrees":
            (shadow / "worktrees" / gitdir.name).mkdir(parents=True)
            mounts.append(Mount("bind", gitdir, common / "worktrees" / gitdir.name))
            for fixed in ("commondir", "gitdir"):
                if (gitdir / fixed).is_file():
                    mounts.append(Mount("ro-bind", gitdir / fixed, gitdir / fixed))
        elif mount_point(Path(entry.path), shadow / name):
            mounts.append(Mount("ro-bind", common / name, common / name))
    return GitShadow(
        common=common,
        shadow=shadow,
        gitdir=gitdir,
        branch=branch,
        tip=tip,
        algo=algo,
        mounts=tuple(mounts),
        refs_before=ref_map(shadow),
        head_before=_read_bytes(gitdir / "HEAD"),
        reflog_before=_read_bytes(gitdir / "logs" / "HEAD"),
    )


def mount_point(src: Path, dest: Path) -> bool:
    """Create at `dest` what a read-only mount of `src` needs; False when nothing is mounted.

    A symlink is copied as a symlink (mounting it would follow it); sockets and fifos are left
    out.
    """
    if src.is_symlink():
        os.symlink(os.readlink(src), dest)
        return False
    if src.is_dir():
        dest.mkdir()
        return True
    if src.is_file():
        dest.touch()
        return True
    return False


def _objects_dir(objects: Path, common: Path) -> None:
    """The shadow's object store: empty, reading the real one (and its alternates) through
    info/alternates. The paths are the ones inside the sandbox."""
    (objects / "info").mkdir(parents=True)
    (objects / "pack").mkdir()
    lines = [str(common / MAIN_OBJECTS)]
    real_alternates = common / "objects" / "info" / "alternates"
    for line in (_read_bytes(real_alternates).decode("utf-8", "replace")).splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            lines.append(str((common / "objects" / line).resolve()))
    (objects / "info" / "alternates").write_text("\n".join(lines) + "\n", encoding="utf-8")


def ref_map(gitdir: Path) -> dict[str, str]:
    """refname -> value (a SHA, or `ref: X` for a symbolic ref) of a files-backend git dir,
    read without git (the directory is the agent's: nothing in it is run or followed)."""
    refs: dict[str, str] = {}
    packed = _read_bytes(gitdir / "packed-refs").decode("utf-8", "replace")
    for line in packed.splitlines():
        if line.startswith(("#", "^")) or " " not in line:
            continue
        sha, name = line.split(" ", 1)
        refs[name.strip()] = sha.strip()
    root = gitdir / "refs"
    count = 0
    for folder, dirs, files in os.walk(root):  # os.walk does not follow symlinked dirs
        dirs.sort()
        for name in sorted(files):
            count += 1
            if count > _MAX_REFS or name.endswith(".lock"):
                continue
            path = Path(folder) / name
            data = _read_regular(path, limit=4096)
            value = data.decode("utf-8", "replace").strip() if data is not None else "<not a file>"
            refs[path.relative_to(gitdir).as_posix()] = value
    return refs


def _valid_object(raw: bytes, name: str, algo: str) -> bool:
    """True when `raw` is a zlib-compressed git object whose hash is `name`."""
    try:
        inflater = zlib.decompressobj()
        data = inflater.decompress(raw, _MAX_OBJECT_BYTES)
    except zlib.error:
        return False
    if inflater.unconsumed_tail or b"\0" not in data[:64]:
        return False
    header, _, body = data.partition(b"\0")
    kind, _, size = header.partition(b" ")
    if kind not in (b"blob", b"tree", b"commit", b"tag") or not size.isdigit():
        return False
    if int(size) != len(body):
        return False
    return hashlib.new(algo, data).hexdigest() == name


def _import_packs(pack_dir: Path, common: Path) -> list[str]:
    """Packs the agent made (git gc / repack in its copy): git index-pack checks every object
    while writing them into the real store."""
    problems: list[str] = []
    real = common / "objects" / "pack"
    real.mkdir(parents=True, exist_ok=True)
    for pack in sorted(pack_dir.glob("*.pack")):
        raw = _read_regular(pack, limit=_MAX_OBJECT_BYTES)
        if raw is None:
            problems.append(f"pack {pack.name} written by the agent is unreadable: ignored")
            continue
        tmp = real / f"tmp_pack_taskgate_{os.urandom(6).hex()}.pack"
        tmp.write_bytes(raw)
        indexed = git("index-pack", "--strict", str(tmp), cwd=common, check=False)
        digest = indexed.stdout.strip().split()[-1] if indexed.ok and indexed.stdout else ""
        if not indexed.ok or not _HEX.fullmatch(digest):
            tmp.unlink(missing_ok=True)
            tmp.with_suffix(".idx").unlink(missing_ok=True)
            problems.append(f"pack {pack.name} written by the agent is corrupt: ignored")
            continue
        os.replace(tmp.with_suffix(".idx"), real / f"pack-{digest}.idx")
        os.replace(tmp, real / f"pack-{digest}.pack")
    return problems


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _read_regular(path: Path, limit: int = _MAX_OBJECT_BYTES) -> bytes | None:
    """The bytes of a regular file (never through a symlink), None otherwise or when larger
    than `limit`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(limit + 1)
    finally:
        os.close(fd)


def _copy_refs(src: Path, dest: Path) -> None:
    """A copy of `src` (the refs) while other taskgate commands and agents may be moving them:
    lock files are left out (a private copy holds nobody's lock), and a ref or lock that is
    renamed or deleted while the copy runs is left out too, as a copy taken a moment later
    would (a concurrent `start` broke every other session's setup on it: the CI run found
    it in tests/test_worktree_setup.py)."""
    try:
        shutil.copytree(src, dest, symlinks=True, ignore=shutil.ignore_patterns("*.lock"))
    except shutil.Error as exc:
        if any(os.path.lexists(failed[0]) for failed in exc.args[0]):
            raise  # something that is still there could not be copied
