"""Deliberate stops of `taskgate run`, as `taskgate recover` explains them (issue 17).

When `run` stops on purpose — an escalation (D-REC-3), used-up retries, a misconfigured agent,
a failed build on main after the merge — it records the cause (`run_stopped` event, the task's
`extra["last_stop"]`, orchestrator/notes.py). Its process then exits, so the owner looks dead;
without this record recover would call it an interrupted session and offer a take-over. The
cause names what the person fixes, and the next command resumes without any manual backward
transition (`run` starts again with fresh retry and build budgets).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from taskgate.store.base import Tx
from taskgate.store.records import TaskSnapshot

if TYPE_CHECKING:
    from taskgate.engine.core import Engine

_ADVICE = {
    "build-escalation": "the build failure could not be given to an agent: fix the build on "
    "the task branch (commit in the task worktree; recorded as a person's intervention) or "
    "the [validation] commands",
    "build-retries": "the agents did not fix the build within the recovery iterations "
    "(R-VAL-09): fix it on the task branch, clarify the task, or resume for a fresh budget",
    "agent-retries": "an agent failed every retry (R-AST-07): check its output in "
    ".taskgate/tasks/{task}/agents/<agent>/, fix the cause",
    "agent-blocked": "an agent needs a human decision (R-AST-12): read its message, clarify "
    "the task in todo.md or task.md",
    "misconfiguration": "an agent could not be started: fix [agents] in taskgate.toml "
    "(command, PATH)",
    "merge-conflicts": "agent branches keep conflicting: resolve them on the agent branches "
    "or re-plan the split of work",
    "no-progress": "the implementation rounds did not converge: narrow the scope in todo.md",
    "post-merge-build": "the build on main failed after the merge (R-CMP-08): fix main, then "
    "taskgate cleanup {task} checks the current main again",
    "agent-escaped": "an agent changed files outside its worktree (R-WTB-02): inspect them, "
    "keep or discard them",
    "agent-worktree": "a killed git command left an agent worktree mid-way (a staged commit, "
    "an index.lock, a merge or rebase): commit or discard it there (git -C <worktree> status); "
    "the agents were not started, no retry was used",
    "review": "no review decision could be collected: fix the reviewers' configuration or "
    "record verdicts by hand (taskgate agent verdict)",
    "plan": "no plan could be written: write the plan in task.md or fix the architect agent",
}


def last_stop(snap: TaskSnapshot) -> dict[str, Any] | None:
    """The deliberate stop a new run has not resumed from yet, if any."""
    stop = snap.task.extra.get("last_stop")
    return stop if isinstance(stop, dict) and stop.get("cause") else None


def explain(snap: TaskSnapshot) -> tuple[str, list[str]] | None:
    """(summary, actions) for a task stopped on purpose; None when it was not."""
    stop = last_stop(snap)
    if stop is None:
        return None
    task = snap.task.name
    cause = str(stop["cause"])
    issue = str(stop.get("issue", "")).strip().splitlines()
    summary = f"run stopped deliberately ({cause}) in {stop.get('state')} at {stop.get('at')}"
    if issue:
        summary += f": {issue[0][:300]}"
    advice = _ADVICE.get(cause, "see the escalation message").format(task=task)
    actions = [advice, f"then resume: {stop.get('next') or f'taskgate run {task}'}"]
    if cause not in ("post-merge-build", "agent-escaped"):
        actions.append(f"or drop it, keeping its work: taskgate abandon {task} --reason '…'")
    return summary, actions


# What resuming after each stop starts afresh (issue 16): the person dealt with the cause, so
# the counters it exhausted would only stop the run again.
_AGENT_CAUSES = ("agent-retries", "agent-blocked", "misconfiguration", "agent-worktree",
                 "no-progress", "merge-conflicts", "review", "plan")  # fmt: skip


def reset_budgets(
    engine: Engine, tx: Tx, snap: TaskSnapshot, extra: dict[str, Any], cause: str, why: str
) -> None:
    """In `tx` (and the task's `extra`, which the caller writes): the counters the stop's cause
    exhausted start again — agent retries (`retries_reset`), the implementation-round budget
    (`round_budget_reset`), the conflict count (`conflicts_reset`), the build iterations."""
    task = snap.task.name
    if cause in ("build-retries", "build-escalation"):
        extra["build_iterations"] = 0  # the person fixed the cause: a fresh budget
    if cause not in _AGENT_CAUSES:
        return
    from taskgate.engine.agentops import reset_retry_rows

    reset_retry_rows(engine, tx, snap, why=why)
    budget = round_budget(extra, why)
    if budget:
        engine.event(tx, task, "round_budget_reset", budget)
    if cause == "merge-conflicts" and extra.get("conflicts"):
        engine.event(tx, task, "conflicts_reset", {"conflicts": extra["conflicts"], "why": why})
        extra["conflicts"] = 0


def round_budget(extra: dict[str, Any], why: str) -> dict[str, Any] | None:
    """Start the implementation-round budget at the current round (in `extra`); what to audit,
    None when no round was used since the last start."""
    round_no = int(extra.get("impl_round", 1))
    base = int(extra.get("round_base", 0))
    if round_no - 1 <= base:
        return None
    extra["round_base"] = round_no - 1
    return {"rounds_used": round_no - 1 - base, "round": round_no, "why": why}


def resolve(engine: Engine, task: str, *, by: str) -> dict[str, Any] | None:
    """`recover T --repair` on a task `run` stopped on purpose: the person says the cause is
    dealt with, so the stop is cleared and the counters it exhausted start again (audited as
    `stop_resolved` and the resets); the next `run T` proceeds. None when there is no stop."""

    def body(tx: Tx, snap: TaskSnapshot) -> dict[str, Any] | None:
        stop = last_stop(snap)
        if stop is None:
            return None
        cause = str(stop["cause"])
        engine.event(tx, task, "stop_resolved", {"cause": cause, "stopped_at": stop.get("at"),
                                                 "by": by})  # fmt: skip
        extra = {k: v for k, v in snap.task.extra.items() if k != "last_stop"}
        reset_budgets(engine, tx, snap, extra, cause, f"{by} after the {cause} stop")
        engine.touch(tx, snap, extra=extra)
        return stop

    return engine.step(task, body)
