"""One task's record for the task page and `/api/tasks/T`, built from ONE store snapshot.

Everything the page shows about the store (state, transitions, events, agents, approvals,
validations, verdicts, feedback, audit, recovery) comes from the same read transaction, so a
`run` changing the store meanwhile never shows a torn mix. Files (task.md, reports) and git
(the diff) are read right after it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from taskgate.engine import views
from taskgate.engine.audit import audit_snapshot
from taskgate.engine.checkpoints import (
    CHECKPOINT_STATE,
    current_presentation,
    feedback_entries,
    recovery_hint,
    task_head,
)
from taskgate.engine.core import Engine
from taskgate.engine.facts import task_path
from taskgate.engine.recover import diagnose
from taskgate.fsutil import read_text
from taskgate.protocol import taskmd
from taskgate.protocol.states import State
from taskgate.server import diffview
from taskgate.store.records import TaskSnapshot

MAX_DOC_CHARS = 300_000


@dataclass(frozen=True)
class Checkpoint:
    """What the person is asked to approve now, and whether the page may offer Approve."""

    kind: str  # "plan" | "changes"
    bound_to: str  # the hash / SHA the page shows and the form carries ("" when none)
    presented: str | None  # what was recorded as presented (None: not presented since)
    presented_at: str | None
    approvable: bool
    approved: bool
    why_not: str

    def to_json(self) -> dict[str, Any]:
        """Export shape."""
        return dict(self.__dict__)


def checkpoint(engine: Engine, snap: TaskSnapshot, task_md: str | None) -> Checkpoint | None:
    """The checkpoint the task waits at (SYNTHESIS / AWAITING_USER_APPROVAL), else None."""
    t = snap.task
    kind = next((k for k, s in CHECKPOINT_STATE.items() if s.value == t.state), None)
    if kind is None or t.released:
        return None
    shown = current_presentation(snap, kind)
    if kind == "plan":
        current = taskmd.plan_hash(task_md) or ""
        approved = snap.active_approval("plan") is not None
    else:
        current = task_head(engine, t) or ""
        approved = bool((t.checkpoint or {}).get("approved"))
    why = ""
    if approved and kind == "plan":
        why = "the plan is approved: 'taskgate run' (or the agent) moves on to IMPLEMENTATION"
    elif approved:
        why = (
            f"the change is approved: 'taskgate run {t.name}' or 'taskgate complete {t.name}' "
            "merges it (R-CMP-09)"
        )
    elif shown is None:
        why = (
            f"the {kind} has not been presented since it last changed (R-CKP-03): "
            f"'taskgate present {t.name}' (or 'taskgate run {t.name}') presents it"
        )
    elif shown.bound_to != current:
        why = (
            f"the {kind} changed after it was presented ({shown.bound_to[:12]} presented, "
            f"{current[:12] or 'nothing'} now): it must be presented again (R-CKP-13, R-CKP-15)"
        )
    return Checkpoint(
        kind=kind,
        bound_to=current,
        presented=shown.bound_to if shown else None,
        presented_at=shown.at if shown else None,
        approvable=not why,
        approved=approved,
        why_not=why,
    )


def _doc(path: Any) -> str | None:
    text = read_text(path)
    if text is not None and len(text) > MAX_DOC_CHARS:
        text = text[:MAX_DOC_CHARS] + "\n\n[... cut: the file is longer; open it on disk]"
    return text


def build(engine: Engine, snap: TaskSnapshot, *, with_diff: bool = True) -> dict[str, Any]:
    """The task's full record as plain data (HTML is added by the page, not here)."""
    t = snap.task
    ws = engine.ws
    task_md = _doc(ws.task_md(t.name))
    head = task_head(engine, t) if ws.task_worktree(t.name).exists() else None
    base = t.base_sha or t.base_branch
    files: list[diffview.FileDiff] = []
    cut = False
    if with_diff and head and base:
        files, cut = diffview.task_diff(ws.task_worktree(t.name), base, head)
    audit = audit_snapshot(ws, snap)
    diagnosis = diagnose(engine, snap)
    point = checkpoint(engine, snap, task_md)
    status = views.task_json(snap)
    status.pop("_note", None)
    return {
        "task": t.name,
        "state": t.state,
        "seq": t.seq,
        "status": status,
        "path": [s.value for s in task_path(snap)],
        "owner": {
            "session_id": t.session_id,
            "host": t.host,
            "pid": t.owner_pid,
            "released_at": t.lock_released_at,
        },
        "risk_level": t.risk_level,
        "checkpoint": point,
        "plan": {
            "task_md_path": str(ws.task_md(t.name)),
            "text": task_md,
            "plan_hash": taskmd.plan_hash(task_md),
        },
        "reports": [
            {
                "agent": a,
                "path": str(ws.report_path(t.name, a)),
                "text": _doc(ws.report_path(t.name, a)),
            }
            for a in t.required_agents
        ],
        "agents": [
            {
                "agent": a.agent,
                "status": a.status or "PENDING",
                "phase": a.phase,
                "message": a.message,
                "updated_at": a.updated_at,
                "work_remaining": a.work_remaining,
                "retry_count": a.retry_count,
            }
            for a in snap.agents
        ],
        "change": {"base": base, "head": head, "files": files, "truncated": cut},
        "validations": [
            {
                "head_sha": v.head_sha,
                "success": v.success,
                "at": v.at,
                "command": v.command,
                "exit_code": v.exit_code,
                "failure_class": v.failure_class,
                "output_tail": v.output_tail,
                "tests": v.tests,
            }
            for v in snap.validations
        ],
        "verdicts": [
            {
                "agent": v.agent,
                "round": v.round,
                "head_sha": v.head_sha,
                "decision": v.decision,
                "reason": v.reason,
                "at": v.at,
            }
            for v in snap.verdicts
        ],
        "approvals": [
            {
                "kind": a.kind,
                "bound_to": a.bound_to,
                "presented_at": a.presented_at,
                "approved_at": a.approved_at,
                "provenance": a.provenance,
                "revoked_at": a.revoked_at,
                "revoke_reason": a.revoke_reason,
            }
            for a in snap.approvals
        ],
        "feedback": feedback_entries(snap),
        "transitions": [
            {"index": r.index, "from": r.source, "to": r.target, "at": r.at, "reason": r.reason}
            for r in snap.transitions
        ],
        "events": [
            {"seq": e.seq, "at": e.at, "kind": e.kind, "payload": e.payload, "hash": e.hash}
            for e in snap.events
        ],
        "audit": audit.to_json(),
        "recovery": {"hint": recovery_hint(snap), "diagnosis": diagnosis.to_json()},
        "done": t.state in (State.COMPLETE.value, State.CLEANUP.value),
    }


def export(record: dict[str, Any]) -> dict[str, Any]:
    """The record as JSON-ready data (`/api/tasks/T`): diffs as per-file summaries + text."""
    out = dict(record)
    point = record["checkpoint"]
    out["checkpoint"] = point.to_json() if point is not None else None
    change = record["change"]
    out["change"] = {
        "base": change["base"],
        "head": change["head"],
        "truncated": change["truncated"],
        "files": [f.to_json() for f in change["files"]],
    }
    return out
