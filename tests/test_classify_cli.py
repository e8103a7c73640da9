"""`taskgate classify` and dynamic agent addition through the real CLI (issue 3)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import TODO, Repo, make_repo
from flow import agents_of, to_classified, to_implementation, to_requirements, write_reports


def test_explain_names_the_pattern_per_file_and_the_reason_per_agent(repo: Repo) -> None:
    repo.ok("start", "add-login")
    out = repo.ok("classify", "add-login", "--explain", cwd=repo.worktree("add-login")).out
    assert "src/auth/login.py" in out and "pattern" in out
    assert "agent architect" in out and "R-AGT-03" in out
    assert "path:" in out


def test_classification_is_recorded_for_status_and_audit(repo: Repo) -> None:
    to_classified(repo, "add-login")
    status = repo.ok("status", "add-login", "--json").json()
    record = status["classification"]
    assert record["risk_level"] == "HIGH" and record["method"] in ("pattern match",
                                                                  "keyword trigger")  # fmt: skip
    assert record["variant"] == "FULL" and record["agents"] == status["required_agents"]
    log = status["transition_log"][0]
    assert (log["from"], log["to"]) == ("INIT", "CLASSIFIED")
    trail = json.loads((repo.task_dir("add-login") / "audit-trail.json").read_text())
    assert trail["events"] >= 3  # claimed, worktree, classification, transition ... (R-RSK-13)


def test_manual_override_lowers_only_with_a_record(repo: Repo) -> None:
    repo.ok("start", "add-login")
    out = repo.ok("classify", "add-login", "--risk-level", "low", "--json",
                  cwd=repo.worktree("add-login")).json()  # fmt: skip
    assert out["risk_level"] == "LOW" and out["method"] == "manual override"  # R-RSK-11
    assert out["computed_level"] == "HIGH"  # R-WFV-11: the lowering is visible
    assert "SYNTHESIS" in out["path"] and "AWAITING_USER_APPROVAL" in out["path"]  # C-07/C-08
    assert "architect" in out["agents"]  # traits still pick reviewers for code (R-AGT-07)


def test_invalid_risk_level_changes_nothing(repo: Repo) -> None:
    repo.ok("start", "add-login")
    result = repo.run("classify", "add-login", "--risk-level", "CRITICAL",
                      cwd=repo.worktree("add-login"))  # fmt: skip
    assert result.code == 2 and "R-RSK-11" in result.err
    assert repo.ok("status", "add-login", "--json").json()["state"] == "INIT"


def test_force_full_protocol(repo: Repo) -> None:
    repo.ok("start", "fix-typo")
    out = repo.ok("classify", "fix-typo", "--force-full-protocol", "--json",
                  cwd=repo.worktree("fix-typo")).json()  # fmt: skip
    assert out["risk_level"] == "HIGH" and "IMPLEMENTATION" in out["path"]  # R-RSK-12


def test_docs_task_is_low_unless_a_keyword_escalates(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "a")
    repo.ok("start", "fix-typo")
    low = repo.ok("classify", "fix-typo", "--json", cwd=repo.worktree("fix-typo")).json()
    assert low["risk_level"] == "LOW" and "IMPLEMENTATION" not in low["path"]
    todo = TODO.replace("the guide misspells the product name",
                        "the guide misspells the security settings")  # fmt: skip
    other = make_repo(tmp_path / "b", todo=todo)
    other.ok("start", "fix-typo")
    raised = other.ok("classify", "fix-typo", "--json", cwd=other.worktree("fix-typo")).json()
    assert raised["risk_level"] == "MEDIUM"  # one level, whole word (R-RSK-09, R-RSK-10)
    assert "keyword:security" in raised["triggers"]


def test_invalid_risk_pattern_is_a_config_error_with_its_line(tmp_path: Path) -> None:
    config = '[validation]\ncommands = []\n\n[risk]\nhigh = ["../outside/**"]\n'
    repo = make_repo(tmp_path / "r", config=config)
    repo.ok("start", "add-login")
    result = repo.run("classify", "add-login", cwd=repo.worktree("add-login"))
    assert result.code == 2 and "line 5" in result.err
    assert repo.ok("status", "add-login", "--json").json()["state"] == "INIT"


def test_R_AGT_18_agent_added_in_requirements_must_report(repo: Repo) -> None:
    to_requirements(repo, "add-login")
    present = agents_of(repo, "add-login")
    new = next(a for a in ("security", "performance", "usability") if a not in present)
    repo.ok("agent", "add", "add-login", new, "--why", "handles passwords")
    write_reports(repo, "add-login")  # writes and completes every agent, the new one included
    assert new in agents_of(repo, "add-login")
    repo.ok("transition", "add-login", "SYNTHESIS", cwd=repo.worktree("add-login"))


def test_R_AGT_18_new_agent_without_report_blocks_synthesis(repo: Repo) -> None:
    to_requirements(repo, "add-login")
    write_reports(repo, "add-login")
    present = agents_of(repo, "add-login")
    new = next(a for a in ("security", "performance", "usability") if a not in present)
    repo.ok("agent", "add", "add-login", new, "--why", "handles passwords")
    blocked = repo.run("transition", "add-login", "SYNTHESIS", cwd=repo.worktree("add-login"))
    assert blocked.code == 1 and new in blocked.err


def test_R_AGT_20_agent_added_in_implementation_must_complete(repo: Repo) -> None:
    to_implementation(repo, "add-login")
    present = agents_of(repo, "add-login")
    new = next(a for a in ("security", "performance", "usability") if a not in present)
    repo.ok("agent", "add", "add-login", new, "--why", "found crypto code")
    nothing = ("--no-change", "nothing to change")  # R-TRN-14 (issue 17): a commit or this
    for agent in present:
        repo.ok("agent", "set", "add-login", agent, "COMPLETE", "--done", *nothing)
    blocked = repo.run("transition", "add-login", "VALIDATION")
    assert blocked.code == 1 and new in blocked.err and "R-TRN-14" in blocked.err
    repo.ok("agent", "set", "add-login", new, "COMPLETE", "--done", *nothing)
    repo.ok("transition", "add-login", "VALIDATION")


def test_additions_refused_for_duplicates_aliases_and_non_stakeholders(repo: Repo) -> None:
    to_requirements(repo, "add-login")
    present = agents_of(repo, "add-login")
    dup = repo.run("agent", "add", "add-login", present[0], "--why", "again")
    assert dup.code == 1 and "R-AGT-15" in dup.err  # C-78
    auditor = repo.run("agent", "add", "add-login", "documentation-auditor", "--why", "x")
    assert auditor.code == 2 and "R-AGT-02" in auditor.err
    if "test" not in present:
        repo.ok("agent", "add", "add-login", "tester", "--why", "new tests")  # alias (C-11)
        assert "test" in agents_of(repo, "add-login")


def test_addition_refused_outside_the_permitted_states(repo: Repo) -> None:
    to_classified(repo, "add-login")
    result = repo.run("agent", "add", "add-login", "security", "--why", "x")
    assert result.code == 1 and "R-AGT-14" in result.err


def test_configured_agent_sets_take_effect(tmp_path: Path) -> None:
    config = (
        '[validation]\ncommands = []\n\n[risk.agents]\nhigh = ["architect", "formatter", '
        '"engineer", "builder", "performance"]\n\n[risk.agents.traits]\nDOCS_ONLY = ["usability"]\n'
    )
    repo = make_repo(tmp_path / "r", config=config)
    repo.ok("start", "add-login")
    out = repo.ok("classify", "add-login", "--json", cwd=repo.worktree("add-login")).json()
    assert out["risk_level"] == "HIGH" and out["agents"][0] == "architect"  # C-10
    assert "performance" in out["agents"] and {"style", "build", "security"} <= set(out["agents"])
    assert out["agent_reasons"]["performance"] == "taskgate.toml [risk.agents] high"
    other = make_repo(tmp_path / "d", config=config)  # one task per session (R-LCK-19)
    other.ok("start", "fix-typo")
    docs = other.ok("classify", "fix-typo", "--json", cwd=other.worktree("fix-typo")).json()
    assert docs["agents"] == ["architect", "usability"]  # DOCS_ONLY trait addition (R-AGT-09)
    broken = make_repo(tmp_path / "b", config='[risk.agents]\nlow = ["architect", "auditor"]\n')
    broken.ok("start", "fix-typo")
    result = broken.run("classify", "fix-typo", cwd=broken.worktree("fix-typo"))
    assert result.code == 2 and "line 2" in result.err and "R-AGT-01" in result.err
