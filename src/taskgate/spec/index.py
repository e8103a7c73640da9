"""index.md: the human view of a spec workflow in the D-SPC-3 layout, rendered from state.

Nothing reads index.md as truth (state.json is); `parse_index` exists only so that a test can
prove the round trip `parse_index(render_index(s)) == index_view(s)` (R-SPC-13).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from taskgate.spec.state import MAX_ITERATIONS, MAX_STALE, SpecState


@dataclass(frozen=True)
class IndexView:
    """What index.md shows: the four D-SPC-3 sections."""

    loop_status: str
    current_iteration: int
    last_activity: str
    stale_count: int
    questions: tuple[tuple[str, str, tuple[str, ...], str], ...]  # id, summary, gaps, status
    gaps: tuple[tuple[str, str, str, str], ...]  # priority, gap id, status, resolution
    history: tuple[tuple[str, int, str, str], ...]  # gap id, iteration, action, details


def index_view(state: SpecState) -> IndexView:
    """The projection of `state` that index.md renders."""
    return IndexView(
        loop_status=state.loop_status,
        current_iteration=state.current_iteration,
        last_activity=state.last_activity,
        stale_count=state.stale_count,
        questions=tuple(
            (q.id, q.summary, tuple(q.gaps), q.status) for q in state.pending_questions
        ),
        gaps=tuple((g.severity.capitalize(), g.id, g.status, g.resolution) for g in state.gaps),
        history=tuple((h.gap, h.iteration, h.action, h.details) for h in state.history),
    )


def _cell(text: str) -> str:
    # Reversible escaping so that any text survives a table cell (R-SPC-13 round trip).
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", "\\n")


def _uncell(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), text)


def _row(*cells: str) -> str:
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def render_index(state: SpecState) -> str:
    """index.md for `state` (D-SPC-3 sections, plus a header and what is pending)."""
    view = index_view(state)
    lines = [
        f"# Spec workflow: {state.feature_id}",
        "",
        "Rendered by taskgate from `.workflow/state.json` after every save; edits here are",
        "overwritten. Run `taskgate spec status " + state.feature_id + "`.",
        "",
        f"- Feature: {_cell(state.description)}",
        f"- Termination: {state.termination_reason or '-'}",
        "",
        "## Priority Loop State",
        "",
        "| Field | Value |",
        "|-------|-------|",
        f"| **Loop Status** | {view.loop_status} |",
        f"| **Current Iteration** | {view.current_iteration} / {MAX_ITERATIONS} |",
        f"| **Last Activity** | {view.last_activity} |",
        f"| **Stale Count** | {view.stale_count} / {MAX_STALE} |",
        "",
        "## Pending Questions",
        "",
        "| ID | Question Summary | Gaps | Status |",
        "|----|------------------|------|--------|",
        *(
            _row(qid, summary, ", ".join(gaps), status)
            for qid, summary, gaps, status in view.questions
        ),
        "",
        "## Gap Priority Queue",
        "",
        "| Priority | Gap ID | Status | Resolution |",
        "|----------|--------|--------|------------|",
        *(_row(*gap) for gap in view.gaps),
        "",
        "## Gap Resolution History",
        "",
        "| Gap ID | Iteration | Action | Details |",
        "|--------|-----------|--------|---------|",
        *(_row(gap, str(it), action, details) for gap, it, action, details in view.history),
        "",
    ]
    if state.pending_decision:
        decision = state.pending_decision
        lines += [
            "## Pending Decision",
            "",
            f"{_cell(decision.message)} Options: {', '.join(decision.options)}.",
            "",
        ]
    return "\n".join(lines)


_SPLIT = re.compile(r"(?<!\\)((?:\\\\)*)\|")


def _cells(line: str) -> list[str]:
    inner = line[1:-1]
    # Split on pipes not escaped by an odd number of backslashes.
    parts, last = [], 0
    for match in _SPLIT.finditer(inner):
        cut = match.end() - 1
        parts.append(inner[last:cut])
        last = cut + 1
    parts.append(inner[last:])
    # render writes exactly one space on each side of a cell; remove exactly that.
    return [_uncell(p[1:-1] if len(p) >= 2 else "") for p in parts]


def _table(text: str, heading: str) -> list[list[str]]:
    lines = text.split("\n")
    try:
        start = lines.index(f"## {heading}")
    except ValueError:
        raise ValueError(f"index.md has no '## {heading}' section") from None
    rows: list[list[str]] = []
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        if line.startswith("|"):
            rows.append(_cells(line))
    return rows[2:]  # header and separator


def _fraction(text: str) -> int:
    return int(text.split("/")[0].strip())


def parse_index(text: str) -> IndexView:
    """Read index.md back into its view; used only by the round-trip test (R-SPC-13)."""
    fields = {k.strip("*"): v for k, v in _table(text, "Priority Loop State")}
    return IndexView(
        loop_status=fields["Loop Status"],
        current_iteration=_fraction(fields["Current Iteration"]),
        last_activity=fields["Last Activity"],
        stale_count=_fraction(fields["Stale Count"]),
        questions=tuple(
            (q[0], q[1], tuple(g for g in q[2].split(", ") if g), q[3])
            for q in _table(text, "Pending Questions")
        ),
        gaps=tuple((g[0], g[1], g[2], g[3]) for g in _table(text, "Gap Priority Queue")),
        history=tuple(
            (h[0], int(h[1]), h[2], h[3]) for h in _table(text, "Gap Resolution History")
        ),
    )
