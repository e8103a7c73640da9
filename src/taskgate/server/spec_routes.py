"""The dashboard's spec-workflow pages: list, one workflow, and answering its questions."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from markupsafe import Markup
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from taskgate.errors import TaskgateError, UsageError
from taskgate.server import actions, pages, specs
from taskgate.server.routes import (
    authed,
    bearer_ok,
    log_answer,
    login_needed,
    message_page,
    read_form,
    render_page,
    server_of,
    session_of,
)
from taskgate.server.security import Session, post_problem


def specs_page(request: Request, session: Session) -> Response:
    """Every spec workflow."""
    rows = specs.listing(server_of(request).ctx.ws.repo)
    body = pages.render("specs.html", specs=rows)
    return render_page(request, title="Specs", page="specs", body=body, api="/api/specs")


def spec_page(request: Request, session: Session) -> Response:
    """One workflow with its pending questions."""
    feature = request.path_params["feature"]
    try:
        data = specs.view(server_of(request).ctx.ws.repo, feature)
    except UsageError as exc:
        return message_page("Not found", exc.message, exc.hint or "", status=404)
    body = pages.render("spec.html", s=data, csrf=session.csrf)
    return render_page(request, title=feature, page="spec", body=str(Markup(body)),
                 api=f"/api/specs/{quote(feature)}")  # fmt: skip


def api_specs(request: Request) -> Response:
    """`/api/specs`."""
    if session_of(request) is None and not bearer_ok(request):
        return login_needed(request)
    return JSONResponse(specs.listing(server_of(request).ctx.ws.repo))


def api_spec(request: Request) -> Response:
    """`/api/specs/ID`."""
    if session_of(request) is None and not bearer_ok(request):
        return login_needed(request)
    try:
        return JSONResponse(
            specs.view(server_of(request).ctx.ws.repo, request.path_params["feature"])
        )
    except UsageError as exc:
        return JSONResponse({"ok": False, "error": exc.message}, status_code=404)


async def answer(request: Request) -> Response:
    """POST: the person's answers to the pending questions the page showed."""
    server = server_of(request)
    feature = request.path_params["feature"]
    try:
        form = await read_form(request)
    except UsageError as exc:
        form = {"_error": exc.message}
    shown = [q for q in form.get("shown", "").split(",") if q]
    given = {k[len("answer.") :]: v for k, v in form.items() if k.startswith("answer.")}
    entry: dict[str, Any] = {
        "task": f"spec:{feature}",
        "action": "answer",
        "kind": "clarification",
        "bound_to": ",".join(shown),
        "remote": request.client.host if request.client else "",
        "text": "\n".join(given.values()),
    }
    problem = form.get("_error", "") or post_problem(
        server.gate,
        session=session_of(request),
        origin=request.headers.get("origin"),
        fetch_site=request.headers.get("sec-fetch-site"),
        csrf=form.get("csrf") or request.headers.get("x-csrf-token", ""),
    )
    wants_json = "application/json" in request.headers.get("accept", "")
    if problem:
        log_answer(server, actions.log_entry(**entry, outcome="refused", reason=problem))
        status = 401 if session_of(request) is None else 403
        return JSONResponse({"ok": False, "error": problem}, status_code=status)
    ws = server.ctx.ws
    try:
        result = await run_in_threadpool(
            specs.answer, ws.repo, ws.common_dir, feature,
            iteration=form.get("iteration", ""), shown=shown, answers=given,
        )  # fmt: skip
    except TaskgateError as exc:
        log_answer(server, actions.log_entry(**entry, outcome="refused", reason=exc.message))
        data = {"ok": False, "error": exc.message, "hint": exc.hint or ""}
        if wants_json:
            return JSONResponse(data, status_code=409 if exc.exit_code in (1, 3) else 400)
        return message_page("Refused", exc.message, exc.hint or "", status=409)
    log_answer(server, actions.log_entry(**entry, outcome="accepted", reason=""))
    if wants_json:
        return JSONResponse(result)
    return RedirectResponse(f"/specs/{quote(feature)}", status_code=303)


def routes() -> list[BaseRoute]:
    """The spec pages' routes."""
    return [
        Route("/specs", authed(specs_page)),
        Route("/specs/{feature}", authed(spec_page)),
        Route("/specs/{feature}/answer", answer, methods=["POST"]),
        Route("/api/specs", api_specs),
        Route("/api/specs/{feature}", api_spec),
    ]
