"""The agent door on 127.0.0.1 (server/door_tcp.py, issue 14): what Claude Code's Linux sandbox
reaches through its proxy, since it refuses Unix sockets. Real `taskgate serve`, real bwrap;
tests/test_agent_door_claude_real.py proves the same with the real Claude Code.

- `hooks install` chooses the endpoint (port + token, 0600) and names `127.0.0.1:PORT` in
  `sandbox.network.allowedDomains`; `--no-sandbox` writes no sandbox settings;
- a confined CLI that cannot use the door's socket reaches the TCP door, as an agent request;
- the TCP door answers only with the token, refuses what the Unix door refuses, and an HTTP
  request (a web page) never parses; nothing of that changes the store;
- the CONNECT tunnel through a proxy (the sandbox's way out) works, and a proxy's refusal is
  named with what to do.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import struct
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import SRC, Repo, Run, make_repo
from flow import to_classified, to_synthesis
from server_helpers import Running, fingerprint, start_server
from taskgate.agents import sandbox
from taskgate.hooks.client_sandbox import unsupported
from taskgate.server import door, door_tcp
from test_agent_door import door_events, launch

TASK = "add-login"
needs_bwrap = pytest.mark.skipif(not sandbox.probe()[0], reason="bubblewrap does not work here")


def _settings(repo: Repo) -> dict:  # type: ignore[type-arg]
    return json.loads((repo.path / ".claude" / "settings.json").read_text())


def test_install_chooses_the_endpoint_and_allows_exactly_it(repo: Repo) -> None:
    result = repo.ok("hooks", "install", "--project", "--sandbox")
    endpoint = door_tcp.load(repo.path / ".git")
    assert endpoint is not None and endpoint.port in door_tcp.PORTS
    path = door_tcp.config_path(repo.path / ".git")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    network = _settings(repo)["sandbox"]["network"]
    assert network["allowedDomains"] == [f"127.0.0.1:{endpoint.port}"]
    # the door's directory (socket, endpoint) is out of the session's reach
    deny = _settings(repo)["sandbox"]["filesystem"]["denyWrite"]
    assert "/" + str(path.parent.resolve()) in deny
    assert "sandbox settings in" in result.out
    # the same endpoint on a second install: the settings do not change
    before = (repo.path / ".claude" / "settings.json").read_bytes()
    repo.ok("hooks", "install", "--project", "--sandbox")
    assert door_tcp.load(repo.path / ".git") == endpoint
    assert (repo.path / ".claude" / "settings.json").read_bytes() == before
    repo.ok("hooks", "uninstall", "--project")
    assert "sandbox" not in _settings(repo)


@pytest.mark.skipif(bool(unsupported()), reason="Claude Code's sandbox cannot run here")
def test_the_sandbox_settings_are_the_default_and_can_be_declined(repo: Repo) -> None:
    repo.ok("hooks", "install", "--project")
    assert _settings(repo)["sandbox"]["enabled"] is True
    repo.ok("hooks", "uninstall", "--project")
    out = repo.ok("hooks", "install", "--project", "--no-sandbox").out
    assert "sandbox" not in _settings(repo) and "unconfined" in out
    assert _settings(repo)["hooks"]["PreToolUse"]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Repo, Running]]:
    """A repository with the TCP door's endpoint chosen and `taskgate serve` running."""
    repo = make_repo(tmp_path / "r")
    door_tcp.ensure(repo.path / ".git")
    server = start_server(repo.path, tmp_path / "st")
    try:
        yield repo, server
    finally:
        server.stop()


def _endpoint(repo: Repo) -> door_tcp.Endpoint:
    endpoint = door_tcp.load(repo.path / ".git")
    assert endpoint is not None
    return endpoint


def _ask(repo: Repo, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", _endpoint(repo).port), timeout=30) as sock:
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def _frame(data: object) -> bytes:
    body = json.dumps(data).encode()
    return struct.pack(">I", len(body)) + body


def _reply(raw: bytes) -> dict:  # type: ignore[type-arg]
    (size,) = struct.unpack(">I", raw[:4])
    data = json.loads(raw[4 : 4 + size])
    assert isinstance(data, dict)
    return data


def test_the_tcp_door_needs_the_token_and_refuses_what_the_door_refuses(
    served: tuple[Repo, Running],
) -> None:
    repo, _ = served
    to_synthesis(repo, TASK)
    repo.ok("present", TASK)
    before = fingerprint(repo.path)
    cwd = str(repo.worktree(TASK))
    transition = {"argv": ["transition", TASK, "IMPLEMENTATION"], "cwd": cwd, "session": "s1"}
    for token in (None, "", "0" * 64, _endpoint(repo).token[:-1] + "x"):
        request = dict(transition, **({"token": token} if token is not None else {}))
        reply = _reply(_ask(repo, _frame(request)))
        assert reply["exit"] == 2 and "token" in reply["stderr"], reply
    # a web page cannot speak it: "POST" read as a length is far above the limit
    page = b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}"
    try:
        raw = _ask(repo, page)
    except ConnectionResetError:  # closed with the page's body unread: the reply may be lost
        raw = b""
    assert not raw or "exceeds the limit" in _reply(raw)["stderr"], raw
    token = _endpoint(repo).token
    for argv in (["approve", TASK, "plan"], ["say", TASK, "approved"],
                 ["--session", "s1", "approve", TASK, "plan"], ["hooks", "uninstall"]):  # fmt: skip
        reply = _reply(_ask(repo, _frame({"argv": argv, "cwd": cwd, "token": token})))
        assert reply["exit"] != 0 and "refused at the agent door" in reply["stderr"], reply
    assert fingerprint(repo.path) == before
    assert repo.ok("status", TASK, "--json").json()["state"] == "SYNTHESIS"


def test_the_peer_is_told_by_the_kernel() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        client = socket.create_connection(listener.getsockname())
        conn, _ = listener.accept()
        with client, conn:
            assert door_tcp.peer_of(conn) == (os.getuid(), os.getpid())


def confined_without_socket(repo: Repo, *args: str, proven: str | None = "s1") -> Run:
    """`python -m taskgate ARGS` in bwrap, the file system read-only and the door's Unix
    socket replaced by /dev/null (as unreachable as under a seccomp filter); its outermost
    process registered for session `proven` (as SessionStart registers a client), or not."""
    bwrap = sandbox.probe()[0]
    sock = door.door_path(repo.path / ".git")
    env = {**os.environ, "PYTHONPATH": str(SRC), "TASKGATE_SESSION": "s1"}
    proc = launch(
        [bwrap, "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
         "--ro-bind", "/dev/null", str(sock), "--setenv", "TASKGATE_SANDBOX", "bwrap",
         "--chdir", str(repo.worktree(TASK)), sys.executable, "-P", "-m", "taskgate", *args],
        env, proven, state_dir=repo.path / ".taskgate",
    )  # fmt: skip
    return Run(proc.returncode, proc.stdout, proc.stderr)


@needs_bwrap
def test_a_confined_cli_without_unix_sockets_uses_the_tcp_door(
    served: tuple[Repo, Running],
) -> None:
    repo, _ = served
    to_classified(repo, TASK)
    result = confined_without_socket(repo, "transition", TASK, "REQUIREMENTS")
    assert result.code == 0, result.err
    assert repo.ok("status", TASK, "--json").json()["state"] == "REQUIREMENTS"
    events = door_events(repo)
    assert [e["argv"] for e in events] == [["transition", TASK, "REQUIREMENTS"]], events
    before = fingerprint(repo.path)
    refused = confined_without_socket(repo, "approve", TASK, "plan")
    assert refused.code != 0 and fingerprint(repo.path) == before
    # identity from the connection, as on the Unix socket: an unregistered process is nobody
    nobody = confined_without_socket(repo, "transition", TASK, "CLASSIFIED", "--reason", "x",
                                     proven=None)  # fmt: skip
    assert nobody.code != 0 and "R-LCK-09" in nobody.err, nobody.err
    assert repo.ok("status", TASK, "--json").json()["state"] == "REQUIREMENTS"


class _Proxy:
    """A minimal CONNECT proxy on 127.0.0.1 (Claude Code's, in miniature): checks the
    credentials, answers `status` and, on 200, relays bytes to the target."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.seen: list[bytes] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        head = b""
        while b"\r\n\r\n" not in head:
            head += conn.recv(1)
        self.seen.append(head)
        target = head.split()[1].decode()
        if self.status != 200:
            conn.sendall(f"HTTP/1.1 {self.status} Forbidden\r\n\r\n".encode())
            conn.close()
            return
        host, port = target.rsplit(":", 1)
        upstream = socket.create_connection((host, int(port)))
        conn.sendall(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        threading.Thread(target=self._pipe, args=(upstream, conn), daemon=True).start()
        self._pipe(conn, upstream)

    @staticmethod
    def _pipe(src: socket.socket, dest: socket.socket) -> None:
        try:
            while chunk := src.recv(65536):
                dest.sendall(chunk)
            dest.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def test_the_tunnel_through_a_proxy(served: tuple[Repo, Running]) -> None:
    repo, _ = served
    to_classified(repo, TASK)
    endpoint = _endpoint(repo)
    proxy = _Proxy()
    url = f"http://user%40x:p%3Ass@127.0.0.1:{proxy.port}"
    from urllib.parse import urlsplit

    sock = door_tcp._tunnel(endpoint, urlsplit(url))
    with sock:
        door.send_frame(sock, {"argv": ["status", TASK], "cwd": str(repo.path),
                               "token": endpoint.token})  # fmt: skip
        reply = door.recv_frame(sock, door.MAX_REPLY)
    assert reply["exit"] == 0 and TASK in reply["stdout"], reply
    assert b"CONNECT 127.0.0.1:" in proxy.seen[0]
    assert b"Proxy-Authorization: Basic dXNlckB4OnA6c3M=" in proxy.seen[0]  # user@x:p:ss

    refusing = _Proxy(status=403)
    with pytest.raises(door_tcp.Unreachable, match="allowedDomains"):
        door_tcp._tunnel(endpoint, urlsplit(f"http://127.0.0.1:{refusing.port}"))
    nobody = _Proxy(status=502)  # the proxy could not reach the port: no server
    with pytest.raises(door_tcp.Unreachable, match="taskgate serve"):
        door_tcp._tunnel(endpoint, urlsplit(f"http://127.0.0.1:{nobody.port}"))


def test_no_endpoint_no_listener(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    assert door_tcp.load(repo.path / ".git") is None
    assert door_tcp.start(type("W", (), {"common_dir": repo.path / ".git"})()) == (None, "")


def test_session_start_starts_the_door_a_sandboxed_session_writes_through(tmp_path: Path) -> None:
    """Issue 14 ("started on demand, e.g. by the SessionStart hook"): with the TCP door chosen
    (the sandbox settings, the default install) and no server running, the SessionStart hook
    the client spawns starts `taskgate serve`, so the session's confined `taskgate` commands
    find the door; a second session finds it running and starts nothing."""
    from taskgate.server.autostart import listening
    from test_hooks_dispatch import fixture

    repo = make_repo(tmp_path / "r")
    endpoint = door_tcp.ensure(repo.path / ".git")
    assert not listening(endpoint.port)
    env = {"TASKGATE_STATE_DIR": str(tmp_path / "st")}
    started = fixture("session_start", repo, session_id="first", source="startup")
    try:
        repo.ok("hook", "SessionStart", stdin=json.dumps(started), session=None, env=env)
        assert listening(endpoint.port)
        infos = list((tmp_path / "st").glob("serve/*/server.json"))
        assert len(infos) == 1
        pid = json.loads(infos[0].read_text())["pid"]
        again = fixture("session_start", repo, session_id="second", source="startup")
        out = repo.ok("hook", "SessionStart", stdin=json.dumps(again), session=None, env=env)
        assert "R-LCK-09" not in out.out
        assert json.loads(infos[0].read_text())["pid"] == pid  # the same server
    finally:
        for info in (tmp_path / "st").glob("serve/*/server.json"):
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(json.loads(info.read_text())["pid"]), signal.SIGTERM)
    deadline = time.monotonic() + 10
    while listening(endpoint.port) and time.monotonic() < deadline:
        time.sleep(0.05)


def test_session_start_without_a_tcp_door_starts_nothing(tmp_path: Path) -> None:
    from test_hooks_dispatch import fixture

    repo = make_repo(tmp_path / "r")  # hooks install --no-sandbox chose no TCP door
    env = {"TASKGATE_STATE_DIR": str(tmp_path / "st")}
    data = fixture("session_start", repo, session_id="first", source="startup")
    repo.ok("hook", "SessionStart", stdin=json.dumps(data), session=None, env=env)
    assert not list((tmp_path / "st").glob("serve/*/server.json"))
