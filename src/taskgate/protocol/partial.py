"""Agent partial-completion detection (RULES §8, D-AST-1, seed 000 Recovery Procedure 2)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from taskgate.protocol.states import AGENT_TIMEOUT_MIN, MAX_AGENT_RETRIES


class AgentCondition(StrEnum):
    """What D-AST-1 makes of one agent's status."""

    COMPLETE = "COMPLETE"
    WORKING = "WORKING"
    TIMEOUT = "TIMEOUT"
    ERROR = "ERROR"
    MISSING = "MISSING"
    UNKNOWN = "UNKNOWN"
    BLOCKED = "BLOCKED"


@dataclass(frozen=True)
class AgentState:
    """Input: one agent's recorded status for the current phase."""

    agent: str
    status: str | None  # None: no status.json for this phase
    updated_at: datetime | None
    error_message: str = ""
    retry_count: int = 0


@dataclass(frozen=True)
class AgentLine:
    """Output: the D-AST-1 line and action for one agent."""

    agent: str
    condition: AgentCondition
    text: str
    action: str  # "none" | "wait" | "re-invoke" | "escalate" | "ask-user"


@dataclass(frozen=True)
class PartialReport:
    """The detection result (R-AST-05) with the recommended next step."""

    lines: tuple[AgentLine, ...]
    complete: int
    errors: int
    timeouts: int
    missing: int
    recommendation: str

    @property
    def summary(self) -> str:
        """R-AST-05's summary line."""
        return (
            f"Summary: {self.complete}/{len(self.lines)} complete, {self.errors} errors, "
            f"{self.timeouts} timeouts, {self.missing} missing"
        )

    @property
    def all_complete(self) -> bool:
        """True only when C == N."""
        return self.complete == len(self.lines)


def _line(a: AgentState, now: datetime, timeout_min: int, max_retries: int) -> AgentLine:
    exhausted = a.retry_count >= max_retries  # R-AST-07, C-01
    redo = "escalate" if exhausted else "re-invoke"
    if a.status is None:
        return AgentLine(
            a.agent,
            AgentCondition.MISSING,
            f"{a.agent}: status.json missing (not invoked or invocation failed)",
            redo,
        )
    if a.status == "COMPLETE":
        return AgentLine(a.agent, AgentCondition.COMPLETE, f"{a.agent}: COMPLETE", "none")
    if a.status == "ERROR":
        return AgentLine(
            a.agent,
            AgentCondition.ERROR,
            f"{a.agent}: ERROR - {a.error_message or 'Unknown'}",
            redo,
        )
    if a.status == "BLOCKED":
        return AgentLine(
            a.agent, AgentCondition.BLOCKED, f"{a.agent}: BLOCKED - {a.error_message}", "ask-user"
        )
    if a.status in ("WORKING", "IN_PROGRESS"):
        if a.updated_at is None:  # R-AST-04, C-82: unparseable updated_at is a timeout
            return AgentLine(
                a.agent, AgentCondition.TIMEOUT, f"{a.agent}: TIMEOUT (no valid updated_at)", redo
            )
        age = int((now - a.updated_at).total_seconds() // 60)
        if age > timeout_min:
            return AgentLine(
                a.agent, AgentCondition.TIMEOUT, f"{a.agent}: TIMEOUT (stuck {age} min)", redo
            )
        return AgentLine(
            a.agent, AgentCondition.WORKING, f"{a.agent}: WORKING ({age}min elapsed)", "wait"
        )
    return AgentLine(
        a.agent, AgentCondition.UNKNOWN, f"{a.agent}: Unknown status '{a.status}'", redo
    )


def detect(
    agents: list[AgentState],
    now: datetime,
    *,
    timeout_min: int = AGENT_TIMEOUT_MIN,
    max_retries: int = MAX_AGENT_RETRIES,
) -> PartialReport:
    """Classify every agent (R-AST-02..07) and recommend one action (R-AST-13, R-REC-15)."""
    lines = tuple(_line(a, now, timeout_min, max_retries) for a in agents)
    count = {c: sum(1 for line in lines if line.condition is c) for c in AgentCondition}
    incomplete = [line for line in lines if line.condition is not AgentCondition.COMPLETE]
    if not incomplete:
        rec = "all agents complete: the phase gate can be checked"
    elif any(line.action == "escalate" for line in incomplete):
        names = [line.agent for line in incomplete if line.action == "escalate"]
        rec = f"Max retries exceeded ({max_retries}) for {', '.join(names)}: escalate to the user"
    elif any(line.action == "ask-user" for line in incomplete):
        rec = "an agent is blocked: return to CLASSIFIED or ask the user (R-AST-12)"
    elif (
        len(incomplete) == len(lines)
        and len(lines) > 1
        and all(line.action == "re-invoke" for line in incomplete)
    ):
        rec = "all agents incomplete: systematic issue, return to CLASSIFIED (R-AST-13)"
    else:
        redo = [line.agent for line in incomplete if line.action == "re-invoke"]
        wait = [line.agent for line in incomplete if line.action == "wait"]
        parts = []
        if redo:
            parts.append(f"re-invoke {', '.join(redo)}")
        if wait:
            parts.append(f"wait for {', '.join(wait)}")
        rec = "; ".join(parts) + " (R-AST-06)"
    return PartialReport(
        lines,
        count[AgentCondition.COMPLETE],
        count[AgentCondition.ERROR],
        count[AgentCondition.TIMEOUT],
        count[AgentCondition.MISSING],
        rec,
    )
