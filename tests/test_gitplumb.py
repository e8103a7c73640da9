"""The anchor written without git processes (taskgate.gitplumb, issue 18): on every repository
shape it takes, it leaves exactly what `git commit-tree` + `git update-ref --no-deref` leave
(the same objects byte for byte, refs, reflogs; `git fsck --strict` clean); on every shape it
cannot vouch for, git writes the anchor (asserted: the git commands ran) and the result is
still the one git gives; a lock already held, an unusual ref, an object already there and a
write that fails half-way leave nothing git would trust.

Each comparison builds the same repository twice (fixed dates, so the same object ids), lets
engine/anchor.write anchor seq 1 and 2 with git on both, then seq 3 and 4 with gitplumb on one
side and git on the other, and compares every file under objects/, refs/ and logs/ (content
and mode), packed-refs and HEAD's reflog.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from taskgate import anchor_write, gitplumb, looseobject
from taskgate.engine import anchor

TASK = "add-login"
WHEN = "1795720754 +0100"  # anchor_write._now() on both sides
AT = "2026-11-26T12:00:00Z"
DATES = {"GIT_AUTHOR_DATE": "@1700000000 +0000", "GIT_COMMITTER_DATE": "@1700000000 +0000"}
SRC = Path(__file__).resolve().parent.parent / "src"
_GIT = anchor_write._git

# A shape: build(root) -> (repo given to anchor.write, its common dir); then(repo, common) runs
# after the second anchor (packing refs, making a reflog...).
Shape = tuple[Callable[[Path], tuple[Path, Path]], Callable[[Path, Path], None] | None]


def _git(cwd: Path, *args: str) -> str:
    """git with fixed dates: two builds of a shape hold the same objects."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(DATES)
    out = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def _plain(root: Path, *config: tuple[str, str]) -> tuple[Path, Path]:
    repo = root / "repo"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    for key, value in config:
        _git(repo, "config", key, value)
    (repo / "a.txt").write_text("a\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "initial")
    return repo, repo / ".git"


def _worktree(root: Path) -> tuple[Path, Path]:
    repo, common = _plain(root)
    _git(repo, "worktree", "add", "-q", "-b", "side", str(root / "wt"))
    return root / "wt", common


def _main_with_worktrees(root: Path) -> tuple[Path, Path]:
    _worktree(root)
    return root / "repo", root / "repo" / ".git"


def _separate(root: Path) -> tuple[Path, Path]:
    repo = root / "repo"
    root.mkdir(parents=True)
    _git(root, "init", "-q", "-b", "main", f"--separate-git-dir={root / 'store.git'}", "repo")
    (repo / "a.txt").write_text("a\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "initial")
    return repo, root / "store.git"


def _with(*config: tuple[str, str]) -> Callable[[Path], tuple[Path, Path]]:
    return lambda root: _plain(root, *config)


def _pack_refs(repo: Path, common: Path) -> None:
    _git(repo, "update-ref", "refs/tags/v1", "HEAD")
    _git(repo, "pack-refs", "--all")  # the anchor ref now only packed: the git path once


def _empty_reflog(repo: Path, common: Path) -> None:
    log = common / "logs" / anchor.ref(TASK)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")


def _used_reflog(repo: Path, common: Path) -> None:
    _empty_reflog(repo, common)
    now = _git(repo, "rev-parse", anchor.ref(TASK))
    (common / "logs" / anchor.ref(TASK)).write_text(f"{'0' * 40} {now} x <y> 1 +0000\told\n")


def _config_after(*pairs: tuple[str, str]) -> Callable[[Path, Path], None]:
    def run(repo: Path, common: Path) -> None:
        for key, value in pairs:
            _git(repo, "config", key, value)

    return run


PLUMBED: dict[str, Shape] = {
    "fresh repository": (_plain, None),
    "linked worktree": (_worktree, None),
    "main worktree of a repository with worktrees": (_main_with_worktrees, None),
    "separate git dir": (_separate, None),
    "packed refs": (_plain, _pack_refs),
    "existing empty reflog": (_plain, _empty_reflog),
    "existing reflog": (_plain, _used_reflog),
    "logAllRefUpdates true": (_with(("core.logAllRefUpdates", "true")), None),
    "logAllRefUpdates false, a reflog": (_with(("core.logAllRefUpdates", "false")), _used_reflog),
    "logAllRefUpdates always": (_with(("core.logAllRefUpdates", "always")), None),
    "logAllRefUpdates always, after": (_plain, _config_after(("core.logAllRefUpdates", "always"))),
    "core.bare true, a reflog": (_plain, _config_after(("core.bare", "true"))),
    "looseCompression 9": (_with(("core.looseCompression", "9")), None),
    "compression 0": (_with(("core.compression", "0")), None),
    "fsync everything": (
        _with(("core.fsync", "all"), ("core.fsyncObjectFiles", "true")),
        None,
    ),
    "commit encoding utf-8": (_with(("i18n.commitEncoding", "UTF-8")), None),
}


def _hook(repo: Path, common: Path) -> None:
    hook = common / "hooks" / "reference-transaction"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(f"#!/bin/sh\necho \"$1\" >> '{common / 'hook-ran'}'\ncat >/dev/null\n")
    hook.chmod(0o755)


def _alternates(repo: Path, common: Path) -> None:
    other = repo.parent / "other.git"
    _git(repo.parent, "init", "-q", "--bare", str(other))
    (common / "objects" / "info" / "alternates").write_text(f"{other / 'objects'}\n")


def _replace(repo: Path, common: Path) -> None:
    _git(repo, "replace", "HEAD", _git(repo, "commit-tree", "HEAD^{tree}", "-m", "other"))


def _repacked(repo: Path, common: Path) -> None:
    _git(repo, "repack", "-a", "-d", "-q")
    _git(repo, "prune-packed")  # the anchor's parent only in a pack now


def _head_on_anchor(repo: Path, common: Path) -> None:
    _git(repo, "symbolic-ref", "HEAD", anchor.ref(TASK))


def _include(repo: Path, common: Path) -> None:
    (common / "extra.cfg").write_text("[core]\n\tlogAllRefUpdates = always\n")
    _git(repo, "config", "include.path", "extra.cfg")


def _continued(repo: Path, common: Path) -> None:
    _append(common, "logAllRefUpdates = \\\nalways")


def _file_at(path: Path) -> None:
    """A file where git looks for a directory (git refuses to append the reflog there)."""
    if path.is_dir():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("not a directory\n")


def _append(common: Path, line: str) -> None:
    with (common / "config").open("a") as handle:
        handle.write(f"[core]\n\t{line}\n")


FALLBACK: dict[str, Shape] = {
    "sha256 objects": (lambda root: _plain_sha256(root), None),
    "format version 1": (_plain, _config_after(("core.repositoryFormatVersion", "1"))),
    "an extension": (
        _plain,
        _config_after(("core.repositoryFormatVersion", "1"), ("extensions.worktreeConfig", "true")),
    ),
    "reference-transaction hook": (_plain, _hook),
    "core.hooksPath": (_plain, _config_after(("core.hooksPath", "/nonexistent"))),
    "alternates": (_plain, _alternates),
    "replace refs": (_plain, _replace),
    "parent packed": (_plain, _repacked),
    "HEAD names the anchor ref": (_plain, _head_on_anchor),
    "include": (_plain, _include),
    "continued value": (_plain, _continued),
    "shared repository": (_plain, _config_after(("core.sharedRepository", "group"))),
    "commit encoding latin-1": (_plain, _config_after(("i18n.commitEncoding", "ISO-8859-1"))),
    "quoted compression": (_plain, lambda repo, common: _append(common, 'looseCompression = "9"')),
    "core.createObject": (_plain, _config_after(("core.createObject", "rename"))),
    "a file above the reflog": (_plain, lambda repo, common: _file_at(common / "logs" / "refs")),
    "a directory at the reflog": (
        _plain,
        lambda repo, common: (common / "logs" / anchor.ref(TASK)).mkdir(parents=True),
    ),
}


def _plain_sha256(root: Path) -> tuple[Path, Path]:
    repo = root / "repo"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main", "--object-format=sha256")
    _git(repo, "commit", "-q", "--allow-empty", "-m", "initial")
    return repo, repo / ".git"


def _write(repo: Path, common: Path, seq: int, plumb: bool,
           monkeypatch: pytest.MonkeyPatch) -> tuple[bool, list[str]]:  # fmt: skip
    """anchor.write of `seq` at WHEN, gitplumb on or off; (its result, the git commands run)."""
    ran: list[str] = []
    real = _GIT

    def spy(args: list[str], *rest: object, **kw: object) -> tuple[int, str]:
        ran.append(args[0])
        return real(args, *rest, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(anchor_write, "_git", spy)
    monkeypatch.setattr(anchor_write, "_now", lambda: WHEN)
    monkeypatch.setattr(anchor_write, "_PLUMB", plumb)
    return anchor.write(repo, common, TASK, seq, f"{seq:064x}", AT), ran


def _files(common: Path, raw: bool = False) -> dict[str, tuple[int, bytes]]:
    """Every file git reads for objects, refs and reflogs: (mode, bytes) by path; a loose
    object's bytes inflated unless `raw` (gitplumb writes zlib's stored form, git compresses
    at its level: the same object)."""
    found: dict[str, tuple[int, bytes]] = {}
    for top in ("objects", "refs", "logs", "packed-refs", "HEAD"):
        base = common / top
        paths = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
        for path in paths:
            if path.name == "alternates":
                continue  # names the other side's directory
            info = path.lstat()
            data = path.read_bytes()
            if not raw and _loose(path):
                data = zlib.decompress(data)
            found[str(path.relative_to(common))] = (info.st_mode, data)
    return found


def _loose(path: Path) -> bool:
    """`path` is a loose object: objects/<2 hex>/<38 hex>."""
    return path.parent.parent.name == "objects" and len(path.parent.name + path.name) == 40


def _view(repo: Path, common: Path, raw: bool = False) -> tuple[object, ...]:
    name = anchor.ref(TASK)
    head = _git(repo, "rev-parse", name)
    return (
        _files(common, raw),
        _git(repo, "cat-file", "-p", head),
        _git(repo, "log", "--format=%H %P%n%B", name),
        _git(repo, "reflog", "show", "--format=%H %gs", name) if (common / "logs" / name).exists()
        else None,
        _git(repo, "cat-file", "--batch-all-objects", "--batch-check"),
    )  # fmt: skip


def _fsck(repo: Path) -> None:
    out = subprocess.run(["git", "fsck", "--strict", "--no-dangling"], cwd=repo,
                         capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 0 and not out.stdout.strip(), out.stdout + out.stderr


def _both(tmp_path: Path, shape: Shape, monkeypatch: pytest.MonkeyPatch,
          fsck: bool = True, raw: bool = False) -> list[list[str]]:  # fmt: skip
    """Build `shape` twice; anchors 1-2 by git on both; 3-4 with gitplumb on the first and git
    on the second; assert the same files (byte for byte with `raw`) and history. The git
    commands the first side ran."""
    build, then = shape
    sides = [build(tmp_path / "plumb"), build(tmp_path / "git")]
    for repo, common in sides:
        assert _write(repo, common, 1, False, monkeypatch)[0]
        assert _write(repo, common, 2, False, monkeypatch)[0]
        if then is not None:
            then(repo, common)
    ran = []
    for seq in (3, 4):
        ok, commands = _write(*sides[0], seq, True, monkeypatch)
        ran.append(commands)
        assert ok == _write(*sides[1], seq, False, monkeypatch)[0]
    assert _view(*sides[0], raw) == _view(*sides[1], raw)
    if fsck:
        _fsck(sides[0][0])
    return ran


@pytest.mark.parametrize("name", list(PLUMBED))
def test_gitplumb_writes_what_git_writes(name: str, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    ran = _both(tmp_path, PLUMBED[name], monkeypatch)
    if name == "packed refs":  # the ref only packed: git once (rev-parse), then gitplumb
        assert ran[0] == ["rev-parse", "commit-tree", "update-ref"] and ran[1] == []
    else:
        assert ran == [[], []], f"{name}: git ran {ran}"  # gitplumb wrote both anchors


def test_at_level_0_the_objects_are_gits_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """zlib's stored form is what git writes with core.compression=0: every file the same."""
    assert _both(tmp_path, PLUMBED["compression 0"], monkeypatch, raw=True) == [[], []]


def test_the_anchors_are_stored_and_the_next_is_written_without_zlib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Anchor 1 by git (compressed at git's level 1), 2 and 3 by gitplumb in stored form: git
    reads them (cat-file, log, fsck --strict), and writing 3 on top of 2 never loads zlib
    (a process of its own that refuses to import it)."""
    repo, common, first = _anchored(tmp_path, monkeypatch)
    assert looseobject.inflate_stored(_object(common, first)) is None  # git compressed it
    assert _write(repo, common, 2, True, monkeypatch) == (True, [])  # reads the parent: zlib
    second = _git(repo, "rev-parse", anchor.ref(TASK))
    code = f"""
import sys
sys.path.insert(0, {str(SRC)!r})
sys.modules["zlib"] = None  # import zlib raises ImportError
from taskgate import anchor_write
anchor_write._now = lambda: {WHEN!r}
print(anchor_write.write({str(repo)!r}, {str(common)!r}, {TASK!r}, 3, "3" * 64, {AT!r}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert (out.returncode, out.stdout.strip()) == (0, "True"), out.stderr
    third = _git(repo, "rev-parse", anchor.ref(TASK))
    assert third != second and _git(repo, "rev-parse", f"{third}^") == second
    for oid in (second, third):
        stream = _object(common, oid)
        inflated = looseobject.inflate_stored(stream)
        assert inflated is not None and inflated == zlib.decompress(stream)
        assert stream == zlib.compress(inflated, 0)
    assert _git(repo, "cat-file", "-p", third).endswith("seq 3\nhash " + "3" * 64 + f"\nat {AT}")
    assert _git(repo, "log", "--format=%s", anchor.ref(TASK)).splitlines() == [
        "taskgate audit anchor"] * 3  # fmt: skip
    _fsck(repo)


def _object(common: Path, oid: str) -> bytes:
    return (common / "objects" / oid[:2] / oid[2:]).read_bytes()


@pytest.mark.parametrize("size", [0, 1, 330, 4096, 65535, 65536, 200_000])
def test_the_stored_form_is_zlibs(size: int) -> None:
    data = os.urandom(size)
    stream = looseobject.deflate_stored(data)
    assert zlib.decompress(stream) == data
    assert looseobject.adler32(data) == zlib.adler32(data)
    if size <= 4096:  # zlib cuts longer data into blocks of its own sizes
        assert stream == zlib.compress(data, 0)
    assert looseobject.inflate_stored(stream) == data
    assert looseobject.inflate_stored(zlib.compress(data, 0)) == data  # zlib's own blocks


def test_only_intact_stored_streams_are_inflated() -> None:
    data = b"commit 12\0tree abcdef\n" * 20
    stream = looseobject.deflate_stored(data)
    assert looseobject.inflate_stored(stream) == data
    for level in (1, 6, 9):
        assert looseobject.inflate_stored(zlib.compress(data, level)) is None  # compressed
    flipped = bytearray(stream)
    flipped[40] ^= 1
    spoiled = {
        "a byte of the data": bytes(flipped),  # the checksum no longer matches
        "cut short": stream[:-5],
        "no checksum": stream[:-4],
        "trailing bytes": stream + b"\0",
        "NLEN": stream[:5] + bytes((stream[5] ^ 1,)) + stream[6:],
        "a preset dictionary": b"\x78\x20" + stream[2:],  # FDICT (and a bad header check)
        "not zlib": b"\x1f\x8b" + stream[2:],
        "empty": b"",
    }
    for name, bad in spoiled.items():
        assert looseobject.inflate_stored(bad) is None, name


@pytest.mark.parametrize("name", list(FALLBACK))
def test_what_gitplumb_cannot_vouch_for_is_left_to_git(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = _both(tmp_path, FALLBACK[name], monkeypatch, fsck=name != "HEAD names the anchor ref")
    # (the parent packed: only the first; the second's parent is the loose one git just wrote)
    assert "commit-tree" in ran[0] and "update-ref" in ran[0], f"{name}: {ran}"


def test_the_reference_transaction_hook_runs(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    repo, common = _plain(tmp_path)
    assert _write(repo, common, 1, True, monkeypatch)[0]
    _hook(repo, common)
    assert _write(repo, common, 2, True, monkeypatch)[0]
    assert (common / "hook-ran").read_text().split() == ["prepared", "committed"]


def test_a_log_all_ref_updates_always_reflog_is_created_as_git_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, common = _plain(tmp_path, ("core.logAllRefUpdates", "always"))
    assert _write(repo, common, 1, False, monkeypatch)[0]
    shutil.rmtree(common / "logs" / "refs" / "taskgate")  # git made it; gitplumb makes it again
    ok, ran = _write(repo, common, 2, True, monkeypatch)
    assert ok and ran == []
    lines = (common / "logs" / anchor.ref(TASK)).read_text().splitlines()
    assert len(lines) == 1 and lines[0].endswith(f"taskgate <taskgate@localhost> {WHEN}\t"
                                                  "taskgate: audit anchor #2")  # fmt: skip


# -- adversarial ---------------------------------------------------------------------------


def _anchored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, str]:
    repo, common = _plain(tmp_path)
    assert _write(repo, common, 1, False, monkeypatch)[0]
    return repo, common, _git(repo, "rev-parse", anchor.ref(TASK))


def test_a_lock_already_held_is_left_alone(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    repo, common, before = _anchored(tmp_path, monkeypatch)
    lock = common / (anchor.ref(TASK) + ".lock")
    lock.write_text("someone else's\n")
    ok, ran = _write(repo, common, 2, True, monkeypatch)
    assert not ok and "update-ref" in ran  # git waited for the lock and refused
    assert lock.read_text() == "someone else's\n"
    assert _git(repo, "rev-parse", anchor.ref(TASK)) == before


def test_a_ref_made_a_symlink_is_left_to_git(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    repo, common, _ = _anchored(tmp_path, monkeypatch)
    main = _git(repo, "rev-parse", "main")
    path = common / anchor.ref(TASK)
    path.unlink()
    path.symlink_to(common / "refs" / "heads" / "main")  # reads as main's commit
    ok, ran = _write(repo, common, 2, True, monkeypatch)
    assert ok and "update-ref" in ran
    assert _git(repo, "rev-parse", "main") == main  # --no-deref: replaced, not followed
    assert not path.is_symlink() and _git(repo, "rev-parse", anchor.ref(TASK) + "^") == main
    _fsck(repo)


def test_a_ref_that_moved_under_the_lock_is_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, common, first = _anchored(tmp_path, monkeypatch)
    main = _git(repo, "rev-parse", "main")
    name = anchor.ref(TASK)
    made = gitplumb.commit(str(repo), str(common), name, main, anchor._EMPTY_TREE["sha1"], "m\n",
                           "taskgate <taskgate@localhost>", WHEN, "x")  # fmt: skip
    assert made is None  # the ref holds `first`, not main: compare-and-swap refused
    assert _git(repo, "rev-parse", name) == first
    assert not (common / (name + ".lock")).exists()


def test_an_object_already_there_is_kept_and_freshened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other"
    o_repo, o_common, _ = _anchored(other, monkeypatch)
    assert _write(o_repo, o_common, 2, False, monkeypatch)[0]
    oid = _git(o_repo, "rev-parse", anchor.ref(TASK))
    repo, common, _ = _anchored(tmp_path / "this", monkeypatch)
    obj = common / "objects" / oid[:2] / oid[2:]
    obj.parent.mkdir(exist_ok=True)
    shutil.copyfile(o_common / "objects" / oid[:2] / oid[2:], obj)
    obj.chmod(0o444)
    os.utime(obj, (1_000_000_000, 1_000_000_000))
    ok, ran = _write(repo, common, 2, True, monkeypatch)
    assert ok and ran == []
    assert _git(repo, "rev-parse", anchor.ref(TASK)) == oid
    assert obj.stat().st_mtime > 1_000_000_000 and oct(obj.stat().st_mode)[-3:] == "444"
    assert _files(common) == _files(o_common)  # as if git had written it
    _fsck(repo)


_FULL = """
import os, resource, signal, sys
sys.path.insert(0, {src!r})
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
from taskgate import gitplumb
from taskgate import anchor_write
from taskgate import anchor_write
from taskgate.engine import anchor
anchor_write._now = lambda: {when!r}
parent = open(os.path.join({common!r}, anchor.ref("{task}"))).read().strip()
if {plumb_only!r}:
    print(gitplumb.commit({repo!r}, {common!r}, anchor.ref("{task}"), parent,
                          anchor._EMPTY_TREE["sha1"], "m\\n", "taskgate <taskgate@localhost>",
                          {when!r}, "x"))
else:
    print(anchor.write({repo!r}, {common!r}, "{task}", 2, "0" * 64, "at"))
"""


def _full_disk(repo: Path, common: Path, limit: int, plumb_only: bool) -> str:
    """gitplumb.commit, or anchor.write (gitplumb then git), in a process whose files cannot
    grow past `limit` bytes: a full disk as the writes meet it (EFBIG where ENOSPC would be)."""
    code = _FULL.format(src=str(SRC), limit=limit, when=WHEN, common=str(common),
                        repo=str(repo), task=TASK, plumb_only=plumb_only)  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_a_full_disk_at_the_object_leaves_nothing_git_trusts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, common, before = _anchored(tmp_path, monkeypatch)
    files = _files(common)
    assert _full_disk(repo, common, 64, plumb_only=True) == "None"
    assert _files(common) == files  # no object, no temporary file, no lock, ref as it was
    assert _full_disk(repo, common, 64, plumb_only=False) == "False"  # then git failed too
    assert _git(repo, "rev-parse", anchor.ref(TASK)) == before
    assert not list((common / "refs").rglob("*.lock"))
    # git itself leaves its temporary file (never an object to git); gitplumb left none
    assert {p for p in _files(common) if "tmp_obj_" not in p} == set(files)
    _fsck(repo)


def test_a_full_disk_at_the_reflog_leaves_ref_and_reflog_as_they_were(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, common, before = _anchored(tmp_path, monkeypatch)
    log = common / "logs" / anchor.ref(TASK)
    log.parent.mkdir(parents=True)
    log.write_text(f"{'0' * 40} {before} x <y> 1 +0000\told\n" * 20)  # > the limit below
    text = log.read_text()
    assert _full_disk(repo, common, 512, plumb_only=True) == "None"
    assert log.read_text() == text
    assert _full_disk(repo, common, 512, plumb_only=False) == "False"
    assert log.read_text() == text
    assert _git(repo, "rev-parse", anchor.ref(TASK)) == before
    assert not list((common / "refs").rglob("*.lock"))
    assert not list((common / "objects").rglob("tmp_obj_*"))
    _fsck(repo)  # the commit written before the ref is only dangling, as git leaves it


def test_gitplumb_is_refused_for_a_git_it_does_not_know(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `git` first on PATH that is not /usr/bin/git: its system configuration may be
    elsewhere, so git writes the anchor."""
    repo, common, _ = _anchored(tmp_path, monkeypatch)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").write_text('#!/bin/sh\nexec /usr/bin/git "$@"\n')
    (bin_dir / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    ok, ran = _write(repo, common, 2, True, monkeypatch)
    assert ok and ran == ["commit-tree", "update-ref"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[core]\n\tbare = false\n", {"core.bare": "false"}),
        ("\ufeff[Core] Bare = true ; comment\n", {"core.bare": "true"}),
        ("[core]\n\tlogAllRefUpdates\n", {"core.logallrefupdates": "\0true"}),
        ("[core]\n\tcompression =\n", {"core.compression": ""}),
        ('[remote "origin"]\n\turl = x # c\n', {"remote.origin.url": "x"}),
        ("[core]\n\tlooseCompression = 9 # nine\n", {"core.loosecompression": "9"}),
        ('[core]\n\tlooseCompression = "9"\n', {"core.loosecompression": gitplumb._UNPARSED}),
        ("[core]\n\tbad key = 1\n", None),
        ("key = 1\n", None),
        ("[core\n", None),
        ("[include]\n\tpath = x\n", None),
        ('[includeIf "gitdir:/x/"]\n\tpath = x\n', None),
        ("[extensions]\n\tobjectFormat = sha256\n", None),
        ("[core]\n\tbare = \\\n  true\n", None),
        ('[a "b\\"c"]\n\tk = v\n', None),
    ],
)
def test_the_config_reader_follows_git_or_refuses(text: str, expected: dict[str, str] | None,
                                                  tmp_path: Path) -> None:  # fmt: skip
    path = tmp_path / "config"
    path.write_text(text)
    found: dict[str, str] = {}
    assert gitplumb._read_config(str(path), found) is (expected is not None)
    if expected is not None:
        assert found == expected
