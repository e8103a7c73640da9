"""The server ends with its repository: `taskgate serve` stops by itself when its `.taskgate`
directory or its store disappears or is replaced by another file.

A server belongs to one repository's store. When that repository is deleted (`rm -rf`, a test's
temporary directory removed) a server left running would hold its port, its agent door and
~40 MB for nothing; when `.taskgate` or `state.db` is replaced (another repository created at
the same path, `recover --rebuild` moving a rebuilt store in), its open connections still
read the old file, so it would answer from a store nobody else sees. Either way the server
stops, and says why.

Identity is the (st_dev, st_ino) pair of each path, taken at start and compared every
`INTERVAL_S` seconds on the event loop (a few `stat` calls, never per request). Stopping goes
through uvicorn's ordinary graceful shutdown; what the server then removes is its own only:
its server.json, and socket files whose identity is still the one it bound
(`remove_if_same`), so a socket another server created at the same path is left alone.
SQLite itself neither checkpoints nor deletes a `-wal`/`-shm` of a database file that moved
or vanished while open.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from taskgate.engine.workspace import Workspace

INTERVAL_S = 2.0

Identity = tuple[int, int] | None


def identity(path: Path) -> Identity:
    """(st_dev, st_ino) of `path` (symlinks followed), None when it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def lstat_identity(path: Path) -> Identity:
    """(st_dev, st_ino) of `path` itself (a socket, never followed), None when absent."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def remove_if_same(path: Path, bound: Identity) -> None:
    """Unlink `path` only when it is still the file we created (`bound`)."""
    if bound is not None and lstat_identity(path) == bound:
        path.unlink(missing_ok=True)


class Tether:
    """The paths a server lives on, with the identity each had when it started."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.paths = tuple(paths)
        self.start = tuple(identity(p) for p in self.paths)

    def lost(self) -> str:
        """What happened to the first path that is gone or another file now; '' if none."""
        for path, was in zip(self.paths, self.start, strict=True):
            now = identity(path)
            if now == was:
                continue
            if now is None:
                return f"{path} was removed"
            return f"{path} was replaced by another file"
        return ""


def for_workspace(ws: Workspace) -> Tether:
    """`.taskgate/` and, with the embedded store, `.taskgate/state.db`."""
    paths = [ws.state_dir]
    if not ws.uses_database_server:
        paths.append(ws.db_path)
    return Tether(paths)
