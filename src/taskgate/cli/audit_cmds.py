"""`taskgate audit` and `taskgate recover` (issue 8)."""

from __future__ import annotations

import argparse
from typing import Any

from taskgate.cli.commands import emit, engine_for
from taskgate.errors import EXIT_CORRUPT, EXIT_FOREIGN, EXIT_HUMAN, EXIT_OK, EXIT_REFUSED


def cmd_audit(args: argparse.Namespace) -> int:
    """`taskgate audit [T]`: PASSED exits 0, FAILED exits 1; nothing is ever written."""
    from taskgate.engine.audit import audit, render_text

    with engine_for(args) as engine:
        audits = audit(engine, args.task)
        passed = all(a.passed for a in audits)
        data = {"verdict": "PASSED" if passed else "FAILED", "tasks": [a.to_json() for a in audits]}
        emit(args, data, render_text(audits))
    return EXIT_OK if passed else EXIT_REFUSED


def _recover_text(d: Any) -> str:
    lines = [f"recover {d.task or '(store)'} ({d.state}): {d.procedure} - {d.summary}"]
    for c in d.checks:
        if not c.passed:  # R-REC-08's six checks: only the failed ones are shown
            lines.append(f"  FAIL check {c.number} {c.name}: {c.detail}")
    lines += [f"  - {a}" for a in d.actions]
    lines += [f"  repaired: {r}" for r in d.repaired]
    if d.repairable and not d.repaired and not d.escalation:
        lines.append(f"  hint: run 'taskgate recover {d.task} --repair' to repair this")
    if d.escalation:
        lines += ["", d.escalation]
    return "\n".join(lines)


def cmd_recover(args: argparse.Namespace) -> int:
    """`taskgate recover [T] [--repair]`: 0 clean or repaired, 3 foreign, 4 escalate, 5 broken."""
    from taskgate.engine.recover import recover

    if args.rebuild:
        return _rebuild(args)
    with engine_for(args) as engine:
        results = recover(engine, args.task, do_repair=args.repair)
        emit(args, [d.to_json() for d in results], "\n\n".join(_recover_text(d) for d in results))
    if any(d.escalation for d in results):
        return EXIT_HUMAN  # R-REC-15/16: the user decides; nothing changed (R-REC-17)
    if any(d.foreign for d in results):
        return EXIT_FOREIGN  # R-REC-10, C-44
    if any(d.corrupt or (d.procedure == "P1" and d.repairable) for d in results):
        return EXIT_CORRUPT  # diagnosed, not repaired: run again with --repair
    return EXIT_OK


def _rebuild(args: argparse.Namespace) -> int:
    """`taskgate recover --rebuild`: 0 intact or rebuilt and proven, 4 parts unproven."""
    from taskgate.engine.rebuild import rebuild, render_text
    from taskgate.errors import UsageError

    if args.task or args.repair:
        raise UsageError(
            "--rebuild rebuilds the whole store; it takes no task and no --repair",
            hint="run 'taskgate recover --rebuild', then 'taskgate recover T --repair' if needed",
        )
    with engine_for(args) as engine:
        result = rebuild(engine)
        emit(args, result.to_json(), render_text(result))
    return EXIT_OK if result.proven else EXIT_HUMAN


def register(add: Any) -> None:
    """Issue 8's commands."""
    s = add("audit", cmd_audit, "compliance checks; never modifies anything (exit 1: FAILED)")
    s.add_argument("task", nargs="?")
    s = add("recover", cmd_recover, "diagnose (RULES §16) and, with --repair, repair what is safe")
    s.add_argument("task", nargs="?")
    s.add_argument("--repair", action="store_true", help="apply the safe repairs (journaled)")
    s.add_argument(
        "--rebuild",
        action="store_true",
        help="rebuild a lost or damaged store (missing, empty, behind its views) from the "
        "views, proving each audit chain against the head anchored in git; the damaged "
        "store is moved aside, never deleted",
    )
