"""`taskgate violations T [--resolve ID...|all]`: the effect check's findings (issue 15).

A change the main agent was not allowed to make (found by comparing the task worktree and refs
with the baseline, hooks/effects.py) is moved aside into a quarantine ref and recorded;
`taskgate audit` fails the task until a person resolves it here. Resolving records who and why;
the quarantined change stays in its ref (`git show REF`) for the person to use or drop.
Agents cannot resolve: the PreToolUse hook denies `--resolve` from their Bash (R-CKP-03).
"""

from __future__ import annotations

import argparse
from typing import Any

from taskgate.cli.commands import emit, engine_for
from taskgate.errors import EXIT_OK


def cmd_violations(args: argparse.Namespace) -> int:
    """List the task's effect violations; `--resolve` marks them resolved (the person)."""
    from taskgate.hooks.quarantine import resolve, violations

    with engine_for(args) as engine:
        if args.resolve:
            resolved = resolve(engine, args.task, args.resolve, args.reason or "")
            found = violations(engine, args.task)
            text = "\n".join(f"resolved {qid}" for qid in resolved) or "nothing to resolve"
            emit(args, {"resolved": resolved, "violations": found}, text)
            return EXIT_OK
        found = violations(engine, args.task)
        emit(args, {"violations": found}, _text(args.task, found))
    return EXIT_OK


def _text(task: str, found: list[dict[str, Any]]) -> str:
    if not found:
        return f"task '{task}': no effect violations"
    lines = [f"task '{task}': {len(found)} effect violation(s)"]
    for v in found:
        state = "resolved" if v.get("resolved") else "OPEN"
        lines.append(f"  [{v.get('rule')}] {v.get('id')} {state} at {v.get('at')} "
                     f"({v.get('source')}, agent {v.get('agent', 'main')})")  # fmt: skip
        lines += [f"    - {c}" for c in v.get("changes", [])[:10]]
        lines.append(f"    moved aside: git for-each-ref {v.get('quarantine')}")
        if v.get("left"):
            lines.append(f"    left as found (no copy of the old content): {', '.join(v['left'])}")
    if any(not v.get("resolved") for v in found):
        lines.append(
            f"hint: after looking at the change, run 'taskgate violations {task} --resolve ID' "
            "(or --resolve all) with --reason; audit fails until then"
        )
    return "\n".join(lines)


def register(add: Any) -> None:
    """Issue 15's command."""
    s = add("violations", cmd_violations, "changes the effect check moved aside; resolve them")
    s.add_argument("task")
    s.add_argument("--resolve", nargs="+", metavar="ID", help="violation ids, or 'all'")
    s.add_argument("--reason", help="why the person resolves them (recorded)")
