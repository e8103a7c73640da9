"""`state.db` replaced under its name (`taskgate recover --rebuild`), and the processes that
had the old file open (R-REC-12, R-LCK-09: recovery never loses work).

A SQLite connection follows the file it opened, not its name. engine/rebuild.py moves the
damaged `state.db` (with `-wal` and `-shm`) into `.taskgate/lost-<time>/` and puts the rebuilt
one in its place; a process that opened the old file before (a hook, a CLI command, `taskgate
serve`) would commit into the file kept aside, and its step would never reach the live store.
So:

- the rebuild holds the old file's write lock (`BEGIN IMMEDIATE`) from before it reads the old
  store until the new one is in place: no writer commits into the old file in between;
- every writer, once its `BEGIN IMMEDIATE` holds the lock, compares `identity(path)` now with
  the identity it recorded before it connected (store/sqlite.py, store/hook_tx.py); a
  different file means its connection is on a file moved aside: it rolls back and opens the
  store at the path again (the hook: its engine's path does);
- a store missing or empty while `.taskgate/rebuild.lock` is held (between moving the old
  file aside and putting the new one in place) is waited for (`wait_for_rebuild`), not
  reported lost, and never created anew by a writer.

Identity is `os.stat`, never `open()`: closing a descriptor of state.db drops every SQLite
lock the process holds on it (store/dbfile.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

LOCK_NAME = "rebuild.lock"  # in the state dir: held (flock) by a rebuild from start to end


def identity(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    """(st_dev, st_ino) of the file at `path` now, None when there is none."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def wait_for_rebuild(state_dir: object, timeout: float) -> bool:
    """True when a `recover --rebuild` held the state dir's rebuild lock and has finished
    (waited up to `timeout` seconds); False when none was running (or it outlasted
    `timeout`: the caller reports what it found)."""
    import fcntl
    import time

    if str(state_dir) in _HELD:
        return False  # this process is the rebuild
    try:
        fd = os.open(os.path.join(str(state_dir), LOCK_NAME), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False  # no rebuild ever ran here
    try:
        deadline, waited = time.monotonic() + timeout, False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return waited
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return False
                if not waited:
                    from taskgate import failpoints

                    failpoints.wait("rebuild:waited-for")  # tests: a rebuild is running
                waited = True
                time.sleep(0.02)
    finally:
        os.close(fd)  # rebuild.lock, not state.db: no SQLite lock goes with it


_HELD: set[str] = set()  # state dirs whose rebuild lock this process holds (exclusive)


@contextmanager
def exclusive(state_dir: object) -> Iterator[None]:
    """The rebuild lock: one rebuild at a time (Locked when another holds it); the kernel
    drops it if this process dies."""
    import fcntl

    from taskgate.errors import Locked

    with open(os.path.join(str(state_dir), LOCK_NAME), "a+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Locked(
                "another 'taskgate recover --rebuild' is running",
                hint="wait for it to finish, then run 'taskgate recover --rebuild' again",
            ) from None
        _HELD.add(str(state_dir))
        try:
            yield
        finally:
            _HELD.discard(str(state_dir))
