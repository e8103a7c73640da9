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
    """Apply D-LCK-1 (rows 1-6), R-LCK-08, R-LCK-12 and the dependency check, in that order."""
    if i.lock is not None:
        if not i.lock.readable or not i.lock.owner:
            return Selection(
                Availability.ASK_USER,
                "R-LCK-08",
                f"the lock record of '{i.task}' is unreadable: neither own nor foreign",
            )
        if i.lock.owner == i.session_id:
            if i.worktree_exists or i.pending_setup:
                return Selection(
                    Availability.RESUME, "R-LCK-03", f"resume '{i.task}': this session owns it"
                )
            return Selection(
                Availability.ASK_USER,
                "R-LCK-05",
                f"ERROR: Inconsistent state - lock for '{i.task}' exists but worktree missing",
            )
        return Selection(
            Availability.FOREIGN,
            "R-LCK-04",
            f"'{i.task}' is owned by another session ({i.lock.owner})",
        )
    if i.done:
        return Selection(Availability.DONE, "R-LCK-23", f"'{i.task}' is already completed")
    if i.worktree_exists:
        return Selection(
            Availability.ASK_USER,
            "R-LCK-05",
            f"a worktree exists for '{i.task}' but no lock: crashed session or manual work",
        )
    if i.missing_fields:
        return Selection(
            Availability.INFEASIBLE,
            "R-LCK-12",
            f"'{i.task}' lacks {', '.join(i.missing_fields)} in todo.md",
        )
    if i.unmet_dependencies:
        return Selection(
            Availability.BLOCKED,
            "C-73",
            f"'{i.task}' waits for {', '.join(i.unmet_dependencies)}",
        )
    return Selection(Availability.AVAILABLE, "R-LCK-06", f"'{i.task}' is available")


def crashed_session_prompt(task: str, task_dir: str) -> str:
    """D-LCK-2: the question asked when a worktree exists without a lock."""
    return (
        f"I found an existing worktree for task '{task}' at {task_dir}\n"
        f"but no lock exists for it. This may indicate a crashed session. Should I:\n"
        f"1. Clean up the abandoned worktree and start fresh\n"
        f"2. Resume work in the existing worktree   (taskgate start {task} --adopt)\n"
        f"3. Select a different task                (taskgate next)"
    )
