"""The long-lived owner's lease (`taskgate run`): pid + start time + fence (DESIGN.md State).

Taking the lease closes audit invocations its dead predecessor left open; a deliberate stop
hands the lease back to the session without a pid, so only a crash looks abandoned.
"""

from __future__ import annotations

import os

from taskgate.engine import invocations
from taskgate.engine.core import Engine, pid_start_time
from taskgate.errors import ForeignTask
from taskgate.store.base import Tx
from taskgate.store.records import TaskSnapshot


def drop_process_lease(engine: Engine, name: str, *, why: str) -> bool:
    """A `run` that stops on purpose (a checkpoint, an escalation, a refusal) leaves the lease
    to its session without a pid: its exit must not look like a crash that others may take
    over; only the session itself or a person's `release --force` frees it. False when this
    process no longer holds the lease."""
    pid = engine.owner_pid
    if pid is None:
        return False

    def body(tx: Tx, snap: TaskSnapshot) -> bool:
        t = snap.task
        if t.released or t.owner_pid != pid or t.session_id != engine.session_id:
            return False
        engine.event(tx, name, "lease_kept", {"pid": pid, "fence": t.fence, "why": why})
        engine.touch(tx, snap, owner_pid=None, owner_started=None)
        return True

    try:
        kept = engine.step(name, body)
    except ForeignTask:
        return False
    engine.owner_pid = None
    return kept


def take_process_lease(engine: Engine, name: str) -> int:
    """Make this process the task's long-lived owner (`taskgate run`): record pid + start time
    and a new fence, so a superseded earlier owner's writes are rejected (DESIGN.md State)."""
    pid = os.getpid()

    def body(tx: Tx, snap: TaskSnapshot) -> int:
        fence = snap.task.fence + 1
        invocations.close_all(engine, tx, snap)
        engine.event(tx, name, "lease", {"pid": pid, "fence": fence, "host": engine.host})
        engine.touch(tx, snap, owner_pid=pid, owner_started=pid_start_time(pid),
                     host=engine.host, fence=fence)  # fmt: skip
        return fence

    engine.fence = None  # the old fence is being replaced by this very step
    fence = engine.step(name, body)
    engine.owner_pid = pid
    engine.fence = fence
    return fence
