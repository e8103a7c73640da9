"""The REQUIREMENTS exit checklist (D-DOC-2): nine checks in order, stopping at the first
failure, each failing with the seeds' `[N/9] FAILED` text. Referenced from the transition
table (transitions.py) like the guards in guards.py, whose shared checks it reuses."""

from __future__ import annotations

from taskgate.protocol.facts import TaskFacts
from taskgate.protocol.guards import Guard, cwd_violation, missing_log_pairs, ownership
from taskgate.protocol.states import MIN_REPORT_BYTES, AgentStatus, State
from taskgate.protocol.taskmd import missing_sections, report_problem
from taskgate.protocol.violations import Violation


def requirements_checklist(f: TaskFacts) -> list[Violation]:
    """D-DOC-2: the 9-point REQUIREMENTS exit checklist, in order, stopping at the first failure."""
    for check in _NINE_CHECKS:
        problems = check(f)
        if problems:
            return problems
    return []


def _check1(f: TaskFacts) -> list[Violation]:
    if f.state is State.REQUIREMENTS:
        return []
    return [
        Violation("R-TRN-11", f"[1/9] FAILED: Lock state is '{f.state}', expected 'REQUIREMENTS'")
    ]


def _check2(f: TaskFacts) -> list[Violation]:
    return [
        Violation(v.rule, f"[2/9] FAILED: Lock owned by different session ({f.owner})", v.hint)
        for v in ownership(f)
    ]


def _check3(f: TaskFacts) -> list[Violation]:
    return cwd_violation(f, "R-TRN-11", "[3/9] FAILED: Wrong directory")


def _check4(f: TaskFacts) -> list[Violation]:
    if f.task_md is None:
        return [Violation("R-DOC-01", "[4/9] FAILED: task.md not found", "run 'taskgate classify'")]
    return [
        Violation("R-DOC-02", f"[4/9] FAILED: task.md missing section: {s}", f"add '## {s}'")
        for s in missing_sections(f.task_md)
    ]


def _check5(f: TaskFacts) -> list[Violation]:
    if not f.required_agents:
        return [
            Violation(
                "R-DOC-07",
                "[5/9] FAILED: No required_agents in lock file",
                "return to CLASSIFIED: taskgate transition T CLASSIFIED --reason ...",
            )
        ]
    missing = [a for a in f.required_agents if not f.agent(a).worktree_exists]
    return [
        Violation(
            "R-DOC-07",
            f"[5/9] FAILED: Agent worktree missing: {a}",
            "return to CLASSIFIED or run 'taskgate recover --repair'",
        )
        for a in missing
    ]


def _check6(f: TaskFacts) -> list[Violation]:
    incomplete = [
        f"{a} ({f.agent(a).status or 'no status'})"
        for a in f.required_agents
        if f.agent(a).status is not AgentStatus.COMPLETE
    ]
    if not incomplete:
        return []
    done = len(f.required_agents) - len(incomplete)
    return [
        Violation(
            "R-AST-15",
            f"[6/9] FAILED: {len(incomplete)} agents incomplete; GATE FAILED: "
            f"{done}/{len(f.required_agents)} agents complete: {', '.join(incomplete)}",
            "wait for WORKING agents, re-invoke the others ('taskgate agent check T')",
        )
    ]


def _check7(f: TaskFacts) -> list[Violation]:
    bad = [
        f"{a}: {problem}"
        for a in f.required_agents
        if (problem := report_problem(f.agent(a).report_bytes)) is not None
    ]
    if not bad:
        return []
    return [
        Violation(
            "R-DOC-04",
            f"[7/9] FAILED: {len(bad)} reports missing/invalid: {'; '.join(bad)}",
            f"each agent writes {f.task}-<agent>-requirements.md (at least {MIN_REPORT_BYTES} "
            "bytes) in the task directory",
        )
    ]


def _check8(f: TaskFacts) -> list[Violation]:
    missing = missing_log_pairs(
        f, (State.INIT, State.CLASSIFIED), (State.CLASSIFIED, State.REQUIREMENTS)
    )
    return [
        Violation(
            "R-TRN-13",
            f"[8/9] FAILED: Missing {a} -> {b} transition",
            "protocol error: escalate to the user ('taskgate recover')",
        )
        for a, b in missing
    ]


def _check9(f: TaskFacts) -> list[Violation]:
    errors = [a for a in f.required_agents if f.agent(a).status is AgentStatus.ERROR]
    if not errors:
        return []
    return [
        Violation(
            "R-DOC-07",
            f"[9/9] FAILED: {len(errors)} agents in ERROR state: {', '.join(errors)}",
            "re-invoke the failed agents",
        )
    ]


_NINE_CHECKS: tuple[Guard, ...] = (
    _check1,
    _check2,
    _check3,
    _check4,
    _check5,
    _check6,
    _check7,
    _check8,
    _check9,
)
