"""Server-side HTML: Jinja2 templates (autoescaped) and the helpers they use."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from taskgate.server import markdown

STATE_HELP = {
    "INIT": "claimed; classification next",
    "CLASSIFIED": "risk and agents decided",
    "REQUIREMENTS": "agents write their requirement reports",
    "SYNTHESIS": "the plan is written and waits for your approval",
    "IMPLEMENTATION": "agents implement the plan",
    "VALIDATION": "the build runs against the task branch",
    "REVIEW": "reviewers judge the change",
    "AWAITING_USER_APPROVAL": "the change waits for your review",
    "SCOPE_NEGOTIATION": "deferring work beyond the scope",
    "COMPLETE": "merged into main",
    "CLEANUP": "done; worktrees removed",
}


def _md(text: str | None) -> Markup:
    return Markup(markdown.render(text or ""))  # the renderer escapes everything


def _short(value: Any, n: int = 12) -> str:
    return str(value or "")[:n]


@lru_cache(maxsize=1)
def environment() -> Environment:
    """The template environment (autoescape on for every template)."""
    env = Environment(
        loader=PackageLoader("taskgate.server", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["md"] = _md
    env.filters["short"] = _short
    env.globals["state_help"] = STATE_HELP
    return env


def render(name: str, **context: Any) -> str:
    """Render template `name`."""
    return environment().get_template(name).render(**context)


def keyed(section_id: str, html: str) -> Markup:
    """Wrap a section with its id and a content key, so live updates replace only what
    changed (and never a form the person is typing in, unless it changed)."""
    key = hashlib.sha1(html.encode("utf-8")).hexdigest()[:16]
    return (
        Markup(f'<section id="{section_id}" class="sec" data-section data-key="{key}">')
        + Markup(html)
        + Markup("</section>")
    )
