"""What the hook events record in the store: the person's words, tool usage, session events."""

from __future__ import annotations

import os
from typing import Any

from taskgate.engine import views
from taskgate.engine.core import Engine
from taskgate.errors import Refused, UsageError
from taskgate.fsutil import read_json
from taskgate.protocol.states import State
from taskgate.store.base import Tx
from taskgate.store.records import TaskSnapshot

TYPE_CHECKING = False
if TYPE_CHECKING:
    from taskgate.hooks.shell import Analysis

_WRITE_TOOLS = ("Write", "Edit", "MultiEdit", "NotebookEdit")


def handle_prompt(engine: Engine, task: str, prompt: str) -> str:
    """The person's own words, judged in context with provenance human-prompt (R-CKP-03);
    returns guidance for the agent."""
    from taskgate.engine.checkpoints import HUMAN_PROMPT
    from taskgate.engine.conversation import record_human_message

    head = f"taskgate: task '{task}'"
    if not prompt.strip():
        return ""
    try:
        said = record_human_message(engine, task, prompt, HUMAN_PROMPT)
    except (Refused, UsageError) as exc:
        rules = "".join(f" [{v.rule}] {v.message}" for v in getattr(exc, "violations", ()))
        return (
            f"{head}: the person's message could not be recorded: {exc.message}.{rules} "
            f"hint: {exc.hint}"
        )
    moved = (
        f" State {said.state_before} -> {said.state_after}."
        if said.state_after != said.state_before
        else f" State: {said.state_after}."
    )
    recorded = (
        f" Recorded the person's {said.approval.kind} approval (provenance {HUMAN_PROMPT})."
        if said.approval
        else ""
    )
    return f"{head} [{said.kind.value}]{recorded}{moved} {said.response}".rstrip()


def record_event(engine: Engine, task: str, kind: str, payload: dict[str, Any]) -> None:
    """Append one audit event in its own protocol step."""

    def body(tx: Tx, snap: TaskSnapshot) -> None:
        engine.event(tx, task, kind, payload)

    engine.step(task, body)


def tampered_views(engine: Engine, snap: TaskSnapshot) -> list[str]:
    """Views whose content differs from what the store renders (edited behind our back)."""
    ws = engine.ws
    found = []
    task_json = ws.task_dir(snap.task.name) / "task.json"
    if read_json(task_json) not in (None, views.task_json(snap)):
        found.append(str(task_json))
    for kind in ("plan", "changes"):
        flag = ws.flag(snap.task.name, kind)
        if flag.exists() and snap.active_approval(kind) is None:
            found.append(str(flag))
    return found


def record_tool_use(
    engine: Engine, task: str, data: dict[str, Any], analysis: Analysis | None
) -> str:
    """R-AUD-03: {tool, file_path, agent, note}; repair and report tampered views.
    `analysis` is the Bash command line's (hooks/shell.py), None for other tools."""
    tool = str(data.get("tool_name", ""))
    tool_input = data.get("tool_input") if isinstance(data.get("tool_input"), dict) else {}
    assert isinstance(tool_input, dict)
    cwd = str(data["cwd"])
    paths: list[str] = []
    if tool in _WRITE_TOOLS:
        raw = tool_input.get("notebook_path" if tool == "NotebookEdit" else "file_path")
        paths = [os.path.normpath(os.path.join(cwd, str(raw)))] if raw else []
    elif analysis is not None:
        paths = sorted(analysis.writes)
    snap = engine.require_snapshot(task)
    tampered = tampered_views(engine, snap)
    if not paths and not tampered:
        return ""
    agent = str(data.get("agent_type") or "main")
    worktree = str(engine.ws.task_worktree(task))
    recovery = (
        snap.task.state == State.VALIDATION.value
        and agent == "main"
        and any(p.startswith(worktree + os.sep) for p in paths)
    )

    def body(tx: Tx, current: TaskSnapshot) -> None:
        for path in paths[:20]:
            engine.event(
                tx,
                task,
                "tool_usage",
                {
                    "tool": tool,
                    "file_path": path,
                    "agent": agent,
                    "note": "recovery-fix" if recovery else "",  # R-VAL-10
                },
            )
        if tampered:
            engine.event(tx, task, "view_tampered", {"paths": tampered, "tool": tool})
        engine.touch(tx, current)  # new events: the views' sequence moves with them

    engine.step(task, body)  # re-renders every view from the store
    if not tampered:
        return ""
    return (
        f"taskgate: {', '.join(tampered)} was changed outside taskgate and has been "
        "re-rendered from the store; editing views changes nothing (use the taskgate CLI)"
    )
