"""The protocol's enums beside the states (RULES §0 Constants): risk levels, change types,
agent status values, review decisions. Imported through taskgate.protocol.states (its
__getattr__ loads this module on first use, issue 18)."""

from __future__ import annotations

from taskgate.enum_lite import StrEnum  # enum.StrEnum without importing enum (issue 18)


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
