"""The Store interface. Engines see only this; SQLite today, PostgreSQL later."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager

from taskgate.store.event_log import EventLog
from taskgate.store.records import (
    JSON,
    AgentRow,
    ApprovalRow,
    EventRow,
    PresentationRow,
    TaskHead,
    TaskRow,
    TaskSnapshot,
    TransitionRow,
    ValidationRow,
    VerdictRow,
)

TYPE_CHECKING = False  # typing stays unimported on the command path (issue 18)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    T = TypeVar("T")


class Conflict(Exception):
    """A compare-and-swap failed: someone else changed the row (STYLE.md 6)."""


class StoreCorrupt(Exception):
    """The store cannot be opened or holds rows that do not parse."""


TaskSummary = tuple[str, str, str, "str | None", "str | None", list[str], str]


class Tx(ABC):
    """One transaction: every protocol step's writes commit together or not at all."""

    @abstractmethod
    def task(self, name: str) -> TaskRow | None:
        """The task row, or None."""

    @abstractmethod
    def tasks(self) -> list[TaskRow]:
        """All task rows, by name."""

    def task_summaries(self) -> list[TaskSummary]:
        """(name, state, session_id, lock_released_at, risk_level, required_agents,
        updated_at) of every task, by name: what `status` lists (a projection, issue 18)."""
        return [
            (t.name, t.state, t.session_id, t.lock_released_at, t.risk_level,
             list(t.required_agents), t.updated_at)
            for t in self.tasks()
        ]  # fmt: skip

    def task_heads(self) -> list[TaskHead]:
        """Name, state, lease, pending step and extra of every task, by name: what `todo`
        selects from (a projection, issue 18)."""
        return [
            TaskHead(t.name, t.state, t.session_id, t.lock_released_at, t.pending, t.extra)
            for t in self.tasks()
        ]

    @abstractmethod
    def insert_task(self, row: TaskRow) -> bool:
        """Create the task row; False if it already exists (exclusive create, R-LCK-01)."""

    @abstractmethod
    def update_task(self, name: str, expected_seq: int, **changes: Any) -> TaskRow:
        """Compare-and-swap on seq: apply changes, bump seq; Conflict if seq moved."""

    @abstractmethod
    def transitions(self, name: str) -> list[TransitionRow]:
        """transition_log rows in order."""

    @abstractmethod
    def add_transition(self, row: TransitionRow) -> None:
        """Append to transition_log."""

    @abstractmethod
    def agents(self, name: str) -> list[AgentRow]:
        """Agent rows in insertion order."""

    @abstractmethod
    def put_agent(self, row: AgentRow) -> None:
        """Insert or replace an agent row."""

    @abstractmethod
    def verdicts(self, name: str) -> list[VerdictRow]:
        """Review decisions in order."""

    @abstractmethod
    def put_verdict(self, row: VerdictRow) -> None:
        """Insert or replace the decision of an agent for a round."""

    @abstractmethod
    def presentations(self, name: str) -> list[PresentationRow]:
        """Checkpoint presentations in order."""

    @abstractmethod
    def add_presentation(self, row: PresentationRow) -> None:
        """Record a presentation."""

    @abstractmethod
    def approvals(self, name: str) -> list[ApprovalRow]:
        """Approvals in order (revoked ones included)."""

    @abstractmethod
    def add_approval(self, row: ApprovalRow) -> None:
        """Record an approval."""

    @abstractmethod
    def revoke_approvals(self, name: str, kind: str, at: str, reason: str) -> int:
        """Revoke every active approval of `kind`; returns how many."""

    @abstractmethod
    def validations(self, name: str) -> list[ValidationRow]:
        """Build verifications in order."""

    @abstractmethod
    def add_validation(self, row: ValidationRow) -> None:
        """Record a build verification."""

    @abstractmethod
    def events(self, name: str) -> list[EventRow]:
        """The task's audit events in order."""

    def events_after(self, name: str, seq: int) -> list[EventRow]:
        """The task's audit events with a sequence number above `seq`, in order."""
        return [e for e in self.events(name) if e.seq > seq]

    @abstractmethod
    def append_event(self, name: str, kind: str, payload: JSON, at: str) -> EventRow:
        """Append a hash-chained audit event."""

    # -- what an EventLog reads on demand (store/event_log.py, issue 18) ---------------------

    # Set by the store when this transaction has ended (committed or rolled back): an
    # EventLog of one of its snapshots then reads through `detached`.
    closed = False

    def event_tail(self, name: str, limit: int) -> tuple[int, list[EventRow]]:
        """How many events the task has, and its last `limit` ones in order."""
        events = self.events(name)
        return len(events), events[max(len(events) - limit, 0) :]

    def events_before(self, name: str, seq: int, limit: int) -> list[EventRow]:
        """The last `limit` of the task's events numbered below `seq`, in order."""
        earlier = [e for e in self.events(name) if e.seq < seq]
        return earlier[max(len(earlier) - limit, 0) :]

    def events_of_kinds(self, name: str, kinds: Sequence[str], upto: int) -> list[EventRow]:
        """The task's events of these kinds numbered `upto` or below, in order."""
        return [e for e in self.events(name) if e.kind in kinds and e.seq <= upto]

    def count_events_of(self, name: str, kind: str, upto: int) -> int:
        """How many of the task's events numbered `upto` or below are of `kind`."""
        return sum(1 for e in self.events(name) if e.kind == kind and e.seq <= upto)

    def detached(self, query: Callable[[Tx], T]) -> T:
        """Run `query` (a read of events numbered at most what this transaction saw) after
        this transaction ended, on the same connection."""
        return query(self)

    def last_event_seq(self) -> int | None:
        """The number of the store's last event (0: none), None when the store does not say
        cheaply; a hook snapshot that saw a later one shows lost steps (issue 16)."""
        return None

    @abstractmethod
    def active_task_of(self, session_id: str) -> TaskRow | None:
        """The one unreleased task this session holds (R-LCK-19, R-LCK-20)."""

    def snapshot(
        self, name: str, *, since: TaskSnapshot | None = None, lazy: bool = False
    ) -> TaskSnapshot | None:
        """Everything about one task, consistent within this transaction. `since`: a snapshot
        of the same task read earlier in this transaction; its events are kept and only the
        ones appended after it are read (the chain is append-only; issue 18: a step read and
        decoded every event twice). `lazy`: the events are an EventLog that reads what is
        asked of it (store/event_log.py; issue 18: a step read and decoded every event);
        else every event is read now."""
        row = self.task(name)
        if row is None:
            return None
        events: EventLog
        if since is not None and since.task.name == name:
            before = since.events
            last = before[-1].seq if before else 0
            added = self.events_after(name, last)
            if isinstance(before, EventLog):
                events = before.extended(added)
            else:
                events = EventLog((*before, *added), task=name)
        elif lazy:
            events = EventLog.lazy(self, name)
        else:
            events = EventLog(self.events(name), task=name)
        return TaskSnapshot(
            task=row,
            transitions=tuple(self.transitions(name)),
            agents=tuple(self.agents(name)),
            verdicts=tuple(self.verdicts(name)),
            presentations=tuple(self.presentations(name)),
            approvals=tuple(self.approvals(name)),
            validations=tuple(self.validations(name)),
            events=events,
        )


class Store(ABC):
    """Opens transactions on the durable store."""

    @abstractmethod
    def read(self) -> AbstractContextManager[Tx]:
        """A read-only transaction (consistent snapshot)."""

    @abstractmethod
    def write(self) -> AbstractContextManager[Tx]:
        """A write transaction: exclusive, committed on success, rolled back on error."""

    @abstractmethod
    def close(self) -> None:
        """Release the connection."""

    @abstractmethod
    def schema_version(self) -> int:
        """The applied schema version."""

    @abstractmethod
    def refresh_snapshot(self, *, wait_s: float | None = None) -> str:
        """Rewrite the hook snapshot (store/snapshot.py) under the write lock; "unchanged",
        "written", "replaced" (it differed: changed outside taskgate) or "busy"."""

    # True: a write that changes what the hook snapshot holds still drops the file before its
    # commit, but the rewrite waits for `refresh_held` (Engine.views_deferred, issue 18); the
    # hooks read the store meanwhile, as when a rewrite fails. The embedded store only.
    hold_snapshot = False

    def refresh_held(self) -> None:
        """Rewrite the hook snapshot that writes under `hold_snapshot` dropped, if any."""
        return None  # a store that holds nothing back has nothing to rewrite

    def iter_snapshots(self) -> Iterator[TaskSnapshot]:
        """Snapshots of every task (one read transaction)."""
        with self.read() as tx:
            for row in tx.tasks():
                snap = tx.snapshot(row.name)
                if snap is not None:
                    yield snap
