"""The ASGI app of `taskgate serve`: one Starlette app, several doors.

`build_app` mounts the dashboard (routes.py) and whatever further doors the caller passes in
`extra_routes` (the HTTP hook endpoint of issue 18, the agent door of issue 14). Every door
shares the Host guard below and the store context; each door does its own authentication
(the dashboard: cookie + CSRF; hooks: a header secret; the agent door: its own socket).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from importlib import resources

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from taskgate.errors import TaskgateError
from taskgate.server import routes, spec_routes
from taskgate.server.context import Server
from taskgate.server.hookdoor import HookDoor
from taskgate.server.security import SECURITY_HEADERS, Gate

_STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}


class HostGuard:
    """Refuse any request whose Host is not this server (DNS rebinding); add security headers."""

    def __init__(self, app: ASGIApp, gate: Gate, hook_door: HookDoor | None = None) -> None:
        self.app = app
        self.gate = gate
        self.hook_door = hook_door  # POST /hooks/EVENT without Starlette (server/hookdoor.py)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), None)
        server = scope.get("server")
        over_unix_socket = server is not None and server[1] is None  # no browser gets there
        if not over_unix_socket and not self.gate.host_ok(host):
            response = PlainTextResponse(
                f"taskgate serve answers only to its own address, not to Host {host!r}\n",
                status_code=421,
            )
            await response(scope, receive, send)
            return
        if self.hook_door is not None and self.hook_door.handles(scope):
            await self.hook_door(scope, receive, send)  # adds the security headers itself
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {k.lower() for k, _ in headers}
                headers += [(k, v) for k, v in SECURITY_HEADERS if k not in present]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def static(request: Request) -> Response:
    """The dashboard's own CSS and JavaScript (package data; no CDN, no build step)."""
    name = request.path_params["name"]
    suffix = name[name.rfind(".") :] if "." in name else ""
    if "/" in name or suffix not in _STATIC_TYPES:
        return PlainTextResponse("not found\n", status_code=404)
    try:
        body = resources.files("taskgate.server").joinpath("static", name).read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        return PlainTextResponse("not found\n", status_code=404)
    return Response(body, media_type=_STATIC_TYPES[suffix])


async def taskgate_error(request: Request, exc: Exception) -> Response:
    """A typed error outside the actions (e.g. a corrupt or lost store): say what to do."""
    from starlette.responses import JSONResponse

    from taskgate.errors import TaskgateError

    assert isinstance(exc, TaskgateError)
    data = {"ok": False, "error": exc.message, "hint": exc.hint or "", "exit_code": exc.exit_code}
    status = 404 if exc.exit_code == 2 else 503
    if request.url.path.startswith(("/api/", "/fragment/", "/events", "/hooks/")):
        return JSONResponse(data, status_code=status)
    text = f"taskgate: {exc.message}\n" + (f"hint: {exc.hint}\n" if exc.hint else "")
    return PlainTextResponse(text, status_code=status)


def build_app(
    server: Server,
    *,
    extra_routes: Sequence[BaseRoute] = (),
    watch: bool = True,
    hook_door: HookDoor | None = None,
) -> ASGIApp:
    """The app: dashboard routes + `extra_routes` (further doors), behind the Host guard;
    `hook_door` answers `POST /hooks/EVENT` ahead of Starlette (the same answers as the route
    `hookdoor.routes()` adds, with less on the way)."""

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        import asyncio

        server.hub.bind(asyncio.get_running_loop())
        if watch and server.watcher is not None:
            server.watcher.start()
        try:
            yield
        finally:
            if server.watcher is not None:
                server.watcher.stop()
            if hook_door is not None:
                hook_door.close()
            server.ctx.close()

    app = Starlette(
        routes=[
            *routes.dashboard_routes(),
            *spec_routes.routes(),
            Route("/static/{name}", static),
            *extra_routes,
        ],
        lifespan=lifespan,
        exception_handlers={TaskgateError: taskgate_error},
    )
    app.state.server = server
    return HostGuard(app, server.gate, hook_door)
