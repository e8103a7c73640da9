"""The protocol's states, risk levels and constants (RULES §0 Constants, one place in code)."""

from __future__ import annotations

from taskgate.enum_lite import StrEnum  # enum.StrEnum without importing enum (issue 18)


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


# RiskLevel, ChangeType, AgentStatus and Decision live in states_extra.py and are loaded on
# first use (__getattr__ below): each StrEnum costs about 0.2 ms to create, and the prompt hook,
# which runs on every prompt of a session holding a task, needs only State and Checkpoint
# (issue 18). `from taskgate.protocol.states import RiskLevel` works as before.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from taskgate.protocol.states_extra import AgentStatus as AgentStatus
    from taskgate.protocol.states_extra import ChangeType as ChangeType
    from taskgate.protocol.states_extra import Decision as Decision
    from taskgate.protocol.states_extra import RiskLevel as RiskLevel

_EXTRA = frozenset({"RiskLevel", "ChangeType", "AgentStatus", "Decision"})


def __getattr__(name: str) -> object:
    """The enums of states_extra.py, imported on first use (PEP 562)."""
    if name in _EXTRA:
        from taskgate.protocol import states_extra

        value = getattr(states_extra, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
