"""Texts the faces show for a spec workflow (pure: they return strings, never print)."""

from __future__ import annotations

from typing import Any

from taskgate.spec.detect import Candidate
from taskgate.spec.state import MAX_ITERATIONS, MAX_STALE, SpecState


def pending_text(s: SpecState) -> str:
    """What the workflow waits for, and the command that answers it."""
    if s.pending_decision:
        lines = [f"spec {s.feature_id} needs your decision (iteration {s.current_iteration})"]
        d = s.pending_decision
        lines += [
            f"  {d.message}",
            f"hint: taskgate spec answer {s.feature_id} --decision {'|'.join(d.options)}",
        ]
        return "\n".join(lines)
    lines = [f"spec {s.feature_id} waits for your answers (iteration {s.current_iteration})"]
    for q in s.pending_questions:
        lines.append(f"  {q.id} [{', '.join(q.gaps)}] {q.summary}: {q.text}")
    example = " ".join(f'--answer {q.id}="..."' for q in s.pending_questions)
    lines.append(f"hint: taskgate spec answer {s.feature_id} {example}")
    return "\n".join(lines)


def resume_prompt(candidate: Candidate, others: list[Candidate]) -> str:
    """D-SPC-1, with the count from the Pending Questions rows (C-71)."""
    s = candidate.state
    rows = [
        ("Status", s.loop_status if s else "scaffolding (no saved state)"),
        ("Iteration", f"{s.current_iteration if s else 1} / {MAX_ITERATIONS}"),
        ("Pending Clarifications", str(len(s.pending_questions) if s else 0)),
        ("Last Activity", candidate.last_activity),
    ]
    lines = [
        f"Found interrupted workflow for '{candidate.feature_id}'.",
        "",
        "| Field | Value |",
        "|-------|-------|",
    ]
    lines += [f"| {k} | {v} |" for k, v in rows]
    if others:
        lines += ["", "Other matching workflows: " + ", ".join(c.feature_id for c in others)]
    lines += ["", "How would you like to proceed?"]
    return "\n".join(lines)


def status_text(s: SpecState, point: str | None, problems: list[str]) -> str:
    """`spec status ID` for people."""
    lines = [
        f"spec {s.feature_id}: {s.description}",
        f"  status {s.loop_status}, iteration {s.current_iteration} / {MAX_ITERATIONS}, "
        f"stale {s.stale_count} / {MAX_STALE}, last activity {s.last_activity}",
        f"  resume point: {point or 'none'}; termination: {s.termination_reason or '-'}",
    ]
    lines += [f"  gap {g.id} {g.severity:<9} {g.status:<10} {g.summary}" for g in s.gaps]
    lines += [f"  integrity: {p}" for p in problems]
    if s.pending_questions or s.pending_decision:
        lines.append(pending_text(s))
    return "\n".join(lines)


def list_row(c: Candidate) -> dict[str, Any]:
    """One workflow in `spec list --json`."""
    s = c.state
    return {
        "feature_id": c.feature_id,
        "loop_status": s.loop_status if s else None,
        "current_iteration": s.current_iteration if s else None,
        "pending_questions": len(s.pending_questions) if s else 0,
        "termination_reason": s.termination_reason if s else None,
        "last_activity": c.last_activity,
        "problem": c.problem,
    }
