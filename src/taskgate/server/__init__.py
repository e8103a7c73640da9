"""`taskgate serve`: the long-lived server (DESIGN.md "Trust": one writer, several doors).

Doors, each a set of routes on one ASGI app (`app.build_app`):
- the dashboard for the person (`routes.py`, `templates/`, `static/`): secret URL -> cookie,
  CSRF and Origin/Host checks on every state-changing request;
- the HTTP hook endpoint (issue 18) and the agent door (issue 14) plug in through
  `app.build_app(extra_routes=...)` / `extra_listeners` without touching the dashboard.

Nothing here is imported by the hook path or by commands that do not serve: only
`cli/serve_cmds.py` imports this package, inside its handler. The modules without a web
framework (`secret`, `markdown`, `diffview`, `timeline`, `board`, `record`, `watch`, `actions`)
are plain Python and testable on their own.
"""
