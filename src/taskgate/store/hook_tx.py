"""The store's write transaction for the hook process, without the engine (issue 18).

A PostToolUse after an Edit appends `tool_usage` events to the task's hash chain; through the
engine that costs about 50 ms of imports (dataclasses, the views, git, argparse's world)
before the first query. This module does the same write with the C modules alone
(`_sqlite3`, `_json` through hooks/jsonio.py, the chain through store/canon.py), and with the
same guarantees as `SqliteStore.write`:

- one `BEGIN IMMEDIATE` transaction on a connection configured like the store's
  (`synchronous=FULL`, foreign keys on, the store's lock timeout), committed or rolled back;
- every event chained and hashed by `canon.event_hash` (the function `taskgate audit`
  verifies with), its payload stored as `canon.compact` text, like `SqliteTx.append_event`;
- the task row moved by compare-and-swap on `seq` (`SqliteTx.update_task`), so the views'
  `_seq` marks them stale and the next reader re-renders them (engine/views.py);
- the hook snapshot (store/snapshot.py) checked against the store under the same lock; this
  module refuses the writes that would change what the snapshot holds (`Unusable`), so it
  never drops or writes the file.

Anything unusual (a store that needs a migration, another journal mode, a snapshot that
differs from the store, views ahead of the store) raises `Unusable`: the caller then takes
the engine's path, which handles and reports it. PostgreSQL stores always take that path.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


# Connections a hook process leaves open on purpose (launch.py ends it with os._exit): closing
# the last connection to a WAL database checkpoints it (copies the log into the database and
# fsyncs it: as long as the commit itself on this disk). Everything is durable at COMMIT;
# the next connection rebuilds its index from the log, the automatic checkpoint (1,000
# pages) of a later commit or any other closing process moves it into the database.
# Only the command hook's process (hooks/launch.py, which sets HOOK_PROCESS in its module)
# lingers; the server's calls close as usual.
_KEPT: list[object] = []


def _linger() -> bool:
    import sys

    return getattr(sys.modules.get("__main__"), "HOOK_PROCESS", False) is True


class Unusable(Exception):
    """This write needs the engine (the message says why; nothing was written)."""


def lock_timeout() -> float:
    """How long a writer waits for the store's lock (engine/core.py reads the same variable)."""
    try:
        return float(os.environ.get("TASKGATE_LOCK_TIMEOUT", "60"))
    except ValueError:
        return 60.0


def now() -> str:
    """The engine clock's `YYYY-MM-DDTHH:MM:SSZ` (TASKGATE_FAKE_NOW pins it, engine/clock.py)."""
    if os.environ.get("TASKGATE_FAKE_NOW"):
        from taskgate.engine.clock import iso, system_clock  # tests only: datetime is fine

        return iso(system_clock())
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class HookTx:
    """One write transaction on `<state_dir>/state.db`: `with HookTx(d) as tx: ...;
    tx.commit()`; leaving the block without commit() rolls back."""

    def __init__(self, state_dir: str, *, timeout: float | None = None) -> None:
        from taskgate.hooks.jsonio import loads
        from taskgate.store.schema import MIGRATIONS

        try:  # the C module alone: sqlite3's dbapi2 wrapper imports datetime
            import _sqlite3 as sqlite3
        except ImportError:  # pragma: no cover - other interpreters
            import sqlite3  # type: ignore[no-redef]

        self.state_dir = state_dir
        self.loads = loads
        self._error = sqlite3.Error
        db = os.path.join(state_dir, "state.db")
        if not os.path.isfile(db):
            raise Unusable(f"no store at {db}")
        try:
            wait = lock_timeout() if timeout is None else timeout
            conn = sqlite3.connect(db, timeout=wait, isolation_level=None)
        except sqlite3.Error as exc:
            raise Unusable(f"the store does not open: {exc}") from None
        self._c = conn
        self._committed = False
        try:
            if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                raise Unusable("the store is not in WAL mode")
            applied = {str(r[0]) for r in conn.execute("SELECT name FROM migrations")}
            if applied != {name for name, _ in MIGRATIONS}:
                raise Unusable("the store's schema is not the one this taskgate writes")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
        except sqlite3.Error as exc:
            conn.close()
            raise Unusable(f"the store cannot be read: {exc}") from None
        except Unusable:
            conn.close()
            raise

    def __enter__(self) -> HookTx:
        try:
            self._c.execute("BEGIN IMMEDIATE")
        except self._error as exc:
            self._c.close()
            raise Unusable(f"the store's write lock: {exc}") from None
        return self

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        try:
            if not self._committed:
                self._c.execute("ROLLBACK")
        finally:
            if _linger():
                _KEPT.append(self._c)
            else:
                self._c.close()

    def commit(self) -> None:
        """Commit (durably: synchronous=FULL, like the store)."""
        self._c.execute("COMMIT")
        self._committed = True

    # -- reads -------------------------------------------------------------------------------

    def held_by(self, session: str) -> list[tuple[str, str, int]]:
        """(name, state, seq) of the unreleased tasks whose lease names `session`."""
        rows = self._c.execute(
            "SELECT name, state, seq FROM tasks WHERE session_id = ? "
            "AND lock_released_at IS NULL ORDER BY name",
            (session,),
        ).fetchall()
        return [(str(n), str(s), int(q)) for n, s, q in rows]

    def check_snapshot(self) -> None:
        """The hook snapshot equals the store, as `SqliteStore.refresh_snapshot` checks it;
        Unusable when it differs or is missing: the engine's path writes it, and records and
        reports a difference (R-LCK-09)."""
        from taskgate.store import snapshot

        kept = snapshot.seen(self.state_dir)  # issue 16: lost steps (read before the store)
        if kept and snapshot.ahead(kept, snapshot.last_seq(self._c)):
            raise Unusable("the hook snapshot is ahead of the store: the engine reports it")
        try:
            text = snapshot.file_text(self._c, self.loads)
        except (ValueError, TypeError) as exc:
            raise Unusable(f"the hook snapshot cannot be built: {exc}") from None
        path = os.path.join(self.state_dir, snapshot.FILE_NAME)
        try:
            with open(path, encoding="utf-8") as handle:
                current: str | None = handle.read()
        except (OSError, UnicodeDecodeError):
            current = None
        if current == text:
            return
        if current is not None:
            raise Unusable("the hook snapshot differs from the store")
        raise Unusable("no hook snapshot: the engine's path writes it")

    # -- writes ------------------------------------------------------------------------------

    def append_event(self, task: str, kind: str, payload: dict[str, Any], at: str) -> str:
        """Append one hash-chained event (SqliteTx.append_event); returns its hash."""
        from taskgate.store import canon, snapshot

        if kind in snapshot.EVENT_KINDS:
            raise Unusable(f"a {kind!r} event changes the hook snapshot")
        last = self._c.execute(
            "SELECT hash FROM events WHERE task = ? ORDER BY seq DESC LIMIT 1", (task,)
        ).fetchone()
        prev = str(last[0]) if last else canon.GENESIS_HASH
        digest = canon.event_hash(prev, task, at, kind, payload)
        self._c.execute(
            "INSERT INTO events (task, at, kind, payload, prev_hash, hash) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (task, at, kind, canon.compact(payload), prev, digest),
        )
        return digest

    def touch(self, task: str, expected_seq: int, at: str) -> None:
        """Compare-and-swap on seq (Engine.touch): updated_at set, seq bumped."""
        cur = self._c.execute(
            "UPDATE tasks SET updated_at = ?, seq = seq + 1 WHERE name = ? AND seq = ?",
            (at, task, expected_seq),
        )
        if cur.rowcount != 1:
            raise Unusable(f"task {task!r} changed concurrently (expected seq {expected_seq})")


def view_seq(task_dir: str) -> int | None:
    """The `_seq` task.json was rendered at (engine/views.view_seq), None when unreadable."""
    from taskgate.hooks.jsonio import loads

    try:
        with open(os.path.join(task_dir, "task.json"), encoding="utf-8") as handle:
            data = loads(handle.read())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    seq = data.get("_seq") if isinstance(data, dict) else None
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else None
