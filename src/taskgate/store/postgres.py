"""PostgreSQL store: the team store behind the same Store/Tx as SQLite (issue 20).

Selected by `[store] url = "postgresql://..."` in taskgate.toml or TASKGATE_DATABASE_URL
(store/select.py); only that path imports this module, so the embedded path never loads
psycopg.

Writes: one transaction per protocol step, READ COMMITTED, which first takes the store's
writer lock (a transaction-scoped advisory lock) - the same one-writer-at-a-time semantics as
SQLite's BEGIN IMMEDIATE, across every machine that uses the database. Every statement after
the lock sees every commit before it, task updates compare-and-swap on `seq` (and the engine
checks the fence inside the same transaction), the partial unique index keeps one unreleased
lock per session (R-LCK-19), and the events' hash chain is computed exactly as in SQLite
(records.event_hash), so `taskgate audit` verifies either store the same way.

Reads: REPEATABLE READ READ ONLY, one consistent snapshot per read transaction.

The hook snapshot (store/snapshot.py) is per machine: this machine's writes drop and rewrite
`<state dir>/hook-snapshot.json` under the writer lock from the transaction's own data, as the
SQLite store does. A write from another machine does not reach this machine's file yet
(LISTEN/NOTIFY invalidation is not built; docs/teams.md says so).

Credentials come only from the URL's environment variable or libpq's own files (PGPASSFILE,
~/.pgpass, PGSERVICEFILE); every message taskgate prints names the database by `describe()`,
which never contains a password.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import errors as pgerrors
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row, tuple_row

from taskgate import failpoints
from taskgate.errors import EnvironmentFault, Locked, SchemaDamaged
from taskgate.fsutil import atomic_write
from taskgate.store import pg_schema, snapshot
from taskgate.store.base import Conflict, Store, StoreCorrupt, TaskSummary, Tx
from taskgate.store.records import (
    GENESIS_HASH,
    JSON,
    AgentRow,
    ApprovalRow,
    EventRow,
    PresentationRow,
    TaskRow,
    TransitionRow,
    ValidationRow,
    VerdictRow,
    event_hash,
)

_TASK_COLUMNS = tuple(TaskRow.__dataclass_fields__)
_JSON_TASK_FIELDS = {"required_agents", "classification", "checkpoint", "pending", "extra"}
# pg_advisory_xact_lock key of the writer lock: "taskgate" in ASCII.
WRITER_LOCK = 0x7461736B67617465


class StoreUnreachable(EnvironmentFault):
    """PostgreSQL cannot be reached, or the connection broke (exit 6): nothing was changed
    unless the message says the outcome of a commit is unknown."""

    kind = "store-unreachable"


def describe(url: str) -> str:
    """The database as messages name it: host, port, database and user, never a password."""
    try:
        info = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "a PostgreSQL database (the URL does not parse)"
    host = info.get("host") or "the default socket"
    port = f":{info['port']}" if info.get("port") else ""
    user = f" as {info['user']}" if info.get("user") else ""
    return f"PostgreSQL database '{info.get('dbname') or '(default)'}' on {host}{port}{user}"


def unreachable(url: str, exc: BaseException, *, commit: bool = False) -> StoreUnreachable:
    """The StoreUnreachable for `exc`: the database named by describe(), no password."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "password" in first.lower():
        first = "authentication failed"  # libpq's text can quote the connection string
    if commit:
        return StoreUnreachable(
            f"the connection to {describe(url)} broke while committing ({first}); the step "
            "either committed completely or not at all",
            hint="when PostgreSQL is back, run 'taskgate status' to see which, then run the "
            "command again if it did not happen",
        )
    return StoreUnreachable(
        f"cannot reach {describe(url)}: {first}; nothing was changed",
        hint="start PostgreSQL or check TASKGATE_DATABASE_URL / [store] url (credentials come "
        "from the environment, ~/.pgpass or a service file), then run the command again",
    )


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _load(text: str | None) -> Any:
    return None if text is None else json.loads(text)


class _QmarkConnection:
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
                **{c: r[c] for c in _TASK_COLUMNS if c not in _JSON_TASK_FIELDS},
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

    def insert_task(self, row: TaskRow) -> bool:
        values = [
            _dump(getattr(row, c)) if c in _JSON_TASK_FIELDS else getattr(row, c)
            for c in _TASK_COLUMNS
        ]
        values[_TASK_COLUMNS.index("required_agents")] = _dump(list(row.required_agents))
        self.touches_snapshot = True
        try:
            cur = self._q(
                f"INSERT INTO tasks ({', '.join(_TASK_COLUMNS)}) "
                f"VALUES ({', '.join('%s' for _ in _TASK_COLUMNS)}) "
                "ON CONFLICT (name) DO NOTHING RETURNING name",
                values,
            )
        except pgerrors.UniqueViolation as exc:  # the partial index: R-LCK-19
            raise Conflict("session already holds an unreleased task lock") from exc
        return cur.fetchone() is not None

    def update_task(self, name: str, expected_seq: int, **changes: Any) -> TaskRow:
        unknown = set(changes) - set(_TASK_COLUMNS)
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
        rows = self._q("SELECT * FROM events WHERE task = %s ORDER BY seq", (name,))
        result = []
        for r in rows:
            try:
                payload = _load(r["payload"])
            except ValueError:
                payload = {"_unparseable": r["payload"]}
            result.append(
                EventRow(r["task"], r["at"], r["kind"], payload, r["prev_hash"], r["hash"],
                         r["seq"])
            )  # fmt: skip
        return result

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
            (name, at, kind, _dump(payload), prev, digest),
        ).fetchone()
        return EventRow(name, at, kind, payload, prev, digest, int(seq["seq"]) if seq else 0)


class PgStore(Store):
    """The team store: one PostgreSQL database shared by every machine of a repository."""

    def __init__(
        self,
        url: str,
        state_dir: Path,
        *,
        timeout: float = 60.0,
        read_only: bool = False,
        connect_timeout: int = 10,
    ) -> None:
        self.url = url
        self.snapshot_path = state_dir / snapshot.FILE_NAME
        self.timeout = timeout
        self.read_only = read_only
        self.connect_timeout = connect_timeout
        self._conn = self._connect()
        try:
            if not read_only:
                self._migrate()
            self._check_columns()
        except psycopg.OperationalError as exc:
            self._conn.close()
            raise unreachable(url, exc) from None
        except psycopg.Error as exc:
            self._conn.close()
            raise StoreCorrupt(f"cannot open the store {describe(url)}: {exc}") from exc

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            conn = psycopg.connect(
                self.url,
                autocommit=True,
                connect_timeout=self.connect_timeout,
                application_name="taskgate",
            )
            if self.read_only:  # `taskgate audit`: the server itself refuses any write (R-AUD-12)
                conn.execute("SET default_transaction_read_only = on")
        except psycopg.Error as exc:
            raise unreachable(self.url, exc) from None
        return conn

    def _live(self) -> psycopg.Connection[Any]:
        """The connection, opened again when the last one broke (a server restart, a killed
        backend): a long-lived owner carries on once PostgreSQL is back."""
        if self._conn.broken or self._conn.closed:
            with suppress(psycopg.Error):
                self._conn.close()
            self._conn = self._connect()
        return self._conn

    def _check_columns(self) -> None:
        have = {
            r[0]
            for r in self._conn.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND table_name = 'tasks'"
            )
        }
        missing = sorted(set(_TASK_COLUMNS) - have)
        if missing:
            raise SchemaDamaged(
                f"the store's tasks table lacks the column(s) {', '.join(missing)} "
                f"({describe(self.url)})",
                hint="restore the database from a backup, or run 'taskgate migrate'; "
                "nothing was changed",
            )

    def _migrate(self) -> None:
        """Apply the shared migrations once, whichever machine comes first (under the lock)."""
        c = self._conn
        known = pg_schema.migrations()
        try:  # the common case, checked without the writer lock: nothing to apply
            if {r[0] for r in c.execute("SELECT name FROM migrations")} == {n for n, _ in known}:
                return
        except pgerrors.UndefinedTable:
            pass
        c.execute("BEGIN")
        try:
            c.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK,))
            c.execute(
                "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT)"
            )
            applied = {r[0] for r in c.execute("SELECT name FROM migrations")}
            unknown = applied - {name for name, _ in known}
            if unknown:
                raise StoreCorrupt(
                    f"the store was written by a newer taskgate (migrations {sorted(unknown)})"
                )
            for name, sql in known:
                if name in applied:
                    continue
                for statement in pg_schema.statements(sql):
                    c.execute(statement)
                c.execute(
                    "INSERT INTO migrations (name, applied_at) VALUES (%s, %s)",
                    (name, datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")),
                )
            c.execute("COMMIT")
        except BaseException:
            with suppress(psycopg.Error):
                c.execute("ROLLBACK")
            raise

    def schema_version(self) -> int:
        row = self._live().execute("SELECT COUNT(*) FROM migrations").fetchone()
        return int(row[0]) if row else 0

    def _begin_write(self) -> None:
        c = self._live()
        c.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
        c.execute(f"SET LOCAL lock_timeout = {max(1, int(self.timeout * 1000))}")
        try:
            c.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK,))
        except pgerrors.LockNotAvailable:
            c.execute("ROLLBACK")
            raise Locked(
                f"another taskgate command held the store's writer lock on {describe(self.url)} "
                f"for more than {self.timeout:g} s; nothing was changed",
                hint="run the command again; if it keeps happening, look for a stuck taskgate "
                "process (pg_stat_activity, application_name = 'taskgate')",
            ) from None

    @contextmanager
    def read(self) -> Iterator[Tx]:
        try:
            self._live().execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        except psycopg.OperationalError as exc:
            raise unreachable(self.url, exc) from None
        try:
            yield PgTx(self._conn)
        except psycopg.OperationalError as exc:
            self._rollback()
            raise unreachable(self.url, exc) from None
        except psycopg.Error as exc:
            self._rollback()
            raise StoreCorrupt(f"store read failed: {exc}") from exc
        except BaseException:
            self._rollback()
            raise
        else:
            try:
                self._conn.execute("COMMIT")
            except psycopg.OperationalError as exc:
                raise unreachable(self.url, exc) from None

    def _rollback(self) -> None:
        with suppress(psycopg.Error):
            self._conn.execute("ROLLBACK")

    @contextmanager
    def write(self) -> Iterator[Tx]:
        try:
            self._begin_write()
        except psycopg.OperationalError as exc:
            raise unreachable(self.url, exc) from None
        tx = PgTx(self._conn)
        try:
            yield tx
        except psycopg.OperationalError as exc:
            self._rollback()
            raise unreachable(self.url, exc) from None
        except psycopg.Error as exc:
            self._rollback()
            raise StoreCorrupt(f"store write failed: {exc}") from exc
        except BaseException:
            self._rollback()
            raise
        else:
            if tx.touches_snapshot:  # under the writer lock, before the change is visible
                self.snapshot_path.unlink(missing_ok=True)
                failpoints.hit("store.snapshot_dropped")
            try:
                failpoints.hit_os("store.commit")
                self._conn.execute("COMMIT")
            except psycopg.OperationalError as exc:
                raise unreachable(self.url, exc, commit=True) from None
            except (psycopg.Error, OSError):
                self._rollback()
                raise
            if tx.touches_snapshot:
                failpoints.hit("store.committed")
                with suppress(psycopg.Error, OSError, ValueError, TypeError, EnvironmentFault):
                    self.refresh_snapshot(wait_s=0.1)

    def refresh_snapshot(self, *, wait_s: float | None = None) -> str:
        """Rewrite this machine's hook snapshot from the store under the writer lock:
        "unchanged", "written" (missing or different) or "busy"."""
        if self.read_only:
            raise StoreCorrupt("a read-only store cannot refresh the hook snapshot")
        c = self._live()
        try:
            c.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
        except psycopg.OperationalError as exc:
            raise unreachable(self.url, exc) from None
        try:
            wait_ms = max(1, int((self.timeout if wait_s is None else wait_s) * 1000))
            c.execute(f"SET LOCAL lock_timeout = {wait_ms}")
            try:
                c.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK,))
            except pgerrors.LockNotAvailable:
                return "busy"
            text = json.dumps(snapshot.collect(_QmarkConnection(c), json.loads), sort_keys=True)
            text += "\n"
            try:
                current: str | None = self.snapshot_path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                current = None
            if current == text:
                return "unchanged"
            atomic_write(self.snapshot_path, text, durable=False)
            # Never "replaced": another machine's commit cannot drop this machine's file, so a
            # difference is expected here, not evidence of a change outside taskgate.
            return "written"
        finally:
            self._rollback()

    def close(self) -> None:
        with suppress(psycopg.Error):
            self._conn.close()


def read_hook_snapshot(url: str, *, connect_timeout: int = 5) -> dict[str, Any]:
    """store/snapshot.py's data straight from the server (the hook of a PostgreSQL
    workspace); StoreUnreachable when it cannot be read (the hook then denies: fail closed)."""
    try:
        with psycopg.connect(
            url, autocommit=True, connect_timeout=connect_timeout, application_name="taskgate-hook"
        ) as conn:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            return snapshot.collect(_QmarkConnection(conn), json.loads)
    except psycopg.Error as exc:
        raise unreachable(url, exc) from None
