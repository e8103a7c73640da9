"""SQLite store: WAL, one IMMEDIATE transaction per protocol step, named migrations.

This module is the store itself: the connection (read-only for `taskgate audit`), the
migrations applied at open, the transaction boundaries, and the hook snapshot kept exact
under the write lock (refresh_snapshot; store/snapshot.py, store/snapshot_splice.py). The
queries a transaction runs are SqliteTx's, in store/sqlite_tx.py (re-exported here).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from taskgate import failpoints
from taskgate.errors import Locked, SchemaDamaged, from_sqlite_error
from taskgate.fsutil import atomic_write
from taskgate.json_lite import loads
from taskgate.store import dbswap, pg_wait, snapshot, snapshot_clock, snapshot_splice
from taskgate.store.base import Store, StoreCorrupt, Tx
from taskgate.store.dbfile import uri
from taskgate.store.schema import MIGRATIONS
from taskgate.store.sqlite_tx import _TASK_COLUMNS
from taskgate.store.sqlite_tx import SqliteTx as SqliteTx  # re-exported: its old home
from taskgate.store.sqlite_tx import _load as _load  # re-exported (tests/test_store_decode.py)

TYPE_CHECKING = False  # typing stays unimported on the command path (issue 18)
if TYPE_CHECKING:
    import sqlite3
else:  # the C module sqlite3 re-exports: its dbapi2 wrapper imports datetime (1 ms, issue 18)
    import _sqlite3 as sqlite3


class _Replaced(Exception):
    """The file the connection opened is no longer the store at the path (store/dbswap.py)."""


_REOPENS = 5  # rebuilds in a row while one command opens the store: then it says so


def _replaced_again(path: Path) -> Locked:
    return Locked(
        f"the store {path} was replaced {_REOPENS} times while this command opened it "
        "('taskgate recover --rebuild' running again and again)",
        hint="wait for the rebuilds to finish, then run the command again; nothing was written",
    )


def _busy(exc: Exception) -> bool:
    """SQLITE_BUSY or SQLITE_LOCKED: another connection held the lock for the whole wait."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in (5, 6)
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _raise_fault(exc: sqlite3.DatabaseError, path: Path) -> None:
    """Disk full, read-only, locked, damaged schema: raise its own error, not "corrupt"."""
    fault = from_sqlite_error(exc, path)
    if fault is not None:
        raise fault from exc


# After a write that changed the hook snapshot's rows: the file it found and whether
# hook-snapshot.gen vouched for it, the snapshot clock at its start and at its commit, and
# the tasks it changed (snapshot_splice.patched).
_Patch = tuple[tuple[bytes | None, bool], tuple[int | None, int | None], frozenset[str]]


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


class SqliteStore(Store):
    """The embedded default store at `<state dir>/state.db`."""

    def __init__(self, path: Path, *, timeout: float = 60.0, read_only: bool = False) -> None:
        self.path = path
        self.snapshot_path = path.with_name(snapshot.FILE_NAME)
        self.timeout = timeout
        self.read_only = read_only
        self._open()

    # (st_dev, st_ino) of the file this connection opened, recorded before it connected
    # (store/dbswap.py: recover --rebuild replaces state.db under its name)
    _ident: tuple[int, int] | None = None

    def _open(self) -> None:
        """Connect to the file at the path now: read-only (`taskgate audit`: SQLite itself
        refuses any write, R-AUD-12), or set up with the migrations applied. A file that is
        there is opened, never created (mode=rw): one moved aside by a rebuild in between is
        waited for, not replaced by an empty store (store/dbswap.py)."""
        path = self.path
        for _ in range(_REOPENS):
            self._ident = ident = dbswap.identity(path)
            if ident is None and not self.read_only and self._rebuilt():
                continue  # between a rebuild's moving the old file aside and the new one
            # mode=ro for audit; mode=rw: a file that is there is never created anew
            mode = "ro" if self.read_only else "rw" if ident else ""
            try:
                self._conn = sqlite3.connect(
                    uri(path, mode) if mode else str(path),
                    uri=bool(mode),
                    timeout=self._lock_wait(),
                    isolation_level=None,
                    check_same_thread=False,
                )
            except sqlite3.DatabaseError as exc:
                if dbswap.identity(path) is None and self._rebuilt():
                    continue  # moved aside by recover --rebuild: open the rebuilt one
                _raise_fault(exc, path)
                raise StoreCorrupt(f"cannot open the store {path}: {exc}") from exc
            if ident is None:  # created here (`taskgate init`, the rebuild's new store)
                self._ident = dbswap.identity(path)
            try:
                self._setup()
                return
            except _Replaced:
                self._conn.close()
            except sqlite3.DatabaseError as exc:
                self._conn.close()
                _raise_fault(exc, path)
                raise StoreCorrupt(f"cannot open the store {path}: {exc}") from exc
            except BaseException:
                self._conn.close()
                raise
        raise _replaced_again(path)

    def _setup(self) -> None:
        c = self._conn
        c.row_factory = sqlite3.Row
        if self.read_only:
            c.execute("PRAGMA query_only=ON")
            c.execute("SELECT COUNT(*) FROM migrations").fetchone()
        else:
            c.execute("PRAGMA journal_mode=WAL")
            c.execute("PRAGMA synchronous=FULL")
            c.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        self._check_columns()

    def _rebuilt(self) -> bool:
        """A rebuild was running and is over (store/dbswap.py). Not a hook's budget: giving
        up here would create a store at the path the rebuild is about to fill; the rebuild
        holds the old file's write lock (which a hook waits for within its budget) for all
        but its last renames."""
        return dbswap.wait_for_rebuild(self.path.parent, self.timeout)

    def _lock_wait(self, wanted: float | None = None) -> float:
        """Seconds to wait for the write lock: `wanted`, by default the store's timeout
        (TASKGATE_LOCK_TIMEOUT for commands); a hook waits no longer than what is left of its
        budget (store/pg_wait.py hook_left, TASKGATE_PG_HOOK_WAIT): Claude Code cancels a
        command hook after 30 s, and the event it was recording would be lost without a word."""
        wait = self.timeout if wanted is None else wanted
        return min(wait, pg_wait.hook_left()) if pg_wait.in_hook() else wait

    def _immediate(self, wanted: float | None = None, *, report: bool = True) -> None:
        """BEGIN IMMEDIATE, waiting for another writer at most _lock_wait(wanted) seconds. A
        hook's wait counts against its budget, and a hook that waited it all out raises
        Locked saying so (on stderr at once too: hooks/dispatch.py reports only the message);
        with `report` False (refresh_snapshot) the OperationalError is the caller's."""
        c = self._conn
        if not pg_wait.in_hook():
            if wanted is None:  # the connection's busy timeout is the store's
                c.execute("BEGIN IMMEDIATE")
                return
            c.execute(f"PRAGMA busy_timeout = {int(wanted * 1000)}")
            try:
                c.execute("BEGIN IMMEDIATE")
            finally:
                c.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            return
        wait = self._lock_wait(wanted)
        c.execute(f"PRAGMA busy_timeout = {int(wait * 1000)}")
        began = time.monotonic()
        try:
            c.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            pg_wait.spent(time.monotonic() - began)  # before _gave_up says how long
            if report and _busy(exc):
                raise self._gave_up() from exc
            raise
        pg_wait.spent(time.monotonic() - began)

    def _gave_up(self) -> Locked:
        """A hook's Locked when another process held the write lock for all its budget."""
        waited, bound = pg_wait.hook_spent(), pg_wait.hook_bound()
        error = Locked(
            f"another process held the store's write lock ({self.path}) for more than "
            f"{waited:.1f} s, all this hook could wait ({pg_wait.HOOK_ENV} = {bound:g} s for "
            "a hook's waits together); this hook event was not recorded, nothing was changed",
            hint="if it keeps happening, look for a stopped or stuck taskgate process (`fuser "
            ".taskgate/state.db` lists the processes that have the store open), a long "
            f"'taskgate recover --rebuild' or a slow disk; to wait longer raise {pg_wait.HOOK_ENV} "
            f"(at most {pg_wait.HOOK_MAX_S:g} s: Claude Code cancels a command hook after 30 s)",
        )
        pg_wait.say(f"taskgate: gave up waiting for the writer lock: {error.message}")
        pg_wait.say(f"hint: {error.hint}")
        return error

    def _same_file(self) -> bool:
        """The file at the path is the one this connection opened (called under the write
        lock: a rebuild moves the old file only while it holds that file's lock)."""
        return self._ident is not None and dbswap.identity(self.path) == self._ident

    def _begin_write(self, wait_s: float | None = None, *, report: bool = True) -> None:
        """BEGIN IMMEDIATE on the store at the path (_immediate): a connection to a file
        recover --rebuild moved aside (it held the lock until the new file was in place)
        rolls back and connects to the new one, so nothing is committed into the file kept
        aside."""
        for _ in range(_REOPENS):
            self._immediate(wait_s, report=report)
            if self._same_file():
                return
            self._conn.execute("ROLLBACK")
            self._reopen()
        raise _replaced_again(self.path)

    def _reopen(self) -> None:
        """Open the store at the path instead of the file moved aside. The old connection is
        left to its last user (a snapshot read before may still read its events through
        it: SqliteTx.detached) and closed when none is left."""
        if self._snapshot_held:  # the held splice was of the old file: refresh it whole
            self._held_patch = ((None, False), (None, None), frozenset())
        self._open()

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
        self._immediate()
        if not self._same_file():  # moved aside by recover --rebuild since it was opened
            c.execute("ROLLBACK")
            raise _Replaced
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
        if not self._same_file():  # a long-lived process: follow the rebuilt store
            self._reopen()
        self._conn.execute("BEGIN")
        tx = SqliteTx(self._conn)
        try:
            yield tx
        except sqlite3.DatabaseError as exc:
            self._conn.execute("ROLLBACK")
            _raise_fault(exc, self.path)
            raise StoreCorrupt(f"store read failed: {exc}") from exc
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        else:
            self._conn.execute("COMMIT")
        finally:
            tx.closed = True  # its snapshots' EventLogs read through tx.detached now

    @contextmanager
    def write(self) -> Iterator[Tx]:
        self._begin_write()
        start = snapshot_splice.generation(self._conn)  # the hook snapshot's clock (patched)
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
            end = snapshot_splice.generation(self._conn)
            previous: tuple[bytes | None, bool] = (None, False)
            if tx.touches_snapshot:  # under the write lock, before the change is visible
                # The file as this step found it: rewritten below from it, changing only
                # the lines of the tasks this transaction touched (snapshot_splice.patched).
                data, key = snapshot_splice.read_file(str(self.snapshot_path))
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
        finally:
            tx.closed = True

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
        trusted for it (snapshot_splice.patched).

        Returns "unchanged", "written" (there was none), "replaced" (it differed from the
        store: changed outside taskgate) or "busy" (another writer held the lock for longer
        than `wait_s`; that writer, the next write or the next hook event rewrites it).
        """
        if self.read_only:
            raise StoreCorrupt("a read-only store cannot refresh the hook snapshot")
        try:  # never the hook snapshot of a file moved aside
            self._begin_write(wait_s, report=False)
        except sqlite3.OperationalError:
            return "busy"
        c = self._conn  # reconnected when the store was rebuilt
        try:
            spliced, gen = None, snapshot_splice.generation(c)
            if patch is not None:  # the step's tasks only (issue 18)
                previous, clocks, names = patch
                spliced = snapshot_splice.patched(previous, clocks, c, set(names), loads)
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
                text = snapshot.file_text(c, loads)
            except ValueError:  # a row that would break a line: render says which
                text = snapshot.render(snapshot.collect(c, loads))
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
        return snapshot_splice.read_generation(str(self.snapshot_path.parent)) == (clock, key)

    def _vouch(self, gen: int | None) -> None:
        """hook-snapshot.gen for the file just written or found equal, at clock `gen`
        (after the file: a crash between leaves one that names another file)."""
        text: str | None = None
        if gen is not None:
            text = snapshot_splice.generation_text(gen, str(self.snapshot_path))
        path = self.snapshot_path.with_name(snapshot.GEN_FILE)
        if text is None:
            path.unlink(missing_ok=True)
        elif _read_bytes(path) != text.encode("ascii"):
            atomic_write(path, text, durable=False)

    def close(self) -> None:
        self._conn.close()
