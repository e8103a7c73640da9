"""The agent door on a loopback TCP port, for sandboxes that refuse Unix sockets (issue 14).

Claude Code's sandbox on Linux (2.1.332) puts the session's Bash in a network namespace of its
own behind a seccomp filter that refuses every `socket(AF_UNIX, ...)`: the door's Unix socket
(server/door.py) cannot be reached from there, and `sandbox.network.allowUnixSockets` is
honoured on macOS only. What such a command can reach is the sandbox's HTTP proxy, which runs
in the Claude Code process outside the sandbox and forwards a CONNECT to an address that
`sandbox.network.allowedDomains` allows, loopback included when it is spelled with its port
(`"127.0.0.1:PORT"`, verified with the real binary: tests/test_agent_door_claude_real.py).

So the server also listens on 127.0.0.1:PORT, the port `taskgate hooks install` chose and
wrote with a random token into `<git common dir>/taskgate/door-tcp.json` (0600, a directory
the client sandbox settings keep read-only). The protocol is the Unix door's (4-byte length +
JSON) with one more field, `token`. A connection is served only when the kernel says its peer
socket belongs to this user (/proc/net/tcp) and the token matches. Who asks is the process
holding the peer socket (through the sandbox's proxy: the Claude Code process itself), proven
from the registrations exactly as for the Unix socket's peer (server/peers.py); the request
then goes to `door.handle`: an agent request by construction, whatever the agent claims
(approvals and every other human-only command are refused there).
An HTTP request (a web page) never parses: its first four bytes read as a length far above
the 64 KiB limit.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import os
import secrets
import socket
import struct
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from taskgate.fsutil import atomic_write
from taskgate.server import door

CONFIG = "door-tcp.json"
HOST = "127.0.0.1"
PORTS = range(20000, 30000)  # below Linux's ephemeral range: no outgoing socket takes it
_ACCEPT_POLL_S = 0.2


@dataclass(frozen=True)
class Endpoint:
    """Where the TCP door of one repository listens, and the token its requests carry."""

    port: int
    token: str

    @property
    def address(self) -> str:
        """`host:port`, as Claude Code's `sandbox.network.allowedDomains` spells it."""
        return f"{HOST}:{self.port}"


def config_path(common_dir: Path) -> Path:
    """The endpoint file, next to the Unix door's socket."""
    return door.door_path(common_dir).parent / CONFIG


def load(common_dir: Path) -> Endpoint | None:
    """The repository's endpoint; None when `hooks install` never chose one (or it is bad)."""
    try:
        data = json.loads(config_path(common_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    port, token = data.get("port"), data.get("token")
    if not isinstance(port, int) or not 0 < port < 65536:
        return None
    if not isinstance(token, str) or len(token) < 32:
        return None
    return Endpoint(port, token)


def ensure(common_dir: Path) -> Endpoint:
    """The repository's endpoint, chosen and written (0600) on first use: a port that is free
    now, starting from one derived from the git dir so that repositories spread out."""
    found = load(common_dir)
    if found is not None:
        return found
    path = config_path(common_dir)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    start = int(hashlib.sha256(str(common_dir.resolve()).encode()).hexdigest()[:8], 16)
    port = next((p for p in _rotate(start) if _free(p)), PORTS[0])
    endpoint = Endpoint(port, secrets.token_hex(32))
    old = os.umask(0o077)
    try:
        atomic_write(path, json.dumps({"port": port, "token": endpoint.token}) + "\n")
    finally:
        os.umask(old)
    path.chmod(0o600)
    return endpoint


def _rotate(start: int) -> list[int]:
    offset = start % len(PORTS)
    return [PORTS[(offset + i) % len(PORTS)] for i in range(len(PORTS))]


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def _hex_address(host: str, port: int) -> str:
    """An IPv4 address as /proc/net/tcp prints it (host byte order, hex)."""
    (value,) = struct.unpack("=I", socket.inet_aton(host))
    return f"{value:08X}:{port:04X}"


def peer_of(conn: socket.socket) -> tuple[int | None, int]:
    """(uid, pid) of the process at the other end of a loopback connection, as the kernel
    shows it: the socket's owner in /proc/net/tcp, and the process holding that socket (0 when
    none of this user's processes does). (None, 0) when it cannot be told: refused."""
    try:
        peer_host, peer_port = conn.getpeername()[:2]
        here_host, here_port = conn.getsockname()[:2]
        local, remote = _hex_address(peer_host, peer_port), _hex_address(here_host, here_port)
        with open("/proc/net/tcp", encoding="ascii") as table:
            for line in table:
                fields = line.split()
                if len(fields) > 9 and fields[1] == local and fields[2] == remote:
                    return int(fields[7]), _holder(fields[9])
    except (OSError, ValueError):
        return None, 0
    return None, 0


def _holder(inode: str) -> int:
    """The process with a file descriptor on socket `inode` (this user's processes only)."""
    wanted = f"socket:[{inode}]"
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            for fd in os.scandir(f"/proc/{entry.name}/fd"):
                if os.readlink(fd.path) == wanted:
                    return int(entry.name)
        except OSError:
            continue  # gone, or another user's
    return 0


class TcpDoor:
    """The listening socket on 127.0.0.1 and its accept thread; `close()` stops it."""

    def __init__(self, ws: Any, endpoint: Endpoint) -> None:
        self.ws = ws
        self.endpoint = endpoint
        self._stop = threading.Event()
        self._slots = threading.BoundedSemaphore(door.MAX_RUNNING)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._sock.bind((HOST, endpoint.port))
        except OSError:
            self._sock.close()
            raise
        self._sock.listen(64)
        self._thread = threading.Thread(target=self._serve, name="agent-door-tcp", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        from taskgate.server.door import accept_loop

        accept_loop(self._sock, self._stop, self._one, _ACCEPT_POLL_S)

    def _one(self, conn: socket.socket) -> None:
        from taskgate.server import peers

        with conn:
            uid, pid = peer_of(conn)
            if uid != os.getuid():
                return  # another user's process (or one the kernel does not show): no answer
            started = peers.start_time(pid) if pid else None
            try:
                conn.settimeout(30)
                request = door.recv_frame(conn, door.MAX_REQUEST)
                conn.settimeout(None)
            except (OSError, ValueError) as exc:
                _try_send(conn, _error(f"taskgate: agent door: {exc}\n"))
                return
            token = request.pop("token", None)
            if not isinstance(token, str) or not hmac.compare_digest(
                token.encode(), self.endpoint.token.encode()
            ):
                _try_send(conn, _error("taskgate: agent door: wrong or missing token\n"))
                return
            # Who asks: the process holding the peer socket (through Claude Code's proxy, the
            # client itself), proven like the Unix door's peer (server/peers.py).
            identity = peers.prove(self.ws.state_dir, pid) if pid else None
            if identity is not None and peers.start_time(pid) != started:
                identity = None  # gone, its pid maybe reused: prove nothing
            with self._slots:
                reply = door.handle(self.ws, request, identity, pid)
            _try_send(conn, reply)

    def close(self) -> None:
        """Stop accepting."""
        self._stop.set()
        self._sock.close()
        self._thread.join(timeout=2)


def _error(text: str) -> dict[str, Any]:
    return {"stdout": "", "stderr": text, "exit": 2}


def _try_send(conn: socket.socket, reply: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):
        door.send_frame(conn, reply)


class Unreachable(Exception):
    """The TCP door could not be reached from here; the message says why."""


_PROXY_VARS = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")


def connect(endpoint: Endpoint, env: dict[str, str] | None = None) -> socket.socket:
    """A connection to the TCP door: directly, else through the HTTP proxy the environment
    names (a sandbox's way out: CONNECT 127.0.0.1:PORT). Raises Unreachable."""
    environ = os.environ if env is None else env
    try:
        return socket.create_connection((HOST, endpoint.port), timeout=10)
    except OSError as exc:
        direct = exc
    proxy = next((environ[v] for v in _PROXY_VARS if environ.get(v)), "")
    if not proxy.startswith("http://"):
        raise Unreachable(f"nothing answers {endpoint.address} ({direct.strerror or direct})")
    return _tunnel(endpoint, urlsplit(proxy))


def _tunnel(endpoint: Endpoint, proxy: Any) -> socket.socket:
    """CONNECT through the proxy at `proxy` (a split http:// URL, credentials allowed)."""
    headers = f"CONNECT {endpoint.address} HTTP/1.1\r\nHost: {endpoint.address}\r\n"
    if proxy.username is not None:
        creds = f"{unquote(proxy.username)}:{unquote(proxy.password or '')}"
        headers += f"Proxy-Authorization: Basic {base64.b64encode(creds.encode()).decode()}\r\n"
    try:
        sock = socket.create_connection((proxy.hostname or HOST, proxy.port or 80), timeout=10)
    except OSError as exc:
        raise Unreachable(
            f"the proxy {proxy.hostname}:{proxy.port} does not answer: {exc}"
        ) from None
    try:
        sock.sendall((headers + "\r\n").encode("ascii"))
        answer = b""
        while b"\r\n\r\n" not in answer and len(answer) < 8192:
            chunk = sock.recv(1)  # byte by byte: nothing after the header is consumed
            if not chunk:
                break
            answer += chunk
        status = answer.split(b"\r\n", 1)[0].decode("latin-1")
        code = status.split()[1:2]
        if code == ["403"]:
            raise Unreachable(
                f"the sandbox's proxy refused {endpoint.address} ({status}): "
                f"'{endpoint.address}' must be in sandbox.network.allowedDomains (run 'taskgate "
                "hooks install' outside the sandbox)"
            )
        if code != ["200"]:
            raise Unreachable(
                f"nothing answers {endpoint.address} behind the sandbox's proxy "
                f"({status or 'no answer'}): is 'taskgate serve' running for this repository? "
                "(SessionStart starts it: start a new session, or ask the person to run "
                "'taskgate serve')"
            )
        sock.settimeout(None)
        return sock
    except OSError as exc:
        sock.close()
        raise Unreachable(f"the proxy failed: {exc}") from None
    except BaseException:
        sock.close()
        raise


def start(ws: Any) -> tuple[TcpDoor | None, str]:
    """The TCP door when `hooks install` chose an endpoint for this repository, and the
    warning to print when it cannot listen ('' otherwise)."""
    endpoint = load(ws.common_dir)
    if endpoint is None:
        return None, ""
    try:
        return TcpDoor(ws, endpoint), ""
    except OSError as exc:
        return None, (
            f"warning: the agent door cannot listen on {endpoint.address} ({exc.strerror}): "
            "sandboxed Claude Code sessions cannot reach it; free the port, or remove "
            f"{config_path(ws.common_dir)} and run 'taskgate hooks install' again"
        )
