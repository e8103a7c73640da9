"""Small store steps the orchestrator needs: feedback for the agents and run counters."""

from __future__ import annotations

from typing import Any

from taskgate.engine.core import Engine
from taskgate.store.base import Tx
from taskgate.store.records import TaskSnapshot


def add_feedback(
    engine: Engine, task: str, kind: str, text: str, *, agents: tuple[str, ...] = (), **extra: Any
) -> None:
    """Append feedback for the agents' next invocation (TaskRow.extra["feedback"]) and audit it.

    Kinds: "plan" / "changes" (the person), "rejection" (a reviewer), "build" (a failed
    validation), "conflict" (a merge conflict), "scope" (a deferral decision).
    """

    def body(tx: Tx, snap: TaskSnapshot) -> None:
        entry = {
            "at": engine.now(),
            "kind": kind,
            "text": text,
            "agents": list(agents),
            "from_state": snap.task.state,
        }
        feedback = [*(snap.task.extra.get("feedback") or []), entry]
        engine.event(tx, task, "feedback", entry)
        engine.touch(tx, snap, extra={**snap.task.extra, **extra, "feedback": feedback})

    engine.step(task, body)


def set_extra(engine: Engine, task: str, event: str, **updates: Any) -> None:
    """Record orchestrator facts (counters, scope decisions) on the task, audited."""

    def body(tx: Tx, snap: TaskSnapshot) -> None:
        engine.event(tx, task, event, {k: v for k, v in updates.items()})
        engine.touch(tx, snap, extra={**snap.task.extra, **updates})

    engine.step(task, body)


def feedback_for(snap: TaskSnapshot, agent: str, *, since: str = "") -> tuple[str, ...]:
    """The feedback texts meant for `agent` (or for everyone), newer than `since`."""
    result = []
    for entry in snap.task.extra.get("feedback") or []:
        if not isinstance(entry, dict) or str(entry.get("at", "")) < since:
            continue
        targets = entry.get("agents") or []
        if not targets or agent in targets:
            result.append(f"{entry.get('kind', 'note')}: {entry.get('text', '')}")
    return tuple(result)
