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
import stat  # os imports it: free

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
#
# And only while the log is small (LOG_LINGER bytes): with no other process keeping the
# store's -shm alive between hook processes, each new one rebuilds the log's index by reading
# the whole log, and that rebuild forgets which frames were checkpointed, so the log is never
# restarted. Left alone it grew by every prompt and every recorded edit (about 13 KB each,
# 4 MB after 300 prompts, the prompt hook 1.5 ms slower; unbounded past the automatic
# checkpoint, which then copied the whole log at every commit) until a CLI command closed the
# store. Past LOG_LINGER the hook closes its connection: the last one checkpoints and removes
# the log (tests/test_hook_wal.py).
_KEPT: list[object] = []
LOG_LINGER = 256 * 1024


def _linger(db: str) -> bool:
    import sys

    if getattr(sys.modules.get("__main__"), "HOOK_PROCESS", False) is not True:
        return False
    try:
        return os.stat(db + "-wal").st_size <= LOG_LINGER
    except OSError:
        return True  # no log left: nothing for the next process to read


def sqlite_module() -> Any:
    """The `_sqlite3` C module (sqlite3's dbapi2 wrapper imports datetime), loaded without
    `functools` and `collections` (issue 18: 2 ms of the hook's 5 above a bare interpreter).

    Module init asks `functools` for `lru_cache`, once, to build each connection's statement
    cache: `functools.lru_cache(maxsize)(connection)`, which is the C `_lru_cache_wrapper` of
    `_functools` (a builtin) around the connection. Where nothing has loaded `functools` yet,
    a stand-in whose `lru_cache` builds that same wrapper is in `sys.modules` for the import
    and removed right after it, so the statement cache is the same object type with the same
    size and eviction, and a later `import functools` gets the real module
    (tests/test_hook_fast.py compares both)."""
    import sys

    loaded = sys.modules.get("_sqlite3")
    if loaded is not None:
        return loaded
    if "functools" in sys.modules:
        import _sqlite3

        return _sqlite3
    stand_in = _stand_in()
    sys.modules["functools"] = stand_in
    try:
        import _sqlite3
    except ImportError:
        raise
    except Exception:  # an interpreter whose _sqlite3 asks functools for more: the real one
        if sys.modules.get("functools") is stand_in:
            del sys.modules["functools"]
        sys.modules.pop("_sqlite3", None)
        import _sqlite3
    finally:
        if sys.modules.get("functools") is stand_in:
            del sys.modules["functools"]
    return _sqlite3


def _stand_in() -> Any:
    """The `functools` _sqlite3's init sees: its lru_cache alone."""
    import sys

    module = type(sys)("functools")
    module.lru_cache = _lru_cache  # type: ignore[attr-defined]
    return module


def _lru_cache(maxsize: int = 128, typed: bool = False) -> Any:
    """functools.lru_cache(maxsize) for an int maxsize, as functools builds it with the C
    wrapper (its cache_info() gives a plain tuple: nothing in _sqlite3 asks for it). Where
    the private wrapper is not callable so (another interpreter), the real functools'."""

    def wrap(user_function: Any) -> Any:
        try:
            from _functools import _lru_cache_wrapper  # type: ignore[import-not-found]

            return _lru_cache_wrapper(user_function, max(maxsize, 0), typed, tuple)
        except (ImportError, TypeError):
            import functools

            return functools.lru_cache(maxsize, typed)(user_function)

    return wrap


# A first try for the write lock, in seconds: another writer holds it for milliseconds. Only
# past it is the hook's budget asked for the rest (_wait_on; store/pg_wait.py), so the usual
# path imports and asks nothing more (issue 18).
FIRST_TRY_S = 0.25


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

        try:
            sqlite3 = sqlite_module()
        except ImportError:  # pragma: no cover - other interpreters
            import sqlite3

        self.state_dir = state_dir
        self.loads = loads
        self._error = sqlite3.Error
        self._db = db = os.path.join(state_dir, "state.db")
        try:  # the file it opens, before it connects (store/dbswap.py: recover --rebuild)
            found = os.stat(db)
        except OSError:
            found = None
        if found is None or not stat.S_ISREG(found.st_mode):
            raise Unusable(f"no store at {db}")
        self._ident = found.st_dev, found.st_ino
        try:
            self._wait = wait = lock_timeout() if timeout is None else timeout
            conn = sqlite3.connect(db, timeout=min(wait, FIRST_TRY_S), isolation_level=None)
        except sqlite3.Error as exc:
            raise Unusable(f"the store does not open: {exc}") from None
        self._c = conn
        self._committed = False
        # (clock, SHA-256, file key or None) of a full check, recorded at commit
        self._checked: tuple[Any, str, str | None] | None = None
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
            if not self._wait_on(exc):
                self._c.close()
                raise Unusable(f"the store's write lock: {exc}") from None
        try:  # under the lock: a file recover --rebuild moved aside never takes a write
            found = os.stat(self._db)
            same = (found.st_dev, found.st_ino) == self._ident
        except OSError:
            same = False
        if not same:
            self._c.execute("ROLLBACK")
            self._c.close()
            raise Unusable("state.db was replaced (recover --rebuild): the engine opens it")
        return self

    def _wait_on(self, exc: Exception) -> bool:
        """The first try found the write lock held: wait for the rest of the timeout, in a
        hook no longer than what is left of its budget (store/pg_wait.py, TASKGATE_PG_HOOK_WAIT:
        the engine's path after a hand-over gets only what this left, so the hook stays under
        the 30 s Claude Code gives it). Both waits count against the budget. True once the
        lock is held; False when it stayed held (or `exc` is another failure)."""
        if "locked" not in str(exc) and "busy" not in str(exc):
            return False
        import time

        from taskgate.store import pg_wait

        first = min(self._wait, FIRST_TRY_S)
        pg_wait.spent(first)
        more = self._wait - first
        if pg_wait.in_hook():
            more = min(more, pg_wait.hook_left())
        if more <= 0:
            return False
        self._c.execute(f"PRAGMA busy_timeout = {int(more * 1000)}")
        began = time.monotonic()
        try:
            self._c.execute("BEGIN IMMEDIATE")
        except self._error:
            return False
        finally:
            pg_wait.spent(time.monotonic() - began)
        return True

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        try:
            if not self._committed:
                self._c.execute("ROLLBACK")
        finally:
            if _linger(self._db):
                _KEPT.append(self._c)
            else:
                self._c.close()

    def commit(self) -> None:
        """Commit (durably: synchronous=FULL, like the store), with the snapshot check's
        finding when it compared every task (store/snapshot_clock.py)."""
        if self._checked is not None:
            from taskgate.store import snapshot_clock

            snapshot_clock.record(self._c, *self._checked)
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

    def agents(self, task: str) -> tuple[str, ...]:
        """The task's required agents, as the hook snapshot reads them (() when unreadable)."""
        row = self._c.execute("SELECT required_agents FROM tasks WHERE name = ?", (task,))
        found = row.fetchone()
        try:
            agents = self.loads(found[0]) if found is not None else None
        except (TypeError, ValueError):
            return ()
        return tuple(str(a) for a in agents) if isinstance(agents, list) else ()

    def check_snapshot(self) -> None:
        """The hook snapshot equals the store, as `SqliteStore.refresh_snapshot` checks it;
        Unusable when it differs or is missing: the engine's path writes it, and records and
        reports a difference (R-LCK-09).

        Where the store's snapshot clock vouches for this very file (store/snapshot_clock.py:
        the store unchanged since a full check found this file, or one with the same
        SHA-256, equal to it), that is the answer; otherwise every task is compared, and a
        file found equal is recorded for the next check by commit() (when this transaction
        writes anyway)."""
        from taskgate.store import snapshot, snapshot_clock

        kept = snapshot.seen(self.state_dir)  # issue 16: lost steps (read before the store)
        if kept and snapshot.ahead(kept, snapshot.last_seq(self._c)):
            raise Unusable("the hook snapshot is ahead of the store: the engine reports it")
        path = os.path.join(self.state_dir, snapshot.FILE_NAME)
        try:
            handle = open(path, "rb")  # noqa: SIM115  (closed below, after fstat and read)
        except OSError:
            raise Unusable("no hook snapshot: the engine's path writes it") from None
        with handle:
            clock = snapshot_clock.read(self._c)
            stat = os.fstat(handle.fileno())
            key = snapshot_clock.file_key(stat)
            if clock is not None and clock.vouches_for_file(key):
                return
            current = handle.read()
        digest = snapshot_clock.digest(current)
        settled = key if snapshot_clock.settled(stat.st_ctime_ns) else None
        if clock is not None and clock.vouches_for(digest):
            if settled is not None:
                self._checked = (clock, digest, settled)
            return
        try:
            text = snapshot.file_text(self._c, self.loads)
        except (ValueError, TypeError) as exc:
            raise Unusable(f"the hook snapshot cannot be built: {exc}") from None
        try:
            equal = current.decode("utf-8") == text
        except UnicodeDecodeError:
            equal = False
        if not equal:
            raise Unusable("the hook snapshot differs from the store")
        if clock is not None:
            self._checked = (clock, digest, settled)

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
