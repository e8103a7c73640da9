"""VALIDATION in `taskgate run`: run the build, and send a failure with its evidence to the
agents whose work it names (R-VAL-04..10, C-49), or stop for the person (R-VAL-08/09)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from taskgate.engine import agentops, failures
from taskgate.engine.validate import ValidationResult, validate
from taskgate.orchestrator import notes
from taskgate.protocol.buildfail import BuildFailure, FailureType
from taskgate.protocol.states import State
from taskgate.protocol.testreports import TestFailure
from taskgate.store.records import TaskSnapshot

if TYPE_CHECKING:
    from taskgate.orchestrator.runner import Runner

# Classes nobody in the task can fix from the output alone: the person decides (R-VAL-08).
_ESCALATE = (FailureType.UNKNOWN, FailureType.TIMEOUT)


def on_validation(runner: Runner, snap: TaskSnapshot) -> None:
    """Validate HEAD; REVIEW on success, else IMPLEMENTATION for the agents the failure names."""
    engine, task = runner.engine, runner.task
    result = validate(engine, task)
    runner.progress.timeline.builds += 1
    if result.row.success:
        counts = result.report.to_json() if result.report else {}
        ran = f", {counts['tests_passed']} tests passed" if counts.get("tests_run") else ""
        runner.progress.emit("build", task, f"build passed ({result.row.command}{ran})")
        runner._move(State.REVIEW)
        return
    failure = result.failure
    assert failure is not None
    iterations = int(snap.task.extra.get("build_iterations", 0)) + 1
    limit = engine.ws.config.protocol.build_recovery_iterations
    runner.progress.emit(
        "build", task, f"build failed: {failure.type} ({failure.detail})",
        failure_class=failure.type.value, tests=list(failure.tests[:20]),
    )  # fmt: skip
    agents = _responsible(runner, snap, failure)
    if failure.type in _ESCALATE or not agents:  # R-VAL-08
        raise _stop(runner, result, "build-escalation", iterations - 1)
    if iterations > limit:  # R-VAL-09
        raise _stop(runner, result, "build-retries", iterations - 1)
    for agent, (mine, why) in agents.items():
        text = failures.feedback_text(failure, mine, why) if mine else (
            f"The build failed ({failure.type}): {failure.detail}\n{result.output[-1500:]}"
        )  # fmt: skip
        notes.add_feedback(engine, task, "build", text, agents=(agent,),
                           build_iterations=iterations)  # fmt: skip
    names = ", ".join(agents)
    tests = ", ".join(failure.tests[:3]) + (" …" if len(failure.tests) > 3 else "")
    runner._move(
        State.IMPLEMENTATION,
        reason=f"build failure ({failure.type}{': ' + tests if tests else ''}) re-delegated to "
        f"{names} (C-49)",
        feedback=False,  # the agents got the failure with its evidence above
    )
    # The named agents get a round, the others are done: one step for the whole team.
    agentops.assign_round(engine, task, {
        agent: ("build failure to fix" if agent in agents else "", agent in agents)
        for agent in snap.task.required_agents
    })  # fmt: skip


def _responsible(
    runner: Runner, snap: TaskSnapshot, failure: BuildFailure
) -> dict[str, tuple[list[TestFailure], set[str]]]:
    """agent -> (its failing tests, the files that made it theirs)."""
    team = snap.task.required_agents
    if failure.failures:
        routing = failures.route(runner.engine, snap, failure)
        if routing.agents:
            return {a: (routing.agents[a], routing.why.get(a, set())) for a in team
                    if a in routing.agents}  # fmt: skip
    if failure.type in _ESCALATE or failure.type is FailureType.DEPENDENCY:
        return {}
    # The seeds' Maven classes without a report: their owners (R-VAL-05..07). `run` has no
    # main agent that edits code, so the main agent's classes go to architect / style (C-49).
    owner = {"main": "architect" if failure.type is FailureType.COMPILATION else "style"}.get(
        failure.responsible, failure.responsible
    )
    if owner in team:
        return {owner: ([], set())}
    return {}


def _stop(runner: Runner, result: ValidationResult, cause: str, iterations: int) -> Exception:
    failure = result.failure
    assert failure is not None
    tests = "\n".join(f"  - {name}" for name in failure.tests[:10])
    return runner._escalation(
        cause=cause,
        issue=f"the build fails ({failure.type}): {failure.detail}"
        + (f"\nfailing:\n{tests}" if tests else ""),
        state="VALIDATION",
        attempts=f"{iterations} recovery iterations (R-VAL-09)",
        impact="the task branch does not build",
        option1="Fix the build on the task branch (commit in "
        f"{runner.engine.ws.task_worktree(runner.task)}), then taskgate run {runner.task}",
        option2=f"Adjust [validation] commands in taskgate.toml, then taskgate run {runner.task}",
        hint=f"output tail:\n{result.output[-1500:]}",
    )
