"""The hook events answered through the engine: what dispatch falls back to when the paths
without it (hooks/quick.py, hooks/prompt.py, hooks/resume.py) hand over.

Its own module (it was in hooks/dispatch.py) so that the hook processes that never need the
engine — PreToolUse, and the usual prompt, edit and session start — do not load this part
either (issue 18). Slower is fine here: the engine's own imports cost about 40 ms.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from taskgate.engine.core import Engine
    from taskgate.store.records import TaskRow


def engine(data: dict[str, Any]) -> Engine | None:
    """The engine of the workspace containing the hook's `cwd`, for its session; None when
    `cwd` is in no initialised workspace."""
    from pathlib import Path

    from taskgate.engine.core import Engine
    from taskgate.engine.workspace import find_workspace
    from taskgate.errors import UsageError

    try:
        ws = find_workspace(Path(data["cwd"]))
    except UsageError:
        return None
    if not ws.initialized:
        return None
    return Engine(ws, session_id=data["session_id"], cwd=Path(data["cwd"]))


def owned(engine: Engine) -> list[TaskRow]:
    """Unreleased tasks whose lease names this session (R-LCK-20)."""
    with engine.store.read() as tx:
        return [r for r in tx.tasks() if r.session_id == engine.session_id and not r.released]


def session_state(data: dict[str, Any]) -> str | None:
    """SessionStart's text through the engine: the session's task and what to do next (None
    outside a taskgate workspace), after rewriting the hook snapshot from the store."""
    from taskgate.hooks.quick import NO_TASK

    found = engine(data)
    if found is None:
        return None
    try:
        held = owned(found)
        warning = verify_snapshot(found, held[0].name if len(held) == 1 else None)
        if not held:
            text = NO_TASK
        elif len(held) > 1:
            names = ", ".join(r.name for r in held)
            text = (
                f"[R-LCK-20] CORRUPTION: this session holds {len(held)} task locks "
                f"({names}); manual intervention required: run 'taskgate recover'"
            )
        else:
            text = resume_text(found, held[0].name)
    finally:
        found.close()
    return f"{warning}\n{text}" if warning else text


def verify_snapshot(engine: Engine, task: str | None) -> str:
    """Rewrite the PreToolUse snapshot from the store (store/snapshot.py); a warning when it
    no longer matched, which only a change made outside taskgate can cause (recorded in the
    session's task's audit trail)."""
    if engine.store.refresh_snapshot(wait_s=1.0) != "replaced":
        return ""
    if task:
        from taskgate.hooks.record import record_event

        record_event(engine, task, "snapshot_mismatch", {"rule": "R-LCK-09"})
    return (
        "[R-LCK-09] taskgate: the store or its hook snapshot was changed outside taskgate; "
        "the snapshot has been rebuilt from the store. Run 'taskgate audit' to see what changed"
    )


def resume_text(engine: Engine, task: str) -> str:
    """What a session resuming `task` is told (protocol/recovery.py)."""
    from taskgate.engine.status import recovery_hint
    from taskgate.protocol.recovery import resume_text as text

    snap = engine.require_snapshot(task)
    worktree = str(engine.ws.task_worktree(task))
    return text(task, snap.task.state, recovery_hint(snap), worktree)


def on_owned_task(
    data: dict[str, Any], act: Callable[[Any, Any], str], any_session: bool = False
) -> str | None:
    """Run `act(engine, task)` for the one task this session owns; None when there is none,
    unless `any_session` (then `act` gets None for the task)."""
    found = engine(data)
    if found is None:
        return None
    try:
        held = owned(found)
        if len(held) == 1:
            return act(found, held[0].name)
        return act(found, None) if any_session else None
    finally:
        found.close()


def stop(data: dict[str, Any], event: str) -> tuple[str, ...]:
    """Stop, SubagentStop, SessionEnd through the engine: the session's task (name, state)
    after recording the event, () without one."""
    from taskgate.hooks.record import record_event

    found = engine(data)
    if found is None:
        return ()
    try:
        held = owned(found)
        if len(held) != 1:
            return ()
        row = held[0]
        if event == "SubagentStop":
            record_event(
                found,
                row.name,
                "subagent_stop",
                {"agent": data.get("agent_type") or "", "agent_id": data.get("agent_id")},
            )
        elif event == "SessionEnd":
            record_event(found, row.name, "session_end", {"reason": data.get("reason", "")})
        return (row.name, row.state)
    finally:
        found.close()
