"""The HTTP hook endpoint (issue 18's door): `POST /hooks/EVENT` with the hook JSON as body.

One decision function, two faces: the body goes through `hooks.dispatch.run_hook`, exactly as
`taskgate hook EVENT` reads it from stdin (same parsing, same handlers, same fail-closed
boundary), and the answer is the JSON the command would have printed (`{}` for "no answer").

Authenticated by its own secret (`hook-secret` beside the dashboard's, 0600), sent as the
`X-Taskgate-Hook-Secret` header; the dashboard's cookie and token do not open this door and
this secret does not open the dashboard. UserPromptSubmit is refused here: it can record a
person's approval, and a request to a local port is no proof that the person typed anything
(it stays a command hook, which the client itself spawns; DESIGN.md "Trust").
"""

from __future__ import annotations

import asyncio
import io
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from taskgate.errors import TaskgateError
from taskgate.server.secret import matches
from taskgate.server.security import SECURITY_HEADERS

HEADER = "x-taskgate-hook-secret"
MAX_BODY = 4 * 1024 * 1024
REFUSED = {"UserPromptSubmit": "UserPromptSubmit stays a command hook: an approval needs a "
           "channel an agent cannot drive (taskgate hooks install writes it)"}  # fmt: skip


def _event(name: str) -> str:
    from taskgate.hooks.dispatch import EVENTS

    key = name.replace("-", "").replace("_", "").lower()
    return next((e for e in EVENTS if e.lower() == key), name)


def _run(event: str, body: str) -> tuple[int, str]:
    from taskgate.hooks.dispatch import run_hook
    from taskgate.store.select import answer_warm

    out = io.StringIO()
    answer_warm(True)  # a PostgreSQL store's PreToolUse data stays in memory (store/pg_warm.py)
    try:
        code = run_hook([event], stdin=io.StringIO(body), stdout=out)
    finally:
        answer_warm(False)
    return code, out.getvalue()


def routes(secret: str) -> list[BaseRoute]:
    """The door's routes, for `app.build_app(extra_routes=...)`."""

    async def hook(request: Request) -> Response:
        if not matches(request.headers.get(HEADER, ""), secret):
            return JSONResponse({"error": f"missing or wrong {HEADER} header"}, 401)
        event = _event(request.path_params["event"])
        if event in REFUSED:
            return JSONResponse({"error": REFUSED[event]}, status_code=403)
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY:
                return JSONResponse({"error": "the hook input is too large"}, 413)
        code, answer = await run_in_threadpool(_run, event, body.decode("utf-8", "replace"))
        if code != 0:
            return JSONResponse({"error": f"taskgate hook {event} exited {code}"}, 400)
        return Response(answer.strip() or "{}", media_type="application/json")

    return [Route("/hooks/{event}", hook, methods=["POST"])]


# The decision's modules (taskgate.hooks.*), imported when the server starts rather than by
# the first hook call (about 8 ms the session's first tool call would wait for).
WARM = ("dispatch", "context", "judge", "effects", "commands", "gitrules", "giteffects",
        "programs")  # fmt: skip


def warm() -> None:
    """Import the decision's modules now (one that moved is simply imported when needed)."""
    import importlib

    for name in WARM:
        try:
            importlib.import_module(f"taskgate.hooks.{name}")
        except ImportError:
            continue


PREFIX = "/hooks/"
THREADS = 40  # decisions at once, as Starlette's thread pool (anyio's default limiter) allows


class HookDoor:
    """The same endpoint as `routes()`, as a bare ASGI app that `app.HostGuard` calls for
    `POST /hooks/EVENT` after its Host check (issue 18: the HTTP PreToolUse on a new
    connection). What it answers is what the Starlette route answers, byte for byte: the same
    checks in the same order (header secret, refused events, body size), the same decision
    (`_run`, in a worker thread: it may read the store), the same headers (the security
    headers HostGuard adds) and the same error answers (a TaskgateError as app.taskgate_error
    renders it, anything else a 500 and re-raised, as Starlette's error middleware does). It
    leaves out Starlette's middleware stack, router, Request/Response objects and HostGuard's
    send wrapper, and hands the decision to a plain thread pool instead of anyio's.
    tests/test_hookdoor_fast.py feeds both the same requests."""

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self._pool = ThreadPoolExecutor(THREADS, thread_name_prefix="taskgate-hook")

    @staticmethod
    def handles(scope: Scope) -> bool:
        """`POST /hooks/EVENT` (EVENT one path segment, as the route's `{event}` matches)."""
        path: str = scope["path"]
        return (
            scope["method"] == "POST"
            and path.startswith(PREFIX)
            and len(path) > len(PREFIX)
            and "/" not in path[len(PREFIX) :]
        )

    def close(self) -> None:
        """Let the worker threads end (a decision under way finishes first)."""
        self._pool.shutdown(wait=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        given = next((v for k, v in scope["headers"] if k == HEADER_BYTES), b"")
        if not matches(given.decode("latin-1"), self.secret):
            await _send(send, 401, _json({"error": f"missing or wrong {HEADER} header"}))
            return
        event = _event(scope["path"][len(PREFIX) :])
        if event in REFUSED:
            await _send(send, 403, _json({"error": REFUSED[event]}))
            return
        body = b""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client is gone: nobody to answer
            body += message.get("body", b"")
            if len(body) > MAX_BODY:
                await _send(send, 413, _json({"error": "the hook input is too large"}))
                return
            if not message.get("more_body", False):
                break
        loop = asyncio.get_running_loop()
        try:
            code, answer = await loop.run_in_executor(
                self._pool, _run, event, body.decode("utf-8", "replace")
            )
        except TaskgateError as exc:
            data = {"ok": False, "error": exc.message, "hint": exc.hint or "",
                    "exit_code": exc.exit_code}  # fmt: skip
            await _send(send, 404 if exc.exit_code == 2 else 503, _json(data))
            return
        except Exception:
            text = PlainTextResponse("Internal Server Error", status_code=500)
            await _send(send, 500, (bytes(text.body), b"text/plain; charset=utf-8"))
            raise
        if code != 0:
            await _send(send, 400, _json({"error": f"taskgate hook {event} exited {code}"}))
            return
        await _send(send, 200, ((answer.strip() or "{}").encode("utf-8"), b"application/json"))


HEADER_BYTES = HEADER.encode("latin-1")


def _json(data: dict[str, Any]) -> tuple[bytes, bytes]:
    return bytes(JSONResponse(data).body), b"application/json"


async def _send(send: Send, status: int, answer: tuple[bytes, bytes]) -> None:
    body, content_type = answer
    headers = [(b"content-length", str(len(body)).encode("latin-1")),
               (b"content-type", content_type), *SECURITY_HEADERS]  # fmt: skip
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
