"""Atomic file writes: temp file in the same directory, fsync, os.replace (STYLE.md 5)."""

from __future__ import annotations

import os
from pathlib import Path

from taskgate import failpoints
from taskgate.json_lite import loads

TYPE_CHECKING = False  # typing stays unimported on the command path (issue 18)
if TYPE_CHECKING:
    from typing import Any


def atomic_write(
    path: Path, text: str | bytes | list[bytes | memoryview], *, durable: bool = True
) -> None:
    """Replace `path` with `text` so that readers see the old or the new file, never a part.

    `durable=False` skips the fsync: still atomic for readers and across a crash of this
    process, but after a power loss the file may be empty. Only for files that are rebuilt
    from the store (views).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    failpoints.hit_os("atomic_write")
    # Not tempfile.mkstemp: importing tempfile costs ~5 ms (shutil, random) on every command.
    tmp = str(path.parent / f".{path.name}.{os.urandom(6).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            if isinstance(text, list):  # pieces, written one after the other
                for piece in text:
                    handle.write(piece)
            else:
                handle.write(text if isinstance(text, bytes) else text.encode("utf-8"))
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        failpoints.hit(f"atomic_write:{path.name}")  # tests: a kill leaves the temp file
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def remove_stale_temps(path: Path) -> list[str]:
    """Remove the temp files a killed `atomic_write` of `path` left beside it (call only where
    no other process writes `path` at the same time, e.g. under a journaled step)."""
    removed = []
    for stale in path.parent.glob(f".{path.name}.*.tmp"):
        stale.unlink(missing_ok=True)
        removed.append(stale.name)
    return removed


def atomic_write_json(path: Path, data: Any, *, durable: bool = True) -> None:
    """Atomically write pretty, key-sorted JSON with a trailing newline."""
    import json

    text = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    atomic_write(path, text, durable=durable)


def read_json(path: Path) -> Any:
    """Parsed JSON, or None when the file is missing or does not parse (views are re-rendered)."""
    try:
        return loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def file_size(path: Path) -> int | None:
    """Size in bytes, or None when the file does not exist."""
    try:
        return path.stat().st_size if path.is_file() else None
    except OSError:
        return None


def read_text(path: Path) -> str | None:
    """File text, or None when it does not exist or is not UTF-8."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
