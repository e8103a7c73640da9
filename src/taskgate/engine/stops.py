"""Deliberate stops of `taskgate run`, as `taskgate recover` explains them (issue 17).

When `run` stops on purpose — an escalation (D-REC-3), used-up retries, a misconfigured agent,
a failed build on main after the merge — it records the cause (`run_stopped` event, the task's
`extra["last_stop"]`, orchestrator/notes.py). Its process then exits, so the owner looks dead;
without this record recover would call it an interrupted session and offer a take-over. The
cause names what the person fixes, and the next command resumes without any manual backward
transition (`run` starts again with fresh retry and build budgets).
"""

from __future__ import annotations

from typing import Any

from taskgate.store.records import TaskSnapshot

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
