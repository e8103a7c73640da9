"""Named crash points for the crash-consistency tests: TASKGATE_FAILPOINT=name kills the process.

The variable is read once; with it unset, `hit()` is a dictionary lookup and nothing else.
"""

from __future__ import annotations

import os
import signal

_ACTIVE = frozenset(filter(None, os.environ.get("TASKGATE_FAILPOINT", "").split(",")))


def hit(name: str) -> None:
    """SIGKILL this process when `name` is an active failpoint (no cleanup, like a crash)."""
    if name in _ACTIVE:
        os.kill(os.getpid(), signal.SIGKILL)
