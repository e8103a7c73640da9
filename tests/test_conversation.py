"""`taskgate say`: messages in context through the real CLI (RULES §9-§10; C-26, C-45, C-68)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from conftest import Repo, make_repo
from flow import (
    PASSING_BUILD,
    agents_of,
    approve_plan,
    commit_in,
    to_awaiting,
    to_implementation,
    to_review,
    to_synthesis,
)
from taskgate.engine import checkpoints
from taskgate.engine.conversation import record_human_message
from taskgate.engine.core import Engine
from taskgate.engine.workspace import find_workspace
from taskgate.protocol.messages import (
    Checkpoint,
    MessageKind,
    clarification_text,
    classify_message,
)
from taskgate.protocol.states import State


@pytest.fixture
def brepo(tmp_path: Path) -> Repo:
    """A repository whose validation command passes."""
    return make_repo(tmp_path / "repo", config=PASSING_BUILD)


def state(repo: Repo, task: str = "add-login") -> str:
    return str(repo.ok("status", task, "--json").json()["state"])


def say(repo: Repo, text: str, code: int = 0, **kw: object) -> dict[str, object]:
    """`say --json`, asserting the exit code and that the state reported matches the store."""
    result = repo.run("say", "add-login", text, "--json", **kw)  # type: ignore[arg-type]
    assert result.code == code, f"{text!r} -> {result.code}\n{result.out}\n{result.err}"
    data: dict[str, object] = result.json()
    assert data["state_after"] == state(repo)
    return data


def task_json(repo: Repo) -> dict[str, object]:
    data: dict[str, object] = json.loads((repo.task_dir("add-login") / "task.json").read_text())
    return data


# --- interruptions never move the state (seed 000 examples) --------------------------------


def test_seed_000_example_3_four_questions_then_resume_at_synthesis(repo: Repo) -> None:
    to_synthesis(repo, "add-login")
    questions = [
        ("How will you handle error cases?", "QUESTION"),
        ("What about thread safety?", "QUESTION"),
        ("Will this work with existing code?", "OTHER"),
        ("Can you explain the testing strategy?", "QUESTION"),
    ]
    for number, (text, kind) in enumerate(questions, start=1):
        data = say(repo, text)
        assert (data["kind"], data["state_before"], data["state_after"]) == (
            kind, "SYNTHESIS", "SYNTHESIS"
        )  # fmt: skip
        assert "state remains: SYNTHESIS" in str(data["response"])  # R-INT-06
        assert data["interruptions"] == number
    log = task_json(repo)["interruptions"]  # R-INT-10
    assert [i["type"] for i in log] == [k for _, k in questions]  # type: ignore[index]
    resumed = say(repo, "Continue with the implementation plan")
    assert resumed["kind"] == "RESUMPTION" and resumed["state_after"] == "SYNTHESIS"  # R-INT-09
    response = str(resumed["response"])
    assert "Resuming from state: SYNTHESIS (after 4 interruptions, R-INT-08)" in response
    assert "present it for approval" in response
    assert repo.ok("status", "add-login", "--json").json()["approvals"] == []


def test_seed_000_example_1_question_audit_question_resume_at_implementation(repo: Repo) -> None:
    to_implementation(repo, "add-login")
    for text, kind in [
        ("What architecture pattern are you using?", "QUESTION"),
        ("/audit-session", "AUDIT"),
        ("Can you explain why you chose that pattern?", "QUESTION"),
    ]:
        data = say(repo, text)
        assert (data["kind"], data["state_after"]) == (kind, "IMPLEMENTATION")
    resumed = say(repo, "Continue working")
    assert resumed["kind"] == "RESUMPTION"
    assert "resume the incomplete implementation work" in str(resumed["response"])  # D-INT-3


def test_seed_000_example_2_status_audit_resume_at_review(brepo: Repo) -> None:
    to_review(brepo, "add-login")
    assert say(brepo, "Where are we in the process?")["kind"] == "STATUS_REQUEST"
    assert say(brepo, "Run audit to verify everything is correct")["kind"] == "AUDIT"
    resumed = say(brepo, "Proceed with review")
    assert resumed["kind"] == "RESUMPTION" and resumed["state_after"] == "REVIEW"
    assert "re-invoke reviewers" in str(resumed["response"])


# --- plan checkpoint ---------------------------------------------------------------------------


def test_r_ckp_04_approval_words_before_the_presentation_never_count(repo: Repo) -> None:
    to_synthesis(repo, "add-login")
    early = say(repo, "LGTM")
    assert early["kind"] == "OTHER" and "R-CKP-04" in str(early["note"])  # nothing presented
    assert "taskgate present add-login" in str(early["response"])
    assert say(repo, "proceed")["kind"] == "RESUMPTION"
    assert repo.ok("status", "add-login", "--json").json()["approvals"] == []
    repo.ok("present", "add-login")
    blocked = repo.run("transition", "add-login", "IMPLEMENTATION")
    assert blocked.code == 1 and "R-CKP-03" in blocked.err
    # R-CKP-17: after the presentation the approval moves the task on at once.
    data = say(repo, "Looks good, proceed with implementation")
    assert data["kind"] == "APPROVAL" and data["checkpoint"] == "PLAN"
    assert data["transition"]["target"] == "IMPLEMENTATION"  # type: ignore[index]
    status = repo.ok("status", "add-login", "--json").json()
    assert status["approvals"][0]["provenance"] == "non-interactive"


def test_r_ckp_04_message_sent_before_presentation_is_no_reply(repo: Repo) -> None:
    to_synthesis(repo, "add-login")
    repo.ok("present", "add-login")
    engine = Engine(find_workspace(repo.path), session_id="s1", cwd=repo.path)
    try:
        result = record_human_message(
            engine, "add-login", "LGTM", checkpoints.HUMAN_PROMPT, sent_at="2000-01-01T00:00:00Z"
        )
    finally:
        engine.close()
    assert result.kind is MessageKind.OTHER and result.checkpoint is Checkpoint.NONE
    assert "R-CKP-04" in result.note and result.approval is None


def test_r_ckp_09_continue_at_a_presented_checkpoint_asks(repo: Repo) -> None:
    to_synthesis(repo, "add-login")
    repo.ok("present", "add-login")
    result = repo.run("say", "add-login", "continue")
    assert result.code == 4  # needs a human decision
    assert result.out.strip() == clarification_text(Checkpoint.PLAN)
    assert state(repo) == "SYNTHESIS"
    assert task_json(repo)["interruptions"][-1]["type"] == "AMBIGUOUS"  # type: ignore[index]


def test_r_ckp_16_unrelated_work_offers_two_options(repo: Repo) -> None:
    to_synthesis(repo, "add-login")
    repo.ok("present", "add-login")
    data = say(repo, "Let's switch to another task for now", code=4)
    assert data["kind"] == "UNRELATED_WORK" and data["needs_human"] is True
    assert "1. Continue waiting" in str(data["response"])
    assert "2. Abandon the current task" in str(data["response"])
    assert data["state_after"] == "SYNTHESIS"


def test_r_ckp_15_plan_change_request_stays_and_drops_approval(repo: Repo) -> None:
    to_synthesis(repo, "add-login")
    approve_plan(repo, "add-login")
    data = say(repo, "Please add a rollback phase to the plan")
    assert data["kind"] == "CHANGE_REQUEST" and data["state_after"] == "SYNTHESIS"
    assert data["feedback"] == "Please add a rollback phase to the plan"
    status = repo.ok("status", "add-login", "--json").json()
    assert status["feedback"][-1]["kind"] == "plan"
    assert not (repo.task_dir("add-login") / "user-plan-approval-obtained.flag").exists()
    blocked = repo.run("transition", "add-login", "IMPLEMENTATION")
    assert blocked.code == 1 and "R-CKP-03" in blocked.err
    stale = repo.run("approve", "add-login", "plan")  # the revised plan must be shown again
    assert stale.code == 1 and "R-CKP-03" in stale.err
    approve_plan(repo, "add-login")
    repo.ok("transition", "add-login", "IMPLEMENTATION")


@pytest.mark.parametrize("marker", ["CLAUDECODE", "TASKGATE_AGENT"])
def test_r_ckp_02_say_of_an_approval_by_an_agent_is_refused(repo: Repo, marker: str) -> None:
    to_synthesis(repo, "add-login")
    repo.ok("present", "add-login")
    result = repo.run("say", "add-login", "LGTM, proceed", env={marker: "1"})
    assert result.code == 1 and "R-CKP-02" in result.err and "hint:" in result.err
    status = repo.ok("status", "add-login", "--json").json()
    assert status["approvals"] == [] and status["state"] == "SYNTHESIS"
    # Relaying a question is fine, and recorded as relayed.
    data = say(repo, "What about thread safety?", env={marker: "1"})
    assert data["provenance"] == "agent-relayed"


# --- change review -----------------------------------------------------------------------------


def test_r_trn_23_change_request_sends_the_task_back_at_once(brepo: Repo) -> None:
    to_awaiting(brepo, "add-login")
    brepo.ok("present", "add-login")
    brepo.ok("approve", "add-login", "changes")
    flag = brepo.task_dir("add-login") / "user-approval-obtained.flag"
    assert flag.exists()
    text = "Looks good but rename login() to sign_in()"
    data = say(brepo, text)
    assert data["kind"] == "CHANGE_REQUEST" and data["state_after"] == "IMPLEMENTATION"
    assert "Would you like" not in str(data["response"])  # R-TRN-23: no options, no question
    status = brepo.ok("status", "add-login", "--json").json()
    assert status["checkpoint"] is None and not flag.exists()  # C-45
    assert all(a["revoked_at"] for a in status["approvals"] if a["kind"] == "changes")
    assert status["feedback"][-1]["text"] == text and status["feedback"][-1]["kind"] == "changes"
    assert status["transition_log"][-1]["reason"].startswith("User requested changes: Looks")
    # R-TRN-26: back through VALIDATION and REVIEW; the new review repeats the request.
    commit_in(brepo.worktree("add-login"), "src/auth/login.py", "def sign_in():\n    pass\n",
              "[agent:quality] rename")  # fmt: skip
    for agent in agents_of(brepo, "add-login"):
        brepo.ok("agent", "set", "add-login", agent, "COMPLETE", "--done")
    brepo.ok("transition", "add-login", "VALIDATION")
    brepo.ok("validate", "add-login")
    brepo.ok("transition", "add-login", "REVIEW")
    for agent in agents_of(brepo, "add-login"):
        brepo.ok("agent", "verdict", "add-login", agent, "APPROVED")
    brepo.ok("transition", "add-login", "AWAITING_USER_APPROVAL")
    assert say(brepo, "LGTM")["kind"] == "OTHER"  # the new SHA is not presented yet
    shown = brepo.ok("present", "add-login").out
    assert f"- {text}" in shown
    approved = say(brepo, "Yes, approved")
    assert approved["kind"] == "APPROVAL" and approved["state_after"] == "AWAITING_USER_APPROVAL"
    assert flag.exists()


def test_r_ckp_13_say_approval_after_a_new_commit_is_refused(brepo: Repo) -> None:
    to_awaiting(brepo, "add-login")
    brepo.ok("present", "add-login")
    commit_in(brepo.worktree("add-login"), "late.txt", "late\n", "late change")
    result = brepo.run("say", "add-login", "ship it")
    assert result.code == 1 and "R-CKP-13" in result.err and "present" in result.err
    assert "user-approval-obtained.flag" not in {
        p.name for p in brepo.task_dir("add-login").iterdir()
    }


def test_r_int_11_change_request_counts_before_the_presentation(brepo: Repo) -> None:
    to_awaiting(brepo, "add-login")
    assert say(brepo, "LGTM")["kind"] == "OTHER"  # R-CKP-04: no approval before presenting
    data = say(brepo, "fix the typo in the docstring")
    assert data["kind"] == "CHANGE_REQUEST" and data["checkpoint"] == "CHANGES"
    assert data["state_after"] == "IMPLEMENTATION"


def test_c_08_skip_path_change_request_returns_to_synthesis(repo: Repo) -> None:
    to_synthesis(repo, "fix-typo", "--risk-level", "LOW")
    approve_plan(repo, "fix-typo")
    commit_in(repo.worktree("fix-typo"), "docs/guide.md", "fixed\n", "fix typo")
    repo.ok("transition", "fix-typo", "AWAITING_USER_APPROVAL")
    repo.ok("present", "fix-typo")
    result = repo.run("say", "fix-typo", "fix the second typo too", "--json")
    assert result.code == 0, result.err
    assert result.json()["state_after"] == "SYNTHESIS"
    status = repo.ok("status", "fix-typo", "--json").json()
    assert status["state"] == "SYNTHESIS" and status["checkpoint"] is None
    assert not (repo.task_dir("fix-typo") / "user-plan-approval-obtained.flag").exists()


# --- input and ownership -----------------------------------------------------------------------


def test_bad_input_changes_nothing(repo: Repo) -> None:
    to_synthesis(repo, "add-login")
    before = task_json(repo)["_seq"]
    empty = repo.run("say", "add-login", "   ")
    assert empty.code == 2 and "hint:" in empty.err
    unknown = repo.run("say", "no-such-task", "hello")
    assert unknown.code == 2
    foreign = repo.run("say", "add-login", "What now?", session="intruder")
    assert foreign.code == 3
    assert task_json(repo)["_seq"] == before


def test_say_reads_stdin_and_needs_no_session(repo: Repo) -> None:
    to_synthesis(repo, "add-login")
    repo.ok("present", "add-login")
    result = repo.run("say", "add-login", "-", "--json", stdin="Approved, go ahead\n",
                      session=None)  # fmt: skip
    assert result.code == 0, result.err
    data = result.json()
    assert data["kind"] == "APPROVAL" and data["state_after"] == "IMPLEMENTATION"
    assert data["approval"]["kind"] == "plan" and len(data["message_hash"]) == 64


# --- property: only approvals and change requests move the state (C-68, R-INT-02) ----------

VOCABULARY = (
    "continue", "keep going", "proceed", "LGTM", "approved", "yes", "ok", "why", "what",
    "status", "audit", "/audit-session", "rename foo", "not", "?", "merge it", "later",
    "the plan", "thanks", "another task", "hmm", "explain", "carry on", "👍",
)  # fmt: skip
TEXTS = st.lists(st.sampled_from(VOCABULARY) | st.text(max_size=8), min_size=1, max_size=5).map(
    " ".join
)


def test_property_r_int_02_messages_outside_a_checkpoint_never_move_the_state(
    repo: Repo,
) -> None:
    to_implementation(repo, "add-login")
    engine = Engine(find_workspace(repo.path), session_id="", cwd=repo.path)

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(TEXTS)
    def check(text: str) -> None:
        assume(text.strip())
        result = record_human_message(engine, "add-login", text, checkpoints.HUMAN_PROMPT)
        assert result.state_before == result.state_after == "IMPLEMENTATION"
        assert result.approval is None and result.kind is not MessageKind.APPROVAL

    try:
        check()
        snap = engine.require_snapshot("add-login")
        assert snap.task.state == "IMPLEMENTATION" and snap.active_approval("changes") is None
    finally:
        engine.close()


def test_property_r_ckp_08_at_the_plan_checkpoint_only_an_approval_moves_on(repo: Repo) -> None:
    to_synthesis(repo, "add-login")
    repo.ok("present", "add-login")
    engine = Engine(find_workspace(repo.path), session_id="s1", cwd=repo.path)

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(TEXTS)
    def check(text: str) -> None:
        expected = classify_message(text, state=State.SYNTHESIS, checkpoint=Checkpoint.PLAN)
        assume(text.strip() and expected.kind is not MessageKind.APPROVAL)
        result = record_human_message(engine, "add-login", text, checkpoints.HUMAN_PROMPT)
        assert result.kind is expected.kind
        assert result.state_after == "SYNTHESIS" and result.approval is None
        if result.kind is MessageKind.AMBIGUOUS:
            assert result.needs_human and result.response == clarification_text(Checkpoint.PLAN)
        if result.kind is MessageKind.CHANGE_REQUEST:  # R-CKP-15: the plan is shown again
            checkpoints.present(engine, "add-login")

    try:
        check()
    finally:
        engine.close()
