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

import io

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from taskgate.server.secret import matches

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
