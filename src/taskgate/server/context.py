"""What the server holds for one repository: the workspace and two engines (reads, writes).

The person has no session: the write engine's session id is empty, so the engine's
`check_speaker` lets a person answer at a checkpoint without holding the task's lease, as
`taskgate say` from their terminal does. Each engine has its own store connection and lock:
a page is never kept waiting by an action that waits for the store's write lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from taskgate.engine.core import Engine
from taskgate.engine.workspace import Workspace, find_workspace, require_initialized
from taskgate.server.board import CardCache
from taskgate.server.security import Gate
from taskgate.server.watch import Hub, Probe, Watcher, probe_for

T = TypeVar("T")


@dataclass
class ServerContext:
    """One repository served: its workspace, engines, and where the server keeps its files."""

    ws: Workspace
    server_dir: Path  # 0700, outside the repository: secret, log, server.json
    _read: Engine | None = None
    _write: Engine | None = None
    _read_lock: threading.Lock = field(default_factory=threading.Lock)
    _write_lock: threading.Lock = field(default_factory=threading.Lock)
    _probe: Probe | None = None
    _probe_lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def open(cls, repo: Path, server_dir: Path) -> ServerContext:
        """The context for the repository containing `repo` (initialised by `taskgate init`)."""
        ws = find_workspace(repo)
        require_initialized(ws)
        return cls(ws, server_dir)

    @property
    def log_path(self) -> Path:
        """JSON lines: every approval / change request received, with its channel."""
        return self.server_dir / "dashboard.log"

    @contextmanager
    def reading(self) -> Iterator[Engine]:
        """The read engine, one request at a time."""
        with self._read_lock:
            if self._read is None:
                self._read = Engine(self.ws, session_id="", cwd=self.ws.repo)
            yield self._read

    def writing(self, action: Callable[[Engine], T]) -> T:
        """Run `action` with the write engine (the person's, no session), serialised."""
        with self._write_lock:
            if self._write is None:
                self._write = Engine(self.ws, session_id="", cwd=self.ws.repo)
            return action(self._write)

    def change_token(self) -> object:
        """Changes whenever the store, todo.md or changelog.md change (for caching pages)."""
        with self._probe_lock:
            if self._probe is None:
                self._probe = probe_for(self.ws)[0]()
            try:
                return self._probe.token()
            except Exception:
                self._probe.close()
                self._probe = None
                return object()  # unknown: never equal to a cached token

    def close(self) -> None:
        """Close the store connections."""
        with self._probe_lock:
            if self._probe is not None:
                self._probe.close()
                self._probe = None
        for lock, engine in ((self._read_lock, self._read), (self._write_lock, self._write)):
            with lock:
                if engine is not None:
                    engine.close()
        self._read = self._write = None


@dataclass
class Server:
    """Everything the routes need, on `request.app.state.server`."""

    ctx: ServerContext
    gate: Gate
    hub: Hub
    watcher: Watcher | None = None
    log: list[dict[str, Any]] = field(default_factory=list)  # the last answers, newest last
    # The board as last built, with the change token it was built at (see routes.board_data).
    board_cache: tuple[object, dict[str, Any], str] | None = None
    board_lock: threading.Lock = field(default_factory=threading.Lock)
    cards: CardCache = field(default_factory=CardCache)
