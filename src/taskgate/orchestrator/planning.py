"""SYNTHESIS helpers of `taskgate run`: reports of agents added mid-task, and the R-WFV-08
safety check that raises a skip-path task's risk when its change touches code (issue 17)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from taskgate.agents.base import Mode
from taskgate.orchestrator import notes
from taskgate.store.records import TaskSnapshot

if TYPE_CHECKING:
    from taskgate.orchestrator.runner import Runner


def missing_reports(runner: Runner, snap: TaskSnapshot) -> None:
    """Agents added in SYNTHESIS (a raised risk) write their requirements first (R-DOC-09)."""
    from taskgate.fsutil import file_size
    from taskgate.protocol.taskmd import report_problem

    for agent in snap.task.required_agents:
        if report_problem(file_size(runner.engine.ws.report_path(runner.task, agent))) is None:
            continue
        result = runner.pool.invoke_one(snap, agent, Mode.REQUIREMENTS, label="requirements")
        if not result.ok:
            raise runner._escalation(
                cause="agent-retries",
                issue=f"{agent} (added in SYNTHESIS) wrote no requirements: {result.reason}",
                state="SYNTHESIS",
                attempts="one invocation",
                impact="the plan cannot be approved without every agent's report (R-DOC-09)",
                option1=f"Write {runner.engine.ws.report_path(runner.task, agent)} yourself",
                option2="Fix the agent's configuration and resume",
            )


def raise_if_code(runner: Runner) -> bool:
    """R-WFV-08: a skip-path change that touches more than documentation raises the risk
    (R-WFV-11) before it can reach the change review; the loop then follows the new path."""
    from taskgate.engine import reclassify

    snap = runner.engine.require_snapshot(runner.task)
    code = reclassify.needs_raise(runner.engine, snap)
    if not code:
        return False
    shown = ", ".join(code[:5])
    record = reclassify.raise_risk(
        runner.engine,
        runner.task,
        reason=f"the change touches {shown}, which is not documentation (R-WFV-08)",
        by="taskgate",
    )
    runner.progress.emit(
        "risk-raised",
        runner.task,
        f"risk {record['from']} -> {record['to']}: the change touches {shown}",
        **{k: record[k] for k in ("from", "to", "agents_added")},
    )
    if record["agents_added"]:  # the plan is approved again with them (R-AGT-19)
        notes.add_feedback(
            runner.engine,
            runner.task,
            "plan",
            f"the risk was raised to {record['to']} because the change touches {shown}; "
            f"plan its implementation, validation and review with the agents "
            f"{', '.join(record['agents_added'])} added",
        )
    return True
