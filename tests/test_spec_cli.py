"""`taskgate spec …` end to end through the real CLI: the demo, questions and answers without a
terminal (exit 4), kill -9 in every phase then resume to the same spec, integrity failures and
repair (R-SPC-16/17), resume detection (R-SPC-01..03, C-58), and the bridge into todo.md."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import Repo, git, make_repo
from taskgate.cli.main import main
from taskgate.protocol.todo import parse_todo
from taskgate.spec.recovery import workflow_lock

DESC = "Add user authentication with email and password"
FID = "001-user-authentication-email-password"
STALE = {
    "gaps": [{"key": "stubborn", "severity": "important", "summary": "Never settled",
              "section": "Requirements", "question": "Which one?", "needs": None},
             {"key": "easy", "severity": "critical", "summary": "Actors",
              "section": "Scenarios", "question": "Who?"}],
    "answers": {"easy": ["Staff"]},
    "decisions": ["retry", "accept"],  # iteration 3: no progress; 4: stale for 3 iterations
}  # fmt: skip


SCRIPTED = '\n[spec]\nbackend = "scripted"  # the canned agents; the person answers\n'


def scripted_spec(repo: Repo) -> Repo:
    """Declare the scripted spec agents in taskgate.toml (without [spec], spec new exits 2)."""
    with (repo.path / "taskgate.toml").open("a", encoding="utf-8") as f:
        f.write(SCRIPTED)
    return repo


@pytest.fixture
def repo(repo: Repo) -> Repo:
    """conftest's repository with `[spec] backend = "scripted"`."""
    return scripted_spec(repo)


def test_spec_new_without_a_spec_section_exits_2_naming_it(tmp_path: Path) -> None:
    """Issue 17: no [spec] section is a usage error, never the canned demo agents."""
    bare = make_repo(tmp_path / "bare")
    run = bare.run("spec", "new", DESC)
    assert run.code == 2, run.err
    assert "no [spec] section" in run.err and "--demo" in run.err
    assert 'backend = "claude"' in run.err
    assert not (bare.path / "specs").exists()  # nothing started
    assert bare.ok("spec", "new", DESC, "--demo").code == 0  # the demo needs no [spec]


def spec_dir(repo: Repo, fid: str = FID) -> Path:
    """specs/NNN-name of the repository."""
    return repo.path / "specs" / fid


def state_of(repo: Repo, fid: str = FID) -> dict[str, Any]:
    """state.json as saved."""
    data: dict[str, Any] = json.loads((spec_dir(repo, fid) / ".workflow/state.json").read_text())
    return data


def outcome(repo: Repo, fid: str = FID) -> tuple[str, dict[str, Any]]:
    """What must not depend on crashes: spec.md and the state without timestamps."""
    state = state_of(repo, fid)
    for key in ("last_activity", "created"):
        state.pop(key)
    return (spec_dir(repo, fid) / "spec.md").read_text(), state


def test_demo_runs_the_whole_loop_and_seeds_a_task(repo: Repo) -> None:
    run = repo.ok("spec", "new", DESC, "--demo")
    assert "completed (success) after 3 iteration(s)" in run.out
    index = (spec_dir(repo) / ".workflow/index.md").read_text()
    assert "| **Loop Status** | completed |" in index and "Termination: success" in index
    assert (spec_dir(repo) / "checklists/requirements.md").exists()
    listed = repo.ok("spec", "list", "--json").json()
    assert [(r["feature_id"], r["termination_reason"]) for r in listed] == [(FID, "success")]
    added = repo.ok("spec", "to-task", "001")
    assert "added task 'user-authentication-email-password'" in added.out
    todo = parse_todo((repo.path / "todo.md").read_text())
    task = todo.get("user-authentication-email-password")
    assert task is not None and task.purpose == DESC and not task.missing_fields
    assert f"specs/{FID}/spec.md" in task.scope
    assert "Notes for humans stay untouched." in (repo.path / "todo.md").read_text()
    again = repo.run("spec", "to-task", "001")
    assert again.code == 2 and "already has a task" in again.err
    todo_items = {t["task"]: t["availability"] for t in repo.ok("todo", "--json").json()}
    assert todo_items["user-authentication-email-password"] == "available"


def test_without_a_terminal_questions_exit_4_and_answers_go_on(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "-b", "main")  # a repository without 'taskgate init'
    repo = Repo(tmp_path)
    (tmp_path / "taskgate.toml").write_text(SCRIPTED)
    first = repo.run("spec", "new", DESC)
    assert first.code == 4, first.err
    assert "C1.1 [G-001]" in first.out and "taskgate spec answer" in first.out
    before = (spec_dir(repo) / ".workflow/state.json").read_bytes()
    partial = repo.run("spec", "answer", FID, "--answer", "C1.1=staff")
    assert partial.code == 2 and "unanswered: C1.2, C1.3" in partial.err
    bogus = repo.run("spec", "answer", FID, "--answer", "C1.1")
    assert bogus.code == 2
    assert (spec_dir(repo) / ".workflow/state.json").read_bytes() == before  # nothing changed
    answers = ["--answer", "C1.1=staff", "--answer", "C1.2=90 days", "--answer", "C1.3=retry"]
    second = repo.run("spec", "answer", FID, *answers, "--json")
    assert second.code == 4
    data = second.json()
    assert data["waiting"] == "answers" and data["current_iteration"] == 2
    assert [q["id"] for q in data["pending_questions"]] == ["C2.1"]
    status = repo.ok("spec", "status", FID, "--json").json()
    assert status["resume_point"] == "B1" and status["integrity"] == []
    wrong = repo.run("spec", "answer", FID, "--decision", "retry")
    assert wrong.code == 1 and "no pending decision" in wrong.err
    done = repo.ok("spec", "answer", FID, "--answer", "C2.1=2 seconds")
    assert "completed (success)" in done.out
    report = repo.ok("spec", "resume", FID)  # R-SPC-09: a finished workflow only reports
    assert "completed (success)" in report.out


def test_decisions_without_a_terminal(repo: Repo, tmp_path: Path) -> None:
    script = tmp_path / "stale.json"
    script.write_text(json.dumps(STALE | {"answers": {}}))
    first = repo.run("spec", "new", "Stubborn thing", "--script", str(script))
    assert first.code == 4
    fid = "001-stubborn-thing"
    for _ in range(2):
        qs = state_of(repo, fid)["pending_questions"]
        out = repo.run("spec", "answer", fid, *[f"--answer={q['id']}=x" for q in qs])
        if out.code == 4 and "needs your decision" in out.out:
            break
    assert "try again, accept the spec as it is, or abort" in out.out
    bad = repo.run("spec", "answer", fid, "--decision", "edit")
    assert bad.code == 2
    done = repo.run("spec", "answer", fid, "--decision", "abort", "--json")
    assert done.code == 0 and done.json()["termination_reason"] == "aborted"
    assert done.json()["loop_status"] == "terminated"


# --- kill -9 in every phase -------------------------------------------------------------------

PHASES = ["spec:A1:dir", "spec:A1", "spec:A2", "spec:A3", "spec:A4", "spec:A5", "spec:B1",
          "spec:B2", "spec:B3", "spec:B5", "spec:C"]  # fmt: skip


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, dict[str, Any]]]:
    """The outcome of an uninterrupted run of the demo and of the stale scenario."""
    base = tmp_path_factory.mktemp("ref")
    demo = Repo(base / "demo")
    make_repo(demo.path)
    demo.ok("spec", "new", DESC, "--demo")
    stale = Repo(base / "stale")
    make_repo(stale.path)
    script = base / "stale.json"
    script.write_text(json.dumps(STALE))
    stale.ok("spec", "new", "Stubborn thing", "--script", str(script), "--demo")
    return {"demo": outcome(demo), "stale": outcome(stale, "001-stubborn-thing")}


@pytest.mark.parametrize("point", PHASES)
def test_kill_9_in_every_phase_resumes_to_the_same_spec(
    tmp_path: Path, point: str, reference: dict[str, tuple[str, dict[str, Any]]]
) -> None:
    repo = make_repo(tmp_path / "r")
    crashed = repo.run("spec", "new", DESC, "--demo", env={"TASKGATE_FAILPOINT": point})
    assert crashed.code == -9, (crashed.out, crashed.err)
    if point == "spec:A1:dir":  # C-58: the directory exists, its state does not
        assert not (spec_dir(repo) / ".workflow").exists()
        assert repo.run("spec", "resume").code == 2  # the description is unknown
        repo.ok("spec", "new", DESC, "--demo", "--resume")
    else:
        status = repo.ok("spec", "status", FID, "--json").json()
        assert status["integrity"] == []
        repo.ok("spec", "resume", "--demo")
    assert outcome(repo) == reference["demo"]


def test_kill_9_while_a_decision_is_pending(
    tmp_path: Path, reference: dict[str, tuple[str, dict[str, Any]]]
) -> None:
    repo = make_repo(tmp_path / "r")
    script = tmp_path / "stale.json"
    script.write_text(json.dumps(STALE))
    args = ("spec", "new", "Stubborn thing", "--script", str(script), "--demo")
    assert repo.run(*args, env={"TASKGATE_FAILPOINT": "spec:B4"}).code == -9
    assert state_of(repo, "001-stubborn-thing")["pending_decision"]["kind"] == "no_progress"
    repo.ok("spec", "resume", "001")
    assert outcome(repo, "001-stubborn-thing") == reference["stale"]
    assert state_of(repo, "001-stubborn-thing")["termination_reason"] == "stale_accepted"


# --- integrity (R-SPC-16/17) ------------------------------------------------------------------


def break_state(repo: Repo, change: Any) -> None:
    """Edit state.json in place, as a person or a buggy tool might."""
    path = spec_dir(repo) / ".workflow/state.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_integrity_failure_blocks_resume_and_repair_fixes_it(repo: Repo) -> None:
    assert repo.run("spec", "new", DESC).code == 4
    break_state(repo, lambda d: d["gaps"][1].update(status="open"))  # G-002 lost its question
    blocked = repo.run("spec", "resume", FID)
    assert blocked.code == 5
    assert "R-SPC-16" in blocked.err and "--repair" in blocked.err and "--fresh" in blocked.err
    assert "not clarifying: G-002" in blocked.err
    repaired = repo.run("spec", "resume", FID, "--repair")
    assert repaired.code == 4 and "repaired: G-002 set to clarifying" in repaired.out
    assert repo.ok("spec", "status", FID, "--json").json()["integrity"] == []


def test_fresh_start_needs_confirmation(repo: Repo) -> None:
    assert repo.run("spec", "new", DESC).code == 4
    break_state(repo, lambda d: d.update(loop_status="paused"))
    assert repo.run("spec", "resume", FID, "--repair").code == 5  # cannot be repaired
    unconfirmed = repo.run("spec", "resume", FID, "--fresh")
    assert unconfirmed.code == 2 and "This will delete" not in unconfirmed.out
    assert state_of(repo)["loop_status"] == "paused"  # R-SPC-17: nothing deleted
    fresh = repo.run("spec", "resume", FID, "--fresh", "--yes", "--demo")
    assert fresh.code == 0, fresh.err
    assert state_of(repo)["termination_reason"] == "success"


def test_unreadable_state_offers_fresh_start_only(repo: Repo) -> None:
    assert repo.run("spec", "new", DESC).code == 4
    (spec_dir(repo) / ".workflow/state.json").write_text("{")
    blocked = repo.run("spec", "resume", FID)
    assert blocked.code == 5 and "--repair" not in blocked.err and "--fresh" in blocked.err
    listed = repo.ok("spec", "list", "--json").json()
    assert listed[0]["problem"]


# --- resume detection (R-SPC-01..03) ----------------------------------------------------------


def test_detection_offers_the_matching_workflow(repo: Repo) -> None:
    assert repo.run("spec", "new", DESC).code == 4
    similar = repo.run("spec", "new", "user authentication using email + passwords")
    assert similar.code == 4
    assert f"Found interrupted workflow for '{FID}'." in similar.out
    assert "| Pending Clarifications | 3 |" in similar.out  # C-71: counted from the rows
    as_json = repo.run("spec", "new", "user authentication using email + passwords", "--json")
    assert as_json.json()["found"] is True and as_json.json()["feature_id"] == FID
    resumed = repo.run("spec", "new", "user authentication via email and password",
                       "--resume", "--demo")  # fmt: skip
    assert resumed.code == 0 and state_of(repo)["termination_reason"] == "success"
    assert len(list((repo.path / "specs").iterdir())) == 1
    # A completed workflow is never offered again (C-59); a different feature starts anew.
    assert repo.run("spec", "new", DESC, "--demo").code == 0
    assert repo.run("spec", "new", "Dark mode for settings").code == 4
    names = sorted(p.name for p in (repo.path / "specs").iterdir())
    assert names == [FID, "002-user-authentication-email-password", "003-dark-mode-setting"]


def test_a_second_process_on_the_same_workflow_exits_3(repo: Repo) -> None:
    assert repo.run("spec", "new", DESC).code == 4
    with workflow_lock(repo.path / ".git", FID):
        busy = repo.run("spec", "resume", FID)
    assert busy.code == 3 and "another taskgate process" in busy.err


# --- a person at a terminal -------------------------------------------------------------------


class Tty(io.StringIO):
    """stdin that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def in_process(
    monkeypatch: pytest.MonkeyPatch, cwd: Path, typed: str, *argv: str
) -> tuple[int, str]:
    """Run main() with `typed` as the terminal input."""
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "stdin", Tty(typed))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    return code, out.getvalue()


def test_interactive_answers_and_resume_prompt(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out = in_process(monkeypatch, repo.path, "staff\n90 days\nretry\n", "spec", "new", DESC)
    assert code == 4 and "Clarification questions (iteration 1)" in out  # stdin ran out
    code, out = in_process(monkeypatch, repo.path, "r\n2 seconds\n", "spec", "new", DESC)
    assert code == 0, out
    assert "How would you like to proceed?" in out and "completed (success)" in out


# --- the command backend -----------------------------------------------------------------------


def test_command_backend_speaks_json(repo: Repo, tmp_path: Path) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        "role, req = sys.argv[1], json.load(sys.stdin)\n"
        "spec = '# Spec\\n- **FR-001**: ' + req.get('description', '')\n"
        "replies = {'spec-writer': {'spec': spec},\n"
        "           'validator': {'gaps': []},\n"
        "           'checklist': {'checklist': '- [ ] CHK-001 FR-001 ok'},\n"
        "           'gap-classifier': {'questions': []}}\n"
        "print('thinking...')\n"
        "print(json.dumps(replies[role]))\n"
    )
    agent.chmod(0o755)
    run = repo.run("spec", "new", "Tiny thing", "--agent-command", str(agent), "--json")
    assert run.code == 0, run.err
    assert run.json()["termination_reason"] == "success"
    agent.write_text("#!/bin/sh\nexit 3\n")
    broken = repo.run("spec", "new", "Another small thing", "--agent-command", str(agent))
    assert broken.code == 10 and "spec agent spec-writer failed" in broken.err


def test_to_task_refuses_an_unfinished_spec_and_bad_input_changes_nothing(
    repo: Repo, tmp_path: Path
) -> None:
    assert repo.run("spec", "new", DESC).code == 4
    todo = (repo.path / "todo.md").read_text()
    refused = repo.run("spec", "to-task", FID)
    assert refused.code == 1 and "R-SPC-09" in refused.err and "spec resume" in refused.err
    assert repo.run("spec", "to-task", "999").code == 2
    assert (repo.path / "todo.md").read_text() == todo
    bad = tmp_path / "bad.json"
    bad.write_text('{"gaps": [{"key": "x", "severity": "fatal"}]}')
    assert repo.run("spec", "new", "Other thing", "--script", str(bad)).code == 2
    assert repo.run("spec", "new", "   ").code == 2
    assert sorted(p.name for p in (repo.path / "specs").iterdir()) == [FID]


def test_resume_fresh_and_orphan_with_description(repo: Repo) -> None:
    assert repo.run("spec", "new", DESC).code == 4
    restarted = repo.run("spec", "resume", FID, "--fresh", "--yes", "--demo")
    assert restarted.code == 0 and state_of(repo)["termination_reason"] == "success"
    (repo.path / "specs" / "002-csv-export").mkdir()  # a crash in A1 (C-58)
    status = repo.ok("spec", "status", "002", "--json").json()
    assert status["resume_point"] == "A1"
    adopted = repo.run("spec", "resume", "002", "--description", "Export CSV files", "--demo")
    assert adopted.code == 0, adopted.err
    assert state_of(repo, "002-csv-export")["loop_status"] == "completed"


NAME = "user-authentication-email-password"


def test_to_task_commits_the_entry_with_its_spec_and_the_title_survives(tmp_path: Path) -> None:
    """Issue 17: to-task leaves no modified todo.md or untracked specs/ behind: one commit on
    main holds both; the task then completes under its title (changelog and commit)."""
    from flow import PASSING_BUILD, to_complete

    repo = make_repo(tmp_path / "r", config=PASSING_BUILD)
    repo.ok("spec", "new", DESC, "--demo")
    before = git(repo.path, "rev-parse", "HEAD")
    out = repo.ok("spec", "to-task", "001", "--json").json()
    assert out["commit"] == git(repo.path, "rev-parse", "HEAD") != before
    assert git(repo.path, "rev-parse", "HEAD~1") == before  # exactly one commit
    files = set(git(repo.path, "show", "--name-only", "--format=", "HEAD").split())
    assert {"todo.md", f"specs/{FID}/spec.md", f"specs/{FID}/checklists/requirements.md",
            f"specs/{FID}/.workflow/state.json"} <= files  # fmt: skip
    assert NAME in git(repo.path, "log", "-1", "--format=%s")
    status = git(repo.path, "status", "--porcelain", "--", "todo.md", f"specs/{FID}/spec.md")
    assert status == ""
    to_complete(repo, NAME)
    changelog = git(repo.path, "show", "main:changelog.md")
    assert f"## {NAME}: Add user authentication with email and password" in changelog
    assert git(repo.path, "log", "-1", "--format=%s", "main").startswith(
        f"{NAME}: Add user authentication"
    )


def test_to_task_never_commits_the_persons_own_todo_edits(repo: Repo) -> None:
    repo.ok("spec", "new", DESC, "--demo")
    todo = repo.path / "todo.md"
    todo.write_text(todo.read_text() + "\nA note of mine, not committed yet.\n")
    head = git(repo.path, "rev-parse", "HEAD")
    run = repo.ok("spec", "to-task", "001")
    assert git(repo.path, "rev-parse", "HEAD") == head  # nothing committed
    assert "not committed (todo.md has changes of yours" in run.out
    assert f"git add todo.md specs/{FID}/spec.md" in run.out
    assert "A note of mine" in todo.read_text() and f"## {NAME}:" in todo.read_text()
