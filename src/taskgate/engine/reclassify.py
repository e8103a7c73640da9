"""Raising a task's risk mid-task (R-WFV-08, R-WFV-11, C-84): `classify T --raise`, or automatic
when a skip-path task's actual change touches more than documentation.

The risk only ever rises here. The path is recomputed from the new level (a raised task is
treated as a code change, so it gets IMPLEMENTATION, VALIDATION and REVIEW), the agents the
new level requires are added with their worktrees, and a plan approval that did not cover them
is revoked (R-AGT-19). A task waiting at the change review goes back to SYNTHESIS first (row 14).
"""

from __future__ import annotations

from typing import Any

from taskgate.engine.checkpoints import check_speaker
from taskgate.engine.core import Engine, current_state
from taskgate.engine.facts import changed_files
from taskgate.engine.flow import apply_transition, refuse_while_pending
from taskgate.errors import Refused, UsageError
from taskgate.fsutil import atomic_write, read_text
from taskgate.git import repo as gitrepo
from taskgate.protocol import agents as agt
from taskgate.protocol import taskmd
from taskgate.protocol.filekinds import file_kind
from taskgate.protocol.states import ChangeType, RiskLevel, State
from taskgate.protocol.violations import Violation
from taskgate.protocol.workflow import state_path
from taskgate.store.base import Tx
from taskgate.store.records import AgentRow, TaskSnapshot

_RAISABLE = (
    State.CLASSIFIED,
    State.REQUIREMENTS,
    State.SYNTHESIS,
    State.IMPLEMENTATION,
    State.VALIDATION,
    State.REVIEW,
    State.AWAITING_USER_APPROVAL,
)
_UP = {RiskLevel.LOW: RiskLevel.MEDIUM, RiskLevel.MEDIUM: RiskLevel.HIGH}


def code_in_change(engine: Engine, snap: TaskSnapshot) -> list[str]:
    """The task branch's changed files that are not documentation (R-WFV-08, D-WFV-2)."""
    head = gitrepo.head_sha(engine.ws.task_worktree(snap.task.name))
    if head is None:
        return []
    return [p for p in changed_files(engine, snap, head) if file_kind(p) != "doc"]


def needs_raise(engine: Engine, snap: TaskSnapshot) -> list[str]:
    """Non-documentation files changed by a task whose path skips validation (else [])."""
    t = snap.task
    risk = RiskLevel(t.risk_level) if t.risk_level else None
    change = ChangeType(t.change_type) if t.change_type else None
    if State.VALIDATION in state_path(risk, change):
        return []
    return code_in_change(engine, snap)


def raise_risk(
    engine: Engine,
    task: str,
    *,
    level: str | None = None,
    reason: str,
    by: str,
) -> dict[str, Any]:
    """Raise the risk of `task` (one level, or to `level`), recompute its path and agents."""
    from taskgate.protocol.risk import RiskConfigError, classify
    from taskgate.protocol.risk_config import parse_risk_config

    snap = engine.require_snapshot(task)
    t = snap.task
    state = current_state(t)
    if state not in _RAISABLE or not t.risk_level:
        raise Refused(
            f"the risk of '{task}' can be raised between CLASSIFIED and the change review, "
            f"it is in {state}",
            [Violation("R-WFV-11", "risk_level may be raised after CLASSIFIED (C-84)")],
            hint=f"taskgate classify {task}" if state is State.INIT else "",
        )
    current = RiskLevel(t.risk_level)
    try:
        target = RiskLevel.parse(level) if level else _UP.get(current, current)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    code = code_in_change(engine, snap)
    path_before = state_path(current, ChangeType(t.change_type) if t.change_type else None)
    if target.rank < current.rank or (target == current and State.VALIDATION in path_before):
        raise Refused(
            f"'{task}' is {current}; --raise only raises it (to {target} there is nothing to do)",
            [Violation("R-WFV-11", "lowering the risk needs a logged manual override (C-84)")],
            hint=f"taskgate classify {task} --raise HIGH" if current != RiskLevel.HIGH else "",
        )
    try:
        risk_config = parse_risk_config(engine.ws.config.risk, engine.ws.config.text)
    except RiskConfigError as exc:
        raise UsageError(str(exc), hint="fix the [risk] table in taskgate.toml") from None
    entry = engine.todo().get(task)
    files = sorted({*(entry.files if entry else ()), *code})
    text = entry.text() if entry else ""
    classify(files, text, config=risk_config, risk_override=target)  # validates the input
    # A raised task is treated as a code change (that is why it was raised): its agents are
    # the new level's code set, whatever the declared files say (R-WFV-11, R-AGT-03..10).
    chosen, _ = agt.select_agents(
        target, ChangeType.CODE, agt.detect_traits(files, text), files,
        agent_sets=risk_config.agents,
    )  # fmt: skip
    added = [a for a in chosen if a not in t.required_agents]
    with gitrepo.repo_lock(engine.ws.common_dir):  # R-AGT-16: worktrees before the record
        for agent in added:
            gitrepo.ensure_worktree(
                engine.ws.repo, engine.ws.agent_worktree(task, agent), f"{task}-{agent}", task
            )
    record = {
        "from": current.value,
        "to": target.value,
        "reason": reason,
        "by": by,
        "files": list(code),
        "agents_added": added,
        "state": state.value,
    }

    def body(tx: Tx, current_snap: TaskSnapshot) -> dict[str, Any]:
        check_speaker(engine, current_snap.task)
        refuse_while_pending(current_snap)
        if current_snap.task.seq != snap.task.seq:
            raise Refused("the task changed meanwhile", [], hint="run the command again")
        work = current_snap
        if current_state(work.task) is State.AWAITING_USER_APPROVAL:  # row 14, while skip path
            apply_transition(engine, tx, work, State.SYNTHESIS,
                             reason=f"risk raised to {target}: {reason}")  # fmt: skip
            work = tx.snapshot(task) or work
        now = engine.now()
        phase = work.task.state if work.task.state in ("REQUIREMENTS", "IMPLEMENTATION") else None
        for agent in added:
            tx.put_agent(
                AgentRow(task, agent, phase=phase, updated_at=now, initial=False,
                         added_at_state=work.task.state, added_at=now,
                         justification=f"risk raised to {target} (R-WFV-11)")
            )  # fmt: skip
        if added and work.task.state == State.SYNTHESIS.value:  # R-AGT-19
            tx.revoke_approvals(task, "plan", now, f"risk raised to {target}; agents added")
        classification = {**work.task.classification, "raised": record}
        engine.event(tx, task, "risk_raised", record)
        engine.touch(
            tx,
            work,
            risk_level=target.value,
            change_type=ChangeType.CODE.value,
            required_agents=(*work.task.required_agents, *added),
            classification=classification,
        )
        return record

    done = engine.step(task, body, owner=False)
    task_md = engine.ws.task_md(task)
    current_md = read_text(task_md)
    if current_md is not None:
        for agent in added:
            current_md = taskmd.add_stakeholder(current_md, task, agent)
        atomic_write(task_md, current_md)
    return {**done, "path": [s.value for s in state_path(target, ChangeType.CODE)]}


__all__ = ["code_in_change", "needs_raise", "raise_risk"]
