"""The SQLite store's transaction: store/base.py's Tx on one SQLite connection (the query
methods, rows in and out, JSON columns decoded). Opened by store/sqlite.py's SqliteStore,
which owns the connection, the migrations, the transaction boundaries and the hook snapshot's
rewrite; store/pg_tx.py is the same Tx for PostgreSQL.

The SQL stays portable (no SQLite-only functions in queries) so that the PostgreSQL store can
run the same statements with `%s` placeholders.
"""

from __future__ import annotations

from taskgate.dataclass_lite import field_names
from taskgate.errors import SchemaDamaged
from taskgate.json_lite import loads, scan_once
from taskgate.store import canon, snapshot
from taskgate.store.base import Conflict, StoreCorrupt, TaskSummary, Tx
from taskgate.store.records import (
    GENESIS_HASH,
    JSON,
    AgentRow,
    ApprovalRow,
    EventRow,
    PresentationRow,
    TaskHead,
    TaskRow,
    TransitionRow,
    ValidationRow,
    VerdictRow,
    event_hash,
)

TYPE_CHECKING = False  # typing stays unimported on the command path (issue 18)
if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any, TypeVar

    T = TypeVar("T")
else:  # the C module sqlite3 re-exports: its dbapi2 wrapper imports datetime (1 ms, issue 18)
    import _sqlite3 as sqlite3

_TASK_COLUMNS = field_names(TaskRow)
_JSON_TASK_FIELDS = {"required_agents", "classification", "checkpoint", "pending", "extra"}


# json.dumps(value, sort_keys=True, separators=(",", ":")), through json's C encoder (issue 18)
_dump = canon.compact


def _load(text: str | None) -> Any:
    """json.loads(text), or None for NULL. A column taskgate wrote holds one JSON value with no
    whitespace around it: the C scanner decodes that without json.loads' per-call overhead
    (3x faster; issue 18: a task's 2,000 events are decoded on every step); anything else
    goes to json.loads (json_lite.loads), which decodes it or raises as before."""
    if text is None:
        return None
    try:
        value, end = scan_once(text, 0)
    except Exception:  # no value at 0, not a str, or an error: json's own verdict
        return loads(text)
    return value if end == len(text) else loads(text)


_EVENT_COLUMNS = "task, at, kind, payload, prev_hash, hash, seq"


def _event_rows(rows: Iterable[tuple[Any, ...]]) -> list[EventRow]:
    """EventRows of (_EVENT_COLUMNS) rows; a payload that does not parse is kept as text."""
    result = []
    # Positional, not by name: 7 lookups by name per event were most of reading 2,000.
    for task, at, kind, text, prev_hash, digest, event_seq in rows:
        try:
            payload = _load(text)
        except ValueError:
            payload = {"_unparseable": text}
        result.append(EventRow(task, at, kind, payload, prev_hash, digest, event_seq))
    return result


class SqliteTx(Tx):
    """A transaction on one SQLite connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._c = conn
        # Set by every write to what store/snapshot.py holds: the hook snapshot must go.
        self.touches_snapshot = False
        self.snapshot_tasks: set[str] = set()  # whose lines it changed (snapshot_splice.patched)

    # -- tasks -------------------------------------------------------------------------------

    def _task_from(self, r: sqlite3.Row) -> TaskRow:
        try:
            return TaskRow(
                name=r["name"],
                state=r["state"],
                session_id=r["session_id"],
                host=r["host"],
                fence=int(r["fence"]),
                created_at=r["created_at"],
                updated_at=r["updated_at"],
                seq=int(r["seq"]),
                owner_pid=r["owner_pid"],
                owner_started=r["owner_started"],
                risk_level=r["risk_level"],
                change_type=r["change_type"],
                required_agents=tuple(_load(r["required_agents"])),
                classification=_load(r["classification"]),
                checkpoint=_load(r["checkpoint"]),
                lock_released_at=r["lock_released_at"],
                cleanup_timestamp=r["cleanup_timestamp"],
                pending=_load(r["pending"]),
                base_branch=r["base_branch"],
                base_sha=r["base_sha"],
                extra=_load(r["extra"]),
            )
        except (ValueError, TypeError) as exc:
            raise StoreCorrupt(f"task row {r['name']!r} does not parse: {exc}") from exc
        except (IndexError, KeyError) as exc:
            raise SchemaDamaged(
                f"the store's tasks table lacks a column taskgate reads: {exc}",
                hint="restore .taskgate/state.db from a backup; nothing was changed",
            ) from exc

    def task(self, name: str) -> TaskRow | None:
        row = self._c.execute("SELECT * FROM tasks WHERE name = ?", (name,)).fetchone()
        return None if row is None else self._task_from(row)

    def tasks(self) -> list[TaskRow]:
        return [self._task_from(r) for r in self._c.execute("SELECT * FROM tasks ORDER BY name")]

    def task_summaries(self) -> list[TaskSummary]:
        query = (
            "SELECT name, state, session_id, lock_released_at, risk_level, required_agents, "
            "updated_at FROM tasks ORDER BY name"
        )
        out: list[TaskSummary] = []
        for r in self._c.execute(query):
            try:
                agents = loads(r[5])
            except (ValueError, TypeError) as exc:
                raise StoreCorrupt(f"task row {r[0]!r} does not parse: {exc}") from exc
            out.append((r[0], r[1], r[2], r[3], r[4], agents, r[6]))
        return out

    def task_heads(self) -> list[TaskHead]:
        query = (
            "SELECT name, state, session_id, lock_released_at, pending, extra FROM tasks "
            "ORDER BY name"
        )
        out: list[TaskHead] = []
        for name, state, session, released, pending, extra in self._c.execute(query):
            try:
                extras = {} if extra == "{}" else loads(extra)  # most rows: nothing extra
                out.append(TaskHead(name, state, session, released, _load(pending), extras))
            except (ValueError, TypeError) as exc:
                raise StoreCorrupt(f"task row {name!r} does not parse: {exc}") from exc
        return out

    def insert_task(self, row: TaskRow) -> bool:
        values = [
            _dump(getattr(row, c)) if c in _JSON_TASK_FIELDS else getattr(row, c)
            for c in _TASK_COLUMNS
        ]
        values[_TASK_COLUMNS.index("required_agents")] = _dump(list(row.required_agents))
        self.touches_snapshot = True
        self.snapshot_tasks.add(row.name)
        try:
            self._c.execute(
                f"INSERT INTO tasks ({', '.join(_TASK_COLUMNS)}) "
                f"VALUES ({', '.join('?' for _ in _TASK_COLUMNS)})",
                values,
            )
        except sqlite3.IntegrityError as exc:
            if "one_lock_per_session" in str(exc) or "session_id" in str(exc):
                raise Conflict("session already holds an unreleased task lock") from exc
            return False
        return True

    def update_task(self, name: str, expected_seq: int, **changes: Any) -> TaskRow:
        unknown = set(changes) - set(_TASK_COLUMNS)
        if unknown:
            raise ValueError(f"unknown task fields: {sorted(unknown)}")
        columns = [c for c in changes if c not in ("name", "seq")]
        if snapshot.TASK_COLUMNS.intersection(columns):
            self.touches_snapshot = True
            self.snapshot_tasks.add(name)
        values: list[Any] = []
        for c in columns:
            value = changes[c]
            if c == "required_agents":
                value = _dump(list(value))
            elif c in _JSON_TASK_FIELDS:
                value = _dump(value)
            values.append(value)
        assignments = ", ".join([*(f"{c} = ?" for c in columns), "seq = seq + 1"])
        try:
            cur = self._c.execute(
                f"UPDATE tasks SET {assignments} WHERE name = ? AND seq = ?",
                [*values, name, expected_seq],
            )
        except sqlite3.IntegrityError as exc:
            raise Conflict(str(exc)) from exc
        if cur.rowcount != 1:
            raise Conflict(f"task {name!r} changed concurrently (expected seq {expected_seq})")
        updated = self.task(name)
        assert updated is not None
        return updated

    def active_task_of(self, session_id: str) -> TaskRow | None:
        row = self._c.execute(
            "SELECT * FROM tasks WHERE session_id = ? AND lock_released_at IS NULL",
            (session_id,),
        ).fetchone()
        return None if row is None else self._task_from(row)

    # -- transition log ----------------------------------------------------------------------

    def transitions(self, name: str) -> list[TransitionRow]:
        rows = self._c.execute("SELECT * FROM transitions WHERE task = ? ORDER BY idx", (name,))
        return [
            TransitionRow(
                r["task"], r["idx"], r["source"], r["target"], r["at"], r["reason"],
                _load(r["evidence"]),
            )
            for r in rows
        ]  # fmt: skip

    def add_transition(self, row: TransitionRow) -> None:
        self._c.execute(
            "INSERT INTO transitions (task, idx, source, target, at, reason, evidence) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (row.task, row.index, row.source, row.target, row.at, row.reason, _dump(row.evidence)),
        )

    # -- agents and verdicts -----------------------------------------------------------------

    def agents(self, name: str) -> list[AgentRow]:
        rows = self._c.execute("SELECT * FROM agents WHERE task = ? ORDER BY ord", (name,))
        return [
            AgentRow(
                task=r["task"],
                agent=r["agent"],
                status=r["status"],
                phase=r["phase"],
                updated_at=r["updated_at"],
                message=r["message"],
                work_remaining=bool(r["work_remaining"]),
                retry_count=int(r["retry_count"]),
                initial=bool(r["initial"]),
                added_at_state=r["added_at_state"],
                added_at=r["added_at"],
                justification=r["justification"],
                invoked_at=r["invoked_at"],
            )
            for r in rows
        ]

    def put_agent(self, row: AgentRow) -> None:
        existing = self._c.execute(
            "SELECT ord FROM agents WHERE task = ? AND agent = ?", (row.task, row.agent)
        ).fetchone()
        if existing is None:
            count = self._c.execute(
                "SELECT COUNT(*) FROM agents WHERE task = ?", (row.task,)
            ).fetchone()[0]
            order = int(count)
        else:
            order = int(existing[0])
        self._c.execute("DELETE FROM agents WHERE task = ? AND agent = ?", (row.task, row.agent))
        self._c.execute(
            "INSERT INTO agents (task, agent, ord, status, phase, updated_at, message, "
            "work_remaining, retry_count, initial, added_at_state, added_at, justification, "
            "invoked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row.task, row.agent, order, row.status, row.phase, row.updated_at, row.message,
                int(row.work_remaining), row.retry_count, int(row.initial), row.added_at_state,
                row.added_at, row.justification, row.invoked_at,
            ),
        )  # fmt: skip

    def verdicts(self, name: str) -> list[VerdictRow]:
        rows = self._c.execute(
            "SELECT * FROM verdicts WHERE task = ? ORDER BY round, agent", (name,)
        )
        return [
            VerdictRow(r["task"], r["agent"], r["round"], r["head_sha"], r["decision"],
                       r["reason"], r["at"])
            for r in rows
        ]  # fmt: skip

    def put_verdict(self, row: VerdictRow) -> None:
        self._c.execute(
            "DELETE FROM verdicts WHERE task = ? AND agent = ? AND round = ?",
            (row.task, row.agent, row.round),
        )
        self._c.execute(
            "INSERT INTO verdicts (task, agent, round, head_sha, decision, reason, at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (row.task, row.agent, row.round, row.head_sha, row.decision, row.reason, row.at),
        )

    # -- checkpoints -------------------------------------------------------------------------

    def presentations(self, name: str) -> list[PresentationRow]:
        rows = self._c.execute("SELECT * FROM presentations WHERE task = ? ORDER BY id", (name,))
        return [
            PresentationRow(r["task"], r["kind"], r["bound_to"], r["at"], r["id"]) for r in rows
        ]

    def add_presentation(self, row: PresentationRow) -> None:
        self._c.execute(
            "INSERT INTO presentations (task, kind, bound_to, at) VALUES (?, ?, ?, ?)",
            (row.task, row.kind, row.bound_to, row.at),
        )

    def approvals(self, name: str) -> list[ApprovalRow]:
        rows = self._c.execute("SELECT * FROM approvals WHERE task = ? ORDER BY id", (name,))
        return [
            ApprovalRow(
                task=r["task"],
                kind=r["kind"],
                bound_to=r["bound_to"],
                presented_at=r["presented_at"],
                approved_at=r["approved_at"],
                provenance=r["provenance"],
                message_hash=r["message_hash"],
                revoked_at=r["revoked_at"],
                revoke_reason=r["revoke_reason"],
                id=r["id"],
            )
            for r in rows
        ]

    def add_approval(self, row: ApprovalRow) -> None:
        self.touches_snapshot |= row.kind == snapshot.APPROVAL_KIND
        self.snapshot_tasks.add(row.task)
        self._c.execute(
            "INSERT INTO approvals (task, kind, bound_to, presented_at, approved_at, provenance, "
            "message_hash, revoked_at, revoke_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row.task, row.kind, row.bound_to, row.presented_at, row.approved_at,
                row.provenance, row.message_hash, row.revoked_at, row.revoke_reason,
            ),
        )  # fmt: skip

    def revoke_approvals(self, name: str, kind: str, at: str, reason: str) -> int:
        self.touches_snapshot |= kind == snapshot.APPROVAL_KIND
        self.snapshot_tasks.add(name)
        cur = self._c.execute(
            "UPDATE approvals SET revoked_at = ?, revoke_reason = ? "
            "WHERE task = ? AND kind = ? AND revoked_at IS NULL",
            (at, reason, name, kind),
        )
        return int(cur.rowcount)

    # -- validations and events --------------------------------------------------------------

    def validations(self, name: str) -> list[ValidationRow]:
        rows = self._c.execute("SELECT * FROM validations WHERE task = ? ORDER BY id", (name,))
        return [
            ValidationRow(
                task=r["task"],
                head_sha=r["head_sha"],
                command=r["command"],
                exit_code=r["exit_code"],
                success=bool(r["success"]),
                at=r["at"],
                output_tail=r["output_tail"],
                failure_class=r["failure_class"],
                tests=_load(r["tests"]),
                id=r["id"],
            )
            for r in rows
        ]

    def add_validation(self, row: ValidationRow) -> None:
        self._c.execute(
            "INSERT INTO validations (task, head_sha, command, exit_code, success, at, "
            "output_tail, failure_class, tests) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row.task, row.head_sha, row.command, row.exit_code, int(row.success), row.at,
                row.output_tail, row.failure_class, _dump(row.tests),
            ),
        )  # fmt: skip

    def events(self, name: str) -> list[EventRow]:
        return self.events_after(name, -1)

    def events_after(self, name: str, seq: int) -> list[EventRow]:
        return _event_rows(
            self._c.execute(
                f"SELECT {_EVENT_COLUMNS} FROM events WHERE task = ? AND seq > ? ORDER BY seq",
                (name, seq),
            )
        )

    def event_tail(self, name: str, limit: int) -> tuple[int, list[EventRow]]:
        rows = _event_rows(
            self._c.execute(
                f"SELECT {_EVENT_COLUMNS} FROM events WHERE task = ? ORDER BY seq DESC LIMIT ?",
                (name, limit),
            )
        )
        rows.reverse()
        if len(rows) < limit:
            return len(rows), rows
        (count,) = self._c.execute(
            "SELECT COUNT(*) FROM events WHERE task = ? AND seq <= ?", (name, rows[-1].seq)
        ).fetchone()
        return int(count), rows

    def events_before(self, name: str, seq: int, limit: int) -> list[EventRow]:
        rows = _event_rows(
            self._c.execute(
                f"SELECT {_EVENT_COLUMNS} FROM events WHERE task = ? AND seq < ? "
                "ORDER BY seq DESC LIMIT ?",
                (name, seq, limit),
            )
        )
        rows.reverse()
        return rows

    def events_of_kinds(self, name: str, kinds: Sequence[str], upto: int) -> list[EventRow]:
        marks = ", ".join("?" for _ in kinds)
        return _event_rows(
            self._c.execute(
                f"SELECT {_EVENT_COLUMNS} FROM events WHERE task = ? AND seq <= ? "
                f"AND kind IN ({marks}) ORDER BY seq",
                (name, upto, *kinds),
            )
        )

    def count_events_of(self, name: str, kind: str, upto: int) -> int:
        (count,) = self._c.execute(
            "SELECT COUNT(*) FROM events WHERE task = ? AND seq <= ? AND kind = ?",
            (name, upto, kind),
        ).fetchone()
        return int(count)

    def detached(self, query: Callable[[Tx], T]) -> T:
        try:
            return query(self)
        except sqlite3.DatabaseError as exc:
            raise StoreCorrupt(f"reading a task's events after its step failed: {exc}") from exc

    def append_event(self, name: str, kind: str, payload: JSON, at: str) -> EventRow:
        if kind in snapshot.EVENT_KINDS:
            self.touches_snapshot = True
            self.snapshot_tasks.add(name)
        last = self._c.execute(
            "SELECT hash FROM events WHERE task = ? ORDER BY seq DESC LIMIT 1", (name,)
        ).fetchone()
        prev = last[0] if last else GENESIS_HASH
        digest = event_hash(prev, name, at, kind, payload)
        cur = self._c.execute(
            "INSERT INTO events (task, at, kind, payload, prev_hash, hash) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (name, at, kind, canon.compact(payload), prev, digest),
        )
        return EventRow(name, at, kind, payload, prev, digest, int(cur.lastrowid or 0))

    def last_event_seq(self) -> int | None:
        (top,) = self._c.execute("SELECT MAX(seq) FROM events").fetchone()
        return int(top or 0)

    def restore_event(self, row: EventRow) -> None:
        """Insert an event exactly as recorded, seq and hashes included (`recover --rebuild`:
        a chain restored from the views keeps what git anchored, and any break stays visible)."""
        if row.kind in snapshot.EVENT_KINDS:
            self.touches_snapshot = True
            self.snapshot_tasks.add(row.task)
        self._c.execute(
            "INSERT INTO events (seq, task, at, kind, payload, prev_hash, hash) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (row.seq, row.task, row.at, row.kind, _dump(row.payload), row.prev_hash, row.hash),
        )
