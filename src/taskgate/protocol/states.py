"""The protocol's states, risk levels and constants (RULES §0 Constants, one place in code)."""

from __future__ import annotations

from enum import StrEnum


class State(StrEnum):
    """The 11 task states (RULES §0 STATES, C-21)."""

    INIT = "INIT"
    CLASSIFIED = "CLASSIFIED"
    REQUIREMENTS = "REQUIREMENTS"
    SYNTHESIS = "SYNTHESIS"
    IMPLEMENTATION = "IMPLEMENTATION"
    VALIDATION = "VALIDATION"
    REVIEW = "REVIEW"
    AWAITING_USER_APPROVAL = "AWAITING_USER_APPROVAL"
    SCOPE_NEGOTIATION = "SCOPE_NEGOTIATION"
    COMPLETE = "COMPLETE"
    CLEANUP = "CLEANUP"

    @classmethod
    def parse(cls, text: str) -> State:
        """Parse a state name (case-insensitive); raise ValueError naming the valid states."""
        try:
            return cls(text.strip().upper())
        except ValueError:
            valid = ", ".join(s.value for s in cls)
            raise ValueError(f"unknown state {text!r} (R-TRN-01); valid states: {valid}") from None


class Checkpoint(StrEnum):
    """Which human checkpoint a message answers: one presented in its state (R-CKP-01, R-CKP-04)."""

    NONE = "NONE"
    PLAN = "PLAN"
    CHANGES = "CHANGES"


class RiskLevel(StrEnum):
    """Task risk (RULES §0 RISK_LEVELS)."""

    HIGH = "HIGH"
    MEDIUM = "MEDIUM"
    LOW = "LOW"

    @property
    def rank(self) -> int:
        """Ordering for max(): HIGH > MEDIUM > LOW (R-RSK-08)."""
        return {"LOW": 0, "MEDIUM": 1, "HIGH": 2}[self.value]

    @classmethod
    def parse(cls, text: str) -> RiskLevel:
        """Parse a risk level (case-insensitive); raise ValueError naming the valid levels."""
        try:
            return cls(text.strip().upper())
        except ValueError:
            raise ValueError(
                f"invalid risk level {text!r} (R-RSK-11); use HIGH, MEDIUM or LOW"
            ) from None


class ChangeType(StrEnum):
    """Change types that select a workflow variant (RULES §2, D-WFV-1)."""

    DOCUMENTATION_ONLY = "documentation_only"
    CONFIG_ONLY = "config_only"
    CODE = "code"


class AgentStatus(StrEnum):
    """Agent status values (RULES §0 AGENT_STATUS_VALUES, plus BLOCKED from DESIGN.md)."""

    WORKING = "WORKING"
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETE = "COMPLETE"
    ERROR = "ERROR"
    BLOCKED = "BLOCKED"


class Decision(StrEnum):
    """Review decisions (RULES §0 REVIEW_DECISIONS)."""

    APPROVED = "APPROVED"
    REJECTED = "REJECTED"


MAX_AGENT_RETRIES = 3  # C-01
AGENT_TIMEOUT_MIN = 60  # C-02
AGENT_SUSPECT_MIN = 30  # C-02, informational
STATUS_FILE_DEADLINE_MIN = 5
MIN_REPORT_BYTES = 100  # R-DOC-04, C-18
STYLE_MAIN_AGENT_MAX_VIOLATIONS = 5
SCOPE_NEGOTIATION_FACTOR = 2
BUILD_RECOVERY_MAX_ITER = 3  # C-65
MAIN_LOCK_MAX_RETRIES = 3  # C-66
SPEC_MAX_ITERATIONS = 10
SPEC_MAX_STALE = 3

TASK_MD_SECTIONS = ("Task Objective", "Scope Definition", "Stakeholder Agent Reports")  # D-DOC-1
PLAN_FLAG = "user-plan-approval-obtained.flag"  # C-04
CHANGE_FLAG = "user-approval-obtained.flag"  # C-03
ARCHIVAL_FLAG = "archival-complete.flag"
LEGACY_FLAG_ALIASES = {
    "user-approved-synthesis.flag": PLAN_FLAG,
    "user-approved-changes.flag": CHANGE_FLAG,
}
