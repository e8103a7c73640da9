"""Who decides at the two human checkpoints when `taskgate run` reaches them (RULES §9)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TextIO

from taskgate.errors import NeedsHuman


@dataclass(frozen=True)
class Decision:
    """The person's answer: approve, request changes (with the text), or stop for now."""

    action: str  # "approve" | "changes" | "stop"
    text: str = ""
    provenance: str = "terminal"


class Approver(Protocol):
    """Asked at SYNTHESIS (kind "plan") and AWAITING_USER_APPROVAL (kind "changes")."""

    def decide(self, task: str, kind: str, presentation: str) -> Decision:
        """Show `presentation` and return the person's decision."""
        ...


def resume_hint(task: str, kind: str) -> str:
    """Exactly how to approve or resume a task that stopped at a checkpoint."""
    return (
        f"show it again: taskgate present {task}\n"
        f"approve it:    taskgate approve {task} {kind}   (typed by you, in your terminal)\n"
        f'or ask for changes: taskgate request-changes {task} "<what to change>"\n'
        f"then resume:   taskgate run {task}"
    )


class StopAtCheckpoint:
    """No terminal: stop with exit 4 and print how to approve and resume (never auto-approve)."""

    def decide(self, task: str, kind: str, presentation: str) -> Decision:
        raise NeedsHuman(
            f"'{task}' waits for your {'plan' if kind == 'plan' else 'change'} approval:\n\n"
            f"{presentation}",
            hint=resume_hint(task, kind),
        )


class AutoApprove:
    """`run --yes`: approve every checkpoint, recorded as automated (refused unless allowed)."""

    def decide(self, task: str, kind: str, presentation: str) -> Decision:
        return Decision("approve", "--yes", provenance="automated --yes")


@dataclass
class TerminalApprover:
    """Ask on a terminal: approve / request changes / show details / stop and resume later."""

    stdin: TextIO = sys.stdin
    stdout: TextIO = sys.stdout
    details: Callable[[str], str] | None = None

    def decide(self, task: str, kind: str, presentation: str) -> Decision:
        out = self.stdout
        out.write(f"\n{presentation}\n\n")
        what = "plan" if kind == "plan" else "change"
        while True:
            out.write(f"Approve this {what}? [a]pprove / [c]hange request / [d]etails / [s]top: ")
            out.flush()
            answer = self.stdin.readline()
            if not answer:
                return Decision("stop")
            choice = answer.strip().lower()
            if choice in ("a", "approve", "approved", "yes", "y"):
                return Decision("approve", answer.strip())
            if choice in ("s", "stop", "q", "quit"):
                return Decision("stop")
            if choice in ("d", "details") and self.details:
                out.write(self.details(task) + "\n")
                continue
            if choice in ("c", "change", "changes"):
                out.write("What should change? ")
                out.flush()
                text = self.stdin.readline().strip()
                if text:
                    return Decision("changes", text)
                continue
            out.write("Please answer a, c, d or s.\n")
