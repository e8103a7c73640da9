"""The clarification loop with scripted agents: every termination reason, staleness, the
question limit, and the invariant that every save is valid and index.md reflects it."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taskgate.spec import loop as loop_module
from taskgate.spec.agents import (
    DEMO_SCENARIO,
    AgentFailed,
    ScriptedSpecBackend,
    SpecAgents,
    backend_from,
)
from taskgate.spec.detect import create
from taskgate.spec.index import index_view, parse_index
from taskgate.spec.loop import Outcome, Workflow
from taskgate.spec.responders import Nobody, Preset, Scripted
from taskgate.spec.state import (
    COMPLETING_REASONS,
    MAX_QUESTIONS,
    Decision,
    SpecPaths,
    SpecState,
    load_state,
    validate_state,
)

STUBBORN = {"key": "stubborn", "severity": "important", "summary": "Never settled",
            "section": "Requirements", "question": "Which one?", "needs": None}  # fmt: skip


def scenario(decisions: list[str], *extra: dict[str, Any]) -> dict[str, Any]:
    """A scenario with one gap that answers never resolve, plus `extra` gaps."""
    return {"gaps": [STUBBORN, *extra], "answers": {}, "decisions": decisions}


@pytest.fixture(autouse=True)
def checked_saves(monkeypatch: pytest.MonkeyPatch) -> list[SpecState]:
    """Every save passes the integrity check and index.md shows exactly the saved state."""
    saved: list[SpecState] = []
    original = loop_module.save_state

    def save(paths: SpecPaths, state: SpecState, **kw: Any) -> SpecState:
        assert validate_state(state) == [], (state.phase, validate_state(state))
        result = original(paths, state, **kw)
        assert parse_index(paths.index.read_text()) == index_view(state)  # R-SPC-13
        saved.append(state)
        return result

    monkeypatch.setattr(loop_module, "save_state", save)
    return saved


def start(tmp_path: Path, scen: dict[str, Any], description: str = "User login") -> Workflow:
    """A1's first half on disk, and the workflow over it."""
    paths = create(tmp_path / "specs", description, "user-login",
                   agents={"backend": "scripted", "scenario": scen}, scripted=True,
                   now="2024-01-01T00:00:00Z")  # fmt: skip
    state = load_state(paths)
    assert state is not None
    return Workflow(paths, state, SpecAgents(backend_from(state.agents)))


def run_scripted(tmp_path: Path, scen: dict[str, Any]) -> Outcome:
    """Run a scenario to the end with the scripted person."""
    wf = start(tmp_path, scen)
    outcome = wf.run(Scripted(wf.state))
    assert outcome.waiting is None
    return outcome


def test_success_with_the_demo_scenario(tmp_path: Path) -> None:
    outcome = run_scripted(tmp_path, DEMO_SCENARIO)
    s = outcome.state
    assert (s.loop_status, s.termination_reason, s.current_iteration) == ("completed", "success", 3)
    assert {g.key: g.status for g in s.gaps} == {
        "actors": "resolved", "data": "resolved", "failure": "resolved",
        "latency": "resolved", "glossary": "deferred",
    }  # fmt: skip
    assert [c.question for c in s.clarifications] == ["C1.1", "C1.2", "C1.3", "C2.1"]
    root = tmp_path / "specs" / "001-user-login"
    assert "**FR-005**" in (root / "spec.md").read_text()
    report = (root / "quality-report.md").read_text()
    assert "Termination: success" in report and "| FR-005 | CHK-005 |" in report
    assert "G-004 | Minor | deferred" in report
    assert s.rewrites == 1  # the critical gap sent the first spec back to A2 once


@pytest.mark.parametrize(
    ("decisions", "reason", "status"),
    [
        (["accept"], "accepted", "completed"),  # no progress in iteration 2: accept
        (["abort"], "aborted", "terminated"),
        (["retry", "retry", "accept"], "stale_accepted", "completed"),  # stale at 3: accept
        (["retry", "retry", "edit"], "manual_edit", "terminated"),
        (["retry"], "max_iterations", "completed"),  # always retry: stops at iteration 10
    ],
)
def test_each_termination_reason(tmp_path: Path, decisions: list[str], reason: str,
                                 status: str) -> None:  # fmt: skip
    s = run_scripted(tmp_path, scenario(decisions)).state
    assert (s.termination_reason, s.loop_status) == (reason, status)
    report = tmp_path / "specs" / "001-user-login" / "quality-report.md"
    assert report.exists() is (status == "completed")  # only completing reasons run phase C
    if reason == "max_iterations":
        assert s.current_iteration == 10
    if reason in ("accepted", "max_iterations", "stale_accepted"):
        assert s.gap("G-001").status == "accepted"  # type: ignore[union-attr]


def test_staleness_warns_at_2_and_escalates_at_3(tmp_path: Path) -> None:
    s = run_scripted(tmp_path, scenario(["retry", "retry", "accept"])).state
    actions = [(h.iteration, h.action) for h in s.history if h.gap == "G-001"]
    assert (3, "stale_warning") in actions
    assert (4, "escalated") in actions
    assert (4, "decision:accept") in actions
    assert s.decisions == ["no_progress:retry", "no_progress:retry", "stale:accept"]


def test_stale_retry_restarts_the_clock(tmp_path: Path) -> None:
    s = run_scripted(tmp_path, scenario(["retry"])).state
    escalations = [h.iteration for h in s.history if h.action == "escalated"]
    assert escalations == [4, 7]  # retry at 4 restarts the clock, so 3 more iterations


def test_at_most_three_questions_grouped_by_section(tmp_path: Path) -> None:
    gaps = [{"key": f"k{n}", "severity": "important", "summary": f"S{n}", "section": sec,
             "question": f"Q{n}?"} for n, sec in enumerate("AABCDE")]  # fmt: skip
    wf = start(tmp_path, {"gaps": gaps, "answers": {}})
    outcome = wf.run(Nobody())
    assert outcome.waiting == "answers"
    questions = outcome.state.pending_questions
    assert len(questions) == MAX_QUESTIONS
    assert [q.id for q in questions] == ["C1.1", "C1.2", "C1.3"]
    assert questions[0].gaps == ["G-001", "G-002"]  # one question, two gaps (C-56)
    assert questions[0].text == "Q0? Q1?"
    unasked = [g.id for g in outcome.state.gaps if g.status == "open"]
    assert unasked == ["G-005", "G-006"]  # asked in a later iteration


def test_non_answers_make_no_progress(tmp_path: Path) -> None:
    wf = start(tmp_path, DEMO_SCENARIO)
    first = wf.run(Nobody())
    skip = {q.id: "skip" for q in first.state.pending_questions}
    second = wf.run(Preset(skip, None, Nobody()))
    assert second.waiting == "decision"
    assert second.state.pending_decision is not None
    assert second.state.pending_decision.kind == "no_progress"
    third = wf.run(Preset({}, "abort", Nobody()))
    assert third.state.termination_reason == "aborted"


def test_a_finished_workflow_runs_nothing(tmp_path: Path, checked_saves: list[SpecState]) -> None:
    wf = start(tmp_path, DEMO_SCENARIO)
    wf.run(Scripted(wf.state))
    count = len(checked_saves)
    assert wf.run(Nobody()).waiting is None
    assert len(checked_saves) == count  # R-SPC-09: report only


class Garbage:
    """A backend that replies outside the contract."""

    name = "garbage"

    def invoke(self, role: str, request: Any) -> Any:
        return {"questions": [{"gaps": ["G-999"]}], "gaps": [{"severity": "fatal"}], "spec": ""}


def test_replies_outside_the_contract_fail_without_saving(tmp_path: Path) -> None:
    wf = start(tmp_path, DEMO_SCENARIO)
    before = wf.paths.state.read_text()
    wf.agents = SpecAgents(Garbage())
    with pytest.raises(AgentFailed):
        wf.run(Nobody())
    assert wf.paths.state.read_text() != before  # A1 completed and was saved ...
    assert load_state(wf.paths).loop_status == "spec_writing"  # type: ignore[union-attr]
    agents = SpecAgents(Garbage())
    with pytest.raises(AgentFailed):
        agents.validate("001-x", "d", "spec", 1)
    with pytest.raises(AgentFailed):
        agents.classify([{"id": "G-001"}])


def test_scripted_backend_is_deterministic() -> None:
    backend = ScriptedSpecBackend(DEMO_SCENARIO)
    request = {"feature_id": "001-x", "description": "d", "clarifications": [], "feedback": []}
    assert backend.invoke("spec-writer", request) == backend.invoke("spec-writer", request)
    assert backend.answer("actors", 5) == backend.answer("actors", 0)
    assert backend.decide(3) == "retry"


class Crash(Exception):
    """Stands in for kill -9 at a failpoint (the in-memory workflow is thrown away)."""


class Drawn:
    """A person whose answers (real or "skip") and decisions Hypothesis chooses."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data

    def answers(self, state: SpecState) -> dict[str, str]:
        return {q.id: self.data.draw(st.sampled_from(["yes, like this", "skip"]))
                for q in state.pending_questions}  # fmt: skip

    def decide(self, state: SpecState, decision: Decision) -> str:
        return self.data.draw(st.sampled_from(decision.options))


_gap = st.fixed_dictionaries(
    {"key": st.sampled_from(["a", "b", "c", "d", "e"]),
     "severity": st.sampled_from(["critical", "important", "minor"]),
     "summary": st.just("gap"), "section": st.sampled_from(["S1", "S2", "S3", "S4"]),
     "question": st.just("why?"), "needs": st.sampled_from([0, 1, 2, 3, None]),
     "appears_at": st.integers(1, 4)}
)  # fmt: skip


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(data=st.data())
def test_any_answers_decisions_and_crashes_end_in_a_valid_final_state(
    data: st.DataObject, monkeypatch: pytest.MonkeyPatch
) -> None:
    gaps = data.draw(st.lists(_gap, max_size=5, unique_by=lambda g: g["key"]))
    crashes = data.draw(st.sets(st.integers(1, 60), max_size=3))
    hits = 0

    def hit(name: str) -> None:
        nonlocal hits
        hits += 1
        if hits in crashes:
            raise Crash(name)

    with tempfile.TemporaryDirectory() as tmp, monkeypatch.context() as patch:
        wf = start(Path(tmp), {"gaps": gaps, "answers": {}})
        patch.setattr(loop_module.failpoints, "hit", hit)  # undone after each example
        person = Drawn(data)
        for _ in range(100):
            try:
                outcome = wf.run(person)
            except Crash:
                state = load_state(wf.paths)
                assert state is not None and validate_state(state) == []  # R-SPC-16 holds
                wf = Workflow(wf.paths, state, wf.agents)
                continue
            break
        s = outcome.state
        assert outcome.waiting is None
        assert s.loop_status in ("completed", "terminated") and s.termination_reason
        assert (s.loop_status == "completed") is (s.termination_reason in COMPLETING_REASONS)
        assert 1 <= s.current_iteration <= 10
        assert not any(g.blocking for g in s.gaps) or s.loop_status == "terminated"
        assert parse_index(wf.paths.index.read_text()) == index_view(s)


def test_a_crash_between_state_and_index_is_healed_by_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """state.json is saved, then index.md rendered from it: a crash between the two left the
    index behind for good once the state said completed (found by the property above)."""
    wf = start(tmp_path, {"gaps": [], "answers": {}})
    real_hit = loop_module.failpoints.hit

    def hit(name: str) -> None:
        if name == "atomic_write:index.md" and load_state(wf.paths).loop_status == "completed":
            raise Crash(name)
        real_hit(name)

    with monkeypatch.context() as patch:
        patch.setattr(loop_module.failpoints, "hit", hit)
        with pytest.raises(Crash):
            wf.run(Nobody())
    state = load_state(wf.paths)
    assert state is not None and state.loop_status == "completed"
    assert parse_index(wf.paths.index.read_text()) != index_view(state)  # behind
    done = Workflow(wf.paths, state, wf.agents).run(Nobody())
    assert done.state.loop_status == "completed"
    assert parse_index(wf.paths.index.read_text()) == index_view(done.state)


def test_answers_applied_at_iteration_10_never_pass_it(tmp_path: Path) -> None:
    wf = start(tmp_path, DEMO_SCENARIO)
    first = wf.run(Nobody())
    state = first.state
    state.current_iteration = 10  # e.g. a state repaired by clamping (R-SPC-16)
    answers = {q.id: "real answer" for q in state.pending_questions}
    wf = Workflow(wf.paths, state, wf.agents)
    s = wf.run(Preset(answers, None, Nobody())).state
    assert (s.current_iteration, s.termination_reason) == (10, "max_iterations")
