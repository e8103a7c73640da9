"""Named crash points for the crash-consistency tests: TASKGATE_FAILPOINT=name kills the process.

The variable is read once; with it unset, `hit()` is a dictionary lookup and nothing else.
"""

from __future__ import annotations

import os

_ACTIVE = frozenset(filter(None, os.environ.get("TASKGATE_FAILPOINT", "").split(",")))


def hit(name: str) -> None:
    """SIGKILL this process when `name` is an active failpoint (no cleanup, like a crash)."""
    if name in _ACTIVE:
        import signal  # here: the signal module is 0.4 ms of every command (issue 18)

        os.kill(os.getpid(), signal.SIGKILL)


def _faults() -> dict[str, int]:
    import errno

    found = {}
    for item in filter(None, os.environ.get("TASKGATE_FAULT", "").split(",")):
        name, _, code = item.partition(":")
        found[name] = int(getattr(errno, code or "EIO", errno.EIO))
    return found


_FAULTS = _faults() if "TASKGATE_FAULT" in os.environ else {}


def hit_os(name: str) -> None:
    """Raise OSError(errno) when TASKGATE_FAULT names this site (`store.commit:ENOSPC`,
    `atomic_write:EROFS`): the disk-full and read-only tests without mounting anything."""
    code = _FAULTS.get(name)
    if code is not None:
        raise OSError(code, os.strerror(code), name)


_WAITS = dict(
    item.split("=", 1)
    for item in filter(None, os.environ.get("TASKGATE_WAIT", "").split(","))
    if "=" in item
)


def wait(name: str) -> None:
    """Block at `name` until a file exists (TASKGATE_WAIT=name=/path): races made exact."""
    path = _WAITS.get(name)
    if path is None:
        return
    import time

    with open(f"{path}.{os.getpid()}.arrived", "w"):
        pass
    for _ in range(6000):
        if os.path.exists(path):
            return
        time.sleep(0.01)
