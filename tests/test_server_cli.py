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
        line = stream.readline().decode().rstrip("\n")
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
        assert TASK in message["tasks"]  # type: ignore[operator]
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
