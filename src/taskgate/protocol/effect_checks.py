"""Audit check for the effect check's findings (issue 15): pure, events in, findings out.

`effect_violation` events (hooks/quarantine.py) record a change the main agent was not allowed
to make, found by comparing the task worktree and refs with a baseline and moved aside into a
quarantine ref; `effect_violation_resolved` events record the person resolving them
(`taskgate violations T --resolve ID`). An open violation fails the task.
"""

from __future__ import annotations

from taskgate.protocol.audit_records import AuditInput, CheckResult, Finding


def check_effect_violations(i: AuditInput) -> CheckResult:
    """Every effect violation has been resolved by a person."""
    found: dict[str, Finding] = {}
    for e in i.events:
        if e.kind == "effect_violation":
            qid = str(e.payload.get("id"))
            changes = "; ".join(str(c) for c in list(e.payload.get("changes", []))[:5])
            found[qid] = Finding(
                f"[{e.payload.get('rule')}] {e.at}: {changes} (moved aside to "
                f"{e.payload.get('quarantine')})",
                f"look at the change (git for-each-ref {e.payload.get('quarantine')}), then "
                f"'taskgate violations {i.task} --resolve {qid} --reason ...'",
                "a change was made in the task worktree or to protected refs while the main "
                "agent was not allowed to write them",
            )
        elif e.kind == "effect_violation_resolved":
            for qid in e.payload.get("ids", []):
                found.pop(str(qid), None)
    return CheckResult(
        "effects",
        "no unresolved change found by the effect check",
        ("R-AGT-12", "R-LCK-09", "R-CMP-01"),
        tuple(found.values()),
    )
