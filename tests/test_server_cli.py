"""`taskgate serve` as a real process: the terminal output, one server per repository, SSE
live updates after CLI commands, the Host guard over real HTTP, and a clean Ctrl-C."""

from __future__ import annotations

import http.client
import json
import time
from pathlib import Path
from urllib.parse import urlsplit

from conftest import Repo
from flow import to_requirements
from server_helpers import Browserless, start_server

TASK = "add-login"


def _sse(base: str, cookie: str) -> http.client.HTTPResponse:
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=20)
    conn.request("GET", "/events", headers={"Cookie": cookie, "Accept": "text/event-stream"})
    response = conn.getresponse()
    assert response.status == 200, response.read()
    return response


def _next_event(stream: http.client.HTTPResponse, kind: str) -> dict[str, object]:
    event = ""
    while True:
        raw = stream.readline()
        if not raw:
            raise EOFError("the event stream ended")
        line = raw.decode().rstrip("\n")
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: ") and event == kind:
            return json.loads(line[6:])  # type: ignore[no-any-return]


def test_serve_pushes_cli_changes_and_keeps_the_secret_off_a_non_terminal(
    repo: Repo, tmp_path: Path
) -> None:
    to_requirements(repo, TASK)
    server = start_server(repo.path, tmp_path / "st")
    try:
        client = Browserless(server.base)
        assert client.get("/")[0] == 401
        assert client.get(f"/login?token={server.token}")[0] == 200
        status, html = client.get("/")
        assert status == 200 and TASK in html
        stream = _sse(server.base, client.cookie_header())
        assert "v" in _next_event(stream, "hello")
        started = time.monotonic()
        repo.ok("agent", "set", TASK, "quality", "WORKING")
        message = _next_event(stream, "change")
        while TASK not in message["tasks"]:  # type: ignore[operator]
            assert message["tasks"] == [], message  # only "anything may have changed" before
            message = _next_event(stream, "change")
        assert time.monotonic() - started < 15
        status, fragment = client.get("/fragment/board")
        assert status == 200 and "ag-WORKING" in fragment
        # A second server for the same repository is refused, saying where the first one is.
        second = repo.run("serve", "--port", "0", "--state-dir", str(tmp_path / "st"))
        assert second.code == 2 and "already running" in second.err and server.base in second.err
        # DNS rebinding over real HTTP: a foreign Host is refused.
        parts = urlsplit(server.base)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        conn.request("GET", "/", headers={"Host": f"rebind.example:{parts.port}",
                                          "Cookie": client.cookie_header()})  # fmt: skip
        assert conn.getresponse().status == 421
    finally:
        code = server.stop()
    out = server.proc.stdout.read() if server.proc.stdout else ""
    err = server.proc.stderr.read() if server.proc.stderr else ""
    assert code == 0, err
    assert server.token not in out + err  # stdout is not a terminal: no login URL printed
    assert "taskgate serve --url" in out
    assert not list((tmp_path / "st").glob("serve/*/server.json"))


def test_serve_refuses_a_non_local_bind_without_the_flag(repo: Repo, tmp_path: Path) -> None:
    result = repo.run("serve", "--host", "0.0.0.0", "--state-dir", str(tmp_path / "st"))
    assert result.code == 2 and "--allow-remote" in result.err


def test_serve_url_is_only_for_a_terminal(repo: Repo, tmp_path: Path) -> None:
    result = repo.run("serve", "--url", "--state-dir", str(tmp_path / "st"))
    assert result.code == 2 and "terminal" in result.err


def test_serve_outside_an_initialised_repository_says_what_to_do(tmp_path: Path) -> None:
    from conftest import git

    (tmp_path / "plain").mkdir()
    git(tmp_path / "plain", "init", "-q")
    result = Repo(tmp_path / "plain").run(
        "serve", "--port", "0", "--state-dir", str(tmp_path / "s")
    )
    assert result.code == 2 and "taskgate init" in result.err


def _consistent(rec: dict[str, object]) -> None:
    """One record = one snapshot: its parts agree with each other."""
    status = rec["status"]
    transitions = rec["transitions"]
    events = rec["events"]
    assert isinstance(status, dict) and isinstance(transitions, list) and isinstance(events, list)
    assert status["_seq"] == rec["seq"] and status["state"] == rec["state"]
    if transitions:
        assert transitions[-1]["to"] == rec["state"]
    assert sum(1 for e in events if e["kind"] == "transition") == len(transitions)


def test_pages_stay_consistent_and_live_while_run_changes_the_store(tmp_path: Path) -> None:
    """`run --all --yes` drives 3 tasks while the board and a task record are read over and
    over: every read is one consistent snapshot, and the live stream keeps up to the end."""
    import subprocess
    import sys
    import threading

    from conftest import SRC, git
    from taskgate.orchestrator.demo import create_sample

    repo = tmp_path / "textkit"
    create_sample(repo, auto_approve=True)
    (repo / "todo.md").write_text("# Tasks\n\n" + "".join(
        f"## h{i}: Helper {i}\n- Purpose: p\n- Scope: src/textkit/h{i}.py and its test\n"
        f"- Components: function, tests\n- Files: src/textkit/h{i}.py, tests/test_h{i}.py\n\n"
        for i in range(3)))  # fmt: skip
    git(repo, "add", "todo.md")
    git(repo, "commit", "-q", "-m", "todo")
    Repo(repo).ok("init")
    server = start_server(repo, tmp_path / "st")
    changes: list[dict[str, object]] = []
    try:
        client = Browserless(server.base)
        client.get(f"/login?token={server.token}")
        stream = _sse(server.base, client.cookie_header())
        _next_event(stream, "hello")

        def listen() -> None:
            try:
                while True:
                    changes.append(_next_event(stream, "change"))
            except Exception:
                return

        threading.Thread(target=listen, daemon=True).start()
        env = {**__import__("os").environ, "PYTHONPATH": str(SRC)}
        run = subprocess.Popen([sys.executable, "-m", "taskgate", "run", "--all", "--yes"],
                               cwd=repo, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)  # fmt: skip
        reads = 0
        while run.poll() is None:
            status, body = client.get("/api/board")
            assert status == 200
            for column in json.loads(body)["columns"]:
                for card in column["tasks"]:
                    assert card["column"] == column["state"]
            status, body = client.get("/api/tasks/h0")
            if status == 200:
                _consistent(json.loads(body))
                reads += 1
        assert run.returncode == 0, run.stderr.read() if run.stderr else ""
        final = json.loads(Repo(repo).ok("status", "--json").out)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the last change reaches the page
            board = json.loads(client.get("/api/board")[1])
            shown = {t["task"]: t["state"] for c in board["columns"] for t in c["tasks"]}
            if all(shown.get(r["task_name"]) == r["state"] for r in final):
                break
            time.sleep(0.05)
        assert all(shown.get(r["task_name"]) == r["state"] for r in final), (shown, final)
        assert {r["state"] for r in final} <= {"CLEANUP", "COMPLETE"} and len(final) == 3
        seen = {t for c in changes for t in c["tasks"]}  # type: ignore[attr-defined]
        assert reads > 0 and {"h0", "h2"} <= seen
    finally:
        server.stop()


def test_bench_script_runs_small() -> None:
    """bench/dashboard.py still runs (tiny sizes; no timing asserted)."""
    import subprocess
    import sys

    from conftest import SRC

    bench = SRC.parent / "bench"
    result = subprocess.run([sys.executable, str(bench / "dashboard.py"), "30", "40", "2"],
                            cwd=bench, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    for expected in (
        "board, 30 tasks, after a todo.md edit",
        "task page, 40 events",
        "commit -> SSE event",
        "run --all --yes over 2 tasks (exit 0, 2 done)",
    ):
        assert expected in result.stdout, result.stdout


def test_serve_says_what_to_do_when_the_port_is_taken(repo: Repo, tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = repo.run("serve", "--port", str(port), "--state-dir", str(tmp_path / "st"))
    assert result.code == 2 and "cannot listen" in result.err and "--port" in result.err
    assert not list((tmp_path / "st").glob("serve/*/server.json"))


def test_allow_host_needs_allow_remote(repo: Repo, tmp_path: Path) -> None:
    result = repo.run("serve", "--allow-host", "box.lan", "--state-dir", str(tmp_path / "st"))
    assert result.code == 2 and "--allow-remote" in result.err


def test_a_terminal_sees_the_login_url_and_an_agent_does_not(repo: Repo, tmp_path: Path) -> None:
    """The person's terminal (a pty) gets the login URL from `serve` and `serve --url`; the
    same command with an agent marker set, or without a terminal, never does."""
    import os
    import pty
    import re
    import select
    import signal
    import subprocess
    import sys

    from conftest import SRC

    env = {**os.environ, "PYTHONPATH": str(SRC)}
    state = str(tmp_path / "st")

    kept: list[int] = []

    def on_a_terminal(
        *args: str, extra_env: dict[str, str] | None = None, until: str = "", keep: bool = False
    ) -> tuple[subprocess.Popen[bytes], str]:
        """Run taskgate with a pty as its terminal; read until `until` (or its exit)."""
        leader, follower = pty.openpty()
        proc = subprocess.Popen(
            [sys.executable, "-m", "taskgate", "--repo", str(repo.path), *args],
            stdin=follower, stdout=follower, stderr=follower, env={**env, **(extra_env or {})},
        )  # fmt: skip
        os.close(follower)
        out = b""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (until.encode() not in out if until else True):
            ready, _, _ = select.select([leader], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(leader, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
        if keep:  # a server keeps writing to its terminal: leave it open until the end
            kept.append(leader)
        else:
            os.close(leader)
        return proc, out.decode(errors="replace")

    server, shown = on_a_terminal(
        "serve", "--port", "0", "--state-dir", state, until="Ctrl-C", keep=True
    )
    try:
        token = next((tmp_path / "st").glob("serve/*/secret")).read_text().strip()
        assert f"/login?token={token}" in shown, shown
        url_cmd, url_out = on_a_terminal("serve", "--url", "--state-dir", state)
        url_cmd.wait(30)
        assert url_cmd.returncode == 0, url_out
        assert re.search(rf"http://127\.0\.0\.1:\d+/login\?token={token}", url_out)
        agent, agent_out = on_a_terminal("serve", "--url", "--state-dir", state,
                                         extra_env={"CLAUDECODE": "1"})  # fmt: skip
        agent.wait(30)
        assert agent.returncode == 2 and token not in agent_out
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(30)
        for fd in kept:
            os.close(fd)


def test_a_unix_socket_for_scripts(repo: Repo, tmp_path: Path) -> None:
    """`--socket PATH`: 0600, the same app (the bearer secret reads /api), removed at exit."""
    import socket
    import stat

    path = tmp_path / "serve.sock"

    class UnixConnection(http.client.HTTPConnection):
        def connect(self) -> None:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(str(path))

    server = start_server(repo.path, tmp_path / "st", "--socket", str(path))
    try:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        for auth, expected in ((None, 401), (f"Bearer {server.token}", 200)):
            conn = UnixConnection("localhost")
            conn.request("GET", "/api/board", headers={"Authorization": auth} if auth else {})
            response = conn.getresponse()
            body = response.read()
            assert response.status == expected, body
        assert "NOT_STARTED" in body.decode()
    finally:
        assert server.stop() == 0
    assert not path.exists()
