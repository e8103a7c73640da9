"""What a session resuming a task should do next (R-CKP-18, D-REC-1, D-INT-3): one text for
every face.

engine/checkpoints.recovery_hint gives `hint` a task's snapshot; the SessionStart hook of a
session resuming the task it holds (hooks/resume.py) gives it the few rows it reads without
the engine (issue 18). Both read "is a presentation still in force" with `shown`, which
engine/checkpoints.current_presentation uses too. Pure: no I/O, nothing imported.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

# The state each checkpoint waits in (engine/checkpoints.CHECKPOINT_STATE is built from it).
CHECKPOINT_STATE = {"plan": "SYNTHESIS", "changes": "AWAITING_USER_APPROVAL"}
# The only event kinds `shown` looks at: every other kind neither shows nor voids.
SHOWN_KINDS = ("presentation", "transition", "agent_added", "change_request")


def voids(kind: str, event_kind: str, payload: dict[str, Any]) -> bool:
    """Does this event make an earlier presentation of `kind` stale?"""
    if event_kind == "transition":  # a new visit to the checkpoint state needs a new showing
        return payload.get("to") == CHECKPOINT_STATE[kind]
    if kind == "plan" and event_kind == "agent_added":  # R-AGT-19: approve after the addition
        return True
    return event_kind == "change_request" and payload.get("kind") == kind  # R-CKP-15


def shown(kind: str, newest_first: Iterable[tuple[str, dict[str, Any]]]) -> bool:
    """Whether the task's last presentation of `kind` is still in force: among its events,
    (kind, payload) newest first, a presentation of `kind` comes before anything voiding it."""
    for event_kind, payload in newest_first:
        if event_kind == "presentation" and payload.get("kind") == kind:
            return True
        if voids(kind, event_kind, payload):
            return False
    return False


_BY_STATE = {
    "INIT": "safe to restart: classify the task",
    "CLASSIFIED": "safe to restart: move to REQUIREMENTS",
    "REQUIREMENTS": "check agent completion (taskgate agent check) and resume agents",
    "IMPLEMENTATION": "check agent status and resume the incomplete implementation work",
    "VALIDATION": "re-run validation (taskgate validate)",
    "REVIEW": "check review status and re-invoke reviewers without a decision",
    "SCOPE_NEGOTIATION": "present the pending deferral proposal again",
    "COMPLETE": "resume completion / cleanup",
    "CLEANUP": "done",
}


def hint(
    name: str,
    state: str,
    extra: dict[str, Any],
    checkpoint: dict[str, Any] | None,
    plan_approved: Callable[[], bool],
    plan_shown: Callable[[], bool],
) -> str:
    """The next step for task `name` in `state`, from its row's `extra` and `checkpoint`;
    in SYNTHESIS also whether an unrevoked plan approval exists and whether the plan's
    presentation is in force (asked in that order, only there)."""
    stop = extra.get("last_stop")
    if isinstance(stop, dict) and stop.get("cause"):  # issue 17: a deliberate stop of run
        return (
            f"run stopped deliberately ({stop['cause']}): see 'taskgate recover {name}' for "
            f"what to fix, then {stop.get('next') or f'taskgate run {name}'}"
        )
    if state == "SYNTHESIS":
        if plan_approved():
            return "plan approved: run the entry guards and proceed to IMPLEMENTATION"
        if not plan_shown():  # R-INT-09: finish the plan, never skip ahead
            return (
                "resume SYNTHESIS: finish the implementation plan in task.md and present it for "
                f"approval (taskgate present {name})"
            )
        return (
            "CHECKPOINT RECOVERY: Task waiting for PLAN APPROVAL - present the plan again "
            f"from task.md (taskgate present {name})"
        )
    if state == "AWAITING_USER_APPROVAL":
        sha = (checkpoint or {}).get("commit_sha", "?")
        if not (checkpoint or {}).get("approved"):
            return (
                "CHECKPOINT RECOVERY: Task waiting for CHANGE REVIEW - present commit "
                f"{sha} again (taskgate present {name})"
            )
        # R-CMP-09; the snapshot cannot see git, so a moved branch is named as the exception.
        return (
            f"changes approved for {str(sha)[:12]}: continue with 'taskgate complete {name}' "
            "(if the task branch moved since, present it again: R-CKP-13)"
        )
    return _BY_STATE.get(state, f"Unknown state: {state} - manual intervention required")


def resume_text(task: str, state: str, next_step: str, worktree: str) -> str:
    """SessionStart's text for a session resuming the one task it holds (R-LCK-20)."""
    return "\n".join(
        [
            f"=== RESUMING TASK: {task} (State: {state}) ===",
            next_step,  # D-REC-1, with the R-CKP-18 checkpoint recovery text
            f"task worktree: {worktree}",
            f"details: taskgate status {task}",
        ]
    )
