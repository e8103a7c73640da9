"""Live updates: the server watches the store and pushes a change to every open page.

A thread probes cheaply (SQLite's `PRAGMA data_version` on a read-only connection of its own
changes whenever any other connection commits: hooks, `run`, CLI commands and the server's
own writes; plus the mtimes of todo.md and changelog.md). On a change it reads which tasks
moved (name and seq) and publishes one message to the subscribers (the SSE streams). The
browser never polls; it fetches the re-rendered part of the page when told to.

A PostgreSQL store (issue 20) plugs in another `Probe` (LISTEN/NOTIFY).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


class Probe(Protocol):
    """Something cheap to call often that changes when the store or todo.md change."""

    def token(self) -> object:
        """An opaque value; a different value means something changed."""
        ...

    def task_seqs(self) -> dict[str, int]:
        """Every task's seq (read only after token() moved)."""
        ...

    def close(self) -> None:
        """Release resources."""
        ...


class SqliteProbe:
    """`PRAGMA data_version` + file mtimes; its own read-only connection."""

    def __init__(self, db: Path, files: tuple[Path, ...]) -> None:
        self._conn = sqlite3.connect(
            f"{db.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False, timeout=5
        )
        self._conn.execute("PRAGMA query_only=ON")
        self._files = files

    def token(self) -> object:
        version = self._conn.execute("PRAGMA data_version").fetchone()[0]
        return (version, _stamps(self._files))

    def task_seqs(self) -> dict[str, int]:
        rows = self._conn.execute("SELECT name, seq FROM tasks").fetchall()
        return {str(name): int(seq) for name, seq in rows}

    def close(self) -> None:
        self._conn.close()


class StoreProbe:
    """Any store through the Store interface (PostgreSQL, issue 20): every task's seq plus the
    files' stamps. A whole read per probe, so it is polled less often than `SqliteProbe`; a
    step that appends events without touching its task row is seen with the next one that
    does (every protocol step touches it)."""

    def __init__(self, store: Any, files: tuple[Path, ...]) -> None:
        self._store = store
        self._files = files
        self._seqs: dict[str, int] = {}

    def token(self) -> object:
        with self._store.read() as tx:
            self._seqs = {r.name: r.seq for r in tx.tasks()}
        return (tuple(sorted(self._seqs.items())), _stamps(self._files))

    def task_seqs(self) -> dict[str, int]:
        return dict(self._seqs)

    def close(self) -> None:
        self._store.close()


def _stamps(files: tuple[Path, ...]) -> tuple[tuple[int, int], ...]:
    stamps = []
    for f in files:
        try:
            st = f.stat()
            stamps.append((st.st_mtime_ns, st.st_size))
        except OSError:
            stamps.append((0, 0))
    return tuple(stamps)


def probe_for(ws: Any) -> tuple[Callable[[], Probe], float]:
    """The cheapest probe for this workspace's store, and how often to call it (seconds)."""
    from taskgate.store.select import uses_database_server

    files = (ws.todo_path, ws.changelog_path)
    if uses_database_server(ws.config.text):
        from taskgate.store.select import open_store

        return (lambda: StoreProbe(open_store(ws, timeout=5, read_only=True), files)), 0.25
    return (lambda: SqliteProbe(ws.db_path, files)), 0.02


@dataclass
class Hub:
    """Fan-out of change messages to asyncio subscribers, fed from the watcher thread."""

    version: int = 0
    _subscribers: set[asyncio.Queue[dict[str, Any] | None]] = field(default_factory=set)
    _loop: asyncio.AbstractEventLoop | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """The event loop the subscribers live on."""
        self._loop = loop

    def subscribe(self) -> asyncio.Queue[dict[str, Any] | None]:
        """A queue that receives every message from now on (None: the server stops)."""
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(maxsize=64)
        with self._lock:
            self._subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[dict[str, Any] | None]) -> None:
        """Stop delivering to `queue`."""
        with self._lock:
            self._subscribers.discard(queue)

    @property
    def subscribers(self) -> int:
        """How many pages listen."""
        return len(self._subscribers)

    def publish(self, message: dict[str, Any] | None) -> None:
        """Deliver to every subscriber (thread-safe); a slow page drops old messages."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with self._lock:
            queues = list(self._subscribers)
        for queue in queues:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_offer, queue, message)


def _offer(queue: asyncio.Queue[dict[str, Any] | None], message: dict[str, Any] | None) -> None:
    if queue.full():  # the page is behind: the newest message tells it to re-fetch anyway
        with contextlib.suppress(asyncio.QueueEmpty):
            queue.get_nowait()
    queue.put_nowait(message)


class Watcher:
    """The probing thread: publishes {"v", "tasks", "at"} on every change it sees."""

    def __init__(
        self,
        probe_factory: Callable[[], Probe],
        hub: Hub,
        *,
        interval: float = 0.02,
        gone: Callable[[], object] | None = None,
    ) -> None:
        self._factory = probe_factory
        self._hub = hub
        self._interval = interval
        # Truthy when the store the server started with is gone or replaced (server/tether.py):
        # then no probe is opened again. SQLite creates a missing `-shm` even for a read-only
        # connection, so a probe reopened while `rm -rf` runs puts a file back into the
        # directory being removed (and makes the removal fail); the server stops anyway.
        self._gone = gone
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors = 0

    def start(self) -> None:
        """Start probing in a daemon thread."""
        self._thread = threading.Thread(target=self._run, name="taskgate-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop probing and tell the subscribers."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        self._hub.publish(None)

    def _run(self) -> None:
        probe: Probe | None = None
        token: object = None
        seqs: dict[str, int] = {}
        lost = False
        while not self._stop.is_set():
            try:
                if probe is None:
                    if self._gone is not None and self._gone():
                        self._stop.wait(0.2)
                        continue
                    probe = self._factory()
                    token, seqs = probe.token(), probe.task_seqs()
                now = probe.token()
                if now != token:
                    token = now
                    fresh = probe.task_seqs()
                    changed = sorted(n for n, s in fresh.items() if seqs.get(n) != s)
                    changed += sorted(n for n in seqs if n not in fresh)
                    seqs = fresh
                    self._hub.version += 1
                    self._hub.publish({"v": self._hub.version, "tasks": changed, "at": time.time()})
            except Exception:  # store busy, locked or replaced: probe again from scratch
                self.errors += 1
                if probe is not None:
                    with contextlib.suppress(Exception):
                        probe.close()
                probe = None
                lost = True
                self._stop.wait(0.2)
                continue
            if lost:  # changes made while the probe was down were not seen: refresh all
                lost = False
                self._hub.version += 1
                self._hub.publish({"v": self._hub.version, "tasks": [], "at": time.time()})
            self._stop.wait(self._interval)
        if probe is not None:
            probe.close()
