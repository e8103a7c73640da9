"""`taskgate recover`: each RULES §16 procedure on a failure created for real."""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from conftest import Repo, edit_store, git, make_repo
from flow import PASSING_BUILD, agents_of, to_classified, to_requirements, to_validation

TASK = "add-login"


def recover(repo: Repo, *args: str, session: str = "s1") -> tuple[int, list[dict[str, Any]]]:
    result = repo.run("recover", TASK, *args, "--json", session=session)
    data = result.json()
    return result.code, data if isinstance(data, list) else [data]


def events(repo: Repo, kind: str) -> list[dict[str, Any]]:
    conn = sqlite3.connect(repo.path / ".taskgate" / "state.db")
    try:
        rows = conn.execute(
            "SELECT payload FROM events WHERE task = ? AND kind = ? ORDER BY seq", (TASK, kind)
        ).fetchall()
    finally:
        conn.close()
    return [json.loads(r[0]) for r in rows]


def test_clean_task_needs_nothing(repo: Repo) -> None:
    to_classified(repo, TASK)
    code, (d,) = recover(repo)
    assert code == 0 and d["procedure"] == "none"
    assert all(c["passed"] for c in d["checks"]) and len(d["checks"]) == 6  # R-REC-08
    assert "safe to restart" in d["actions"][0]  # D-REC-1


@pytest.mark.parametrize("point", ["claim:after-insert", "setup:after-worktree"])
def test_P1_killed_during_start_resumes_the_journaled_step(tmp_path: Path, point: str) -> None:
    repo = make_repo(tmp_path / "r")
    crashed = repo.run("start", TASK, env={"TASKGATE_FAILPOINT": point})
    assert crashed.code == -signal.SIGKILL
    before = fingerprint_light(repo)
    code, (d,) = recover(repo)
    assert code == 5 and d["procedure"] == "P1"  # an interrupted journal: run --repair
    assert "'create_task_worktree'" in d["summary"]
    assert any(f"taskgate start {TASK}" in a for a in d["actions"])
    assert fingerprint_light(repo) == before  # diagnosis only
    code, (d,) = recover(repo, "--repair")
    assert code == 0, d
    assert d["repaired"] == ["resumed the journaled step create_task_worktree"]
    assert d["procedure"] == "none"  # R-REC-13: detection ran again and found nothing
    assert (repo.worktree(TASK) / ".git").exists()
    assert repo.ok("status", TASK, "--json").json()["pending"] is None
    assert events(repo, "recovery")[-1]["procedure"] == "P1"
    assert repo.run("audit", TASK).code == 0


def fingerprint_light(repo: Repo) -> str:
    conn = sqlite3.connect(repo.path / ".taskgate" / "state.db")
    try:
        dump = "\n".join(conn.iterdump())
    finally:
        conn.close()
    return dump + git(repo.path, "worktree", "list", "--porcelain")


def test_P1_killed_during_classify(repo: Repo) -> None:
    repo.ok("start", TASK)
    crashed = repo.run(
        "classify",
        TASK,
        cwd=repo.worktree(TASK),
        env={"TASKGATE_FAILPOINT": "classify:after-transition"},
    )
    assert crashed.code == -signal.SIGKILL
    code, (d,) = recover(repo, "--repair")
    assert code == 0 and d["repaired"] == ["resumed the journaled step create_agent_worktrees"]
    for agent in agents_of(repo, TASK):
        assert (repo.task_dir(TASK) / "agents" / agent / "code" / ".git").exists()


def test_P2_partial_completion_retries_then_escalates(repo: Repo) -> None:
    to_requirements(repo, TASK)
    agents = agents_of(repo, TASK)
    failing = agents[0]
    repo.ok("agent", "set", TASK, failing, "ERROR", "--message", "tool crashed")
    code, (d,) = recover(repo)
    assert code == 0 and d["procedure"] == "P2"
    assert f"{failing}: ERROR - tool crashed" in d["actions"]
    assert d["summary"].startswith(
        f"agent partial completion in REQUIREMENTS: Summary: 0/{len(agents)}"
    )
    for attempt in (1, 2, 3):
        code, (d,) = recover(repo, "--repair")
        assert code == 0
        assert any(f"{failing}: retry {attempt}/3 recorded" in r for r in d["repaired"])
    code, (d,) = recover(repo)
    assert code == 4  # R-AST-07: 3 retries, escalate
    text = d["escalation"]
    assert text.startswith(f"Task '{TASK}' encountered a recovery scenario requiring user guidance")
    for part in (
        "**Issue**:",
        "**Current State**: REQUIREMENTS",
        "**Recovery Attempts**:",
        "**Impact**:",
        "3. Abandon task and select alternative",
    ):
        assert part in text
    assert text.endswith("Please advise on how to proceed.")
    state = repo.ok("status", TASK, "--json").json()
    assert state["state"] == "REQUIREMENTS" and state["session_id"] == "s1"  # R-REC-17


def test_P3_build_failure_is_classified(tmp_path: Path) -> None:
    failing = (
        "[validation]\ncommands = [\"python3 -c \\\"import sys; print('There are test failures'); "
        'sys.exit(1)\\""]\n'
    )
    repo = make_repo(tmp_path / "r", config=failing)
    to_validation(repo, TASK)
    assert repo.run("validate", TASK).code == 1
    code, (d,) = recover(repo)
    assert code == 0 and d["procedure"] == "P3"
    assert "test" in d["summary"] and "responsible: test" in d["summary"]
    assert "IMPLEMENTATION --reason 'build failure: test' (C-49)" in d["actions"][0]


def test_P3_unknown_build_failure_escalates(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", config='[validation]\ncommands = ["false"]\n')
    to_validation(repo, TASK)
    assert repo.run("validate", TASK).code == 1
    code, (d,) = recover(repo)
    assert code == 4 and d["procedure"] == "P3"
    assert "an unknown build failure (R-VAL-08)" in d["escalation"]


def test_P4_deleted_task_worktree_is_recreated_from_its_branch(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", config=PASSING_BUILD)
    to_validation(repo, TASK)
    head = git(repo.worktree(TASK), "rev-parse", "HEAD")
    shutil.rmtree(repo.worktree(TASK))
    before = fingerprint_light(repo)
    code, (d,) = recover(repo)
    assert code == 5 and d["procedure"] == "P4"
    failed = [c for c in d["checks"] if not c["passed"]]
    assert [c["number"] for c in failed] == [4]
    assert fingerprint_light(repo) == before
    code, (d,) = recover(repo, "--repair")
    assert code == 0, d
    assert d["repaired"] == [f"recreated worktree {repo.worktree(TASK)} from branch {TASK}"]
    assert git(repo.worktree(TASK), "rev-parse", "HEAD") == head  # the work is intact
    assert events(repo, "recovery")[-1] == {
        "session": "s1",
        "procedure": "P4",
        "repaired": d["repaired"],
    }
    assert repo.run("audit", TASK).code == 0


def test_P4_missing_branch_is_never_fabricated(repo: Repo) -> None:
    to_classified(repo, TASK)
    agent = agents_of(repo, TASK)[0]
    path = repo.task_dir(TASK) / "agents" / agent / "code"
    git(repo.path, "worktree", "remove", "--force", str(path))
    git(repo.path, "branch", "-q", "-D", f"{TASK}-{agent}")
    code, (d,) = recover(repo, "--repair")
    assert code == 4, d  # R-REC-11: escalate, never create the branch
    assert "Please advise on how to proceed." in d["escalation"]
    assert not git(repo.path, "branch", "--list", f"{TASK}-{agent}")
    assert not path.exists()


def test_P4_corrupt_view_is_rerendered(repo: Repo) -> None:
    to_classified(repo, TASK)
    view = repo.task_dir(TASK) / "task.json"
    view.write_text("{ not json")
    code, (d,) = recover(repo)
    assert code == 5 and "task.json is missing or does not parse" in d["checks"][1]["detail"]
    assert view.read_text() == "{ not json"  # diagnosis repairs nothing
    code, (d,) = recover(repo, "--repair")
    assert code == 0 and d["repaired"] == ["re-rendered the views from the store"]
    assert json.loads(view.read_text())["state"] == "CLASSIFIED"


def test_P4_session_mismatch_is_foreign_never_repaired(repo: Repo) -> None:
    to_classified(repo, TASK)
    shutil.rmtree(repo.worktree(TASK))
    before = fingerprint_light(repo)
    code, (d,) = recover(repo, "--repair", session="s2")
    assert code == 3 and d["foreign"]  # R-REC-10, C-44
    assert "taskgate next" in d["actions"][0]
    assert fingerprint_light(repo) == before
    assert repo.ok("status", TASK, "--json").json()["session_id"] == "s1"


def test_P4_inconsistent_transition_log_escalates(repo: Repo) -> None:
    to_requirements(repo, TASK)
    edit_store(repo, "DELETE FROM transitions WHERE task = ? AND idx = 0", TASK)
    code, (d,) = recover(repo, "--repair")
    assert code == 4, d
    check6 = next(c for c in d["checks"] if c["number"] == 6)
    assert not check6["passed"] and "R-TRN-05" in check6["detail"]


def test_R_REC_12_unreadable_store_offers_three_options(repo: Repo) -> None:
    repo.ok("start", TASK)
    (repo.path / ".taskgate" / "state.db").write_bytes(b"garbage" * 1000)
    result = repo.run("recover", TASK)
    assert result.code == 4
    assert "Delete the task record and restart from scratch" in result.out
    assert "Reconstruct the record from git history" in result.out
    assert "3. Abandon task and select alternative" in result.out
    assert result.out.rstrip().endswith("Please advise on how to proceed.")


def test_P4_half_created_worktree_is_redone(repo: Repo) -> None:
    """A `git worktree add` killed before its checkout (no index) is removed and added again."""
    to_classified(repo, TASK)
    agent = agents_of(repo, TASK)[0]
    path = repo.task_dir(TASK) / "agents" / agent / "code"
    git(repo.path, "worktree", "remove", "--force", str(path))
    git(repo.path, "worktree", "add", "-q", "--no-checkout", str(path), f"{TASK}-{agent}")
    code, (d,) = recover(repo)
    assert code == 5
    assert d["checks"][4]["detail"] == f"missing or half-created for {agent}"
    code, (d,) = recover(repo, "--repair")
    assert code == 0, d
    assert d["repaired"] == [f"recreated worktree {path} from branch {TASK}-{agent}"]
    assert git(path, "status", "--porcelain") == ""
    assert (path / "README.md").exists()


def test_R_REC_07_unknown_state_needs_a_human(repo: Repo) -> None:
    to_classified(repo, TASK)
    edit_store(repo, "UPDATE tasks SET state = 'BOGUS' WHERE name = ?", TASK)
    code, (d,) = recover(repo, "--repair")
    assert code == 4
    assert "Unknown state: BOGUS - manual intervention required" in " ".join(d["actions"])
    assert "'BOGUS' is not a protocol state (R-TRN-01)" in d["escalation"]
    audit = repo.run("audit", TASK, "--json")
    assert audit.code == 1


def test_R_REC_12_row_that_does_not_parse(repo: Repo) -> None:
    to_classified(repo, TASK)
    edit_store(repo, "UPDATE tasks SET classification = '{broken' WHERE name = ?", TASK)
    code, (d,) = recover(repo, "--repair")
    assert code == 4 and "does not parse" in d["summary"]
    assert "Reconstruct the record from git history" in d["escalation"]
    assert repo.run("audit", TASK).code == 5


def test_repair_killed_midway_is_resumed(repo: Repo) -> None:
    """The repair's own journal: a kill after the git work leaves `recover_worktrees` pending."""
    to_classified(repo, TASK)
    shutil.rmtree(repo.worktree(TASK))
    crashed = repo.run(
        "recover", TASK, "--repair", env={"TASKGATE_FAILPOINT": "recover:after-worktrees"}
    )
    assert crashed.code == -signal.SIGKILL
    assert repo.ok("status", TASK, "--json").json()["pending"] == {"op": "recover_worktrees"}
    refused = repo.run("transition", TASK, "REQUIREMENTS", cwd=repo.worktree(TASK))
    assert refused.code == 1 and "R-REC-02" in refused.err  # finish the journal first
    code, (d,) = recover(repo, "--repair")
    assert code == 0 and d["repaired"] == ["resumed the journaled step recover_worktrees"]
    assert repo.ok("status", TASK, "--json").json()["pending"] is None
    repo.ok("transition", TASK, "REQUIREMENTS", cwd=repo.worktree(TASK))
    assert repo.run("audit", TASK).code == 0
