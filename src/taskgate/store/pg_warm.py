"""`taskgate serve`'s warm PreToolUse data for a PostgreSQL store (issue 20, hooks per machine).

The HTTP hook door (server/hookdoor.py) answers every guarded tool call of the machine's
sessions. On PostgreSQL that data is the server's, which another machine can change at any
moment, so the process keeps it in memory with the snapshot clock it was read at
(store/pg_schema.py) and, per request, asks the server one tiny question on a connection it
keeps open: is the clock still that? Yes: the memory is the store's current data. No: read it
again in one consistent transaction, with the clock, and keep that.

Every write that changes the data advances the clock before it commits and NOTIFYs the new
value; a listener thread re-reads on each notification, so the request after another
machine's write usually finds the data already current. The notification only saves time:
the clock check on each request is what makes a stale answer impossible (a notification is
delivered after the commit, asynchronously; the check reads the committed clock).
"""

from __future__ import annotations

import json
import threading
from contextlib import suppress
from typing import Any

import psycopg

from taskgate.store import pg_hook, pg_schema, pg_wait
from taskgate.store.pg_tx import QmarkConnection


class Warm:
    """One database's data in memory, checked against its snapshot clock on every read."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.reads = 0  # full reads of the data (the tests compare it)
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None
        self._clock: int | None = None
        self._data: dict[str, Any] | None = None
        self._listener: threading.Thread | None = None
        self._stop = threading.Event()

    def _live(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.broken or self._conn.closed:
            if self._conn is not None:
                with suppress(psycopg.Error):
                    self._conn.close()
            from taskgate.store.pg_fault import describe

            self._conn = pg_wait.connect(  # full or restarting: waited for, a hook's bound
                lambda: psycopg.connect(
                    self.url, autocommit=True, connect_timeout=5, application_name="taskgate-serve"
                ),
                (psycopg.OperationalError,),
                where=lambda: describe(self.url),
                wait_s=pg_wait.hook_bound(),
                diagnose=lambda: pg_hook.refusal_state(self.url, 5),
            )
        return self._conn

    def get(self) -> dict[str, Any]:
        """The store's current data (fail closed: StoreUnreachable when it cannot be read)."""
        from taskgate.store.pg_fault import unreachable

        with self._lock:
            kept = self._conn is not None and not (self._conn.broken or self._conn.closed)
            try:
                return self._current()
            except psycopg.OperationalError as exc:
                if not kept:  # refused (and waited for) just now: no second wait
                    raise unreachable(self.url, exc) from None
                try:  # one reconnect: the server restarted, or killed this backend
                    self._conn = None
                    return self._current()
                except psycopg.Error as exc:
                    raise unreachable(self.url, exc) from None
            except psycopg.Error as exc:
                raise unreachable(self.url, exc) from None

    def _current(self) -> dict[str, Any]:
        conn = self._live()
        if self._data is not None:
            row = conn.execute(pg_schema.CLOCK_READ).fetchone()
            if row is not None and row[0] == self._clock:
                return self._data
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        try:
            try:
                with conn.transaction(savepoint_name="clock"):
                    row = conn.execute(pg_schema.CLOCK_READ).fetchone()
            except psycopg.errors.UndefinedTable:
                row = None  # no write opened this store since the clock came: never cached
            data = pg_hook.collect(QmarkConnection(conn), json.loads)
        finally:
            with suppress(psycopg.Error):
                conn.execute("COMMIT")
        self.reads += 1
        self._clock = None if row is None else int(row[0])
        self._data = data if row is not None else None
        self._start_listener()
        return data

    def _start_listener(self) -> None:
        if self._listener is None:
            self._listener = threading.Thread(
                target=self._listen, name="taskgate-pg-listen", daemon=True
            )
            self._listener.start()

    def _listen(self) -> None:
        """Re-read on every NOTIFY of the clock's channel (a cache warmer, not the guard)."""
        while not self._stop.is_set():
            try:
                with psycopg.connect(
                    self.url, autocommit=True, connect_timeout=5,
                    application_name="taskgate-serve-listen",
                ) as conn:  # fmt: skip
                    conn.execute(f"LISTEN {pg_schema.CHANNEL}")
                    while not self._stop.is_set():
                        heard = list(conn.notifies(timeout=1.0))
                        if heard and heard[-1].payload != str(self._clock):
                            with suppress(Exception):
                                self.get()
            except psycopg.Error:
                self._stop.wait(1.0)  # the server is away: try again (requests fail closed)

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            if self._conn is not None:
                with suppress(psycopg.Error):
                    self._conn.close()


_WARM: dict[str, Warm] = {}
_GUARD = threading.Lock()


def warm(url: str) -> Warm:
    """This process's Warm for `url` (one per database)."""
    with _GUARD:
        found = _WARM.get(url)
        if found is None:
            found = _WARM[url] = Warm(url)
        return found


def snapshot(url: str) -> dict[str, Any]:
    """store/snapshot.py's data of `url` as the server has it now, from memory when current."""
    return warm(url).get()
