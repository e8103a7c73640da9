"""The allowed-transition table (RULES D-TRN-3): the one place that lists transitions.

Everything else (the engine, the CLI's help, the docs reference, the audit) reads this table.
"""

from __future__ import annotations

from taskgate.dataclass_lite import dataclass
from taskgate.protocol import checklist, guards
from taskgate.protocol.facts import TaskFacts
from taskgate.protocol.states import State
from taskgate.protocol.violations import Violation

S = State


@dataclass(frozen=True)
class Transition:
    """One row of D-TRN-3: a (from, to) pair, its guard and where the rule comes from."""

    row: int
    source: State
    target: State
    condition: str
    source_ref: str
    guard: guards.Guard
    backward: bool = False  # rows 11-20: a non-empty reason is required (R-TRN-06)
    reason_must_mention: str = ""  # C-47: a return to REQUIREMENTS names the agent addition

    @property
    def forward(self) -> bool:
        """Rows 1-10 follow the task's workflow path (R-WFV-06)."""
        return not self.backward


TRANSITIONS: tuple[Transition, ...] = (
    Transition(1, S.INIT, S.CLASSIFIED, "R-TRN-09 gate", "001 §INIT -> CLASSIFIED",
               guards.init_to_classified),
    Transition(2, S.CLASSIFIED, S.REQUIREMENTS, "R-TRN-10 gate", "001 §CLASSIFIED -> REQUIREMENTS",
               guards.classified_to_requirements),
    Transition(3, S.REQUIREMENTS, S.SYNTHESIS, "9-point checklist (D-DOC-2)",
               "001 §REQUIREMENTS State Exit Verification", checklist.requirements_checklist),
    Transition(4, S.SYNTHESIS, S.IMPLEMENTATION, "entry guards 1-6 (D-DOC-3), plan approved",
               "001 §IMPLEMENTATION State Entry Guards", guards.synthesis_to_implementation),
    Transition(5, S.SYNTHESIS, S.AWAITING_USER_APPROVAL,
               "skip-path task; plan approved; changes committed", "C-08",
               guards.synthesis_to_awaiting),
    Transition(6, S.IMPLEMENTATION, S.VALIDATION, "all required agents COMPLETE",
               "002 §Critical State Dependencies", guards.implementation_to_validation),
    Transition(7, S.VALIDATION, S.REVIEW, "fresh passing build for the current HEAD",
               "002 §Critical State Dependencies", guards.validation_to_review),
    Transition(8, S.REVIEW, S.AWAITING_USER_APPROVAL, "unanimous APPROVED",
               "002 §State Definitions", guards.review_to_awaiting),
    Transition(9, S.AWAITING_USER_APPROVAL, S.COMPLETE,
               "approved for the presented SHA + archival commit + ff-merged", "001/002, C-36",
               guards.awaiting_to_complete),
    Transition(10, S.COMPLETE, S.CLEANUP, "merge verified, audit trail complete",
               "002 §COMPLETE → CLEANUP Transition", guards.complete_to_cleanup),
    Transition(11, S.REVIEW, S.IMPLEMENTATION, "at least one REJECTED", "002 §State Definitions",
               guards.review_to_implementation, backward=True),
    Transition(12, S.REVIEW, S.SCOPE_NEGOTIATION, "scope rejection, effort > 2x scope, consensus",
               "002 §State Definitions, C-22", guards.to_scope_negotiation, backward=True),
    Transition(13, S.AWAITING_USER_APPROVAL, S.IMPLEMENTATION, "user change request (full path)",
               "001 §Backward Transition", guards.owner_only, backward=True),
    Transition(14, S.AWAITING_USER_APPROVAL, S.SYNTHESIS, "user change request (skip path)",
               "C-08", guards.owner_only, backward=True),
    Transition(15, S.AWAITING_USER_APPROVAL, S.SCOPE_NEGOTIATION,
               "change request effort > 2x scope + consensus", "002 §Core Flow, C-22",
               guards.to_scope_negotiation, backward=True),
    Transition(16, S.SCOPE_NEGOTIATION, S.SYNTHESIS, "deferral decision recorded",
               "002 §Core Flow, C-22", guards.scope_to_synthesis, backward=True),
    Transition(17, S.IMPLEMENTATION, S.SYNTHESIS, "violation 1.2 or plan deviation (re-approval)",
               "002 §Violation Recovery Patterns, C-46", guards.owner_only, backward=True),
    Transition(18, S.VALIDATION, S.IMPLEMENTATION, "build failure re-delegated to an agent",
               "C-49", guards.owner_only, backward=True),
    Transition(19, S.REQUIREMENTS, S.CLASSIFIED, "agent blocker / missing worktree / systematic",
               "001 §Partial Agent Completion Handling, C-48", guards.owner_only, backward=True),
    Transition(20, S.VALIDATION, S.REQUIREMENTS, "critical agent addition",
               "001 §Dynamic Agent Addition Mid-Task, C-47", guards.critical_agent_addition,
               backward=True, reason_must_mention="agent addition"),
    Transition(20, S.REVIEW, S.REQUIREMENTS, "critical agent addition",
               "001 §Dynamic Agent Addition Mid-Task, C-47", guards.critical_agent_addition,
               backward=True, reason_must_mention="agent addition"),
)  # fmt: skip

_BY_PAIR: dict[tuple[State, State], Transition] = {(t.source, t.target): t for t in TRANSITIONS}


def lookup(source: State, target: State) -> Transition | None:
    """The D-TRN-3 row for (source, target), or None when the pair is not allowed."""
    return _BY_PAIR.get((source, target))


def next_on_path(path: tuple[State, ...], state: State) -> State | None:
    """The forward successor of `state` on a workflow path, or None at the end / off path."""
    if state not in path:
        return None
    index = path.index(state)
    return path[index + 1] if index + 1 < len(path) else None


def candidates(facts: TaskFacts) -> list[Transition]:
    """Rows that leave the current state and fit the task's path (before guards are run)."""
    rows = [t for t in TRANSITIONS if t.source is facts.state]
    forward_target = next_on_path(facts.path, facts.state)
    return [t for t in rows if t.backward or t.target is forward_target]


def _structural(
    facts: TaskFacts, target: State, reason: str | None
) -> list[Violation] | Transition:
    """Table and variant checks; returns the row or the violations (R-TRN-03, R-WFV-06).

    `reason=None` skips the reason checks (used to list which moves are possible now).
    """
    row = lookup(facts.state, target)
    if row is None:
        if facts.state is S.REVIEW and target is S.COMPLETE:
            return [
                Violation(
                    "R-TRN-17",
                    "REVIEW -> COMPLETE is never allowed: after unanimous approval the task "
                    "must wait for the user at AWAITING_USER_APPROVAL (C-23)",
                    "taskgate transition T AWAITING_USER_APPROVAL",
                )
            ]
        allowed = ", ".join(str(t.target) for t in candidates(facts)) or "none"
        return [
            Violation(
                "R-TRN-03",
                f"transition {facts.state} -> {target} is not in the transition table",
                f"allowed from {facts.state} for this task: {allowed}",
            )
        ]
    if row.forward:
        expected = next_on_path(facts.path, facts.state)
        if target is not expected:
            return [
                Violation(
                    "R-WFV-06",
                    f"{facts.state} -> {target} does not follow this task's workflow "
                    f"({' -> '.join(str(s) for s in facts.path)})",
                    f"the next state on this path is {expected or 'none'}",
                )
            ]
    if row.backward and reason is not None:
        if not reason.strip():
            return [
                Violation(
                    "R-TRN-06",
                    f"the backward transition {facts.state} -> {target} needs a reason",
                    "pass --reason '...'",
                )
            ]
        if row.reason_must_mention and row.reason_must_mention not in reason.lower():
            return [
                Violation(
                    "C-47",
                    f"returning to {target} is allowed only for a critical agent addition",
                    "pass --reason 'critical agent addition: <agent> because ...'",
                )
            ]
    if row.backward:
        if target is S.IMPLEMENTATION and S.IMPLEMENTATION not in facts.path:
            return [
                Violation(
                    "R-TRN-23",
                    "this task's workflow has no IMPLEMENTATION state; change requests "
                    "return to SYNTHESIS (C-08)",
                    "taskgate transition T SYNTHESIS --reason '...'",
                )
            ]
        if (
            target is S.SYNTHESIS
            and facts.state is S.AWAITING_USER_APPROVAL
            and (S.IMPLEMENTATION in facts.path)
        ):
            return [
                Violation(
                    "R-TRN-23",
                    "a change request on a full-path task returns to IMPLEMENTATION",
                    "taskgate transition T IMPLEMENTATION --reason '...'",
                )
            ]
    return row


def check(facts: TaskFacts, target: State, reason: str = "") -> list[Violation]:
    """All violations that block moving the task to `target` (empty: the move is allowed)."""
    result = _structural(facts, target, reason)
    if isinstance(result, list):
        return result
    return result.guard(facts)


def possible(facts: TaskFacts) -> list[tuple[Transition, list[Violation]]]:
    """Every move out of the current state that fits the path, with what blocks it now."""
    result = []
    for row in candidates(facts):
        structural = _structural(facts, row.target, None)
        blocked = structural if isinstance(structural, list) else row.guard(facts)
        if not (isinstance(structural, list) and structural[0].rule == "R-TRN-23"):
            result.append((row, blocked))
    return result
