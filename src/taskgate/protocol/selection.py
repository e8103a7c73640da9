"""Task selection: the decision matrix D-LCK-1 plus feasibility and dependencies (RULES §5)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Availability(StrEnum):
    """What a session may do with a task (the `todo` column and the `start` decision)."""

    AVAILABLE = "available"  # matrix row 6: PROCEED WITH INIT
    RESUME = "resume"  # row 1
    FOREIGN = "foreign"  # rows 3-4: SELECT ALTERNATIVE TASK
    ASK_USER = "ask-user"  # rows 2 and 5, and unreadable locks (R-LCK-05, R-LCK-08)
    BLOCKED = "blocked"  # unfinished dependencies
    INFEASIBLE = "infeasible"  # missing Purpose/Scope/Components (R-LCK-12)
    DONE = "done"  # released after CLEANUP, or archived
    ABANDONED = "abandoned"  # `taskgate abandon` ended it (issue 17); start refuses it


@dataclass(frozen=True)
class LockInfo:
    """The task's lock as the store knows it (released locks are passed as None, R-LCK-23)."""

    owner: str  # session id; "" when the record is unreadable (R-LCK-08)
    readable: bool = True


@dataclass(frozen=True)
class SelectionInput:
    """Facts for one task and one session."""

    task: str
    session_id: str
    lock: LockInfo | None
    worktree_exists: bool  # WS/tasks/T/code exists (R-LCK-07, C-30)
    done: bool = False
    missing_fields: tuple[str, ...] = ()
    unmet_dependencies: tuple[str, ...] = ()
    pending_setup: bool = False  # this session's own claim whose worktree step was interrupted


@dataclass(frozen=True)
class Selection:
    """The decision with the rule that produced it and a message for the user."""

    availability: Availability
    rule: str
    message: str


def select(i: SelectionInput) -> Selection:
    """Apply D-LCK-1 (rows 1-6), R-LCK-08, R-LCK-12 and the dependency check, in that order
    (protocol/lockmatrix.py holds the decision over plain values)."""
    from taskgate.protocol.lockmatrix import decide

    availability, rule, message = decide(
        i.task,
        i.session_id,
        None if i.lock is None else (i.lock.owner, i.lock.readable),
        i.worktree_exists,
        i.done,
        i.missing_fields,
        i.unmet_dependencies,
        i.pending_setup,
    )
    return Selection(Availability(availability), rule, message)


def crashed_session_prompt(task: str, task_dir: str) -> str:
    """D-LCK-2: the question asked when a worktree exists without a lock."""
    return (
        f"I found an existing worktree for task '{task}' at {task_dir}\n"
        f"but no lock exists for it. This may indicate a crashed session. Should I:\n"
        f"1. Clean up the abandoned worktree and start fresh\n"
        f"2. Resume work in the existing worktree   (taskgate start {task} --adopt)\n"
        f"3. Select a different task                (taskgate next)"
    )
