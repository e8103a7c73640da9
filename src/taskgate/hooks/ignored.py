"""Ignored files of a task worktree in the effect check (issue 15, hooks/effects.py).

`git status` leaves ignored files out, yet a main agent that may not write the task worktree
could write one (`.env`, generated code, build output a later step ships). So the baseline
also holds a cheap fingerprint of them. The same `git status` call lists them
(`--ignored=matching`: ignored files, and an ignored directory once, not its contents); each
file is known by its lstat (size, mtime, inode, mode), an ignored directory is walked, up to
LIMIT files in all (beyond, the directory's own mtime stands in: files added or removed
directly inside it still show). Disposable build caches are not watched: the `[cleanup]
disposable` patterns (`__pycache__`, `.pytest_cache`, `node_modules`, `.venv`, ...), the caches
test tools leave (TOOL_CACHES), what the worktree's setup commands created and the directories
taskgate copied in.

When the baseline is taken, the content of small ignored files goes into git's object store
(objects only), so a restore puts back exactly what was there; a larger file that changed is
kept in the quarantine and left as it was found (the agent is told).
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

LIMIT = 2000  # ignored files fingerprinted in all
KEEP_SIZE = 1 << 20  # content kept at baseline time for files up to this size...
KEEP_FILES = 200  # ...and this many files...
KEEP_TOTAL = 16 << 20  # ...and this many bytes in all
# Caches that test runs and linters leave in the worktree they run in, not watched whatever
# [cleanup] disposable says: the main agent runs tests in the task worktree, and these are not
# its work (node_modules, build, dist... are watched unless configured disposable).
TOOL_CACHES = ("__pycache__", "*.pyc", ".pytest_cache", ".mypy_cache", ".ruff_cache",
               ".hypothesis", ".coverage", ".coverage.*", "htmlcov", ".nox", ".tox",
               ".eslintcache")  # fmt: skip


def unwatched(repo: str, worktree: str, state_dir: str) -> list[str]:
    """Patterns of what is not watched: the configured disposable caches, what the setup
    commands created, the directories taskgate copied in (engine/worktree_setup.py).

    Reading them loads the configuration (tomllib, re) and the worktree module, about 35 ms
    on the first guarded call of every session (issue 18); so they are kept per worktree in
    `cache_path(state_dir)`, valid while taskgate.toml and the worktree's setup
    marker keep their stat signature (the same trust as the baselines beside it)."""
    from taskgate.hooks.jsonio import dumps, loads

    cache = cache_path(state_dir)
    sig = [_stat_sig(os.path.join(repo, "taskgate.toml")), _stat_sig(_marker_of(worktree))]
    try:
        with open(cache, "rb") as fh:
            known = loads(fh.read().decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        known = {}
    if not isinstance(known, dict):
        known = {}
    entry = known.get(worktree)
    if isinstance(entry, dict) and entry.get("sig") == sig:
        patterns = entry.get("patterns")
        if isinstance(patterns, list) and all(isinstance(x, str) for x in patterns):
            return patterns
    found = _read_unwatched(repo, worktree)
    known[worktree] = {"sig": sig, "patterns": found}
    tmp = f"{cache}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(dumps(known))
        os.replace(tmp, cache)
    except OSError:
        pass  # a cache only: the next call reads the configuration again
    return found


def cache_path(state_dir: str) -> str:
    """`<state dir>/effects/.unwatched.json`: beside the sessions' baselines, under a name no
    session's baseline can have (hooks/context.safe_name never starts with a dot). It was
    `unwatched.json`, which is also the baseline of a session named `unwatched`: each
    overwrote the other."""
    return os.path.join(state_dir, "effects", ".unwatched.json")


def _stat_sig(path: str | None) -> list[int]:
    """What tells a changed file: size, mtime (ns), inode; [] when it does not exist."""
    try:
        st = os.stat(path) if path else None
    except OSError:
        return []
    return [st.st_size, st.st_mtime_ns, st.st_ino] if st else []


def _marker_of(worktree: str) -> str | None:
    """The setup marker's path in the worktree's private git dir (engine/worktree_files.py),
    found by reading the `.git` file, without git."""
    try:
        with open(os.path.join(worktree, ".git"), encoding="utf-8") as fh:
            line = fh.readline().strip()
    except OSError:
        return None
    if not line.startswith("gitdir: "):
        return None
    gitdir = os.path.join(worktree, line[8:])
    return os.path.join(gitdir, "taskgate-setup.json")


def _read_unwatched(repo: str, worktree: str) -> list[str]:
    from pathlib import Path

    from taskgate.engine import worktree_files as files
    from taskgate.engine.config import DEFAULT_DISPOSABLE, load_config
    from taskgate.errors import TaskgateError

    try:
        found = list(load_config(Path(repo)).cleanup.disposable)
    except (TaskgateError, OSError):
        found = list(DEFAULT_DISPOSABLE)  # a broken config is reported by every command
    found += TOOL_CACHES
    tree = Path(worktree)
    found += [str(p).rstrip("/") for p in files.read_marker(tree).get("created") or []]
    found += [p for p in files.placed_paths(tree) if _is_dir(os.path.join(worktree, p))]
    return found


def _is_dir(path: str) -> bool:
    return os.path.isdir(path) and not os.path.islink(path)


def fingerprint(worktree: str, listed: list[str], ignore: list[str]) -> dict[str, str]:
    """path -> lstat summary of the watched ignored files (`listed`: git status's `!`)."""
    from taskgate.git.disposable import is_disposable

    patterns = tuple(ignore)
    found: dict[str, str] = {}
    left = [LIMIT]

    def visit(rel: str) -> None:
        if is_disposable(rel, patterns):
            return
        full = os.path.join(worktree, rel)
        try:
            st = os.lstat(full)
        except OSError:
            return
        if not stat.S_ISDIR(st.st_mode):
            if left[0] > 0:
                left[0] -= 1
                found[rel] = _summary(full, st)
            return
        if left[0] <= 0:
            found[rel + "/"] = f"d:{st.st_mtime_ns}"
            return
        try:
            names = sorted(os.listdir(full))
        except OSError:
            return
        for name in names:
            visit(f"{rel}/{name}")

    for rel in listed:
        visit(rel.rstrip("/"))
    return found


def _summary(full: str, st: os.stat_result) -> str:
    if stat.S_ISLNK(st.st_mode):
        return "l:" + os.readlink(full)
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}:{st.st_mode & 0o7777:o}"


def changed(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """One line per ignored path that differs."""
    found = []
    for path in sorted(set(old) | set(new)):
        was, now = old.get(path), new.get(path)
        if was != now:
            what = "created" if was is None else "removed" if now is None else "changed"
            found.append(f"{path}: ignored file {what}")
    return found


def keep(
    worktree: str, prints: dict[str, str], run: Callable[..., tuple[int, bytes]]
) -> dict[str, str]:
    """Store the content of small ignored files (git objects only): path -> blob id."""
    paths: list[str] = []
    total = 0
    for path, summary in prints.items():
        size = int(summary.split(":")[0]) if summary[0].isdigit() else KEEP_TOTAL
        if size <= KEEP_SIZE and total + size <= KEEP_TOTAL and len(paths) < KEEP_FILES:
            paths.append(path)
            total += size
    if not paths:
        return {}
    text = "\n".join(paths).encode("utf-8", "surrogateescape") + b"\n"
    code, out = run(["hash-object", "-w", "--no-filters", "--stdin-paths"], worktree, text)
    shas = out.decode().split()
    return dict(zip(paths, shas, strict=False)) if code == 0 and len(shas) == len(paths) else {}


def quarantined(base: dict[str, str], now: dict[str, str]) -> list[str]:
    """The ignored files a quarantine commit must hold: created or changed (present now)."""
    return [p for p, s in now.items() if base.get(p) != s and not s.startswith("d:")]


def restore(
    wt: str,
    base: dict[str, str],
    blobs: dict[str, str],
    now: dict[str, str],
    read_blob: Callable[[str], bytes],
) -> list[str]:
    """Put the ignored files back as the baseline had them; what could not be (no copy kept)
    is listed. Created files are removed (the quarantine holds them)."""
    left = []
    for path in sorted(set(base) | set(now)):
        was, found = base.get(path), now.get(path)
        if was == found or (was or found or "").startswith("d:"):
            continue
        full = os.path.join(wt, path)
        if was is None:
            remove(wt, path)
        elif was.startswith("l:"):
            remove(wt, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            os.symlink(was[2:], full)
        elif path in blobs:
            put(wt, path, read_blob(blobs[path]), int(was.rsplit(":", 1)[1], 8))
        else:
            left.append(path)
    return left


def remove(wt: str, path: str) -> None:
    """Delete a file of the worktree and the directories it leaves empty (only those)."""
    full = os.path.join(wt, path)
    try:
        os.unlink(full)
    except OSError:
        return
    parent = os.path.dirname(full)
    while parent.startswith(wt + os.sep):
        try:
            os.rmdir(parent)
        except OSError:
            break
        parent = os.path.dirname(parent)


def put(wt: str, path: str, content: bytes, mode: int | None = None) -> None:
    """Write a file of the worktree with `content` (replacing a link or file found there)."""
    full = os.path.join(wt, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    if os.path.islink(full) or os.path.exists(full):
        os.unlink(full)
    with open(full, "wb") as handle:
        handle.write(content)
    if mode is not None:
        os.chmod(full, mode)
