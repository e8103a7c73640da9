"""`taskgate status`: one task in full, or every task in one line each."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from taskgate.errors import Corrupted
from taskgate.store.base import StoreCorrupt

if TYPE_CHECKING:
    from taskgate.engine.checkpoints import recovery_hint
    from taskgate.engine.core import Engine

__all__ = ["all_status", "recovery_hint", "task_status"]


def __getattr__(name: str) -> Any:
    """`recovery_hint` (R-CKP-18: one text for all faces), imported when first asked for:
    `status` over every task needs none of the engine's views (issue 18)."""
    if name == "recovery_hint":
        from taskgate.engine.checkpoints import recovery_hint

        return recovery_hint
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def task_status(engine: Engine, task: str) -> dict[str, Any]:
    """The seeds' task.json shape plus agents, approvals, paths and what may come next."""
    from taskgate.engine import views
    from taskgate.engine.checkpoints import recovery_hint
    from taskgate.engine.facts import task_path
    from taskgate.engine.flow import allowed_next
    from taskgate.protocol import confinement  # issue 14: how the agents ran

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
            rows = tx.task_summaries()  # a projection: no full rows, one JSON column
    except StoreCorrupt as exc:
        raise Corrupted(str(exc), hint="run 'taskgate recover'") from exc
    me = engine.session_id
    return [
        {
            "task_name": name,
            "state": state,
            "session_id": session,
            "owned_by_me": bool(me) and session == me and released_at is None,
            "released": released_at is not None,
            "risk_level": risk,
            "required_agents": agents,
            "updated_at": updated,
        }
        for name, state, session, released_at, risk, agents, updated in rows
    ]
