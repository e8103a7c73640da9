"""`taskgate migrate` (issue 20): the store's schema version, pending migrations applied, and an
embedded SQLite store copied into a team's PostgreSQL database.

Both stores apply the same named migrations (store/schema.py; PostgreSQL's dialect in
store/pg_schema.py) when a command opens them; `migrate` says which are applied and applies
the rest on purpose. The copy keeps every row as it is (ids, seqs, event hashes), so the audit
chain and the views rendered on this machine stay valid; it runs in one transaction under
the writer lock into an empty database and compares every task's snapshot on both sides
before it commits.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from taskgate.errors import Refused, UsageError
from taskgate.store.base import Store, StoreCorrupt
from taskgate.store.schema import MIGRATIONS

TABLES = ("tasks", "transitions", "agents", "verdicts", "presentations", "approvals",
          "validations", "events")  # fmt: skip
# SQLite's rowid keys, identity columns in PostgreSQL: their sequences continue after a copy.
if TYPE_CHECKING:
    from taskgate.engine.workspace import Workspace

IDENTITY = {"presentations": "id", "approvals": "id", "validations": "id", "events": "seq"}


@dataclass
class Report:
    """What `migrate` found and did."""

    store: str  # "sqlite" | "postgresql"
    where: str
    applied_before: list[str]
    applied_now: list[str] = field(default_factory=list)
    copied: dict[str, int] = field(default_factory=dict)

    @property
    def version(self) -> int:
        return len(self.applied_before) + len(self.applied_now)

    def to_json(self) -> dict[str, Any]:
        """The `--json` shape."""
        return {
            "store": self.store, "where": self.where, "version": self.version,
            "latest": len(MIGRATIONS), "applied_before": self.applied_before,
            "applied_now": self.applied_now, "copied": self.copied,
        }  # fmt: skip


def sqlite_applied(path: Path) -> list[str]:
    """Migration names recorded in an SQLite store, read without changing it."""
    if not path.exists():
        return []
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [r[0] for r in conn.execute("SELECT name FROM migrations ORDER BY name")]
    except sqlite3.OperationalError:
        return []  # no migrations table yet
    finally:
        conn.close()


def _rows(conn: sqlite3.Connection, table: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    cur = conn.execute(f"SELECT * FROM {table}")  # table names are constants
    columns = [d[0] for d in cur.description]
    return columns, [tuple(r) for r in cur.fetchall()]


def copy_sqlite(source: Path, target: Any) -> dict[str, int]:
    """Copy every row of the SQLite store at `source` into the empty PgStore `target`."""
    from taskgate.store.sqlite import SqliteStore

    if not source.is_file():
        raise UsageError(
            f"no embedded store at {source}",
            hint="name it: taskgate migrate --from-sqlite PATH/.taskgate/state.db",
        )
    lite = SqliteStore(source)  # applies the embedded store's own pending migrations
    try:
        if sqlite_applied(source) != target.migration_names():
            raise StoreCorrupt(f"{source} and the database are at different schema versions")
        with lite.read() as tx:
            names = [t.name for t in tx.tasks()]
            before = {n: tx.snapshot(n) for n in names}
        conn = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
        try:
            tables = [(t, *_rows(conn, t)) for t in TABLES]
        finally:
            conn.close()
    finally:
        lite.close()
    return target.import_tables(tables, IDENTITY, expect=before)  # type: ignore[no-any-return]


def refuse_not_empty(where: str, tasks: int, events: int) -> Refused:
    """The error for a copy into a database that already holds a store."""
    return Refused(
        f"the database {where} already holds {tasks} task(s) and {events} event(s); the copy "
        "goes into an empty database only (nothing was changed)",
        hint="create a new database for this repository (createdb ...), point "
        "TASKGATE_DATABASE_URL at it, and run the copy again",
    )


def pg_applied(url: str) -> list[str]:
    """Migration names recorded in a PostgreSQL store, read without changing it."""
    import psycopg
    from psycopg import errors as pgerrors

    from taskgate.store import pg_hook, pg_wait
    from taskgate.store.postgres import describe, unreachable

    try:
        conn = pg_wait.connect(  # a full or restarting server: waited for, as PgStore does
            lambda: psycopg.connect(url, connect_timeout=10, application_name="taskgate"),
            (psycopg.OperationalError,),
            where=lambda: describe(url),
            wait_s=pg_wait.bound(pg_wait.lock_timeout()),
            diagnose=lambda: pg_hook.refusal_state(url, 10),  # a refusal in another language
        )
        with conn:
            try:
                rows = conn.execute("SELECT name FROM migrations ORDER BY name").fetchall()
            except pgerrors.UndefinedTable:
                return []
    except psycopg.OperationalError as exc:
        raise unreachable(url, exc) from None
    return [str(r[0]) for r in rows]


def migrate(ws: Workspace, open_store: Callable[[], Store], from_sqlite: Path | None) -> Report:
    """Report the schema version, apply pending migrations, optionally copy an embedded store."""
    from taskgate.store.select import database_url

    url = database_url(ws.config.text, str(ws.config.path or "taskgate.toml"))
    if url is None:
        if from_sqlite is not None:
            raise UsageError(
                "--from-sqlite copies into a team's PostgreSQL database, and this workspace "
                "uses the embedded store",
                hint="set TASKGATE_DATABASE_URL (or [store] url in taskgate.toml) to the new "
                "database first, then run 'taskgate migrate --from-sqlite' again",
            )
        before = sqlite_applied(ws.db_path)
        open_store()
        after = sqlite_applied(ws.db_path)
        return Report("sqlite", str(ws.db_path), before, [n for n in after if n not in before])
    from taskgate.store.postgres import PgStore, describe

    before = pg_applied(url)
    store = open_store()
    assert isinstance(store, PgStore)
    after = store.migration_names()
    report = Report("postgresql", describe(url), before, [n for n in after if n not in before])
    if from_sqlite is not None:
        report.copied = copy_sqlite(from_sqlite, store)
    return report
