"""End-to-end through the real CLI in temporary git repositories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import Repo, edit_store, git, make_repo
from flow import (
    PASSING_BUILD,
    agents_of,
    approve_plan,
    commit_in,
    to_awaiting,
    to_classified,
    to_implementation,
    to_requirements,
    to_review,
    to_synthesis,
    to_validation,
    write_reports,
)


@pytest.fixture
def brepo(tmp_path: Path) -> Repo:
    """A repository whose validation command passes."""
    return make_repo(tmp_path / "repo", config=PASSING_BUILD)


def test_init_is_idempotent_and_excludes_state(repo: Repo) -> None:
    second = repo.ok("init", "--json").json()
    assert second["created"] == []
    assert "/.taskgate/" in (repo.path / ".git" / "info" / "exclude").read_text()
    assert "taskgate.toml" in git(repo.path, "status", "--porcelain")
    assert ".taskgate" not in git(repo.path, "status", "--porcelain")


def test_todo_lists_availability(repo: Repo) -> None:
    rows = {r["task"]: r for r in repo.ok("todo", "--json").json()}
    assert rows["add-login"]["availability"] == "available"
    assert rows["needs-login"]["availability"] == "blocked"
    assert rows["vague"]["availability"] == "infeasible"  # R-LCK-12
    assert rows["vague"]["rule"] == "R-LCK-12"


def test_start_creates_worktree_on_task_branch(repo: Repo) -> None:
    out = repo.ok("start", "add-login", "--json").json()
    assert out["action"] == "claimed" and out["state"] == "INIT"
    wt = repo.worktree("add-login")
    assert git(wt, "branch", "--show-current") == "add-login"  # R-WTB-01
    view = json.loads((repo.task_dir("add-login") / "task.json").read_text())
    assert view["state"] == "INIT" and view["transition_log"] == []  # R-TRN-02, R-LCK-02
    assert view["session_id"] == "s1"


def test_selection_matrix(repo: Repo) -> None:
    repo.ok("start", "add-login")
    again = repo.ok("start", "add-login", "--json").json()  # row 1: RESUME
    assert again["action"] == "resumed"
    foreign = repo.run("start", "add-login", session="s2")  # rows 3-4
    assert foreign.code == 3
    assert "fix-typo" in foreign.err  # names the next available task
    held = repo.run("start", "fix-typo")  # R-LCK-19
    assert held.code == 1 and "R-LCK-19" in held.err
    blocked = repo.run("start", "needs-login", session="s3")
    assert blocked.code == 1 and "add-login" in blocked.err
    infeasible = repo.run("start", "vague", session="s3")
    assert infeasible.code == 1 and "R-LCK-12" in infeasible.err


def test_missing_session_is_usage_error(repo: Repo) -> None:
    result = repo.run("start", "add-login", session=None)
    assert result.code == 2
    assert "TASKGATE_SESSION" in result.err
    assert not repo.task_dir("add-login").exists()


@pytest.mark.parametrize(
    "name", ["../etc", "a/b", "-rf", "main", "Add", "x" * 65, "tâche", "a..b", ""]
)
def test_invalid_task_names_change_nothing(repo: Repo, name: str) -> None:
    before = sorted(p.name for p in (repo.path / ".taskgate" / "tasks").iterdir())
    result = repo.run("start", name)
    assert result.code == 2, result.err
    assert sorted(p.name for p in (repo.path / ".taskgate" / "tasks").iterdir()) == before


def test_unknown_state_is_usage_error(repo: Repo) -> None:
    repo.ok("start", "add-login")
    result = repo.run("transition", "add-login", "DONE")
    assert result.code == 2 and "R-TRN-01" in result.err


def test_worktree_without_lock_asks_user(repo: Repo) -> None:
    repo.ok("start", "add-login")
    repo.ok("release", "add-login", "--force", "--reason", "session crashed")
    result = repo.run("start", "add-login", session="s2")
    assert result.code == 4  # R-LCK-05 row 5
    assert "Clean up the abandoned worktree" in result.err
    adopted = repo.ok("start", "add-login", "--adopt", "--json", session="s2").json()
    assert adopted["action"] == "adopted"
    status = repo.ok("status", "add-login", "--json", session="s2").json()
    assert status["session_id"] == "s2" and status["lock"]["fence"] == 2


def test_classify_requires_task_worktree_cwd(repo: Repo) -> None:
    repo.ok("start", "add-login")
    result = repo.run("classify", "add-login")
    assert result.code == 1 and "R-TRN-09" in result.err
    assert repo.ok("status", "add-login", "--json").json()["state"] == "INIT"


def test_classify_creates_agent_worktrees_and_task_md(repo: Repo) -> None:
    to_classified(repo, "add-login")
    status = repo.ok("status", "add-login", "--json").json()
    assert status["state"] == "CLASSIFIED"
    assert "architect" in status["required_agents"]  # R-AGT-03
    for agent in status["required_agents"]:
        wt = repo.task_dir("add-login") / "agents" / agent / "code"
        assert git(wt, "branch", "--show-current") == f"add-login-{agent}"  # R-WTB-02
    task_md = (repo.task_dir("add-login") / "task.md").read_text()
    for heading in ("## Task Objective", "## Scope Definition", "## Stakeholder Agent Reports"):
        assert heading in task_md  # R-DOC-02
    log = status["transition_log"]
    assert [(e["from"], e["to"]) for e in log] == [("INIT", "CLASSIFIED")]


def test_requirements_checklist_blocks_until_reports(repo: Repo) -> None:
    to_requirements(repo, "add-login")
    agents = agents_of(repo, "add-login")
    wt = repo.worktree("add-login")
    blocked = repo.run("transition", "add-login", "SYNTHESIS", cwd=wt)
    assert blocked.code == 1 and "[6/9]" in blocked.err
    short = repo.task_dir("add-login") / f"add-login-{agents[0]}-requirements.md"
    short.write_text("x" * 99)
    refused = repo.run("agent", "set", "add-login", agents[0], "COMPLETE")
    assert refused.code == 1 and "too small (99 bytes)" in refused.err  # R-DOC-04
    write_reports(repo, "add-login")
    repo.ok("transition", "add-login", "SYNTHESIS", cwd=wt)


def test_plan_approval_is_bound_to_plan_hash(repo: Repo) -> None:
    to_synthesis(repo, "add-login")
    early = repo.run("approve", "add-login", "plan")
    assert early.code == 1 and "R-CKP-03" in early.err  # nothing presented yet
    approve_plan(repo, "add-login")
    task_md = repo.task_dir("add-login") / "task.md"
    task_md.write_text(task_md.read_text() + "\n- extra step added after approval\n")
    edited = repo.run("transition", "add-login", "IMPLEMENTATION")
    assert edited.code == 1 and "R-CKP-15" in edited.err
    approve_plan(repo, "add-login")
    repo.ok("transition", "add-login", "IMPLEMENTATION")


def test_touching_flag_file_approves_nothing(repo: Repo) -> None:
    to_synthesis(repo, "add-login")
    (repo.task_dir("add-login") / "user-plan-approval-obtained.flag").write_text("{}")
    result = repo.run("transition", "add-login", "IMPLEMENTATION")
    assert result.code == 1 and "User plan approval not obtained" in result.err
    assert not (repo.task_dir("add-login") / "user-plan-approval-obtained.flag").exists()


def test_approve_refused_for_agents(repo: Repo) -> None:
    to_synthesis(repo, "add-login")
    repo.ok("present", "add-login")
    result = repo.run("approve", "add-login", "plan", env={"CLAUDECODE": "1"})
    assert result.code == 1 and "R-CKP-02" in result.err


def test_full_path_to_awaiting_user_approval(brepo: Repo) -> None:
    to_awaiting(brepo, "add-login")
    status = brepo.ok("status", "add-login", "--json").json()
    head = git(brepo.worktree("add-login"), "rev-parse", "HEAD")
    assert status["checkpoint"]["commit_sha"] == head  # R-CKP-10
    assert status["checkpoint"]["approved"] is False
    path = [(e["from"], e["to"]) for e in status["transition_log"]]
    assert path[-4:] == [
        ("SYNTHESIS", "IMPLEMENTATION"),
        ("IMPLEMENTATION", "VALIDATION"),
        ("VALIDATION", "REVIEW"),
        ("REVIEW", "AWAITING_USER_APPROVAL"),
    ]
    brepo.ok("present", "add-login")
    brepo.ok("approve", "add-login", "changes")
    assert (brepo.task_dir("add-login") / "user-approval-obtained.flag").exists()
    # A new commit after the approval voids it (R-CKP-13).
    commit_in(brepo.worktree("add-login"), "late.txt", "late\n", "late change")
    result = brepo.run("transition", "add-login", "COMPLETE")
    assert result.code == 1 and "R-CKP-13" in result.err


def test_review_to_complete_is_never_allowed(brepo: Repo) -> None:
    to_review(brepo, "add-login")
    result = brepo.run("transition", "add-login", "COMPLETE")
    assert result.code == 1 and "R-TRN-17" in result.err


def test_validation_must_be_fresh_for_head(brepo: Repo) -> None:
    to_validation(brepo, "add-login")
    no_build = brepo.run("transition", "add-login", "REVIEW")
    assert no_build.code == 1 and "R-TRN-15" in no_build.err
    brepo.ok("validate", "add-login")
    commit_in(brepo.worktree("add-login"), "more.txt", "x\n", "more")
    moved = brepo.run("transition", "add-login", "REVIEW")
    assert moved.code == 1 and "R-TRN-15" in moved.err


def test_failed_build_is_recorded_and_classified(tmp_path: Path) -> None:
    script = "print('There are test failures'); raise SystemExit(1)"
    config = f'[validation]\ncommands = [["python3", "-c", "{script}"]]\n'
    repo = make_repo(tmp_path / "r", config=config)
    to_validation(repo, "add-login")
    result = repo.run("validate", "add-login", "--json")
    assert result.code == 1
    data = result.json()
    assert data["success"] is False and data["failure"]["type"] == "test"
    assert data["failure"]["responsible"] == "test"  # R-VAL-06
    back = repo.run("transition", "add-login", "IMPLEMENTATION")
    assert back.code == 1 and "R-TRN-06" in back.err  # backward needs a reason
    repo.ok("transition", "add-login", "IMPLEMENTATION", "--reason", "tests fail")


def test_rejection_returns_to_implementation(brepo: Repo) -> None:
    to_review(brepo, "add-login")
    agents = agents_of(brepo, "add-login")
    not_yet = brepo.run("transition", "add-login", "IMPLEMENTATION", "--reason", "x")
    assert not_yet.code == 1 and "R-TRN-22" in not_yet.err
    brepo.ok("agent", "verdict", "add-login", agents[0], "REJECTED", "--reason", "naming")
    blocked = brepo.run("transition", "add-login", "AWAITING_USER_APPROVAL")
    assert blocked.code == 1 and "R-TRN-16" in blocked.err
    brepo.ok("transition", "add-login", "IMPLEMENTATION", "--reason", "review rejected")
    status = brepo.ok("status", "add-login", "--json").json()
    assert all(a["status"] is None for a in status["agents"])  # R-AST-19


def test_change_request_resets_checkpoint(brepo: Repo) -> None:
    to_awaiting(brepo, "add-login")
    brepo.ok("present", "add-login")
    brepo.ok("approve", "add-login", "changes")
    brepo.ok("transition", "add-login", "IMPLEMENTATION", "--reason", "User requested changes")
    status = brepo.ok("status", "add-login", "--json").json()
    assert status["checkpoint"] is None  # R-TRN-25, C-45
    assert not (brepo.task_dir("add-login") / "user-approval-obtained.flag").exists()
    skip = brepo.run("transition", "add-login", "AWAITING_USER_APPROVAL")
    assert skip.code == 1  # R-TRN-26: only through VALIDATION and REVIEW


def test_foreign_session_cannot_transition(repo: Repo) -> None:
    to_classified(repo, "add-login")
    result = repo.run("transition", "add-login", "REQUIREMENTS", session="intruder",
                      cwd=repo.worktree("add-login"))  # fmt: skip
    assert result.code == 3 and "Cannot update lock owned by s1" in result.err


def test_skip_path_for_low_risk_docs(repo: Repo) -> None:
    to_synthesis(repo, "fix-typo", "--risk-level", "LOW")
    status = repo.ok("status", "fix-typo", "--json").json()
    assert "IMPLEMENTATION" not in status["path"]
    assert status["required_agents"] == ["architect"]  # R-AGT-06, C-10
    approve_plan(repo, "fix-typo")
    wrong = repo.run("transition", "fix-typo", "IMPLEMENTATION")
    assert wrong.code == 1 and "R-WFV-06" in wrong.err
    commit_in(repo.worktree("fix-typo"), "docs/guide.md", "fixed\n", "fix typo")
    repo.ok("transition", "fix-typo", "AWAITING_USER_APPROVAL")


def test_agent_add_in_synthesis_revokes_plan_approval(repo: Repo) -> None:
    to_synthesis(repo, "add-login")
    approve_plan(repo, "add-login")
    agents = agents_of(repo, "add-login")
    new = next(a for a in ("usability", "performance", "security") if a not in agents)
    no_why = repo.run("agent", "add", "add-login", new, "--why", " ")
    assert no_why.code == 1 and "R-AGT-15" in no_why.err
    repo.ok("agent", "add", "add-login", new, "--why", "user-facing form")
    assert (repo.task_dir("add-login") / "agents" / new / "code").is_dir()  # R-AGT-16
    blocked = repo.run("transition", "add-login", "IMPLEMENTATION")
    assert blocked.code == 1  # R-AGT-19: approval revoked, and the new agent has no report


def test_agent_add_refused_in_validation(brepo: Repo) -> None:
    to_validation(brepo, "add-login")
    result = brepo.run("agent", "add", "add-login", "security", "--why", "found auth code")
    assert result.code == 1 and "REQUIREMENTS" in result.err  # R-AGT-14


def test_agent_check_reports_partial_completion(repo: Repo) -> None:
    to_requirements(repo, "add-login")
    agents = agents_of(repo, "add-login")
    repo.ok("agent", "set", "add-login", agents[0], "WORKING")
    result = repo.run("agent", "check", "add-login", "--json")
    assert result.code == 1
    data = result.json()
    assert data["summary"].startswith(f"Summary: 0/{len(agents)} complete")
    assert data["agents"][0]["condition"] == "WORKING"


def test_status_view_is_rerendered_when_tampered(repo: Repo) -> None:
    repo.ok("start", "add-login")
    view = repo.task_dir("add-login") / "task.json"
    view.write_text('{"state": "COMPLETE"}')
    status = repo.ok("status", "add-login", "--json").json()
    assert status["state"] == "INIT"
    assert json.loads(view.read_text())["state"] == "INIT"


def test_corrupt_todo_is_usage_error_with_line(repo: Repo) -> None:
    (repo.path / "todo.md").write_text("## Bad Name: x\n- Purpose: y\n## ok: z\n- Risk: HUGE\n")
    result = repo.run("todo")
    assert result.code == 2 and "line 4" in result.err


def test_implementation_requires_all_agents_complete(repo: Repo) -> None:
    to_implementation(repo, "add-login")
    agents = agents_of(repo, "add-login")
    repo.ok("agent", "set", "add-login", agents[0], "COMPLETE", "--work-remaining")
    result = repo.run("transition", "add-login", "VALIDATION")
    assert result.code == 1 and "R-TRN-14" in result.err and "R-AST-20" in result.err


def test_invalid_state_in_store_is_corruption(repo: Repo) -> None:
    repo.ok("start", "add-login")
    edit_store(repo, "UPDATE tasks SET state = 'DONE'")
    status = repo.run("status", "add-login")
    assert status.code == 5 and "R-TRN-01" in status.err and "recover" in status.err
    start = repo.run("start", "add-login", session="s2")
    assert start.code == 4 and "R-LCK-08" in start.err  # neither own nor foreign


def test_unreadable_store_is_exit_5_and_left_alone(repo: Repo) -> None:
    db = repo.path / ".taskgate" / "state.db"
    garbage = b"not a database" * 100
    db.write_bytes(garbage)
    for args in (("status",), ("todo",), ("start", "add-login")):
        result = repo.run(*args)
        assert result.code == 5, (args, result.err)
        assert "taskgate recover" in result.err
    assert db.read_bytes() == garbage
