"""The PostgreSQL store's transaction (issue 20): store/base.py's Tx on one psycopg
connection, the same statements as store/sqlite_tx.py with `%s` placeholders. Opened by
store/postgres.py's PgStore, which owns the transaction boundaries and the writer lock."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pgerrors
from psycopg.rows import dict_row, tuple_row

from taskgate.errors import SchemaDamaged
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

_EVENT_COLUMNS = "task, at, kind, payload, prev_hash, hash, seq"
TASK_COLUMNS = tuple(f.name for f in dataclasses.fields(TaskRow))
_JSON_TASK_FIELDS = {"required_agents", "classification", "checkpoint", "pending", "extra"}
T = TypeVar("T")


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _load(text: str | None) -> Any:
    return None if text is None else json.loads(text)


class QmarkConnection:
    """store/snapshot.py's collect() speaks sqlite3 (`?` placeholders, tuple rows)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._c = conn

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> psycopg.Cursor[Any]:
        cur = self._c.cursor(row_factory=tuple_row)
        return cur.execute(sql.replace("?", "%s"), params)


class PgTx(Tx):
    """A transaction on one PostgreSQL connection."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._c = conn
        self.touches_snapshot = False

    def _q(self, sql: str, params: Any = ()) -> psycopg.Cursor[Any]:
        return self._c.cursor(row_factory=dict_row).execute(sql, params)

    # -- tasks -------------------------------------------------------------------------------

    def _task_from(self, r: dict[str, Any]) -> TaskRow:
        try:
            return TaskRow(
                **{c: r[c] for c in TASK_COLUMNS if c not in _JSON_TASK_FIELDS},
                required_agents=tuple(_load(r["required_agents"])),
                classification=_load(r["classification"]),
                checkpoint=_load(r["checkpoint"]),
                pending=_load(r["pending"]),
                extra=_load(r["extra"]),
            )
        except (ValueError, TypeError) as exc:
            raise StoreCorrupt(f"task row {r.get('name')!r} does not parse: {exc}") from exc
        except KeyError as exc:
            raise SchemaDamaged(
                f"the store's tasks table lacks a column taskgate reads: {exc}",
                hint="restore the database from a backup; nothing was changed",
            ) from exc

    def task(self, name: str) -> TaskRow | None:
        row = self._q("SELECT * FROM tasks WHERE name = %s", (name,)).fetchone()
        return None if row is None else self._task_from(row)

    def tasks(self) -> list[TaskRow]:
        return [self._task_from(r) for r in self._q("SELECT * FROM tasks ORDER BY name")]

    def task_summaries(self) -> list[TaskSummary]:
        cur = self._c.cursor(row_factory=tuple_row).execute(
            "SELECT name, state, session_id, lock_released_at, risk_level, required_agents, "
            "updated_at FROM tasks ORDER BY name"
        )
        out: list[TaskSummary] = []
        for r in cur:
            try:
                agents = json.loads(r[5])
            except (ValueError, TypeError) as exc:
                raise StoreCorrupt(f"task row {r[0]!r} does not parse: {exc}") from exc
            out.append((r[0], r[1], r[2], r[3], r[4], agents, r[6]))
        return out

    def task_heads(self) -> list[TaskHead]:
        cur = self._c.cursor(row_factory=tuple_row).execute(
            "SELECT name, state, session_id, lock_released_at, pending, extra FROM tasks "
            "ORDER BY name"
        )
        out: list[TaskHead] = []
        for name, state, session, released, pending, extra in cur:
            try:
                extras = {} if extra == "{}" else json.loads(extra)
                out.append(TaskHead(name, state, session, released, _load(pending), extras))
            except (ValueError, TypeError) as exc:
                raise StoreCorrupt(f"task row {name!r} does not parse: {exc}") from exc
        return out

    def insert_task(self, row: TaskRow) -> bool:
        values = [
            _dump(getattr(row, c)) if c in _JSON_TASK_FIELDS else getattr(row, c)
            for c in TASK_COLUMNS
        ]
        values[TASK_COLUMNS.index("required_agents")] = _dump(list(row.required_agents))
        self.touches_snapshot = True
        try:
            cur = self._q(
                f"INSERT INTO tasks ({', '.join(TASK_COLUMNS)}) "
                f"VALUES ({', '.join('%s' for _ in TASK_COLUMNS)}) "
                "ON CONFLICT (name) DO NOTHING RETURNING name",
                values,
            )
        except pgerrors.UniqueViolation as exc:  # the partial index: R-LCK-19
            raise Conflict("session already holds an unreleased task lock") from exc
        return cur.fetchone() is not None

    def update_task(self, name: str, expected_seq: int, **changes: Any) -> TaskRow:
        unknown = set(changes) - set(TASK_COLUMNS)
        if unknown:
            raise ValueError(f"unknown task fields: {sorted(unknown)}")
        columns = [c for c in changes if c not in ("name", "seq")]
        if snapshot.TASK_COLUMNS.intersection(columns):
            self.touches_snapshot = True
        values: list[Any] = []
        for c in columns:
            value = changes[c]
            if c == "required_agents":
                value = _dump(list(value))
            elif c in _JSON_TASK_FIELDS:
                value = _dump(value)
            values.append(value)
        assignments = ", ".join([*(f"{c} = %s" for c in columns), "seq = seq + 1"])
        try:
            row = self._q(
                f"UPDATE tasks SET {assignments} WHERE name = %s AND seq = %s RETURNING *",
                [*values, name, expected_seq],
            ).fetchone()
        except pgerrors.IntegrityError as exc:
            raise Conflict(str(exc).splitlines()[0]) from exc
        if row is None:
            raise Conflict(f"task {name!r} changed concurrently (expected seq {expected_seq})")
        return self._task_from(row)

    def active_task_of(self, session_id: str) -> TaskRow | None:
        row = self._q(
            "SELECT * FROM tasks WHERE session_id = %s AND lock_released_at IS NULL",
            (session_id,),
        ).fetchone()
        return None if row is None else self._task_from(row)

    # -- transition log ----------------------------------------------------------------------

    def transitions(self, name: str) -> list[TransitionRow]:
        rows = self._q("SELECT * FROM transitions WHERE task = %s ORDER BY idx", (name,))
        return [
            TransitionRow(
                r["task"], r["idx"], r["source"], r["target"], r["at"], r["reason"],
                _load(r["evidence"]),
            )
            for r in rows
        ]  # fmt: skip

    def add_transition(self, row: TransitionRow) -> None:
        self._q(
            "INSERT INTO transitions (task, idx, source, target, at, reason, evidence) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (row.task, row.index, row.source, row.target, row.at, row.reason, _dump(row.evidence)),
        )

    # -- agents and verdicts -----------------------------------------------------------------

    def agents(self, name: str) -> list[AgentRow]:
        rows = self._q("SELECT * FROM agents WHERE task = %s ORDER BY ord", (name,))
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
        existing = self._q(
            "SELECT ord FROM agents WHERE task = %s AND agent = %s", (row.task, row.agent)
        ).fetchone()
        if existing is None:
            count = self._q("SELECT COUNT(*) AS n FROM agents WHERE task = %s", (row.task,))
            order = int(count.fetchone()["n"])  # type: ignore[index]
        else:
            order = int(existing["ord"])
        self._q("DELETE FROM agents WHERE task = %s AND agent = %s", (row.task, row.agent))
        self._q(
            "INSERT INTO agents (task, agent, ord, status, phase, updated_at, message, "
            "work_remaining, retry_count, initial, added_at_state, added_at, justification, "
            "invoked_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                row.task, row.agent, order, row.status, row.phase, row.updated_at, row.message,
                int(row.work_remaining), row.retry_count, int(row.initial), row.added_at_state,
                row.added_at, row.justification, row.invoked_at,
            ),
        )  # fmt: skip

    def verdicts(self, name: str) -> list[VerdictRow]:
        rows = self._q("SELECT * FROM verdicts WHERE task = %s ORDER BY round, agent", (name,))
        return [
            VerdictRow(r["task"], r["agent"], r["round"], r["head_sha"], r["decision"],
                       r["reason"], r["at"])
            for r in rows
        ]  # fmt: skip

    def put_verdict(self, row: VerdictRow) -> None:
        self._q(
            "DELETE FROM verdicts WHERE task = %s AND agent = %s AND round = %s",
            (row.task, row.agent, row.round),
        )
        self._q(
            "INSERT INTO verdicts (task, agent, round, head_sha, decision, reason, at) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (row.task, row.agent, row.round, row.head_sha, row.decision, row.reason, row.at),
        )

    # -- checkpoints -------------------------------------------------------------------------

    def presentations(self, name: str) -> list[PresentationRow]:
        rows = self._q("SELECT * FROM presentations WHERE task = %s ORDER BY id", (name,))
        return [
            PresentationRow(r["task"], r["kind"], r["bound_to"], r["at"], r["id"]) for r in rows
        ]

    def add_presentation(self, row: PresentationRow) -> None:
        self._q(
            "INSERT INTO presentations (task, kind, bound_to, at) VALUES (%s, %s, %s, %s)",
            (row.task, row.kind, row.bound_to, row.at),
        )

    def approvals(self, name: str) -> list[ApprovalRow]:
        rows = self._q("SELECT * FROM approvals WHERE task = %s ORDER BY id", (name,))
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
        self._q(
            "INSERT INTO approvals (task, kind, bound_to, presented_at, approved_at, provenance, "
            "message_hash, revoked_at, revoke_reason) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                row.task, row.kind, row.bound_to, row.presented_at, row.approved_at,
                row.provenance, row.message_hash, row.revoked_at, row.revoke_reason,
            ),
        )  # fmt: skip

    def revoke_approvals(self, name: str, kind: str, at: str, reason: str) -> int:
        self.touches_snapshot |= kind == snapshot.APPROVAL_KIND
        cur = self._q(
            "UPDATE approvals SET revoked_at = %s, revoke_reason = %s "
            "WHERE task = %s AND kind = %s AND revoked_at IS NULL",
            (at, reason, name, kind),
        )
        return int(cur.rowcount)

    # -- validations and events --------------------------------------------------------------

    def validations(self, name: str) -> list[ValidationRow]:
        rows = self._q("SELECT * FROM validations WHERE task = %s ORDER BY id", (name,))
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
        self._q(
            "INSERT INTO validations (task, head_sha, command, exit_code, success, at, "
            "output_tail, failure_class, tests) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                row.task, row.head_sha, row.command, row.exit_code, int(row.success), row.at,
                row.output_tail, row.failure_class, _dump(row.tests),
            ),
        )  # fmt: skip

    def events(self, name: str) -> list[EventRow]:
        return self.events_after(name, 0)

    def events_after(self, name: str, seq: int) -> list[EventRow]:
        return self._event_rows(
            f"SELECT {_EVENT_COLUMNS} FROM events WHERE task = %s AND seq > %s ORDER BY seq",
            (name, seq),
        )

    def _event_rows(self, sql: str, params: Any) -> list[EventRow]:
        result = []
        cur = self._c.cursor(row_factory=tuple_row).execute(sql, params)
        for task, at, kind, text, prev_hash, digest, seq in cur:
            try:
                payload = _load(text)
            except ValueError:
                payload = {"_unparseable": text}
            result.append(EventRow(task, at, kind, payload, prev_hash, digest, seq))
        return result

    def event_tail(self, name: str, limit: int) -> tuple[int, list[EventRow]]:
        rows = self._event_rows(
            f"SELECT {_EVENT_COLUMNS} FROM events WHERE task = %s ORDER BY seq DESC LIMIT %s",
            (name, limit),
        )
        rows.reverse()
        if len(rows) < limit:
            return len(rows), rows
        count = self._q(
            "SELECT COUNT(*) AS n FROM events WHERE task = %s AND seq <= %s", (name, rows[-1].seq)
        ).fetchone()
        return int(count["n"]) if count else 0, rows

    def events_before(self, name: str, seq: int, limit: int) -> list[EventRow]:
        rows = self._event_rows(
            f"SELECT {_EVENT_COLUMNS} FROM events WHERE task = %s AND seq < %s "
            "ORDER BY seq DESC LIMIT %s",
            (name, seq, limit),
        )
        rows.reverse()
        return rows

    def events_of_kinds(self, name: str, kinds: Sequence[str], upto: int) -> list[EventRow]:
        return self._event_rows(
            f"SELECT {_EVENT_COLUMNS} FROM events WHERE task = %s AND seq <= %s "
            "AND kind = ANY(%s) ORDER BY seq",
            (name, upto, list(kinds)),
        )

    def count_events_of(self, name: str, kind: str, upto: int) -> int:
        row = self._q(
            "SELECT COUNT(*) AS n FROM events WHERE task = %s AND seq <= %s AND kind = %s",
            (name, upto, kind),
        ).fetchone()
        return int(row["n"]) if row else 0

    def detached(self, query: Callable[[Tx], T]) -> T:
        try:
            return query(self)
        except psycopg.Error as exc:
            raise StoreCorrupt(f"reading a task's events after its step failed: {exc}") from exc

    def append_event(self, name: str, kind: str, payload: JSON, at: str) -> EventRow:
        if kind in snapshot.EVENT_KINDS:
            self.touches_snapshot = True
        last = self._q(
            "SELECT hash FROM events WHERE task = %s ORDER BY seq DESC LIMIT 1", (name,)
        ).fetchone()
        prev = last["hash"] if last else GENESIS_HASH
        digest = event_hash(prev, name, at, kind, payload)
        seq = self._q(
            "INSERT INTO events (task, at, kind, payload, prev_hash, hash) "
            "VALUES (%s, %s, %s, %s, %s, %s) RETURNING seq",
            (name, at, kind, canon.compact(payload), prev, digest),
        ).fetchone()
        return EventRow(name, at, kind, payload, prev, digest, int(seq["seq"]) if seq else 0)
