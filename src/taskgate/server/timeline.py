"""The task page's timeline chart: an SVG drawn by the server from the audit events.

Rows: the protocol state over time (a band per state visit), one row per agent with a bar
per invocation (invoked -> completed; the mode and round in its tooltip), and a row of marks
for presentations, approvals, change requests, validations and review verdicts. The x axis
is time when the events spread over time, else event order (a demo run records many events
in the same second); the chart says which. Every text is escaped.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from html import escape

from taskgate.store.records import EventRow, TaskSnapshot

WIDTH = 960
LABEL = 120
ROW = 22
PAD = 6
MIN_BAR = 3.0


@dataclass(frozen=True)
class _Axis:
    mode: str  # "time" | "order"
    start: float
    span: float

    def x(self, value: float) -> float:
        frac = 0.0 if self.span <= 0 else (value - self.start) / self.span
        return LABEL + frac * (WIDTH - LABEL - PAD)


def _epoch(at: str) -> float | None:
    try:
        return datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _positions(events: tuple[EventRow, ...]) -> tuple[_Axis, list[float]]:
    times = [_epoch(e.at) for e in events]
    known = [t for t in times if t is not None]
    distinct = len(set(known))
    if (
        known
        and len(known) == len(times)
        and max(known) - min(known) >= 60
        and (distinct * 2 >= len(known))
    ):
        values = [t for t in times if t is not None]
        return _Axis("time", min(values), max(values) - min(values)), values
    return _Axis("order", 0.0, float(max(len(events) - 1, 1))), [
        float(i) for i in range(len(events))
    ]


def _title(text: str) -> str:
    return f"<title>{escape(text)}</title>"


def render(snap: TaskSnapshot, *, now: str | None = None) -> str:
    """The SVG (a string of markup, escaped) for one task."""
    events = tuple(snap.events)
    if not events:
        return '<p class="muted">No events recorded yet.</p>'
    axis, xs = _positions(events)
    agents = list(
        dict.fromkeys(
            [
                *snap.task.required_agents,
                *(
                    str(e.payload.get("agent"))
                    for e in events
                    if e.kind in ("agent_invoked", "agent_completed")
                ),
            ]
        )
    )
    rows = ["state", *agents, "checks"]
    top = 8
    height = top + ROW * len(rows) + 44
    y_of = {name: top + i * ROW for i, name in enumerate(rows)}
    end_x = axis.x(xs[-1])
    parts = [
        f'<svg class="timeline" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'xmlns="http://www.w3.org/2000/svg" aria-label="timeline of {escape(snap.task.name)}">'
    ]
    for name, y in y_of.items():
        label = {"state": "state", "checks": "checkpoints · checks"}.get(name, f"agent {name}")
        parts.append(f'<text class="lbl" x="4" y="{y + 15}">{escape(label)}</text>')
        parts.append(
            f'<line class="grid" x1="{LABEL}" x2="{WIDTH - PAD}" y1="{y + ROW}" y2="{y + ROW}"/>'
        )
    parts += _states(snap, events, xs, axis, y_of["state"], end_x)
    parts += _agents(events, xs, axis, y_of, end_x)
    parts += _marks(events, xs, axis, y_of["checks"])
    parts += _ticks(events, xs, axis, top + ROW * len(rows))
    parts.append("</svg>")
    return "".join(parts)


def _states(
    snap: TaskSnapshot,
    events: tuple[EventRow, ...],
    xs: list[float],
    axis: _Axis,
    y: int,
    end_x: float,
) -> list[str]:
    visits: list[tuple[str, float, str]] = []
    first = "INIT"
    for e, x in zip(events, xs, strict=True):
        if e.kind == "transition":
            if not visits:
                first = str(e.payload.get("from") or "INIT")
            visits.append((str(e.payload.get("to")), x, e.at))
    spans = [(first, xs[0], events[0].at), *visits]
    out = []
    for i, (state, start, at) in enumerate(spans):
        x0 = axis.x(start)
        x1 = axis.x(spans[i + 1][1]) if i + 1 < len(spans) else max(end_x, x0 + 40)
        w = max(x1 - x0, MIN_BAR)
        out.append(
            f'<rect class="st st-{escape(state)}" x="{x0:.1f}" y="{y + 3}" width="{w:.1f}" '
            f'height="{ROW - 6}">{_title(f"{state} from {at}")}</rect>'
        )
        if w > 8 * len(state):
            out.append(f'<text class="stl" x="{x0 + 3:.1f}" y="{y + 15}">{escape(state)}</text>')
    current = snap.task.state
    out.append(
        f'<text class="now" x="{WIDTH - PAD}" y="{y - 1 if y > 8 else 7}" '
        f'text-anchor="end">now: {escape(current)}</text>'
    )
    return out


def _agents(
    events: tuple[EventRow, ...], xs: list[float], axis: _Axis, y_of: dict[str, int], end_x: float
) -> list[str]:
    out: list[str] = []
    open_bar: dict[str, tuple[float, EventRow]] = {}
    rounds: dict[tuple[str, str], int] = {}

    def bar(agent: str, start: float, began: EventRow, x_end: float, status: str, at: str) -> None:
        y = y_of.get(agent)
        if y is None:
            return
        mode = str(began.payload.get("mode") or "")
        key = (agent, mode)
        rounds[key] = rounds.get(key, 0) + 1
        x0 = axis.x(start)
        w = max(x_end - x0, MIN_BAR)
        tip = f"{agent} {mode} round {rounds[key]}: {status} ({began.at} - {at})"
        out.append(
            f'<rect class="bar mode-{escape(mode)} status-{escape(status)}" '
            f'x="{x0:.1f}" y="{y + 5}" width="{w:.1f}" height="{ROW - 10}">'
            f"{_title(tip)}</rect>"
        )

    for e, x in zip(events, xs, strict=True):
        agent = str(e.payload.get("agent", ""))
        if e.kind == "agent_invoked":
            if agent in open_bar:  # invoked again without completing: close the old bar
                start, began = open_bar.pop(agent)
                bar(agent, start, began, axis.x(x), "interrupted", e.at)
            open_bar[agent] = (x, e)
        elif e.kind == "agent_completed" and agent in open_bar:
            start, began = open_bar.pop(agent)
            bar(agent, start, began, axis.x(x), str(e.payload.get("status") or "COMPLETE"), e.at)
    for agent, (start, began) in open_bar.items():
        bar(agent, start, began, max(end_x, axis.x(start) + 12), "running", "now")
    return out


_MARKS = {
    "presentation": ("diamond", "presented"),
    "approval": ("diamond filled", "approved"),
    "change_request": ("square", "change request"),
    "validation": ("circle", "validation"),
    "verdict": ("tri", "review verdict"),
}


def _marks(events: tuple[EventRow, ...], xs: list[float], axis: _Axis, y: int) -> list[str]:
    out: list[str] = []
    cy = y + ROW / 2
    for e, x in zip(events, xs, strict=True):
        if e.kind not in _MARKS:
            continue
        shape, what = _MARKS[e.kind]
        p = e.payload
        ok = ""
        detail = ""
        if e.kind == "validation":
            # A task-branch build has `success`; cleanup's build on main has `result`
            # (SUCCESS, UNCHANGED: main is exactly the validated merge, ACCEPTED, SKIPPED).
            result = p.get("result")
            passed = p.get("success") or result in ("SUCCESS", "UNCHANGED", "ACCEPTED")
            ok = "ok" if passed else ("" if result == "SKIPPED" else "bad")
            label = f"main: {result.lower()}" if isinstance(result, str) else "passed"
            detail = (
                label
                if passed or result == "SKIPPED"
                else (f"failed ({p.get('failure_class', '')})")
            )
        elif e.kind == "verdict":
            ok = "ok" if p.get("decision") == "APPROVED" else "bad"
            detail = f"{p.get('agent', '')}: {p.get('decision', '')} {p.get('reason', '')}"
        elif e.kind in ("presentation", "approval"):
            detail = f"{p.get('kind', '')} {str(p.get('bound_to', ''))[:12]}"
            if e.kind == "approval":
                detail += f" via {p.get('provenance', '')}"
        else:
            detail = f"{p.get('kind', '')}: {str(p.get('text', ''))[:120]}"
        cx = axis.x(x)
        tip = _title(f"{what} at {e.at}: {detail}")
        cls = f"mk {shape} {ok}".strip()
        if shape.startswith("diamond"):
            pts = f"{cx:.1f},{cy - 6} {cx + 6:.1f},{cy} {cx:.1f},{cy + 6} {cx - 6:.1f},{cy}"
            out.append(f'<polygon class="{cls}" points="{pts}">{tip}</polygon>')
        elif shape == "square":
            out.append(
                f'<rect class="{cls}" x="{cx - 5:.1f}" y="{cy - 5}" width="10" '
                f'height="10">{tip}</rect>'
            )
        elif shape == "tri":
            pts = f"{cx:.1f},{cy - 6} {cx + 6:.1f},{cy + 5} {cx - 6:.1f},{cy + 5}"
            out.append(f'<polygon class="{cls}" points="{pts}">{tip}</polygon>')
        else:
            out.append(f'<circle class="{cls}" cx="{cx:.1f}" cy="{cy}" r="5">{tip}</circle>')
    return out


def _ticks(events: tuple[EventRow, ...], xs: list[float], axis: _Axis, y: int) -> list[str]:
    out = [f'<line class="axis" x1="{LABEL}" x2="{WIDTH - PAD}" y1="{y + 2}" y2="{y + 2}"/>']
    label = "time (UTC)" if axis.mode == "time" else "event order (times in the tooltips)"
    out.append(f'<text class="lbl" x="4" y="{y + 34}">{escape(label)}</text>')
    count = 5
    for i in range(count + 1):
        value = axis.start + axis.span * i / count
        x = axis.x(value)
        if axis.mode == "time":
            text = _utc(value)
        else:
            idx = min(round(value), len(events) - 1)
            text = f"#{idx + 1} {events[idx].at[11:19]}"
        anchor = "start" if i == 0 else ("end" if i == count else "middle")
        out.append(f'<line class="tick" x1="{x:.1f}" x2="{x:.1f}" y1="{y + 2}" y2="{y + 7}"/>')
        out.append(
            f'<text class="tk" x="{x:.1f}" y="{y + 18}" text-anchor="{anchor}">'
            f"{escape(text)}</text>"
        )
    return out


def _utc(value: float) -> str:
    from datetime import UTC

    return datetime.fromtimestamp(value, UTC).strftime("%H:%M:%S")
