"""Starting `taskgate serve`: bind, guard against a second server, print the login URL, run.

The listening sockets are bound here (so `--port 0` knows its port before the URL is printed,
and further listeners, e.g. the agent door's Unix socket of issue 14, are added to the same
uvicorn server as more sockets).
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import signal
import socket
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from taskgate.errors import UsageError
from taskgate.fsutil import atomic_write
from taskgate.server import secret

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
DEFAULT_PORT = 7457


@dataclass(frozen=True)
class ServeOptions:
    """What `taskgate serve` was asked for."""

    repo: Path
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    allow_remote: bool = False
    state_dir: Path | None = None
    new_secret: bool = False
    watch_interval: float = 0.02
    extra_hosts: tuple[str, ...] = ()  # more Host names to answer to (with --allow-remote)
    unix_socket: Path | None = None  # also listen here (0600): scripts, `curl --unix-socket`


def is_local(host: str) -> bool:
    """Loopback only?"""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, allow_remote: bool) -> str:
    """Refuse a non-local bind without the explicit flag; return the warning to print if any."""
    if is_local(host):
        return ""
    if not allow_remote:
        raise UsageError(
            f"refusing to serve the dashboard on {host}: it can approve plans and changes",
            hint="bind 127.0.0.1 (the default), or pass --allow-remote if you really mean it",
        )
    return (
        f"WARNING: the dashboard listens on {host}, reachable from other machines. Anyone "
        "with the login URL can approve plans and changes; the traffic is not encrypted."
    )


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(
            f"cannot listen on {host}:{port}: {exc.strerror}",
            hint="pass --port with a free port (0 picks one)",
        ) from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def bind_unix(path: Path) -> socket.socket:
    """A listening Unix socket only this user can connect to (a stale one is replaced)."""
    if path.exists() or path.is_symlink():
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()  # nobody listens: left by a server that was killed
        else:
            raise UsageError(f"{path} is in use by another server", hint="pass another --socket")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o077)
    try:
        sock.bind(str(path))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {path}: {exc.strerror}") from None
    finally:
        os.umask(old)
    path.chmod(0o600)
    sock.listen(128)
    return sock


def url_host(host: str) -> str:
    """The host as it appears in a URL."""
    if host in ("0.0.0.0", "::", ""):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


@contextlib.contextmanager
def single_instance(directory: Path) -> Iterator[IO[str]]:
    """Hold `serve.lock` for the server's lifetime; a second server for the repo is refused."""
    handle = (directory / "serve.lock").open("a+", encoding="utf-8")
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            running = read_info(directory)
            raise UsageError(
                "taskgate serve is already running for this repository"
                + (f" (pid {running.get('pid')}, {running.get('url')})" if running else ""),
                hint="use that server ('taskgate serve --url' prints its login URL), or stop it",
            ) from None
        yield handle
    finally:
        handle.close()


def info_path(directory: Path) -> Path:
    """server.json: pid, address and start time of the running server (no secret in it)."""
    return directory / "server.json"


def read_info(directory: Path) -> dict[str, Any]:
    """The running server's server.json, or {}."""
    try:
        data = json.loads(info_path(directory).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def login_url(base: str, token: str) -> str:
    """The URL that logs a browser in (printed only to the person's terminal)."""
    return f"{base}/login?token={token}"


class _Terminated(Exception):
    """SIGTERM: uvicorn shuts down gracefully, then raises the signal again for the default
    behaviour, which would end the process before `serve` removes server.json and the door's
    socket; this handler turns it into an exception `serve` catches, like Ctrl-C."""


def _terminated(signum: int, frame: Any) -> None:
    raise _Terminated


def _uvicorn_server() -> type[Any]:
    import time

    import uvicorn

    from taskgate.server.tether import INTERVAL_S, Tether

    class Stoppable(uvicorn.Server):
        """Ends the live streams first, so a Ctrl-C shutdown is not held up by open pages;
        stops by itself when its repository's `.taskgate` or store goes (server/tether.py)."""

        def __init__(self, config: uvicorn.Config, hub: Any, tether: Tether | None) -> None:
            super().__init__(config)
            self._hub = hub
            self._tether = tether
            self._checked = time.monotonic()

        def handle_exit(self, sig: int, frame: Any) -> None:
            self._hub.publish(None)
            super().handle_exit(sig, frame)

        async def on_tick(self, counter: int) -> bool:
            # uvicorn calls this every 0.1 s on the event loop; a few stat calls every
            # INTERVAL_S, never on a request's path.
            now = time.monotonic()
            if self._tether is not None and now - self._checked >= INTERVAL_S:
                self._checked = now
                gone = self._tether.lost()
                if gone and not self.should_exit:
                    print(
                        f"taskgate serve: {gone}: stopping (this server served that store); "
                        "run 'taskgate serve' in the repository to serve it again",
                        file=sys.stderr,
                        flush=True,
                    )
                    self._hub.publish(None)
                    self.should_exit = True
            return bool(await super().on_tick(counter))

    return Stoppable


def serve(
    options: ServeOptions,
    *,
    announce: Callable[[str, str], None],
    extra_sockets: Sequence[socket.socket] = (),
) -> None:
    """Run the server until interrupted. `announce(base_url, token)` tells the person."""
    import uvicorn

    from taskgate.engine.clock import iso, system_clock
    from taskgate.engine.workspace import find_workspace, require_initialized
    from taskgate.server import door, door_tcp, hookdoor
    from taskgate.server.app import build_app
    from taskgate.server.context import Server, ServerContext
    from taskgate.server.security import Gate, allowed_hosts
    from taskgate.server.tether import for_workspace, lstat_identity, remove_if_same
    from taskgate.server.watch import Hub, Watcher, probe_for

    ws = find_workspace(options.repo)
    require_initialized(ws)
    directory = secret.server_dir(secret.state_root(options.state_dir), ws.common_dir)
    ctx = ServerContext(ws, directory)
    tether = for_workspace(ws)  # the identities of `.taskgate` and the store, now
    with single_instance(directory):
        token = secret.load_or_create(directory / "secret", rotate=options.new_secret)
        sock = bind(options.host, options.port)
        listeners = [sock, *extra_sockets]
        unix_bound = None
        if options.unix_socket is not None:
            listeners.append(bind_unix(options.unix_socket))
            unix_bound = lstat_identity(options.unix_socket)
        port = sock.getsockname()[1]
        agent_door = door.Door(ws)  # issue 14: agents' commands, as agent requests
        tcp_door, tcp_warning = door_tcp.start(ws)  # the same, for Claude Code's Linux sandbox
        if tcp_warning:
            print(tcp_warning, file=sys.stderr)
        base = f"http://{url_host(options.host)}:{port}"
        extra = tuple(
            h if ":" in h.rsplit("]", 1)[-1] else f"{h}:{port}" for h in options.extra_hosts
        )
        gate = Gate(token, allowed_hosts(options.host, port, extra))
        hub = Hub()
        probe, every = probe_for(ws)
        watcher = Watcher(probe, hub, interval=max(every, options.watch_interval), gone=tether.lost)
        hook_secret = secret.load_or_create(directory / "hook-secret")
        hookdoor.warm()  # the first hook call does not wait for the decision's imports
        app = build_app(
            Server(ctx, gate, hub, watcher),
            extra_routes=hookdoor.routes(hook_secret),
            hook_door=hookdoor.HookDoor(hook_secret),  # the same door, ahead of Starlette
        )
        atomic_write(
            info_path(directory),
            json.dumps(
                {
                    "pid": os.getpid(),
                    "url": base,
                    "repo": str(ws.repo),
                    "started_at": iso(system_clock()),
                }
            )
            + "\n",
        )
        _Uvicorn = _uvicorn_server()
        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=2,
            server_header=False,
        )
        previous = signal.signal(signal.SIGTERM, _terminated)
        try:
            announce(base, token)
            _Uvicorn(config, hub, tether).run(sockets=listeners)
        except (KeyboardInterrupt, _Terminated):  # re-raised by uvicorn after its shutdown
            pass
        finally:
            signal.signal(signal.SIGTERM, previous)
            info_path(directory).unlink(missing_ok=True)
            agent_door.close()
            if tcp_door is not None:
                tcp_door.close()
            for listener in listeners:
                listener.close()
            if options.unix_socket is not None:
                remove_if_same(options.unix_socket, unix_bound)
