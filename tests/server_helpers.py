"""Helpers for the dashboard tests: an in-process app with a TestClient, and store fingerprints."""

from __future__ import annotations

import hashlib
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from starlette.testclient import TestClient

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
