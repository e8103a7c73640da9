"""A task's audit events as a sequence read from the store on demand (issue 18).

`Tx.snapshot` read and decoded every event of the task for every step: at 2,000 events (most
of them the hooks' tool_usage records) about 5 ms of CPU, for consumers that need a count,
the last few events and the few events of some kinds. An EventLog is that same sequence
(`len`, indexing, slices, iteration, equality with the tuple it stands for) holding only what
was touched:

- the number of events and the last ones (TAIL; all of them when there are no more), read
  when the snapshot is taken;
- the events from some position to the end (`log[k:]`, `log[i]`, `reversed(log)`), read
  back from the end as far as asked;
- the events of some kinds (`of_kinds`): the protocol's own records (transitions,
  invocations, commits, validations, approvals, interruptions), one query for all of them;
- how many events of a kind come before a position (`count_of`): a COUNT.

Every read is bounded by the last event the snapshot saw (`seq <=` it), so a log answers the
same after its transaction ended (the views are rendered after the commit): the events are
append-only, and both stores number them in commit order under the one writer lock (SQLite's
BEGIN IMMEDIATE, PostgreSQL's advisory writer lock), so no event at or below that number can
appear later. A read that finds a different number of events than the snapshot counted raises
StoreCorrupt. Iterating a log reads everything once, as `Tx.snapshot` did.

A log built from rows (`EventLog(rows)`) is complete and never reads the store: what the read
path, the audit and `recover` use. The functions `of_kinds`, `count_of` and `select` take
any sequence of events (a tuple too) and answer the same; tests/test_event_log.py compares
them with the full-history computation on both stores.
"""

from __future__ import annotations

from collections.abc import Sequence

from taskgate.store.records import EventRow

TYPE_CHECKING = False  # typing stays unimported on the command path (issue 18)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from typing import Any

    from taskgate.store.base import Tx

# The kinds a step reads by kind (engine/invocations.py, engine/facts.py, engine/views.py): the
# protocol's own records, read together by the first question about any of them. Not the hooks'
# records of every tool call (tool_usage), of forwarded commands or of sessions: most of a long
# task's events, and counted by a query when a count is asked for.
PROTOCOL_KINDS = frozenset(
    {"transition", "agent_invoked", "agent_completed", "commit", "validation", "approval",
     "interruption"}
)  # fmt: skip
# The events a lazy log reads first, from the end: a task with no more is read whole in one
# query, and a step's renderings mostly need no others (the events since the last one).
TAIL = 32


class EventLog(Sequence[EventRow]):
    """The events of one task, in order; complete, or read from `source` on demand."""

    __slots__ = ("_length", "_picked", "_source", "_tail", "task")

    def __init__(
        self,
        rows: Iterable[EventRow] = (),
        *,
        task: str = "",
        source: Tx | None = None,
        length: int | None = None,
    ) -> None:
        tail = list(rows)
        self.task = task
        self._tail = tail  # the events from position _length - len(tail) to the end
        self._length = len(tail) if length is None else length
        self._source = source if self._length > len(tail) else None
        # Every event of PROTOCOL_KINDS, once read (of_kinds, count_of).
        self._picked: list[EventRow] | None = None
        if self._length and not tail:
            raise ValueError("a lazy event log holds at least its last event")

    @classmethod
    def lazy(cls, tx: Tx, task: str) -> EventLog:
        """The log of `task` in `tx`: its length and last events read (all of them when
        there are few), the rest on demand."""
        length, last = tx.event_tail(task, TAIL)
        return cls(last, task=task, source=tx, length=length)

    # -- the sequence --------------------------------------------------------------------------

    @property
    def complete(self) -> bool:
        """Every event is in memory (nothing more is read)."""
        return self._source is None

    def __len__(self) -> int:
        return self._length

    def __bool__(self) -> bool:
        return self._length > 0

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._length)
            if step != 1 or start >= stop:
                return tuple(self._all())[index] if start < stop else ()
            self._load_from(start)
            offset = self._length - len(self._tail)
            return tuple(self._tail[start - offset : stop - offset])
        position = index.__index__()
        if position < 0:
            position += self._length
        if not 0 <= position < self._length:
            raise IndexError("event index out of range")
        self._load_from(position)
        return self._tail[position - (self._length - len(self._tail))]

    def __iter__(self) -> Iterator[EventRow]:
        return iter(self._all())

    def __reversed__(self) -> Iterator[EventRow]:
        """From the last event back, reading earlier ones in doubling chunks only as the caller
        goes on (a search from the end mostly stops near it)."""
        position = self._length  # the events before it are yet to be given
        while position > 0:
            start = self._length - len(self._tail)
            if position <= start:
                self._load_from(max(start - max(len(self._tail), TAIL), 0))
                start = self._length - len(self._tail)
            for i in range(position - 1, start - 1, -1):
                # By the distance from the end: a read elsewhere may have added to the tail.
                yield self._tail[i - self._length + len(self._tail)]
            position = start

    def __eq__(self, other: object) -> bool:
        if isinstance(other, EventLog):
            return len(other) == self._length and other._all() == self._all()
        if isinstance(other, (tuple, list)):
            return len(other) == self._length and list(other) == self._all()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._all()))

    def __add__(self, other: Sequence[EventRow]) -> tuple[EventRow, ...]:
        return (*self._all(), *other)

    def __repr__(self) -> str:
        loaded = "complete" if self.complete else f"{len(self._tail)} read"
        return f"<EventLog of {self.task!r}: {self._length} events, {loaded}>"

    # -- reading on demand ---------------------------------------------------------------------

    def _all(self) -> list[EventRow]:
        self._load_from(0)
        return self._tail

    def _load_from(self, position: int) -> None:
        """Read the events from `position` on that are not in memory yet."""
        have = self._length - len(self._tail)
        if position >= have:
            return
        source = self._source
        assert source is not None
        first = self._tail[0].seq
        rows = self._read(lambda tx: tx.events_before(self.task, first, have - position))
        if len(rows) != have - position:
            raise _changed(self.task, self._length, len(rows) + len(self._tail))
        self._tail[:0] = rows
        if position == 0:
            self._source = None  # complete: nothing is read any more

    def _read(self, query: Callable[[Tx], Any]) -> Any:
        source = self._source
        assert source is not None
        return source.detached(query) if source.closed else query(source)

    def _protocol(self) -> list[EventRow]:
        """Every event of PROTOCOL_KINDS, in order (read once)."""
        if self._picked is None:
            bound, kinds = self._tail[-1].seq, sorted(PROTOCOL_KINDS)
            self._picked = self._read(lambda tx: tx.events_of_kinds(self.task, kinds, bound))
        return self._picked

    def of_kinds(self, kinds: Iterable[str]) -> tuple[EventRow, ...]:
        """The events whose kind is one of `kinds`, in order."""
        wanted = frozenset(kinds)
        if self._source is None:
            return tuple(e for e in self._tail if e.kind in wanted)
        if wanted <= PROTOCOL_KINDS:
            return tuple(e for e in self._protocol() if e.kind in wanted)
        bound, asked = self._tail[-1].seq, sorted(wanted)
        return tuple(self._read(lambda tx: tx.events_of_kinds(self.task, asked, bound)))

    def count_of(self, kind: str, stop: int) -> int:
        """How many of the events before position `stop` are of `kind`."""
        stop = min(max(stop, 0), self._length)
        if not stop:
            return 0
        bound = self[stop - 1].seq  # read back to it: the step's renderings read on from it
        have = self._length - len(self._tail)
        if self._source is None or have == 0:
            return sum(1 for e in self._tail[: stop - have] if e.kind == kind)
        if kind in PROTOCOL_KINDS:
            return sum(1 for e in self._protocol() if e.kind == kind and e.seq <= bound)
        return int(self._read(lambda tx: tx.count_events_of(self.task, kind, bound)))

    def select(self, kinds: Iterable[str], start: int) -> list[tuple[bool, EventRow]]:
        """(whether at position `start` or after, event) of the events whose kind is one of
        `kinds` or whose position is `start` or after, in order: what a rendering that keeps
        what it rendered of the others before needs."""
        start = min(max(start, 0), self._length)
        if self._source is None:
            wanted = frozenset(kinds)
            return [(i >= start, e) for i, e in enumerate(self._tail)
                    if i >= start or e.kind in wanted]  # fmt: skip
        later = self[start:]
        first = later[0].seq if later else self._tail[-1].seq + 1
        return [(False, e) for e in self.of_kinds(kinds) if e.seq < first] + [
            (True, e) for e in later
        ]

    def extended(self, rows: Sequence[EventRow]) -> EventLog:
        """This log with `rows` (the events appended after its last one, in order) after it,
        keeping what was read."""
        log = EventLog(task=self.task)
        log._tail = [*self._tail, *rows]
        log._length = self._length + len(rows)
        log._source = self._source
        if self._picked is not None:
            log._picked = [*self._picked, *(e for e in rows if e.kind in PROTOCOL_KINDS)]
        return log


def _changed(task: str, counted: int, found: int) -> Exception:
    from taskgate.store.base import StoreCorrupt

    return StoreCorrupt(
        f"the events of task {task!r} changed while a step read them ({counted} counted, "
        f"{found} found): the store was changed around taskgate"
    )


# -- the same questions of any sequence of events ----------------------------------------------


def of_kinds(events: Sequence[EventRow], kinds: Iterable[str]) -> tuple[EventRow, ...]:
    """The events whose kind is one of `kinds`, in order."""
    if isinstance(events, EventLog):
        return events.of_kinds(kinds)
    wanted = frozenset(kinds)
    return tuple(e for e in events if e.kind in wanted)


def count_of(events: Sequence[EventRow], kind: str, stop: int) -> int:
    """How many of the events before position `stop` are of `kind`."""
    if isinstance(events, EventLog):
        return events.count_of(kind, stop)
    return sum(1 for e in events[: max(stop, 0)] if e.kind == kind)


def select(events: Sequence[EventRow], kinds: Iterable[str],
           start: int) -> list[tuple[bool, EventRow]]:  # fmt: skip
    """(whether at position `start` or after, event) of the events whose kind is one of
    `kinds` or whose position is `start` or after, in order (EventLog.select)."""
    if isinstance(events, EventLog):
        return events.select(kinds, start)
    wanted = frozenset(kinds)
    return [(i >= start, e) for i, e in enumerate(events) if i >= start or e.kind in wanted]
