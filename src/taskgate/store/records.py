"""Plain records that cross the Store interface (validated once when read, STYLE.md 4)."""

from __future__ import annotations

from taskgate.dataclass_lite import dataclass, field, replace

# One definition of the chain for the store, the audit and the hook process (issue 18).
from taskgate.store.canon import GENESIS_HASH as GENESIS_HASH
from taskgate.store.canon import event_hash as event_hash

TYPE_CHECKING = False  # typing stays unimported on the command path (issue 18)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

JSON = dict[str, "Any"]  # "Any": typing is imported for mypy only


@dataclass(frozen=True)
class TaskRow:
    """One task: its state and its lease (session, host, fence, long-lived owner pid)."""

    name: str
    state: str
    session_id: str
    host: str
    fence: int
    created_at: str
    updated_at: str
    seq: int = 1
    owner_pid: int | None = None
    owner_started: str | None = None
    risk_level: str | None = None
    change_type: str | None = None
    required_agents: tuple[str, ...] = ()
    classification: JSON = field(default_factory=dict)
    checkpoint: JSON | None = None
    lock_released_at: str | None = None
    cleanup_timestamp: str | None = None
    pending: JSON | None = None  # journaled git step in flight: {"op": ..., ...}
    base_branch: str = "main"
    base_sha: str = ""
    extra: JSON = field(default_factory=dict)

    @property
    def released(self) -> bool:
        """The lock was released (CLEANUP or a human's release --force, R-LCK-23)."""
        return self.lock_released_at is not None

    def with_changes(self, **changes: Any) -> TaskRow:
        """A copy with fields replaced."""
        return replace(self, **changes)


class TaskHead:
    """What selecting a task reads of its row (`taskgate todo` over every task, issue 18): a
    projection, so 10,000 rows are not decoded into TaskRows for six fields."""

    __slots__ = ("extra", "lock_released_at", "name", "pending", "session_id", "state")

    def __init__(self, name: str, state: str, session_id: str, lock_released_at: str | None,
                 pending: JSON | None, extra: JSON) -> None:  # fmt: skip
        self.name = name
        self.state = state
        self.session_id = session_id
        self.lock_released_at = lock_released_at
        self.pending = pending
        self.extra = extra

    @property
    def released(self) -> bool:
        """The lock was released (as TaskRow.released)."""
        return self.lock_released_at is not None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TaskHead) and all(
            getattr(self, k) == getattr(other, k) for k in self.__slots__
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "TaskHead(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__) + ")"


@dataclass(frozen=True)
class TransitionRow:
    """A transition_log entry (R-TRN-04) with the evidence that passed its gate (R-RSK-14)."""

    task: str
    index: int
    source: str
    target: str
    at: str
    reason: str = ""
    evidence: JSON = field(default_factory=dict)


@dataclass(frozen=True)
class AgentRow:
    """A required agent and its status for one phase (R-AST-01, R-AST-19)."""

    task: str
    agent: str
    status: str | None = None
    phase: str | None = None
    updated_at: str | None = None
    message: str = ""
    work_remaining: bool = False
    retry_count: int = 0
    initial: bool = True
    added_at_state: str | None = None
    added_at: str | None = None
    justification: str = ""
    invoked_at: str | None = None


@dataclass(frozen=True)
class VerdictRow:
    """A review decision for one round and the HEAD it was given for (R-REV-01)."""

    task: str
    agent: str
    round: int
    head_sha: str
    decision: str
    reason: str
    at: str


@dataclass(frozen=True)
class PresentationRow:
    """What was shown to the human at a checkpoint, and when (R-CKP-03, R-CKP-10)."""

    task: str
    kind: str  # "plan" | "changes"
    bound_to: str  # plan hash or commit SHA
    at: str
    id: int = 0


@dataclass(frozen=True)
class ApprovalRow:
    """A human approval bound to a presented artifact, with its provenance."""

    task: str
    kind: str  # "plan" | "changes"
    bound_to: str
    presented_at: str
    approved_at: str
    provenance: str  # "terminal", "human-prompt", "automated --yes"
    message_hash: str = ""
    revoked_at: str | None = None
    revoke_reason: str = ""
    id: int = 0


@dataclass(frozen=True)
class ValidationRow:
    """One build verification against a task-branch HEAD (R-VAL-01)."""

    task: str
    head_sha: str
    command: str
    exit_code: int
    success: bool
    at: str
    output_tail: str = ""
    failure_class: str = ""
    tests: JSON = field(default_factory=dict)
    id: int = 0


@dataclass(frozen=True)
class EventRow:
    """An audit event; `hash` chains it to the task's previous event (tamper evidence)."""

    task: str
    at: str
    kind: str
    payload: JSON
    prev_hash: str
    hash: str
    seq: int = 0


@dataclass(frozen=True)
class TaskSnapshot:
    """Everything the store holds about one task, read in one transaction."""

    task: TaskRow
    transitions: tuple[TransitionRow, ...] = ()
    agents: tuple[AgentRow, ...] = ()
    verdicts: tuple[VerdictRow, ...] = ()
    presentations: tuple[PresentationRow, ...] = ()
    approvals: tuple[ApprovalRow, ...] = ()
    validations: tuple[ValidationRow, ...] = ()
    # An EventLog (store/event_log.py) from Tx.snapshot: read on demand when lazy (issue 18).
    events: Sequence[EventRow] = ()

    def agent(self, name: str) -> AgentRow | None:
        """The agent row called `name`, or None."""
        return next((a for a in self.agents if a.agent == name), None)

    def latest_presentation(self, kind: str) -> PresentationRow | None:
        """The most recent presentation of `kind`."""
        rows = [p for p in self.presentations if p.kind == kind]
        return rows[-1] if rows else None

    def active_approval(self, kind: str) -> ApprovalRow | None:
        """The most recent unrevoked approval of `kind`."""
        rows = [a for a in self.approvals if a.kind == kind and a.revoked_at is None]
        return rows[-1] if rows else None
