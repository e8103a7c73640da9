"""Issue 17: a person's words and the protocol's reasons reach the agents' next prompts; a
person raises the risk mid-task; no-op approvals need a person and a reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import Repo, make_repo
from flow import PASSING_BUILD, to_implementation, to_review, to_validation
from taskgate.agents.base import Mode, TaskBrief
from taskgate.agents.config import parse_agents_config
from taskgate.agents.invoke import build_request
from taskgate.engine.core import Engine
from taskgate.engine.workspace import find_workspace
from taskgate.orchestrator import notes

TASK = "add-login"


def prompt_of(repo: Repo, agent: str) -> str:
    """The implementation prompt `run` would give `agent` now (with its feedback)."""
    engine = Engine(find_workspace(repo.path), session_id="s1", cwd=repo.path)
    try:
        snap = engine.require_snapshot(TASK)
        agents = parse_agents_config(engine.ws.config.agents, engine.ws.repo)
        request = build_request(
            engine.ws, agents, TaskBrief(TASK), agent, Mode.IMPLEMENTATION,
            team=snap.task.required_agents, feedback=notes.feedback_for(snap, agent),
        )  # fmt: skip
        return request.prompt
    finally:
        engine.close()


@pytest.fixture
def brepo(tmp_path: Path) -> Repo:
    return make_repo(tmp_path / "r", config=PASSING_BUILD)


def test_request_changes_in_validation_goes_back_with_the_words(brepo: Repo) -> None:
    to_validation(brepo, TASK)
    words = "the session cookie must be HttpOnly"  # no keyword a classifier would need
    result = brepo.ok("request-changes", TASK, words, "--json", session=None)
    assert result.json()["kind"] == "CHANGE_REQUEST"
    status = brepo.ok("status", TASK, "--json").json()
    assert status["state"] == "IMPLEMENTATION"
    for agent in ("architect", "quality"):
        assert words in prompt_of(brepo, agent)


def test_request_changes_in_review_counts_like_a_rejection(brepo: Repo) -> None:
    to_review(brepo, TASK)
    brepo.ok("request-changes", TASK, "log failed logins", session=None)
    assert brepo.ok("status", TASK, "--json").json()["state"] == "IMPLEMENTATION"
    assert "log failed logins" in prompt_of(brepo, "quality")


def test_a_backward_transitions_reason_is_feedback(brepo: Repo) -> None:
    to_validation(brepo, TASK)
    brepo.ok("transition", TASK, "IMPLEMENTATION", "--reason", "use the shared password hasher")
    prompt = prompt_of(brepo, "quality")
    assert "transition: use the shared password hasher" in prompt
    assert "Feedback from earlier rounds, failures and the user:\nnone" not in prompt


def test_say_in_implementation_gives_every_finished_agent_another_round(brepo: Repo) -> None:
    to_implementation(brepo, TASK)
    agents = brepo.ok("status", TASK, "--json").json()["required_agents"]
    for agent in agents:
        brepo.ok("agent", "set", TASK, agent, "COMPLETE", "--done", "--no-change", "n/a")
    said = brepo.ok("say", TASK, "please rename login to sign_in", "--json", session=None)
    assert said.json()["kind"] == "CHANGE_REQUEST"
    assert said.json()["state_after"] == "IMPLEMENTATION"
    check = brepo.ok("agent", "check", TASK, "--json").json()
    assert check  # the report exists; the gate shows who still has work
    blocked = brepo.run("transition", TASK, "VALIDATION")
    assert blocked.code == 1 and "R-AST-20" in blocked.err  # every agent has another round
    assert "rename login to sign_in" in prompt_of(brepo, "quality")


def test_a_person_raises_the_risk_mid_task(tmp_path: Path) -> None:
    todo = (
        "## docs-x: Document x\n- Purpose: p\n- Scope: s\n- Components: c\n"
        "- Files: docs/x.md\n- Risk: LOW\n"
    )
    repo = make_repo(tmp_path / "r", todo=todo, config=PASSING_BUILD)
    repo.ok("start", "docs-x")
    repo.ok("classify", "docs-x", cwd=repo.worktree("docs-x"))
    before = repo.ok("status", "docs-x", "--json").json()
    assert "VALIDATION" not in before["path"]
    raised = repo.ok("classify", "docs-x", "--raise", "--reason", "touches code", "--json")
    record = raised.json()
    assert (record["from"], record["to"]) == ("LOW", "MEDIUM")
    after = repo.ok("status", "docs-x", "--json").json()
    assert after["risk_level"] == "MEDIUM" and "VALIDATION" in after["path"]
    added = set(after["required_agents"]) - set(before["required_agents"])
    assert added and added == set(record["agents_added"])
    for agent in added:  # their worktrees exist on their branches (R-AGT-16)
        assert (repo.task_dir("docs-x") / "agents" / agent / "code" / ".git").exists()
    lower = repo.run("classify", "docs-x", "--raise", "LOW")
    assert lower.code == 1 and "R-WFV-11" in lower.err  # only ever raised


def test_noop_approval_needs_a_reason_and_a_person(brepo: Repo) -> None:
    to_review(brepo, TASK)
    assert brepo.run("approve", TASK, "noop", session=None).code == 2
    agent = brepo.run("approve", TASK, "noop", "--message", "x", session=None,
                      env={"TASKGATE_AGENT": "quality"})  # fmt: skip
    assert agent.code == 1 and "R-CKP-02" in agent.err
    brepo.ok("approve", TASK, "noop", "--message", "already done upstream", session=None)


def test_details_at_the_terminal_show_the_whole_plan(brepo: Repo) -> None:
    from flow import to_synthesis
    from taskgate.orchestrator.run import choose_approver, details

    to_synthesis(brepo, TASK)
    engine = Engine(find_workspace(brepo.path), session_id="s1", cwd=brepo.path)
    try:
        approver = choose_approver(engine, yes=False, interactive=True)
        assert getattr(approver, "details", None) is not None  # [d] works (issue 17)
        text = details(engine, TASK)
        assert "## Implementation Plan" in text and "### Decision Log" in text
    finally:
        engine.close()


def test_a_change_request_at_the_terminal_costs_one_round(tmp_path: Path) -> None:
    """Issue 17: it used to consume two of the ten rounds, and the timeline miscounted."""
    from conftest import git
    from taskgate.orchestrator.approver import Decision
    from taskgate.orchestrator.demo import create_sample
    from taskgate.orchestrator.progress import Progress
    from taskgate.orchestrator.run import run_one

    class OneChangeThenApprove:
        asked = 0

        def decide(self, task: str, kind: str, presentation: str) -> Decision:
            if kind == "changes" and not self.asked:
                self.asked += 1
                return Decision("changes", "rename the helper")
            return Decision("approve", "yes")

    path = create_sample(tmp_path / "sample", auto_approve=True)
    Repo(path).ok("init")
    git(path, "commit", "-qam", "init", "--allow-empty")
    engine = Engine(find_workspace(path), session_id="run-test", cwd=path)
    progress = Progress(as_json=True, out=open(tmp_path / "events.jsonl", "w"))  # noqa: SIM115
    try:
        assert run_one(engine, "add-slugify", OneChangeThenApprove(), progress) == "CLEANUP"
        snap = engine.require_snapshot("add-slugify")
        impl_rounds = sorted(
            {int(e.payload["impl_round"]) for e in snap.events if "impl_round" in e.payload}
        )
    finally:
        engine.close()
    assert progress.timeline.rounds == 2  # the first round and the one the request asked for
    assert impl_rounds == [2, 3]  # round_done after rounds 1 and 2: no round skipped


def test_abandon_keeps_every_piece_of_work_and_ends_the_task(brepo: Repo) -> None:
    """`taskgate abandon`: committed, merged, uncommitted and untracked work all survive under
    refs/taskgate/quarantine/; branches and worktrees go; the task cannot be resumed."""
    from conftest import git

    to_validation(brepo, TASK)
    quality = brepo.task_dir(TASK) / "agents" / "quality" / "code"
    (quality / "draft.py").write_text("unfinished = True\n")  # untracked, never committed
    head = git(brepo.worktree(TASK), "rev-parse", "HEAD")
    agent = brepo.run("abandon", TASK, "--reason", "x", session=None,
                      env={"TASKGATE_AGENT": "quality"})  # fmt: skip
    assert agent.code == 1 and "R-CKP-02" in agent.err
    assert brepo.run("abandon", TASK, session=None).code == 2  # the reason is required
    result = brepo.ok("abandon", TASK, "--reason", "superseded by sso", "--json", session=None)
    kept = result.json()["kept"]
    assert set(kept) >= {TASK, f"{TASK}-quality"}
    assert git(brepo.path, "merge-base", "--is-ancestor", head, kept[TASK]) == ""
    files = git(brepo.path, "ls-tree", "-r", "--name-only", kept[f"{TASK}-quality"])
    assert "draft.py" in files.split()
    branches = git(brepo.path, "branch", "--format=%(refname:short)").split()
    assert branches == ["main"]
    assert not brepo.worktree(TASK).exists() and not quality.exists()
    status = brepo.ok("status", TASK, "--json").json()
    assert status["state"] == "VALIDATION"  # the record stays as it was
    again = brepo.run("start", TASK, session="s2")
    assert again.code == 1 and "abandoned" in again.err
    listed = {t["task"]: t for t in brepo.ok("todo", "--json", session="s2").json()}
    assert listed[TASK]["availability"] == "abandoned"  # not available, not another's
    assert "superseded by sso" in listed[TASK]["reason"]
    line = next(x for x in brepo.ok("todo", session="s2").out.splitlines() if TASK in x)
    assert line.split()[1] == "abandoned", line


# The build fails only once the archival edit is on main (as in tests/test_cleanup.py).
_MAIN_ONLY_FAILURE = (
    '[validation]\ncommands = [["python3", "-c", "import os, sys; '
    "sys.exit(os.path.exists('changelog.md') and 'add-login' in open('changelog.md').read())"
    '"]]\nrebuild_on_main = "always"\n'  # the archival edit is part of this build
)


def test_a_failed_main_build_is_checked_again_on_the_current_main(tmp_path: Path) -> None:
    from conftest import git
    from flow import to_complete

    repo = make_repo(tmp_path / "r", config=_MAIN_ONLY_FAILURE)
    to_complete(repo, TASK)
    assert repo.run("cleanup", TASK).code == 4  # R-CMP-08
    (repo.path / "changelog.md").write_text("# Changelog\n")  # the person fixes main
    git(repo.path, "commit", "-qam", "fix the build on main")
    fixed = git(repo.path, "rev-parse", "main")
    repo.ok("cleanup", TASK)  # not the old merge again: main as it is now
    assert repo.ok("status", TASK, "--json").json()["state"] == "CLEANUP"
    on_main = [r for r in _events(repo, "validation") if r.get("on_main")]
    assert [r["result"] for r in on_main] == ["FAILURE", "SUCCESS"]
    assert on_main[-1]["head_sha"] == fixed


def test_a_person_accepts_main_with_a_reason(tmp_path: Path) -> None:
    from flow import to_complete

    repo = make_repo(tmp_path / "r", config=_MAIN_ONLY_FAILURE)
    to_complete(repo, TASK)
    assert repo.run("cleanup", TASK).code == 4
    assert repo.run("cleanup", TASK, "--accept-main").code == 2  # the reason is required
    agent = repo.run("cleanup", TASK, "--accept-main", "--reason", "x",
                     env={"TASKGATE_AGENT": "quality"})  # fmt: skip
    assert agent.code == 1 and "R-CKP-02" in agent.err
    repo.ok("cleanup", TASK, "--accept-main", "--reason", "changelog check is known-broken")
    status = repo.ok("status", TASK, "--json").json()
    assert status["state"] == "CLEANUP"
    (accepted,) = _events(repo, "main_accepted")
    assert accepted["reason"] == "changelog check is known-broken"
    assert accepted["provenance"] == "non-interactive"


def _events(repo: Repo, kind: str) -> list[dict[str, object]]:
    import json
    import sqlite3

    db = repo.path / ".taskgate" / "state.db"
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT payload FROM events WHERE kind = ? ORDER BY seq", (kind,))
        return [json.loads(r[0]) for r in rows]
    finally:
        con.close()


def test_an_agent_with_files_left_behind_is_not_complete(brepo: Repo) -> None:
    to_implementation(brepo, TASK)
    worktree = brepo.task_dir(TASK) / "agents" / "quality" / "code"
    (worktree / "__pycache__").mkdir()
    (worktree / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")  # a cache: fine
    (worktree / "login.py").write_text("def login(): ...\n")  # work that would be lost
    refused = brepo.run("agent", "set", TASK, "quality", "COMPLETE", "--done")
    assert refused.code == 1 and "R-TRN-14" in refused.err and "login.py" in refused.err
    assert "__pycache__" not in refused.err
    (worktree / "login.py").unlink()
    brepo.ok("agent", "set", TASK, "quality", "COMPLETE", "--done", "--no-change", "n/a")
