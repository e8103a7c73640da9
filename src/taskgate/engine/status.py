"""`taskgate status`: one task in full, or every task in one line each."""

from __future__ import annotations

from typing import Any

from taskgate.engine import views
from taskgate.engine.checkpoints import recovery_hint  # R-CKP-18: one text for all faces
from taskgate.engine.core import Engine
from taskgate.engine.facts import task_path
from taskgate.engine.flow import allowed_next
from taskgate.errors import Corrupted
from taskgate.protocol import confinement  # issue 14: how the agents ran
from taskgate.store.base import StoreCorrupt

__all__ = ["all_status", "recovery_hint", "task_status"]


def task_status(engine: Engine, task: str) -> dict[str, Any]:
    """The seeds' task.json shape plus agents, approvals, paths and what may come next."""
    snap = engine.require_snapshot(task)
    data = views.task_json(snap)
    data.pop("_note", None)
    t = snap.task
    data["path"] = [s.value for s in task_path(snap)]
    data["agents"] = [
        {
            "agent": a.agent,
            "status": a.status,
            "phase": a.phase,
            "updated_at": a.updated_at,
            "work_remaining": a.work_remaining,
            "retry_count": a.retry_count,
            "message": a.message,
            "worktree": str(engine.ws.agent_worktree(t.name, a.agent)),
        }
        for a in snap.agents
    ]
    data["approvals"] = [
        {
            "kind": a.kind,
            "bound_to": a.bound_to,
            "presented_at": a.presented_at,
            "approved_at": a.approved_at,
            "provenance": a.provenance,
            "revoked_at": a.revoked_at,
        }
        for a in snap.approvals
    ]
    data["validations"] = [
        {"head_sha": v.head_sha, "success": v.success, "at": v.at, "command": v.command,
         "failure_class": v.failure_class}
        for v in snap.validations
    ]  # fmt: skip
    data["verdicts"] = [
        {"agent": v.agent, "round": v.round, "head_sha": v.head_sha, "decision": v.decision,
         "reason": v.reason}
        for v in snap.verdicts
    ]  # fmt: skip
    data["paths"] = {
        "task_dir": str(engine.ws.task_dir(t.name)),
        "worktree": str(engine.ws.task_worktree(t.name)),
        "task_md": str(engine.ws.task_md(t.name)),
    }
    data["pending"] = t.pending
    data["feedback"] = list(t.extra.get("feedback") or [])  # user change requests (R-INT-11)
    data["next"] = [] if t.released else allowed_next(engine, snap)
    data["recovery"] = recovery_hint(snap)
    data["confinement"] = confinement.summary((e.kind, e.payload) for e in snap.events)
    return data


def all_status(engine: Engine) -> list[dict[str, Any]]:
    """One compact record per task, from a single query (cheap at 10,000 tasks)."""
    try:
        with engine.store.read() as tx:
            rows = tx.tasks()
    except StoreCorrupt as exc:
        raise Corrupted(str(exc), hint="run 'taskgate recover'") from exc
    return [
        {
            "task_name": r.name,
            "state": r.state,
            "session_id": r.session_id,
            "owned_by_me": bool(engine.session_id) and r.session_id == engine.session_id
            and not r.released,
            "released": r.released,
            "risk_level": r.risk_level,
            "required_agents": list(r.required_agents),
            "updated_at": r.updated_at,
        }
        for r in rows
    ]  # fmt: skip
