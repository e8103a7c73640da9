"""Phase C's quality report: gaps, deferred gaps, and requirement-to-checklist traceability."""

from __future__ import annotations

import re

from taskgate.spec.state import MAX_ITERATIONS, SpecState

_REQUIREMENT = re.compile(r"\*\*((?:FR|NFR|SC)-\d{3})\*\*")
_CHECK = re.compile(r"^- \[[ xX]\] (CHK-\d{3})\b(.*)$")


def requirement_ids(spec: str) -> list[str]:
    """Requirement ids (`**FR-001**`, `**NFR-…**`, `**SC-…**`) in spec order, once each."""
    return list(dict.fromkeys(_REQUIREMENT.findall(spec)))


def traceability(spec: str, checklist: str) -> dict[str, list[str]]:
    """Each requirement id of the spec → the checklist items that mention it."""
    items = [(m.group(1), m.group(2)) for m in map(_CHECK.match, checklist.splitlines()) if m]
    return {req: [chk for chk, text in items if req in text] for req in requirement_ids(spec)}


def quality_report(state: SpecState, spec: str, checklist: str, now: str) -> str:
    """quality-report.md for a finished workflow."""
    trace = traceability(spec, checklist)
    untraced = [req for req, checks in trace.items() if not checks]
    by_status: dict[str, int] = {}
    for gap in state.gaps:
        by_status[gap.status] = by_status.get(gap.status, 0) + 1
    lines = [
        f"# Quality Report: {state.feature_id}",
        "",
        f"- Termination: {state.termination_reason}",
        f"- Iterations: {state.current_iteration} / {MAX_ITERATIONS}",
        f"- Questions answered: {len(state.clarifications)}",
        f"- Gaps: {len(state.gaps)} ("
        + (", ".join(f"{n} {status}" for status, n in sorted(by_status.items())) or "none")
        + ")",
        f"- Requirements traced to the checklist: {len(trace) - len(untraced)} / {len(trace)}",
        f"- Generated: {now}",
        "",
        "## Known and Deferred Gaps",
        "",
        "| Gap ID | Priority | Status | Summary |",
        "|--------|----------|--------|---------|",
    ]
    lines += [
        f"| {g.id} | {g.severity.capitalize()} | {g.status} | {g.summary} |"
        for g in state.gaps
        if g.status in ("deferred", "accepted")
    ]
    lines += ["", "## Traceability", "", "| Requirement | Checklist items |", "|---|---|"]
    lines += [f"| {req} | {', '.join(checks) or '**none**'} |" for req, checks in trace.items()]
    lines.append("")
    return "\n".join(lines)
