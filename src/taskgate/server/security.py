"""Who may use the dashboard: the secret URL, the session cookie, CSRF, Origin and Host.

- Host: every request must name one of the server's own addresses (127.0.0.1:PORT,
  localhost:PORT, [::1]:PORT, or the explicit non-local bind): a DNS-rebinding page that
  resolves its own name to 127.0.0.1 sends its own Host and is refused before any route.
- Login: `/login?token=SECRET` (the URL only the person's terminal printed) sets an
  HttpOnly, SameSite=Strict cookie holding a random session id, never the secret itself.
- State changes: POST only, with the session cookie, the session's CSRF token, an Origin
  header naming this server, and (when the browser sends it) Sec-Fetch-Site same-origin.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from taskgate.server.secret import matches

COOKIE = "taskgate_dashboard"
MAX_SESSIONS = 64
SECURITY_HEADERS = (
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
)


def allowed_hosts(bind_host: str, port: int, extra: Iterable[str] = ()) -> frozenset[str]:
    """The Host header values this server answers to."""
    hosts = {f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"}
    if bind_host not in ("127.0.0.1", "localhost", "::1", ""):
        hosts.add(f"[{bind_host}]:{port}" if ":" in bind_host else f"{bind_host}:{port}")
    hosts.update(extra)
    return frozenset(h.lower() for h in hosts)


@dataclass
class Session:
    """A logged-in browser: its CSRF token and when it logged in."""

    sid: str
    csrf: str
    created: float


@dataclass
class Gate:
    """The secret, the allowed hosts and the live sessions of one server."""

    token: str
    hosts: frozenset[str]
    _sessions: OrderedDict[str, Session] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def host_ok(self, host: str | None) -> bool:
        """Is this Host header one of ours (DNS rebinding defence)?"""
        return bool(host) and host.lower() in self.hosts  # type: ignore[union-attr]

    def origin_ok(self, origin: str | None) -> bool:
        """Is this Origin exactly one of ours (http://HOST)?"""
        if not origin:
            return False
        origin = origin.lower()
        return origin.startswith("http://") and origin[len("http://") :] in self.hosts

    def login(self, given: str) -> Session | None:
        """A new session for the right secret, else None."""
        if not given or not matches(given, self.token):
            return None
        session = Session(secrets.token_urlsafe(32), secrets.token_urlsafe(32), time.time())
        with self._lock:
            self._sessions[session.sid] = session
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)
        return session

    def session(self, sid: str | None) -> Session | None:
        """The session of this cookie value, or None."""
        if not sid:
            return None
        with self._lock:
            found = self._sessions.get(sid)
        if found is None or not secrets.compare_digest(found.sid, sid):
            return None
        return found

    def logout(self, sid: str) -> None:
        """Forget a session."""
        with self._lock:
            self._sessions.pop(sid, None)


def cookie_header(sid: str) -> str:
    """Set-Cookie for a new session (no Max-Age: it ends with the browser or the server)."""
    return f"{COOKIE}={sid}; HttpOnly; SameSite=Strict; Path=/"


def post_problem(
    gate: Gate, *, session: Session | None, origin: str | None, fetch_site: str | None, csrf: str
) -> str:
    """Why a state-changing request is refused ("" when it may proceed)."""
    if session is None:
        return "not logged in: open the URL that 'taskgate serve' printed in your terminal"
    if not gate.origin_ok(origin):
        return f"the request's Origin {origin or '(none)'} is not this dashboard"
    if fetch_site is not None and fetch_site not in ("same-origin", "none"):
        return f"cross-site request (Sec-Fetch-Site: {fetch_site})"
    if not csrf or not secrets.compare_digest(csrf.encode(), session.csrf.encode()):
        return "the form's CSRF token is missing or stale: reload the page and try again"
    return ""
