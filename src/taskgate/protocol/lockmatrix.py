"""D-LCK-1 over plain values: the one decision behind `selection.select` and the quick
`taskgate todo` listing (engine/todo_fast.py), which must not pay for dataclasses or enums at
import (issue 18). Availability values are the strings of `selection.Availability`."""

from __future__ import annotations


def decide(
    task: str,
    session_id: str,
    lock: tuple[str, bool] | None,
    worktree_exists: bool,
    done: bool,
    missing_fields: tuple[str, ...],
    unmet_dependencies: tuple[str, ...],
    pending_setup: bool,
) -> tuple[str, str, str]:
    """(availability, rule, message): D-LCK-1 (rows 1-6), R-LCK-08, R-LCK-12 and the
    dependency check, in that order. `lock` is (owner, readable) of the task's unreleased
    lock, None when there is none."""
    if lock is not None:
        lock_owner, lock_readable = lock
        if not lock_readable or not lock_owner:
            return (
                "ask-user",
                "R-LCK-08",
                f"the lock record of '{task}' is unreadable: neither own nor foreign",
            )
        if lock_owner == session_id:
            if worktree_exists or pending_setup:
                return "resume", "R-LCK-03", f"resume '{task}': this session owns it"
            return (
                "ask-user",
                "R-LCK-05",
                f"ERROR: Inconsistent state - lock for '{task}' exists but worktree missing",
            )
        return "foreign", "R-LCK-04", f"'{task}' is owned by another session ({lock_owner})"
    if done:
        return "done", "R-LCK-23", f"'{task}' is already completed"
    if worktree_exists:
        return (
            "ask-user",
            "R-LCK-05",
            f"a worktree exists for '{task}' but no lock: crashed session or manual work",
        )
    if missing_fields:
        return (
            "infeasible",
            "R-LCK-12",
            f"'{task}' lacks {', '.join(missing_fields)} in todo.md",
        )
    if unmet_dependencies:
        return "blocked", "C-73", f"'{task}' waits for {', '.join(unmet_dependencies)}"
    return "available", "R-LCK-06", f"'{task}' is available"
