"""Reading `state.db`'s bytes outside SQLite without breaking SQLite's locks.

SQLite's locks on a database file are POSIX advisory locks (fcntl F_SETLK), which belong to
the process, not to a file descriptor: closing *any* descriptor of the file drops every lock
the process holds on it, the ones its SQLite connections hold included (sqlite.org/howtocorrupt
2.2). A process that opened `state.db` with `open()` to read its header and closed it lost the
SHARED lock its own connections keep on a WAL database; another process closing the last
connection it saw then took the EXCLUSIVE lock, checkpointed and deleted `state.db-wal` and
`state.db-shm` under the first process's connections, which read "database disk image is
malformed" (and a write of theirs in flight could be lost). That happened in the hook's
PreToolUse (hooks/context.load_actor), in every process that runs it: the hook process (which
holds its store connection), `taskgate serve`'s HTTP hooks, a test that calls it in-process.

So the bytes are read through one descriptor per file (device, inode) kept open for the
process's life, with pread, and never closed: closing it is what drops the locks (SQLite
itself keeps such descriptors in its own list of unused ones for the same reason). A file
replaced under its name (recover --rebuild) gets a descriptor of its own; the old one stays
open (one descriptor per version a process ever read).
"""

from __future__ import annotations

import os

# (st_dev, st_ino) -> a read-only descriptor of that file, never closed (see above)
_KEPT: dict[tuple[int, int], int] = {}


def read_head(path: str, size: int) -> bytes:
    """The first `size` bytes of the regular file at `path` (fewer when it is shorter);
    OSError when it is missing or not a regular file, as `open(path, "rb")` raises."""
    import stat

    found = os.stat(path)
    if not stat.S_ISREG(found.st_mode):
        raise IsADirectoryError(f"{path} is not a regular file")
    fd = _KEPT.get((found.st_dev, found.st_ino))
    if fd is None:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        opened = os.fstat(fd)  # the file this descriptor reads (replaced since the stat?)
        _KEPT.setdefault((opened.st_dev, opened.st_ino), fd)
    return os.pread(fd, size, 0)


def uri(path: str | os.PathLike[str], mode: str) -> str:
    """SQLite's `file:` URI of `path` opened with `mode` (`rw`: an existing file is opened,
    never created: a store moved aside by `recover --rebuild` is not replaced by an empty one).
    Path.as_uri imports urllib.parse, re and enum (3 ms of every command, issue 18); SQLite
    decodes %HH and stops at ? and #."""
    text = os.path.abspath(path).replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    return f"file:{text}?mode={mode}"
