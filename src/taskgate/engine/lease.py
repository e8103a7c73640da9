"""The long-lived owner's lease (`taskgate run`): pid + start time + fence (DESIGN.md State).

Taking the lease closes audit invocations its dead predecessor left open; a deliberate stop
hands the lease back to the session without a pid, so only a crash looks abandoned.
"""

from __future__ import annotations

import os
from dataclasses import replace

from taskgate.engine.core import Engine, pid_start_time
from taskgate.errors import ForeignTask
from taskgate.protocol.states import State
from taskgate.store.base import Tx
from taskgate.store.records import TaskSnapshot


def running_invocations(snap: TaskSnapshot) -> list[str]:
    """Agents whose last audited invocation has no completion (R-AUD-05)."""
    running: dict[str, bool] = {}
    for e in snap.events:
        if e.kind == "agent_invoked":
            running[str(e.payload.get("agent"))] = True
        elif e.kind == "agent_completed":
            running.pop(str(e.payload.get("agent")), None)
    return list(running)


def _close_dead_invocations(engine: Engine, tx: Tx, snap: TaskSnapshot) -> None:
    """A process taking the lease runs every agent itself: an invocation still open belongs
    to an owner process that is gone (killed between an agent's verdict and its completion,
    say). Close it in the audit trail; a reviewer whose verdict for this round is recorded
    finished, any other agent is ERROR "interrupted" and is re-invoked as a retry."""
    from taskgate.engine.facts import review_round

    now = engine.now()
    round_ = review_round(snap)
    for agent in running_invocations(snap):
        row = snap.agent(agent)
        reviewed = snap.task.state == State.REVIEW.value and any(
            v.agent == agent and v.round == round_ for v in snap.verdicts
        )
        status = "COMPLETE" if reviewed else "ERROR"
        why = "interrupted: the process that ran it is gone"
        engine.event(tx, snap.task.name, "agent_completed", {
            "agent": agent, "mode": (row.phase or "").lower() if row else "",
            "status": status, "report": None, "message": why, "interrupted": True,
        })  # fmt: skip
        if row is not None:
            message = row.message if reviewed else why
            tx.put_agent(replace(row, status=status, updated_at=now, message=message))


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
        _close_dead_invocations(engine, tx, snap)
        engine.event(tx, name, "lease", {"pid": pid, "fence": fence, "host": engine.host})
        engine.touch(tx, snap, owner_pid=pid, owner_started=pid_start_time(pid),
                     host=engine.host, fence=fence)  # fmt: skip
        return fence

    engine.fence = None  # the old fence is being replaced by this very step
    fence = engine.step(name, body)
    engine.owner_pid = pid
    engine.fence = fence
    return fence
