"""The dashboard door: pages, live fragments, the two checkpoint actions, SSE and /api."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import parse_qs, quote

from markupsafe import Markup
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import BaseRoute, Route

from taskgate.errors import TaskgateError, UsageError
from taskgate.server import actions, board, cards, pages, record, timeline
from taskgate.server.context import Server
from taskgate.server.secret import matches
from taskgate.server.security import COOKIE, Session, cookie_header, post_problem

TASK_SECTIONS = (
    "head",
    "checkpoint",
    "timeline",
    "plan",
    "change",
    "validation",
    "reviews",
    "feedback",
    "agents",
    "reports",
    "audit",
    "recovery",
    "log",
)
SHOWN_EVENTS = 300
MAX_FORM_BYTES = 512 * 1024
KEEPALIVE_S = 15.0
_FLASH = {
    "approved": ("Approved. The task moves on; this page follows it live.", "ok"),
    "changes": ("Change request recorded for the agents.", "ok"),
    "refused": ("Refused: nothing was recorded. See the checkpoint below.", "bad"),
}
_log_lock = threading.Lock()


def server_of(request: Request) -> Server:
    server: Server = request.app.state.server
    return server


def session_of(request: Request) -> Session | None:
    return server_of(request).gate.session(request.cookies.get(COOKIE))


def bearer_ok(request: Request) -> bool:
    """`Authorization: Bearer SECRET` for read-only /api/ calls from scripts."""
    auth = request.headers.get("authorization", "")
    return auth.startswith("Bearer ") and matches(auth[7:].strip(), server_of(request).gate.token)


def message_page(
    title: str, text: str, hint: str = "", status: int = 200, refresh: str = ""
) -> HTMLResponse:
    html = pages.render("message.html", title=title, text=text, hint=hint, refresh=refresh)
    return HTMLResponse(html, status_code=status)


def login_needed(request: Request) -> Response:
    text = "This dashboard needs the login URL that 'taskgate serve' printed in your terminal."
    hint = "Run 'taskgate serve --url' in your own terminal to see it again."
    if request.url.path.startswith(("/api/", "/fragment/", "/events")):
        return JSONResponse({"ok": False, "error": text, "hint": hint}, status_code=401)
    return message_page("Log in from your terminal", text, hint, status=401)


def render_page(
    request: Request, *, title: str, page: str, body: str, api: str = "", task_name: str = ""
) -> HTMLResponse:
    flash, kind = _FLASH.get(request.query_params.get("flash", ""), ("", ""))
    html = pages.render(
        "base.html",
        title=title,
        page=page,
        body=Markup(body),
        api=api,
        task_name=task_name,
        repo=str(server_of(request).ctx.ws.repo),
        flash=flash,
        flash_kind=kind,
    )
    return HTMLResponse(html)


def authed(handler: Callable[[Request, Session], Response]) -> Callable[[Request], Response]:
    def endpoint(request: Request) -> Response:
        session = session_of(request)
        if session is None:
            return login_needed(request)
        return handler(request, session)

    return endpoint


# -- login ---------------------------------------------------------------------------------------


def login(request: Request) -> Response:
    """`/login?token=SECRET`: exchange the secret for a session cookie."""
    session = server_of(request).gate.login(request.query_params.get("token", ""))
    if session is None:
        return message_page(
            "This login link is not valid",
            "The token does not match this server's secret (it may have been rotated).",
            "Use the URL that 'taskgate serve' printed in your terminal.",
            status=403,
        )
    response = message_page("Logged in", "Opening the board…", refresh="/")
    response.headers["set-cookie"] = cookie_header(session.sid)
    return response


# -- board ---------------------------------------------------------------------------------------


def _board_parts(server: Server) -> tuple[dict[str, Any], str]:
    """The board's data and HTML, rebuilt only when the store or todo.md changed since.

    Every open board fetches the fragment after each change: one build serves them all. The
    token is read before building, so a change during the build only causes one more build.
    """
    with server.board_lock:
        token = server.ctx.change_token()
        cached = server.board_cache
        if cached is not None and cached[0] == token:
            return cached[1], cached[2]
        with server.ctx.reading() as engine:
            data = board.build(engine, server.cards)
        head = pages.keyed("board-head", pages.render("boardhead.html", board=data))
        html = str(head + Markup('<div id="board" class="board">') + cards.columns(data)
                   + Markup("</div>"))  # fmt: skip
        server.board_cache = (token, data, html)
        return data, html


def board_page(request: Request, session: Session) -> Response:
    """The board."""
    _, html = _board_parts(server_of(request))
    search = (  # outside the live sections: an update never takes what the person typed
        '<input id="filter" class="filter" type="search" placeholder="Filter tasks by name, '
        'title, owner or agent" aria-label="filter tasks">'
    )
    return render_page(request, title="Board", page="board", body=search + html, api="/api/board")


def board_fragment(request: Request, session: Session) -> Response:
    """The board's sections, for the live update."""
    return HTMLResponse(_board_parts(server_of(request))[1])


def api_board(request: Request) -> Response:
    """`/api/board`: the board as JSON."""
    if session_of(request) is None and not bearer_ok(request):
        return login_needed(request)
    return JSONResponse(_board_parts(server_of(request))[0])


# -- task ----------------------------------------------------------------------------------------


def _read_snapshot(engine: Any, name: str) -> Any:
    """One consistent read of the task; a page view never re-renders views (writes nothing)."""
    from taskgate.errors import Corrupted
    from taskgate.store.base import StoreCorrupt

    try:
        with engine.store.read() as tx:
            return tx.snapshot(name)
    except StoreCorrupt as exc:
        raise Corrupted(str(exc), hint="run 'taskgate recover'") from exc


def _task_record(server: Server, task: str) -> tuple[dict[str, Any] | None, str, str]:
    """(record, timeline svg, not-started html); raises UsageError for unknown tasks."""
    from taskgate.engine.lifecycle import availability

    with server.ctx.reading() as engine:
        name = engine.check_task_name(task)
        snap = _read_snapshot(engine, name)
        if snap is None:
            entry = next((a for a in availability(engine) if a.name == name), None)
            if entry is None:
                raise UsageError(
                    f"no task '{name}' in todo.md or the store",
                    hint="see the board for the tasks there are",
                )
            row = {
                "task": entry.name,
                "title": entry.title,
                "availability": entry.availability.value,
                "availability_rule": entry.rule,
                "availability_message": entry.message,
            }
            return None, "", pages.render("notstarted.html", t=row)
        rec = record.build(engine, snap)
    return rec, timeline.render(snap), ""


def _task_html(server: Server, task: str, session: Session) -> str:
    rec, svg, not_started = _task_record(server, task)
    if rec is None:
        return str(pages.keyed("head", not_started))
    return Markup("").join(
        pages.keyed(
            name,
            pages.render(
                f"task/{name}.html",
                r=rec,
                csrf=session.csrf,
                svg=Markup(svg),
                shown_events=SHOWN_EVENTS,
            ),
        )
        for name in TASK_SECTIONS
    )


def _usage_page(request: Request, exc: UsageError) -> Response:
    return message_page("Not found", exc.message, exc.hint or "", status=404)


def task_page(request: Request, session: Session) -> Response:
    """One task: checkpoint, timeline, plan, change, validation, reviews, audit, recovery."""
    task = request.path_params["task"]
    try:
        html = _task_html(server_of(request), task, session)
    except UsageError as exc:
        return _usage_page(request, exc)
    body = f'<div id="task" class="taskpage">{html}</div>'
    return render_page(
        request, title=task, page="task", body=body, api=f"/api/tasks/{quote(task)}", task_name=task
    )


def task_fragment(request: Request, session: Session) -> Response:
    """The task page's sections, for the live update."""
    try:
        return HTMLResponse(_task_html(server_of(request), request.path_params["task"], session))
    except UsageError as exc:
        return JSONResponse({"ok": False, "error": exc.message}, status_code=404)


def api_task(request: Request) -> Response:
    """`/api/tasks/T`: the task's whole record as JSON."""
    if session_of(request) is None and not bearer_ok(request):
        return login_needed(request)
    try:
        rec, _, _ = _task_record(server_of(request), request.path_params["task"])
    except UsageError as exc:
        return JSONResponse({"ok": False, "error": exc.message, "hint": exc.hint}, 404)
    if rec is None:
        return JSONResponse({"ok": False, "error": "not started"}, status_code=404)
    return Response(
        json.dumps(record.export(rec), default=str, sort_keys=True), media_type="application/json"
    )


# -- the two checkpoint actions ------------------------------------------------------------------


async def read_form(request: Request) -> dict[str, str]:
    if request.headers.get("content-type", "").split(";")[0].strip() != (
        "application/x-www-form-urlencoded"
    ):
        return {}
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise UsageError("the form is too large")
    fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {k: v[0] for k, v in fields.items()}


def log_answer(server: Server, entry: dict[str, Any]) -> None:
    """Every answer received, accepted or refused, with its channel (0600 JSON lines)."""
    from taskgate.engine.clock import iso, system_clock

    entry = {"at": iso(system_clock()), **entry}
    server.log.append(entry)
    del server.log[:-200]
    line = json.dumps(entry, sort_keys=True) + "\n"
    with _log_lock:
        fd = os.open(server.ctx.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)
    print(
        f"dashboard: {entry['action']} {entry['kind']} of '{entry['task']}' "
        f"({entry['bound_to'][:12]}) from {entry['remote']}: {entry['outcome']}"
        + (f" - {entry['reason']}" if entry["reason"] else ""),
        file=sys.stderr,
    )


def _answer(request: Request, status: int, data: dict[str, Any], flash: str) -> Response:
    if "application/json" in request.headers.get("accept", ""):
        return JSONResponse(data, status_code=status)
    if status in (401, 403) and not data.get("ok"):
        return message_page(
            "Refused", str(data.get("error", "")), str(data.get("hint", "")), status=status
        )
    target = f"/tasks/{quote(request.path_params['task'])}?flash={flash}"
    return RedirectResponse(target, status_code=303)


async def _act(request: Request, action: str) -> Response:
    server = server_of(request)
    task = request.path_params["task"]
    remote = request.client.host if request.client else ""
    try:
        form = await read_form(request)
    except UsageError as exc:
        form = {"_error": exc.message}
    kind, bound, text = form.get("kind", ""), form.get("bound_to", ""), form.get("text", "")
    entry = dict(task=task, action=action, kind=kind, bound_to=bound, remote=remote, text=text)
    problem = form.get("_error", "") or post_problem(
        server.gate,
        session=session_of(request),
        origin=request.headers.get("origin"),
        fetch_site=request.headers.get("sec-fetch-site"),
        csrf=form.get("csrf") or request.headers.get("x-csrf-token", ""),
    )
    if problem:
        log_answer(server, actions.log_entry(**entry, outcome="refused", reason=problem))
        status = 401 if session_of(request) is None else 403
        return _answer(
            request,
            status,
            {"ok": False, "error": problem, "hint": "reload the page from your login URL"},
            "refused",
        )

    def run(engine: Any) -> actions.Outcome:
        if action == "approve":
            return actions.approve(engine, task, kind, bound)
        return actions.request_changes(engine, task, kind, bound, text)

    try:
        outcome = await run_in_threadpool(server.ctx.writing, run)
    except TaskgateError as exc:
        log_answer(server, actions.log_entry(**entry, outcome="refused", reason=exc.message))
        data = {
            "ok": False,
            "error": exc.message,
            "hint": exc.hint or "",
            "violations": [v.render() for v in getattr(exc, "violations", ())],
        }
        return _answer(request, 409 if exc.exit_code == 1 else 400, data, "refused")
    log_answer(server, actions.log_entry(**entry, outcome="accepted", reason=""))
    return _answer(
        request, 200, outcome.to_json(), "approved" if action == "approve" else "changes"
    )


async def approve(request: Request) -> Response:
    """POST: approve the plan / change the page showed."""
    return await _act(request, "approve")


async def request_changes(request: Request) -> Response:
    """POST: the person's change request, as the agents' feedback."""
    return await _act(request, "request-changes")


# -- live updates --------------------------------------------------------------------------------


async def events(request: Request) -> Response:
    """Server-sent events: one `change` per store change ({"v", "tasks"})."""
    if session_of(request) is None:
        return login_needed(request)
    hub = server_of(request).hub
    queue = hub.subscribe()

    async def stream() -> AsyncIterator[str]:
        try:
            yield f"retry: 1000\nevent: hello\ndata: {json.dumps({'v': hub.version})}\n\n"
            while True:
                try:
                    message = await asyncio.wait_for(queue.get(), timeout=KEEPALIVE_S)
                except TimeoutError:
                    yield ": keepalive\n\n"
                    continue
                if message is None:
                    return
                yield f"event: change\ndata: {json.dumps(message)}\n\n"
        finally:
            hub.unsubscribe(queue)

    return StreamingResponse(
        stream(), media_type="text/event-stream", headers={"X-Accel-Buffering": "no"}
    )


def dashboard_routes() -> list[BaseRoute]:
    """The dashboard's routes (app.build_app adds the other doors beside them)."""
    return [
        Route("/login", login),
        Route("/favicon.ico", lambda request: Response(status_code=204)),
        Route("/", authed(board_page)),
        Route("/fragment/board", authed(board_fragment)),
        Route("/tasks/{task}", authed(task_page)),
        Route("/fragment/tasks/{task}", authed(task_fragment)),
        Route("/tasks/{task}/approve", approve, methods=["POST"]),
        Route("/tasks/{task}/request-changes", request_changes, methods=["POST"]),
        Route("/events", events),
        Route("/api/board", api_board),
        Route("/api/tasks/{task}", api_task),
    ]
