"""SQLite store: WAL, one IMMEDIATE transaction per protocol step, named migrations.

The SQL stays portable (no SQLite-only functions in queries) so that a PostgreSQL store can
implement the same Tx with the same statements and `%s` placeholders.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from taskgate import failpoints
from taskgate.dataclass_lite import field_names
from taskgate.errors import SchemaDamaged, from_sqlite_error
from taskgate.fsutil import atomic_write
from taskgate.store import canon, snapshot, snapshot_clock
from taskgate.store.base import Conflict, Store, StoreCorrupt, TaskSummary, Tx
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
from taskgate.store.schema import MIGRATIONS

TYPE_CHECKING = False  # typing stays unimported on the command path (issue 18)
if TYPE_CHECKING:
    import sqlite3
    from typing import Any
else:  # the C module sqlite3 re-exports: its dbapi2 wrapper imports datetime (1 ms, issue 18)
    import _sqlite3 as sqlite3

_TASK_COLUMNS = field_names(TaskRow)
_JSON_TASK_FIELDS = {"required_agents", "classification", "checkpoint", "pending", "extra"}


def _raise_fault(exc: sqlite3.DatabaseError, path: Path) -> None:
    """Disk full, read-only, locked, damaged schema: raise its own error, not "corrupt"."""
    fault = from_sqlite_error(exc, path)
    if fault is not None:
        raise fault from exc


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


_scan = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _load(text: str | None) -> Any:
    """json.loads(text), or None for NULL. A column taskgate wrote holds one JSON value with no
    whitespace around it: the C scanner decodes that without json.loads' per-call overhead
    (3x faster; issue 18: a task's 2,000 events are decoded on every step); anything else
    goes to json.loads, which decodes it or raises as before."""
    if text is None:
        return None
    try:
        value, end = _scan(text, 0)
    except (StopIteration, TypeError):
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


# After a write that changed the hook snapshot's rows: the file it found and whether
# hook-snapshot.gen vouched for it, the snapshot clock at its start and at its commit, and
# the tasks it changed (snapshot.patched).
_Patch = tuple[tuple[bytes | None, bool], tuple[int | None, int | None], frozenset[str]]


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


class SqliteTx(Tx):
    """A transaction on one SQLite connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._c = conn
        # Set by every write to what store/snapshot.py holds: the hook snapshot must go.
        self.touches_snapshot = False
        self.snapshot_tasks: set[str] = set()  # whose lines it changed (snapshot.patched)

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
                agents = json.loads(r[5])
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
                extras = {} if extra == "{}" else json.loads(extra)  # most rows: nothing extra
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
        rows = self._c.execute(
            "SELECT task, at, kind, payload, prev_hash, hash, seq FROM events "
            "WHERE task = ? AND seq > ? ORDER BY seq",
            (name, seq),
        )
        result = []
        # Positional, not by name: 7 lookups by name per event were most of reading 2,000.
        for task, at, kind, text, prev_hash, digest, event_seq in rows:
            try:
                payload = _load(text)
            except ValueError:
                payload = {"_unparseable": text}
            result.append(EventRow(task, at, kind, payload, prev_hash, digest, event_seq))
        return result

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


class SqliteStore(Store):
    """The embedded default store at `<state dir>/state.db`."""

    def __init__(self, path: Path, *, timeout: float = 60.0, read_only: bool = False) -> None:
        self.path = path
        self.snapshot_path = path.with_name(snapshot.FILE_NAME)
        self.timeout = timeout
        self.read_only = read_only
        try:
            if read_only:  # `taskgate audit`: SQLite itself refuses any write (R-AUD-12)
                self._conn = sqlite3.connect(
                    f"{path.resolve().as_uri()}?mode=ro",
                    uri=True,
                    timeout=timeout,
                    isolation_level=None,
                    check_same_thread=False,
                )
                self._conn.row_factory = sqlite3.Row
                self._conn.execute("PRAGMA query_only=ON")
                self._conn.execute("SELECT COUNT(*) FROM migrations").fetchone()
                self._check_columns()
                return
            self._conn = sqlite3.connect(
                path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
            self._conn.row_factory = sqlite3.Row
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=FULL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._migrate()
            self._check_columns()
        except sqlite3.DatabaseError as exc:
            _raise_fault(exc, path)
            raise StoreCorrupt(f"cannot open the store {path}: {exc}") from exc

    def _check_columns(self) -> None:
        """integrity_check accepts a renamed or dropped column; taskgate does not (exit 5)."""
        have = {r[1] for r in self._conn.execute("PRAGMA table_info(tasks)")}
        missing = sorted(set(_TASK_COLUMNS) - have)
        if missing:
            raise SchemaDamaged(
                f"the store's tasks table lacks the column(s) {', '.join(missing)} "
                f"(renamed or dropped outside taskgate; it has {', '.join(sorted(have))})",
                hint="restore .taskgate/state.db from a backup, or rename the column back "
                "with the sqlite3 shell; nothing was changed",
            )

    def _migrate(self) -> None:
        c = self._conn
        c.execute("BEGIN IMMEDIATE")
        try:
            c.execute(
                "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT)"
            )
            applied = {r[0] for r in c.execute("SELECT name FROM migrations")}
            unknown = applied - {name for name, _ in MIGRATIONS}
            if unknown:
                raise StoreCorrupt(
                    f"the store was written by a newer taskgate (migrations {sorted(unknown)})"
                )
            for name, sql in MIGRATIONS:
                if name in applied:
                    continue
                for statement in sql.split(";"):
                    if statement.strip():
                        c.execute(statement)
                c.execute(
                    "INSERT INTO migrations (name, applied_at) VALUES (?, ?)",
                    (name, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())),
                )
            snapshot_clock.install(c)  # the hooks' snapshot check (issue 18): bookkeeping
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise

    def schema_version(self) -> int:
        return int(self._conn.execute("SELECT COUNT(*) FROM migrations").fetchone()[0])

    @contextmanager
    def read(self) -> Iterator[Tx]:
        self._conn.execute("BEGIN")
        try:
            yield SqliteTx(self._conn)
        except sqlite3.DatabaseError as exc:
            self._conn.execute("ROLLBACK")
            _raise_fault(exc, self.path)
            raise StoreCorrupt(f"store read failed: {exc}") from exc
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        else:
            self._conn.execute("COMMIT")

    @contextmanager
    def write(self) -> Iterator[Tx]:
        self._conn.execute("BEGIN IMMEDIATE")
        start = snapshot.generation(self._conn)  # the hook snapshot's clock (snapshot.patched)
        tx = SqliteTx(self._conn)
        try:
            yield tx
        except sqlite3.DatabaseError as exc:
            with suppress(sqlite3.Error):  # a full disk can fail the rollback too
                self._conn.execute("ROLLBACK")
            _raise_fault(exc, self.path)
            raise StoreCorrupt(f"store write failed: {exc}") from exc
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        else:
            end = snapshot.generation(self._conn)
            previous: tuple[bytes | None, bool] = (None, False)
            if tx.touches_snapshot:  # under the write lock, before the change is visible
                # The file as this step found it: rewritten below from it, changing only
                # the lines of the tasks this transaction touched (snapshot.patched).
                data, key = snapshot.read_file(str(self.snapshot_path))
                previous = (data, start is not None and self._vouched(start, key))
                self.snapshot_path.unlink(missing_ok=True)
                failpoints.hit("store.snapshot_dropped")
            elif start is not None and end != start:
                # The clock moved for a change the file does not hold (a `changes` approval):
                # the file it vouched for still equals the store, at the new clock.
                with suppress(OSError):
                    if self._vouched(start, snapshot.file_key(self.snapshot_path.stat())):
                        self._vouch(end)
            try:
                failpoints.hit_os("store.commit")  # tests: ENOSPC at the commit
                self._conn.execute("COMMIT")
            except (sqlite3.DatabaseError, OSError) as exc:
                with suppress(sqlite3.Error):
                    self._conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.DatabaseError):
                    _raise_fault(exc, self.path)
                raise
            if tx.touches_snapshot:
                failpoints.hit("store.committed")
                patch = (previous, (start, end), frozenset(tx.snapshot_tasks))
                if self.hold_snapshot:
                    self._hold(patch)
                    self._snapshot_held = True  # rewritten by refresh_held
                    return
                # Committed all the same if this fails: without the file the hook reads the store.
                with suppress(sqlite3.Error, OSError, ValueError, TypeError):
                    self.refresh_snapshot(wait_s=0.1, patch=patch)
            elif self._snapshot_held and self._held_patch is not None and end != start:
                self._hold((self._held_patch[0], (start, end), frozenset()))

    _snapshot_held = False
    # The splice the held writes add up to (Store.hold_snapshot): the file the first one found,
    # the clock from its start to the last one's commit, every task they changed.
    _held_patch: _Patch | None = None

    def refresh_held(self) -> None:
        if self._snapshot_held:
            self._snapshot_held = False
            patch, self._held_patch = self._held_patch, None
            with suppress(sqlite3.Error, OSError, ValueError, TypeError):
                self.refresh_snapshot(wait_s=0.1, patch=patch)

    def _hold(self, patch: _Patch) -> None:
        """Add a held write's splice to the ones before it: valid while each write starts at
        the clock the one before it committed (no other writer changed the snapshot's rows)."""
        held = self._held_patch
        if held is None or not self._snapshot_held:
            self._held_patch = patch
        elif patch[1][0] is not None and patch[1][0] == held[1][1]:
            self._held_patch = (held[0], (held[1][0], patch[1][1]), held[2] | patch[2])
        else:
            self._held_patch = ((None, False), (None, None), frozenset())

    def refresh_snapshot(
        self,
        *,
        wait_s: float | None = None,
        patch: _Patch | None = None,
    ) -> str:
        """Rewrite the hook snapshot from the store under the write lock (store/snapshot.py).

        `patch` (after a write: the file it found, the snapshot clock at its start and at its
        commit, the tasks it changed) rewrites only those tasks' lines when the file can be
        trusted for it (snapshot.patched).

        Returns "unchanged", "written" (there was none), "replaced" (it differed from the
        store: changed outside taskgate) or "busy" (another writer held the lock for longer
        than `wait_s`; that writer, the next write or the next hook event rewrites it).
        """
        if self.read_only:
            raise StoreCorrupt("a read-only store cannot refresh the hook snapshot")
        c = self._conn
        if wait_s is not None:
            c.execute(f"PRAGMA busy_timeout = {int(wait_s * 1000)}")
        try:
            c.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:
            return "busy"
        finally:
            if wait_s is not None:
                c.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
        try:
            spliced, gen = None, snapshot.generation(c)
            if patch is not None:  # the step's tasks only (issue 18)
                previous, clocks, names = patch
                spliced = snapshot.patched(previous, clocks, c, set(names), json.loads)
            top = snapshot.last_seq(c)
            state_dir = str(self.snapshot_path.parent)
            if snapshot.ahead(snapshot.seen(state_dir, (snapshot.SEQ_FILE,)), top):
                snapshot.set_aside(state_dir)  # issue 16: lost steps; evidence, never trusted
                return "ahead"
            # Not fsynced: after a power loss an empty or missing file sends the hook to the
            # store, and an old one is caught by the next PostToolUse or SessionStart.
            seq_path = self.snapshot_path.with_name(snapshot.SEQ_FILE)
            if spliced is not None:  # the file this write dropped, its own tasks updated
                atomic_write(seq_path, f"{top}\n", durable=False)
                atomic_write(self.snapshot_path, spliced, durable=False)
                self._vouch(gen)
                return "written"
            try:  # SQLite builds the task lines: about 8 ms at 10,000 tasks (issue 18)
                text = snapshot.file_text(c, json.loads)
            except ValueError:  # a row that would break a line: render says which
                text = snapshot.render(snapshot.collect(c, json.loads))
            try:
                current: str | None = self.snapshot_path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                current = None
            if current == text:
                self._vouch(gen)
                return "unchanged"
            atomic_write(seq_path, f"{top}\n", durable=False)
            atomic_write(self.snapshot_path, text, durable=False)
            self._vouch(gen)
            return "written" if current is None else "replaced"
        finally:
            c.execute("ROLLBACK")

    def _vouched(self, clock: int, key: str) -> bool:
        """hook-snapshot.gen names the file with this key at this clock."""
        return snapshot.read_generation(str(self.snapshot_path.parent)) == (clock, key)

    def _vouch(self, gen: int | None) -> None:
        """hook-snapshot.gen for the file just written or found equal, at clock `gen`
        (after the file: a crash between leaves one that names another file)."""
        text = None if gen is None else snapshot.generation_text(gen, str(self.snapshot_path))
        path = self.snapshot_path.with_name(snapshot.GEN_FILE)
        if text is None:
            path.unlink(missing_ok=True)
        elif _read_bytes(path) != text.encode("ascii"):
            atomic_write(path, text, durable=False)

    def close(self) -> None:
        self._conn.close()
