"""The escalation message (RULES §16, D-REC-3): one template for every stop for the user."""

from __future__ import annotations


def escalation_message(
    task: str, *, issue: str, state: str, attempts: str, impact: str, option1: str, option2: str
) -> str:
    """D-REC-3 filled in (R-REC-16): option 3 is always to abandon and select an alternative."""
    return (
        f"Task '{task}' encountered a recovery scenario requiring user guidance:\n\n"
        f"**Issue**: {issue}\n"
        f"**Current State**: {state}\n"
        f"**Recovery Attempts**: {attempts}\n"
        f"**Impact**: {impact}\n\n"
        f"**Options**:\n"
        f"1. {option1}\n"
        f"2. {option2}\n"
        f"3. Abandon task and select alternative\n\n"
        f"Please advise on how to proceed."
    )
