"""Agent invocations in the audit trail: `agent_invoked` opens one, `agent_completed` closes it.

An invocation that `taskgate run` starts records the process that runs it (pid, its start time,
the host). Once that process is provably gone — no such pid, a zombie, or the pid now belongs to
a process started at another time — the invocation can never complete by itself: the next
write on the task (`Engine.step`, whatever the command) closes it as interrupted with an
`agent_completed` event (`interrupted: true`), so neither `run` nor a person's manual session is
stuck on "agent invocations still running" (R-AUD-05, issue 16). An invocation opened by hand
(`taskgate agent set T A WORKING`) names no process: the session that opened it closes it.
"""

from __future__ import annotations

import os
from pathlib import Path

from taskgate.dataclass_lite import replace
from taskgate.engine.core import Engine, pid_start_time
from taskgate.protocol.states import State
from taskgate.store.base import Tx
from taskgate.store.event_log import of_kinds
from taskgate.store.records import JSON, EventRow, TaskSnapshot


def process_record(engine: Engine) -> JSON:
    """What an invocation records about the process that runs it (empty when unknown)."""
    pid = engine.owner_pid
    if pid is None:
        return {}
    return {"pid": pid, "pid_started": pid_start_time(pid), "host": engine.host}


def open_invocations(snap: TaskSnapshot) -> dict[str, EventRow]:
    """agent -> its last `agent_invoked` event that has no `agent_completed` after it."""
    running: dict[str, EventRow] = {}
    for e in of_kinds(snap.events, ("agent_invoked", "agent_completed")):
        if e.kind == "agent_invoked":
            running[str(e.payload.get("agent"))] = e
        elif e.kind == "agent_completed":
            running.pop(str(e.payload.get("agent")), None)
    return running


def _gone(pid: int, started: str | None) -> bool:
    """Is process `pid` (started at `started`) provably dead on this host?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, someone else's
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False  # no /proc: alive as far as can be proven
    fields = stat.rsplit(")", 1)[-1].split()
    if fields and fields[0] in ("Z", "X"):
        return True  # killed, not reaped yet
    now = fields[19] if len(fields) > 19 else None
    return bool(started and now and now != started)  # the pid was reused


def dead_invocations(snap: TaskSnapshot, host: str) -> dict[str, str]:
    """agent -> why, for open invocations whose recorded process is provably gone."""
    dead: dict[str, str] = {}
    for agent, e in open_invocations(snap).items():
        pid, started = e.payload.get("pid"), e.payload.get("pid_started")
        if not isinstance(pid, int) or e.payload.get("host") != host:
            continue  # opened by hand, or on another machine: not provable here
        if _gone(pid, started if isinstance(started, str) else None):
            dead[agent] = f"interrupted: process {pid} that ran it is gone"
    return dead


def close(engine: Engine, tx: Tx, snap: TaskSnapshot, agents: dict[str, str]) -> None:
    """Close the open invocations of `agents` (agent -> why) as interrupted, in `tx`.

    A reviewer whose verdict for this round is recorded finished (stores written before the
    verdict and its completion became one step); any other agent is ERROR and is re-invoked as
    a retry (R-AST-06). The caller touches the task row.
    """
    from taskgate.engine.facts import review_round

    now = engine.now()
    round_ = review_round(snap)
    opened = open_invocations(snap)
    for agent, why in agents.items():
        row = snap.agent(agent)
        mode = str(opened[agent].payload.get("mode", "")) if agent in opened else ""
        reviewed = snap.task.state == State.REVIEW.value and any(
            v.agent == agent and v.round == round_ for v in snap.verdicts
        )
        status = "COMPLETE" if reviewed else "ERROR"
        engine.event(tx, snap.task.name, "agent_completed", {
            "agent": agent, "mode": mode, "status": status, "report": None, "message": why,
            "interrupted": True,
        })  # fmt: skip
        # The row changes only while it still shows this invocation running (a transition
        # since then gave the agent a new phase, which this closing must not touch).
        running = row is not None and row.status in ("WORKING", "IN_PROGRESS")
        if row is not None and running and (row.phase or "").lower() == mode:
            message = row.message if reviewed else why
            tx.put_agent(replace(row, status=status, updated_at=now, message=message))


def close_dead(engine: Engine, tx: Tx, snap: TaskSnapshot) -> list[str]:
    """Close every invocation whose process is provably gone; the agents closed."""
    dead = dead_invocations(snap, engine.host)
    if dead:
        close(engine, tx, snap, dead)
        engine.touch(tx, snap)
    return sorted(dead)


def close_all(engine: Engine, tx: Tx, snap: TaskSnapshot) -> None:
    """A process taking the `run` lease runs every agent itself: every invocation still open
    belongs to an owner that is gone (or to a manual session it takes over)."""
    running = open_invocations(snap)
    if running:
        close(engine, tx, snap, dict.fromkeys(running, "interrupted: the process that ran it "
                                                       "is gone"))  # fmt: skip
