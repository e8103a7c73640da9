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


# Why `run` stopped on purpose (issue 17); `taskgate recover` names it and the next command.
STOP_CAUSES = (
    "build-escalation",  # a build failure no agent can be given (R-VAL-08)
    "build-retries",  # BUILD_RECOVERY_MAX_ITER recovery iterations used up (R-VAL-09)
    "agent-retries",  # an agent failed its retries (R-AST-07)
    "agent-blocked",  # an agent asked for a human decision (R-AST-12)
    "misconfiguration",  # an agent could not even be started (missing executable)
    "merge-conflicts",  # agent branches keep conflicting
    "no-progress",  # implementation rounds without finishing
    "post-merge-build",  # the build on main failed after the merge (R-CMP-08)
    "agent-escaped",  # an agent wrote outside its worktree (R-WTB-02)
    "agent-worktree",  # a killed git command left an agent worktree mid-way (issue 16)
    "review",  # no review decision could be collected
    "plan",  # no plan could be written
)


def record_stop(engine: Engine, task: str, cause: str, issue: str, next_command: str) -> None:
    """Record a deliberate stop: the cause, what happened and what the person runs next."""

    def body(tx: Tx, snap: TaskSnapshot) -> None:
        entry = {
            "cause": cause,
            "state": snap.task.state,
            "issue": issue[:2000],
            "next": next_command,
            "at": engine.now(),
        }
        engine.event(tx, task, "run_stopped", entry)
        engine.touch(tx, snap, extra={**snap.task.extra, "last_stop": entry})

    engine.step(task, body)


def take_stop(engine: Engine, task: str) -> dict[str, Any] | None:
    """The stop a new run resumes from (cleared and audited as `run_resumed`), if any; the
    counters its cause exhausted start again in the same step, each reset audited with why."""
    from taskgate.engine.stops import reset_budgets

    stop = engine.require_snapshot(task).task.extra.get("last_stop")
    if not isinstance(stop, dict):
        return None
    cause = str(stop.get("cause"))

    def body(tx: Tx, snap: TaskSnapshot) -> None:
        engine.event(tx, task, "run_resumed", {"cause": cause, "stopped_at": stop.get("at")})
        extra = {k: v for k, v in snap.task.extra.items() if k != "last_stop"}
        why = f"resumed after the {cause} stop of {stop.get('at')}: the person dealt with it"
        reset_budgets(engine, tx, snap, extra, cause, why)
        engine.touch(tx, snap, extra=extra)

    engine.step(task, body)
    return stop


def reset_round_budget(engine: Engine, task: str, why: str) -> None:
    """A new plan or the person's change request: implementation rounds count afresh."""
    from taskgate.engine.stops import round_budget as _round_budget

    if _round_budget(dict(engine.require_snapshot(task).task.extra), why) is None:
        return  # no round used since the budget started: nothing to write

    def body(tx: Tx, snap: TaskSnapshot) -> None:
        extra = dict(snap.task.extra)
        budget = _round_budget(extra, why)
        if budget:
            engine.event(tx, task, "round_budget_reset", budget)
            engine.touch(tx, snap, extra=extra)

    engine.step(task, body)


def rounds_used(snap: TaskSnapshot) -> int:
    """Implementation rounds started since the budget last started (MAX_IMPLEMENTATION_ROUNDS)."""
    extra = snap.task.extra
    return int(extra.get("impl_round", 1)) - int(extra.get("round_base", 0))
