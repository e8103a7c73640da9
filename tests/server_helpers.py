"""Helpers for the dashboard tests: an in-process app with a TestClient, and store fingerprints."""

from __future__ import annotations

import hashlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from starlette.testclient import TestClient

from conftest import SRC
from taskgate.server import secret
from taskgate.server.app import build_app
from taskgate.server.context import Server, ServerContext
from taskgate.server.security import COOKIE, Gate, allowed_hosts
from taskgate.server.watch import Hub

PORT = 7457
BASE = f"http://127.0.0.1:{PORT}"
ORIGIN = BASE


@dataclass
class Dash:
    """A logged-in dashboard client."""

    client: TestClient
    server: Server
    token: str

    def csrf(self, page_html: str) -> str:
        """The CSRF token in a rendered page's form."""
        match = re.search(r'name="csrf" value="([^"]+)"', page_html)
        assert match, "the page has no checkpoint form"
        return match.group(1)

    def bound(self, page_html: str) -> str:
        """The hash / SHA the page's Approve form carries."""
        match = re.search(r'name="bound_to" value="([^"]*)"', page_html)
        assert match, "the page has no checkpoint form"
        return match.group(1)

    def post(
        self,
        path: str,
        data: dict[str, str],
        *,
        origin: str | None = ORIGIN,
        json_reply: bool = True,
        **headers: str,
    ):  # type: ignore[no-untyped-def]
        """POST a form like the page's JavaScript does."""
        h = {"accept": "application/json"} if json_reply else {}
        if origin is not None:
            h["origin"] = origin
        h.update(headers)
        return self.client.post(path, data=data, headers=h, follow_redirects=False)


@contextmanager
def dashboard(repo: Path, state_dir: Path, *, login: bool = True) -> Iterator[Dash]:
    """The app for `repo`, in-process (no watcher thread), with a client on 127.0.0.1:PORT."""
    ctx = ServerContext.open(repo, state_dir)
    token = secret.load_or_create(state_dir / "secret")
    server = Server(ctx, Gate(token, allowed_hosts("127.0.0.1", PORT)), Hub())
    app = build_app(server, watch=False)
    with TestClient(app, base_url=BASE) as client:
        dash = Dash(client, server, token)
        if login:
            r = client.get(f"/login?token={token}")
            assert r.status_code == 200 and client.cookies.get(COOKIE)
        yield dash


def fingerprint(repo: Path) -> str:
    """Every row of every table of the store (changes nothing)."""
    conn = sqlite3.connect(f"{(repo / '.taskgate' / 'state.db').as_uri()}?mode=ro", uri=True)
    try:
        dump = "\n".join(conn.iterdump())
    finally:
        conn.close()
    return hashlib.sha256(dump.encode()).hexdigest()


@dataclass
class Running:
    """A real `taskgate serve` process."""

    proc: subprocess.Popen[str]
    base: str
    token: str
    state_dir: Path

    def login_url(self) -> str:
        """The URL the person's terminal would show."""
        return f"{self.base}/login?token={self.token}"

    def stop(self) -> int:
        """Ctrl-C, as the person would; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        return self.proc.returncode


def start_server(
    repo: Path, state_dir: Path, *extra: str, env: dict[str, str] | None = None
) -> Running:
    """Start `taskgate serve --port 0` for `repo` and wait for its address."""
    full_env = {**os.environ, "PYTHONPATH": str(SRC), **(env or {})}
    full_env.pop("TASKGATE_SESSION", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "taskgate", "--repo", str(repo), "serve", "--port", "0",
         "--state-dir", str(state_dir), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env,
    )  # fmt: skip
    assert proc.stdout is not None
    first = proc.stdout.readline()
    match = re.search(r"dashboard at (http://[^/\s]+)/", first)
    if match is None:
        proc.kill()
        raise AssertionError(
            f"serve did not start: {first}{proc.stderr.read() if proc.stderr else ''}"
        )
    [secret_file] = list(state_dir.glob("serve/*/secret"))
    return Running(proc, match.group(1), secret_file.read_text().strip(), state_dir)


class Browserless:
    """A tiny HTTP client with a cookie jar (stdlib only), for the real-server tests."""

    def __init__(self, base: str) -> None:
        import http.cookiejar
        import urllib.request

        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
        """GET; returns (status, body)."""
        import urllib.error
        import urllib.request

        request = urllib.request.Request(self.base + path, headers=headers or {})
        try:
            with self.opener.open(request, timeout=30) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def cookie_header(self) -> str:
        """The Cookie header value the jar would send."""
        return "; ".join(f"{c.name}={c.value}" for c in self.jar)
