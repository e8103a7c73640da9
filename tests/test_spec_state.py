"""Spec workflow state: integrity (R-SPC-14/15/18, C-56), atomic save (C-55), index.md round
trip (R-SPC-13), resume points (D-SPC-2, C-53, C-54), repair (R-SPC-16), detection (R-SPC-02/03,
C-58, C-59)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taskgate.errors import Corrupted
from taskgate.spec.detect import detect, scan, similarity, slugify
from taskgate.spec.index import index_view, parse_index, render_index
from taskgate.spec.recovery import next_step, remove_workflow, repair, resume_point
from taskgate.spec.state import (
    GAP_STATUSES,
    LOOP_STATUSES,
    SEVERITIES,
    Decision,
    Gap,
    HistoryEntry,
    Question,
    SpecPaths,
    SpecState,
    load_state,
    save_state,
    state_from_json,
    validate_state,
)

FIXED = datetime(2024, 1, 15, 10, 30, tzinfo=UTC)


def clarifying_state() -> SpecState:
    """The D-SPC-3 example: iteration 2, C2.1 pending for G-004 (consistent fixtures, C-71)."""
    return SpecState(
        feature_id="005-user-auth",
        description="User authentication",
        loop_status="clarifying",
        current_iteration=2,
        last_activity="2024-01-15T10:30:00Z",
        gaps=[
            Gap("G-001", "timeout", "critical", "Session timeout", status="resolved",
                resolution="Applied in iteration 1"),
            Gap("G-004", "lockout", "important", "Account lockout", status="clarifying",
                first_seen=2, since=2, resolution="Pending C2.1"),
        ],
        pending_questions=[Question("C2.1", "Session timeout", "How long?", ["G-004"])],
        history=[HistoryEntry("G-001", 1, "resolved", 'Answer: "15 minute timeout"')],
    )  # fmt: skip


def test_the_seed_example_passes_the_integrity_check() -> None:
    assert validate_state(clarifying_state()) == []


@pytest.mark.parametrize(("iteration", "ok"), [(0, False), (1, True), (10, True), (11, False)])
def test_r_spc_15_iteration_bounds(iteration: int, ok: bool) -> None:
    state = clarifying_state()
    state.current_iteration = iteration
    assert (validate_state(state) == []) is ok


@pytest.mark.parametrize(("stale", "ok"), [(-1, False), (0, True), (3, True), (4, False)])
def test_r_spc_15_stale_count_bounds(stale: int, ok: bool) -> None:
    state = clarifying_state()
    state.stale_count = stale
    assert (validate_state(state) == []) is ok


def test_r_spc_15_paused_is_not_a_loop_status() -> None:
    state = clarifying_state()
    state.loop_status = "paused"
    assert any("R-SPC-14" in p and "paused" in p for p in validate_state(state))


def test_c_56_one_question_may_cover_several_gaps() -> None:
    state = clarifying_state()
    state.gaps.append(Gap("G-005", "k5", "important", "Reset", status="clarifying"))
    state.pending_questions[0].gaps.append("G-005")
    assert validate_state(state) == []  # 1 question, 2 clarifying gaps: the sets match


def test_c_56_sets_are_compared_in_both_directions() -> None:
    uncovered = clarifying_state()
    uncovered.gaps.append(Gap("G-005", "k5", "important", "Reset", status="clarifying"))
    assert any("without a pending question" in p for p in validate_state(uncovered))
    stray = clarifying_state()
    stray.pending_questions[0].gaps.append("G-001")  # a resolved gap
    assert any("not clarifying" in p for p in validate_state(stray))


def test_r_spc_18_clarifying_without_questions_or_answers_fails() -> None:
    state = clarifying_state()
    state.pending_questions = []
    state.gaps[1].status = "open"
    assert any("R-SPC-18" in p for p in validate_state(state))


def test_c_55_last_activity_is_set_before_the_atomic_write(tmp_path: Path) -> None:
    paths = SpecPaths(tmp_path / "005-user-auth")
    state = clarifying_state()
    save_state(paths, state, clock=lambda: FIXED, render=render_index)
    on_disk = json.loads(paths.state.read_text())
    assert on_disk["last_activity"] == "2024-01-15T10:30:00Z" == state.last_activity
    assert "| **Last Activity** | 2024-01-15T10:30:00Z |" in paths.index.read_text()
    # no temp files left behind
    assert sorted(p.name for p in paths.workflow.iterdir()) == ["index.md", "state.json"]


def test_unreadable_state_is_corrupted_with_exit_5(tmp_path: Path) -> None:
    paths = SpecPaths(tmp_path / "001-x")
    paths.workflow.mkdir(parents=True)
    paths.state.write_text("{not json")
    with pytest.raises(Corrupted) as info:
        load_state(paths)
    assert info.value.exit_code == 5 and "R-SPC-16" in info.value.message
    paths.state.write_text(json.dumps({"feature_id": "001-x", "description": "d", "bogus": 1}))
    with pytest.raises(Corrupted):
        load_state(paths)


# --- index.md round trip (R-SPC-13) -------------------------------------------------------

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
_ids = st.from_regex(r"G-\d{3}", fullmatch=True)


@st.composite
def states(draw: st.DrawFn) -> SpecState:
    """Arbitrary (not necessarily valid) states with awkward text: pipes, backslashes, newlines."""
    gaps = [
        Gap(draw(_ids), draw(_text), draw(st.sampled_from(SEVERITIES)), draw(_text),
            status=draw(st.sampled_from(GAP_STATUSES)), resolution=draw(_text))
        for _ in range(draw(st.integers(0, 4)))
    ]  # fmt: skip
    questions = [
        Question(f"C{n}.1", draw(_text), draw(_text), draw(st.lists(_ids, max_size=3)),
                 draw(st.sampled_from(["awaiting_answer", "answered"])))
        for n in range(draw(st.integers(0, 3)))
    ]  # fmt: skip
    history = [
        HistoryEntry(draw(_ids), draw(st.integers(1, 10)), draw(_text), draw(_text))
        for _ in range(draw(st.integers(0, 4)))
    ]
    return SpecState(
        feature_id="001-x",
        description=draw(_text),
        loop_status=draw(st.sampled_from(LOOP_STATUSES)),
        current_iteration=draw(st.integers(1, 10)),
        stale_count=draw(st.integers(0, 3)),
        last_activity="2024-01-15T10:30:00Z",
        gaps=gaps,
        pending_questions=questions,
        history=history,
    )


@settings(max_examples=150, deadline=None)
@given(states())
def test_r_spc_13_index_round_trips(state: SpecState) -> None:
    assert parse_index(render_index(state)) == index_view(state)


@settings(max_examples=50, deadline=None)
@given(states())
def test_state_json_round_trips(state: SpecState) -> None:
    assert state_from_json(json.loads(json.dumps(state.to_json()))) == state


def test_r_spc_13_index_has_the_four_sections_with_their_fields() -> None:
    text = render_index(clarifying_state())
    for heading in ("Priority Loop State", "Pending Questions", "Gap Priority Queue",
                    "Gap Resolution History"):  # fmt: skip
        assert f"\n## {heading}\n" in text
    assert "| **Current Iteration** | 2 / 10 |" in text
    assert "| **Stale Count** | 0 / 3 |" in text
    assert "| C2.1 | Session timeout | G-004 | awaiting_answer |" in text
    assert "| Important | G-004 | clarifying | Pending C2.1 |" in text
    assert '| G-001 | 1 | resolved | Answer: "15 minute timeout" |' in text


# --- resume points (D-SPC-2) ----------------------------------------------------------------


def at(status: str, **kw: object) -> SpecState:
    """A state in `status` with fields overridden."""
    state = SpecState(feature_id="001-x", description="d", loop_status=status)
    for key, value in kw.items():
        setattr(state, key, value)
    return state


@pytest.mark.parametrize(
    ("state", "spec_exists", "point"),
    [
        (None, False, "A1"),  # R-SPC-10, C-58
        (at("not_started"), False, "A1"),  # R-SPC-05
        (at("scaffolding"), False, "A1"),  # R-SPC-06
        (at("scaffolding"), True, "A2"),  # C-53
        (at("spec_writing"), True, "A2"),  # R-SPC-05
        (at("validating"), True, "A3"),  # R-SPC-07
        (at("validating", current_iteration=4), True, "B3"),
        (at("clarifying"), True, "B1"),  # R-SPC-08
        (at("clarifying", user_answers={"C1.1": "x"}), True, "B2"),  # C-54
        (at("completed"), True, None),  # R-SPC-09
        (at("terminated"), True, None),
    ],
)
def test_d_spc_2_resume_points(state: SpecState | None, spec_exists: bool, point: str) -> None:
    assert resume_point(state, spec_exists=spec_exists) == point


def test_next_step_skips_a_saved_validation_but_never_leaves_the_rule_point_behind() -> None:
    assert next_step(at("validating", validated_iteration=1), spec_exists=True) == "A4"
    done = at("validating", validated_iteration=1, checklist_done=True)
    assert next_step(done, spec_exists=True) == "A5"
    assert next_step(at("validating", current_iteration=3, validated_iteration=2),
                     spec_exists=True) == "B3"  # fmt: skip
    assert next_step(at("validating", current_iteration=3, validated_iteration=3),
                     spec_exists=True) == "B4"  # fmt: skip
    assert next_step(at("validating", termination_reason="success"), spec_exists=True) == "C"


# --- repair (R-SPC-16) ----------------------------------------------------------------------


def test_repair_makes_a_broken_state_pass_and_says_what_it_did() -> None:
    broken = clarifying_state()
    broken.current_iteration, broken.stale_count = 12, 7
    broken.gaps.append(Gap("G-006", "k6", "important", "Orphan", status="clarifying"))
    broken.pending_questions.append(Question("C2.2", "gone", "?", ["G-099"]))
    broken.user_answers = {"C9.9": "stray"}
    assert validate_state(broken)
    fixed, actions = repair(broken)
    assert validate_state(fixed) == []
    assert fixed.current_iteration == 10 and fixed.stale_count == 3
    assert fixed.gap("G-006").status == "open"  # type: ignore[union-attr]
    assert [q.id for q in fixed.pending_questions] == ["C2.1"]
    assert len(actions) >= 5
    assert validate_state(broken)  # the input is untouched


def test_repair_of_r_spc_18_goes_back_to_classification() -> None:
    state = clarifying_state()
    state.pending_questions = []
    fixed, _ = repair(state)
    assert fixed.loop_status == "validating"
    assert next_step(fixed, spec_exists=True) == "B4"


def test_an_unknown_loop_status_cannot_be_repaired() -> None:
    with pytest.raises(Corrupted, match="R-SPC-16"):
        repair(at("paused"))


def test_r_spc_17_declined_fresh_start_deletes_nothing(tmp_path: Path) -> None:
    paths = SpecPaths(tmp_path / "001-x")
    save_state(paths, at("clarifying"))
    assert remove_workflow(paths, confirmed=False) is False
    assert paths.state.exists()
    assert remove_workflow(paths, confirmed=True) is True
    assert not paths.root.exists()


# --- detection (R-SPC-01..03, C-58, C-59) ----------------------------------------------------


def test_slug_and_similarity() -> None:
    assert slugify("Add user authentication with email and password") == (
        "user-authentication-email-password"
    )
    assert slugify("!!!") == "feature"
    assert similarity("Add user login with passwords", "user login with password") == 1.0
    assert similarity("Add user login", "Export monthly CSV reports") == 0.0


def _workflow(root: Path, fid: str, description: str, status: str, when: str) -> SpecPaths:
    paths = SpecPaths(root / fid)
    state = SpecState(feature_id=fid, description=description, loop_status=status)
    save_state(paths, state, clock=lambda: datetime.fromisoformat(when))
    return paths


def test_detection_matches_similar_descriptions_most_recent_first(tmp_path: Path) -> None:
    root = tmp_path / "specs"
    _workflow(root, "001-user-login", "Add user login with password", "clarifying",
              "2024-01-01T00:00:00+00:00")  # fmt: skip
    _workflow(root, "002-user-login-page", "User login page with password", "validating",
              "2024-02-01T00:00:00+00:00")  # fmt: skip
    _workflow(root, "003-csv-export", "Export monthly CSV reports", "clarifying",
              "2024-03-01T00:00:00+00:00")  # fmt: skip
    _workflow(root, "004-user-login", "Add user login with password", "completed",
              "2024-04-01T00:00:00+00:00")  # fmt: skip
    found = detect(root, "add a user login with passwords")
    assert [c.feature_id for c in found] == ["002-user-login-page", "001-user-login"]  # R-SPC-03
    assert detect(root, "Dark mode for the settings screen") == []
    assert [c.feature_id for c in detect(root, "export monthly csv report")] == ["003-csv-export"]


def test_c_58_directories_without_state_are_a1_candidates(tmp_path: Path) -> None:
    root = tmp_path / "specs"
    (root / "007-user-login").mkdir(parents=True)
    (root / "notes").mkdir()
    os.utime(root / "007-user-login", (0, 0))
    [orphan] = scan(root)
    assert orphan.state is None and orphan.last_activity == "1970-01-01T00:00:00Z"
    assert resume_point(orphan.state, spec_exists=False) == "A1"
    assert [c.feature_id for c in detect(root, "User login for the admin")] == ["007-user-login"]
    assert detect(root, "login") == []  # a single shared word is not enough


def test_decision_options() -> None:
    assert Decision("stale", [], "").options == ("retry", "accept", "edit")
    assert Decision("no_progress", [], "").options == ("retry", "accept", "abort")
