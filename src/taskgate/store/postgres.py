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
SQLite store does, with the snapshot clock it was read at beside it (CLOCK_FILE). Every such
write advances the clock (pg_schema.CLOCK_TABLE) and NOTIFYs it, so another machine's file or
`taskgate serve`'s memory (store/pg_warm.py) is trusted only at the server's current clock.

Credentials come only from the URL's environment variable or libpq's own files (PGPASSFILE,
~/.pgpass, PGSERVICEFILE); every message taskgate prints names the database by `describe()`,
which never contains a password.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import errors as pgerrors

from taskgate import failpoints
from taskgate.errors import EnvironmentFault, Locked, SchemaDamaged
from taskgate.fsutil import atomic_write
from taskgate.store import pg_hook, pg_schema, pg_wait, select, snapshot
from taskgate.store.base import Store, StoreCorrupt, Tx
from taskgate.store.pg_fault import StoreUnreachable as StoreUnreachable
from taskgate.store.pg_fault import describe as describe
from taskgate.store.pg_fault import unreachable as unreachable
from taskgate.store.pg_tx import TASK_COLUMNS, PgTx, QmarkConnection
from taskgate.store.records import TaskSnapshot

# Beside this machine's hook snapshot: the snapshot clock (pg_schema.CLOCK_TABLE) it was read
# at. The hook trusts the file only while the server's clock still says that (pg_hook.py).
CLOCK_FILE = select.CLOCK_FILE

# pg_advisory_xact_lock key of the writer lock: "taskgate" in ASCII.
WRITER_LOCK = 0x7461736B67617465
# libpq's connect_timeout for one attempt of a hook (PreToolUse's reads use the same).
HOOK_CONNECT_TIMEOUT = 5


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
        self.clock_path = state_dir / CLOCK_FILE
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
        except BaseException:  # Locked: the migrations' writer lock stayed held
            self._conn.close()
            raise

    def _connect(self) -> psycopg.Connection[Any]:
        # A hook's attempt that gets no answer gives up sooner: its budget (at most 20 s) plus
        # this stays under the 30 s after which Claude Code cancels it.
        per_try = self.connect_timeout
        if pg_wait.in_hook():
            per_try = min(per_try, HOOK_CONNECT_TIMEOUT)
        try:  # a full or restarting server is waited for (store/pg_wait.py)
            conn = pg_wait.connect(
                lambda: psycopg.connect(
                    self.url,
                    autocommit=True,
                    connect_timeout=per_try,
                    application_name="taskgate",
                ),
                (psycopg.OperationalError,),
                where=lambda: describe(self.url),
                wait_s=pg_wait.bound(self.timeout),
                diagnose=lambda: pg_hook.refusal_state(self.url, per_try),
            )
            if self.read_only:  # `taskgate audit`: the server itself refuses any write (R-AUD-12)
                conn.execute("SET default_transaction_read_only = on")
        except psycopg.Error as exc:
            raise unreachable(self.url, exc) from None
        return conn

    def _live(self) -> psycopg.Connection[Any]:
        """The connection, opened again when the last one broke (a server restart, a killed
        backend): a long-lived owner carries on once PostgreSQL is back. A server still
        starting up (57P03) is waited for like a first connection's (store/pg_wait.py)."""
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
        missing = sorted(set(TASK_COLUMNS) - have)
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
            names = {r[0] for r in c.execute("SELECT name FROM migrations")}
            if names == {n for n, _ in known} and self._has_clock():
                return
        except pgerrors.UndefinedTable:
            pass
        c.execute("BEGIN")
        try:
            wait = self._lock_wait()
            if not self._writer_lock(wait):
                raise self._locked(wait)
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
            for statement in pg_schema.CLOCK_DDL:
                c.execute(statement)
            c.execute("COMMIT")
        except BaseException:
            with suppress(psycopg.Error):
                c.execute("ROLLBACK")
            raise

    def _has_clock(self) -> bool:
        row = self._conn.execute("SELECT to_regclass(%s) IS NOT NULL", (pg_schema.CLOCK_TABLE,))
        found = row.fetchone()
        return bool(found and found[0])

    def migration_names(self) -> list[str]:
        """The applied migrations' names, in order (`taskgate migrate`)."""
        return [
            str(r[0]) for r in self._live().execute("SELECT name FROM migrations ORDER BY name")
        ]

    def import_tables(
        self,
        tables: Sequence[tuple[str, list[str], list[tuple[Any, ...]]]],
        identity: Mapping[str, str],
        *,
        expect: Mapping[str, TaskSnapshot | None],
    ) -> dict[str, int]:
        """Copy whole tables into this empty store in one write transaction (`taskgate migrate
        --from-sqlite`); every task's snapshot must equal `expect` before the commit."""
        from taskgate.store.migrate import refuse_not_empty

        with self.write() as tx:
            assert isinstance(tx, PgTx)
            c = self._conn
            counts = c.execute("SELECT (SELECT COUNT(*) FROM tasks), (SELECT COUNT(*) FROM events)")
            tasks, events = counts.fetchone() or (0, 0)
            if tasks or events:
                raise refuse_not_empty(describe(self.url), int(tasks), int(events))
            copied = {}
            for table, columns, rows in tables:
                names = ", ".join(columns)
                marks = ", ".join(["%s"] * len(columns))
                with c.cursor() as cur:
                    cur.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks})", rows)
                copied[table] = len(rows)
            for table, column in identity.items():  # new rows continue after the copied ids
                c.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'), "
                    f"COALESCE((SELECT MAX({column}) FROM {table}), 0) + 1, false)"
                )
            for name, snap in expect.items():
                if tx.snapshot(name) != snap:
                    raise StoreCorrupt(f"task '{name}' differs after the copy; nothing was copied")
            tx.touches_snapshot = True  # this machine's hook snapshot is rebuilt after the commit
        return copied

    def schema_version(self) -> int:
        row = self._live().execute("SELECT COUNT(*) FROM migrations").fetchone()
        return int(row[0]) if row else 0

    def _begin_write(self) -> None:
        c = self._live()
        c.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
        wait = self._lock_wait()
        if not self._writer_lock(wait):
            c.execute("ROLLBACK")
            raise self._locked(wait)

    def _lock_wait(self, wanted: float | None = None) -> float:
        """Seconds to wait for the writer lock: `wanted`, by default the store's timeout
        (TASKGATE_LOCK_TIMEOUT for commands); a hook waits no longer than what is left of its
        budget (store/pg_wait.py hook_left): Claude Code cancels a command hook after 30 s,
        and the event it was recording would be lost without a word."""
        wait = self.timeout if wanted is None else wanted
        return min(wait, pg_wait.hook_left()) if pg_wait.in_hook() else wait

    def _writer_lock(self, wait_s: float) -> bool:
        """Inside a transaction: take the writer lock, waiting at most `wait_s` seconds for
        another holder (False when that passed: the transaction is aborted, roll it back).
        A hook's wait counts against its budget."""
        c = self._conn
        c.execute(f"SET LOCAL lock_timeout = {max(1, int(wait_s * 1000))}")  # 0 is no limit
        hook = pg_wait.in_hook()
        began = time.monotonic() if hook else 0.0
        try:
            c.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK,))
        except pgerrors.LockNotAvailable:
            return False
        finally:
            if hook:
                pg_wait.spent(time.monotonic() - began)
        return True

    def _locked(self, wait_s: float) -> Locked:
        """The error when the writer lock stayed held for `wait_s` seconds; a hook also says
        so on stderr at once (its caller reports only the message: hooks/dispatch.py)."""
        if not pg_wait.in_hook():
            return Locked(
                f"another taskgate command held the store's writer lock on {describe(self.url)} "
                f"for more than {wait_s:g} s; nothing was changed",
                hint="run the command again; if it keeps happening, look for a stuck taskgate "
                "process (pg_stat_activity, application_name = 'taskgate')",
            )
        bound = pg_wait.hook_bound()
        error = Locked(
            f"another taskgate command held the store's writer lock on {describe(self.url)} "
            f"for more than {wait_s:.1f} s, all this hook could still wait ({pg_wait.HOOK_ENV}"
            f" = {bound:g} s for a hook's waits together); this hook event was not recorded, "
            "nothing was changed",
            hint="if it keeps happening, look for a stuck taskgate process (pg_stat_activity, "
            f"application_name = 'taskgate'); to wait longer raise {pg_wait.HOOK_ENV} (at "
            f"most {pg_wait.HOOK_MAX_S:g} s: Claude Code cancels a command hook after 30 s)",
        )
        pg_wait.say(f"taskgate: gave up waiting for the writer lock: {error.message}")
        pg_wait.say(f"hint: {error.hint}")
        return error

    @contextmanager
    def read(self) -> Iterator[Tx]:
        try:
            self._live().execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
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
            raise StoreCorrupt(f"store read failed: {exc}") from exc
        except BaseException:
            self._rollback()
            raise
        else:
            try:
                self._conn.execute("COMMIT")
            except psycopg.OperationalError as exc:
                raise unreachable(self.url, exc) from None
        finally:
            tx.closed = True  # its snapshots' EventLogs read through tx.detached now

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
                self.clock_path.unlink(missing_ok=True)
                self.snapshot_path.unlink(missing_ok=True)
                failpoints.hit("store.snapshot_dropped")
                self._advance_clock()
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
        finally:
            tx.closed = True

    def _advance_clock(self) -> None:
        """Inside the write transaction: the snapshot clock moves on, and every machine's
        `taskgate serve` listening on the channel hears the new value when this commits."""
        try:
            row = self._conn.execute(pg_schema.CLOCK_ADVANCE).fetchone()
            if row is not None:
                self._conn.execute("SELECT pg_notify(%s, %s)", (pg_schema.CHANNEL, str(row[0])))
        except psycopg.OperationalError as exc:
            self._rollback()
            raise unreachable(self.url, exc) from None
        except psycopg.Error as exc:
            self._rollback()
            raise StoreCorrupt(f"store write failed: {exc}") from exc

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
            if not self._writer_lock(self._lock_wait(wait_s)):
                return "busy"
            text = snapshot.render(pg_hook.collect(QmarkConnection(c), json.loads))
            row = c.execute(pg_schema.CLOCK_READ).fetchone()
            clock = f"{row[0]}\n" if row else ""
            try:
                current: str | None = self.snapshot_path.read_text(encoding="utf-8")
                seen: str | None = self.clock_path.read_text(encoding="ascii")
            except (OSError, UnicodeDecodeError):
                current = seen = None
            if current == text and seen == clock:
                return "unchanged"
            # The clock file goes first and comes back last: a hook that reads it before the
            # snapshot never pairs a clock with an older file than the one it was read with.
            self.clock_path.unlink(missing_ok=True)
            atomic_write(self.snapshot_path, text, durable=False)
            if clock:
                atomic_write(self.clock_path, clock, durable=False)
            if current == text:
                return "unchanged"
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
        conn = pg_wait.connect(
            lambda: psycopg.connect(
                url, autocommit=True, connect_timeout=connect_timeout,
                application_name="taskgate-hook",
            ),
            (psycopg.OperationalError,),
            where=lambda: describe(url),
            wait_s=pg_wait.hook_left(),
            diagnose=lambda: pg_hook.refusal_state(url, connect_timeout),
        )  # fmt: skip
        with conn:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            return pg_hook.collect(QmarkConnection(conn), json.loads)
    except psycopg.Error as exc:
        raise unreachable(url, exc) from None
