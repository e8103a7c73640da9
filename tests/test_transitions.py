"""The transition table (D-TRN-3) and the structural checks (R-TRN-03, R-TRN-06, R-WFV-06)."""

from __future__ import annotations

import itertools

import pytest

from taskgate.protocol import transitions
from taskgate.protocol.facts import TaskFacts
from taskgate.protocol.states import ChangeType, RiskLevel, State
from taskgate.protocol.workflow import state_path

S = State
FULL = state_path(RiskLevel.HIGH, ChangeType.CODE)
SKIP = state_path(RiskLevel.LOW, ChangeType.DOCUMENTATION_ONLY)


def facts(state: State, path: tuple[State, ...] = FULL) -> TaskFacts:
    return TaskFacts(task="t", session_id="s", owner="s", state=state, path=path)


def test_table_has_the_20_rows_of_D_TRN_3() -> None:
    assert sorted({t.row for t in transitions.TRANSITIONS}) == list(range(1, 21))
    pairs = [(t.source, t.target) for t in transitions.TRANSITIONS]
    assert len(pairs) == len(set(pairs)) == 21  # row 20 has two sources


def test_every_state_appears() -> None:
    seen = {t.source for t in transitions.TRANSITIONS} | {t.target for t in transitions.TRANSITIONS}
    assert seen == set(State)  # R-TRN-01: the 11 states (C-21)


def test_backward_rows_are_11_to_20() -> None:
    for row in transitions.TRANSITIONS:
        assert row.backward == (row.row >= 11)


@pytest.mark.parametrize(
    ("source", "target"),
    [
        (S.INIT, S.REQUIREMENTS),
        (S.CLASSIFIED, S.SYNTHESIS),
        (S.SYNTHESIS, S.VALIDATION),
        (S.IMPLEMENTATION, S.REVIEW),
        (S.COMPLETE, S.INIT),
        (S.CLEANUP, S.INIT),
        (S.SCOPE_NEGOTIATION, S.IMPLEMENTATION),
    ],
)
def test_R_TRN_03_pairs_outside_the_table(source: State, target: State) -> None:
    violations = transitions.check(facts(source), target)
    assert [v.rule for v in violations] == ["R-TRN-03"]
    assert str(source) in violations[0].message and str(target) in violations[0].message


def test_R_TRN_17_review_to_complete() -> None:
    assert [v.rule for v in transitions.check(facts(S.REVIEW), S.COMPLETE)] == ["R-TRN-17"]


def test_R_TRN_06_backward_needs_reason() -> None:
    for row in transitions.TRANSITIONS:
        if row.backward:
            violations = transitions.check(facts(row.source), row.target, reason="  ")
            assert violations and violations[0].rule in ("R-TRN-06", "R-TRN-23")


def test_C_47_return_to_requirements_only_for_agent_addition() -> None:
    rules = [v.rule for v in transitions.check(facts(S.REVIEW), S.REQUIREMENTS, "bored")]
    assert rules == ["C-47"]


def test_R_WFV_06_low_task_cannot_enter_implementation() -> None:
    rules = [v.rule for v in transitions.check(facts(S.SYNTHESIS, SKIP), S.IMPLEMENTATION)]
    assert rules == ["R-WFV-06"]


def test_R_WFV_06_high_task_cannot_skip_to_awaiting() -> None:
    f = facts(S.SYNTHESIS, FULL)
    assert [v.rule for v in transitions.check(f, S.AWAITING_USER_APPROVAL)] == ["R-WFV-06"]


def test_R_TRN_23_change_request_target_depends_on_path() -> None:
    full = transitions.check(facts(S.AWAITING_USER_APPROVAL, FULL), S.SYNTHESIS, "change")
    assert [v.rule for v in full] == ["R-TRN-23"]
    skip = transitions.check(facts(S.AWAITING_USER_APPROVAL, SKIP), S.IMPLEMENTATION, "change")
    assert [v.rule for v in skip] == ["R-TRN-23"]


def test_candidates_follow_the_path() -> None:
    targets = {t.target for t in transitions.candidates(facts(S.SYNTHESIS, SKIP))}
    assert S.AWAITING_USER_APPROVAL in targets and S.IMPLEMENTATION not in targets
    targets = {t.target for t in transitions.candidates(facts(S.SYNTHESIS, FULL))}
    assert S.IMPLEMENTATION in targets and S.AWAITING_USER_APPROVAL not in targets


@pytest.mark.parametrize("path", [FULL, SKIP])
def test_every_forward_step_of_a_path_is_a_table_row(path: tuple[State, ...]) -> None:
    for source, target in itertools.pairwise(path):
        row = transitions.lookup(source, target)
        assert row is not None and row.forward, (source, target)
