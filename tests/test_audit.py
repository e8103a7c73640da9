"""`taskgate audit`: read-only compliance checks and tamper detection, through the real CLI."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Repo, edit_store, git, make_repo
from flow import (
    PASSING_BUILD,
    approve_changes,
    commit_in,
    to_awaiting,
    to_complete,
    to_implementation,
    to_requirements,
)
from flow import to_synthesis as flow_to_synthesis
from taskgate.protocol import audit_checks as ac
from taskgate.protocol import audit_records as ar
from taskgate.protocol.agents import STAKEHOLDERS
from taskgate.store.sqlite import SqliteStore

TASK = "add-login"


def _hermetic_env(home: Path, mp: pytest.MonkeyPatch) -> None:
    mp.setenv("HOME", str(home))
    mp.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in ("TASKGATE_SESSION", "CLAUDECODE", "TASKGATE_AGENT", "TASKGATE_FAKE_NOW"):
        mp.delenv(var, raising=False)
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Test\n\temail = test@example.com\n"
        "[init]\n\tdefaultBranch = main\n[commit]\n\tgpgsign = false\n"
    )


@pytest.fixture(scope="module")
def awaiting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Repo]:
    """A task in AWAITING_USER_APPROVAL, built once; each test restores what it tampers."""
    with pytest.MonkeyPatch.context() as mp:
        _hermetic_env(tmp_path_factory.mktemp("home"), mp)
        repo = make_repo(tmp_path_factory.mktemp("aud") / "repo", config=PASSING_BUILD)
        to_awaiting(repo, TASK)
        yield repo


def db(repo: Repo) -> Path:
    return repo.path / ".taskgate" / "state.db"


def audit(repo: Repo, *args: str) -> tuple[int, dict[str, Any]]:
    result = repo.run("audit", *args, "--json")
    return result.code, result.json()


def findings(data: dict[str, Any], check: str) -> list[str]:
    return [
        f["evidence"]
        for t in data["tasks"]
        for c in t["checks"]
        if c["id"] == check
        for f in c["findings"]
    ]


def failed(data: dict[str, Any]) -> set[str]:
    return {c["id"] for t in data["tasks"] for c in t["checks"] if not c["passed"]}


def fingerprint(repo: Repo) -> dict[str, str]:
    """Bytes of the store and every file under .taskgate, plus git refs and worktrees."""
    result: dict[str, str] = {}
    for path in sorted((repo.path / ".taskgate").rglob("*")):
        if path.is_file() and not path.name.endswith(("-shm", "-wal")) and ".git" not in path.parts:
            result[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    result["refs"] = git(repo.path, "for-each-ref", "--format=%(refname) %(objectname)")
    result["worktrees"] = git(repo.path, "worktree", "list", "--porcelain")
    result["status"] = git(repo.worktree(TASK), "status", "--porcelain")
    conn = sqlite3.connect(db(repo))
    try:
        result["dump"] = "\n".join(conn.iterdump())
    finally:
        conn.close()
    return result


def _view_files(repo: Repo) -> dict[Path, bytes]:
    return {
        p: p.read_bytes()
        for p in repo.task_dir(TASK).rglob("*")
        if p.is_file() and "code" not in p.relative_to(repo.task_dir(TASK)).parts
    }


@pytest.fixture
def saved(awaiting: Repo) -> Iterator[Repo]:
    """Restore the store and views after a test tampered with them."""
    store = db(awaiting).read_bytes()
    views = _view_files(awaiting)
    yield awaiting
    db(awaiting).write_bytes(store)
    for suffix in ("-wal", "-shm"):
        Path(str(db(awaiting)) + suffix).unlink(missing_ok=True)
    for path in set(_view_files(awaiting)) - set(views):
        path.unlink()
    for path, data in views.items():
        path.write_bytes(data)
    code, data = audit(awaiting, TASK)
    assert code == 0, data


def test_clean_task_passes_and_audit_writes_nothing(awaiting: Repo) -> None:
    before = fingerprint(awaiting)
    code, data = audit(awaiting, TASK)
    assert code == 0, json.dumps(data, indent=1)
    assert data["verdict"] == "PASSED"
    ids = [c["id"] for c in data["tasks"][0]["checks"]]
    for check in (
        "hash-chain",
        "transitions",
        "artifacts",
        "approvals",
        "agent-additions",
        "agents-completed",
        "1.2",
        "views",
        "git",
    ):
        assert check in ids
    text = awaiting.run("audit", TASK)
    assert text.code == 0 and "PASSED" in text.out
    assert fingerprint(awaiting) == before  # R-AUD-12: not a byte changed


def test_R_AUD_12_a_failed_audit_repairs_nothing(saved: Repo) -> None:
    view = saved.task_dir(TASK) / "task.json"
    data = json.loads(view.read_text())
    data["state"] = "COMPLETE"
    view.write_text(json.dumps(data))
    before = fingerprint(saved)
    code, result = audit(saved, TASK)
    assert code == 1 and result["verdict"] == "FAILED"
    assert fingerprint(saved) == before  # the wrong view is reported, not re-rendered
    assert findings(result, "views") == [
        'task.json: \'state\' is "COMPLETE" in the view but "AWAITING_USER_APPROVAL" in the store'
    ]
    human = saved.run("audit", TASK)
    assert "FAIL  views" in human.out and "root cause:" in human.out and "fix:" in human.out


def test_tamper_touching_a_flag_file_is_reported(saved: Repo) -> None:
    flag = saved.task_dir(TASK) / "user-approval-obtained.flag"
    assert not flag.exists()
    flag.touch()
    code, data = audit(saved, TASK)
    assert code == 1
    assert findings(data, "views") == [
        "user-approval-obtained.flag exists but the store holds no active changes record "
        "(touching a flag approves nothing)"
    ]


def test_tamper_status_view_edited(saved: Repo) -> None:
    agent = saved.ok("status", TASK, "--json").json()["required_agents"][0]
    path = saved.task_dir(TASK) / "agents" / agent / "status.json"
    data = json.loads(path.read_text())
    data["status"] = "ERROR"
    path.write_text(json.dumps(data))
    code, result = audit(saved, TASK)
    assert code == 1
    assert findings(result, "views") == [
        f"agents/{agent}/status.json: 'status' is \"ERROR\" in the view but null in the store"
    ]


def test_tamper_state_changed_with_sqlite(saved: Repo) -> None:
    edit_store(saved, "UPDATE tasks SET state = 'REVIEW' WHERE name = ?", TASK)
    code, data = audit(saved, TASK)
    assert code == 1
    assert (
        "the transition_log ends at AWAITING_USER_APPROVAL but the task's state is REVIEW "
        "(R-TRN-05): the state changed without a logged transition"
    ) in findings(data, "transitions")
    assert any("'state' is" in f for f in findings(data, "views"))


def test_tamper_transition_row_deleted_with_sqlite(saved: Repo) -> None:
    edit_store(saved, "DELETE FROM transitions WHERE task = ? AND idx = 4", TASK)
    code, data = audit(saved, TASK)
    assert code == 1
    evidence = findings(data, "transitions")
    assert any("has index 5: a transition_log row was deleted or inserted" in e for e in evidence)
    assert any(
        "starts at VALIDATION but the previous transition ended at IMPLEMENTATION" in e
        for e in evidence
    )
    assert any("transition_log has 6 rows but the audit trail records 7" in e for e in evidence)


def test_tamper_event_edited_with_sqlite(saved: Repo) -> None:
    conn = sqlite3.connect(db(saved))
    seq, payload = conn.execute(
        "SELECT seq, payload FROM events WHERE task = ? AND kind = 'approval'", (TASK,)
    ).fetchone()
    conn.close()
    edited = json.loads(payload) | {"provenance": "terminal-edited"}
    edit_store(saved, "UPDATE events SET payload = ? WHERE seq = ?", json.dumps(edited), seq)
    code, data = audit(saved, TASK)
    assert code == 1
    assert findings(data, "hash-chain") == [
        f"event #{seq} (approval at {_event_at(saved, seq)}): the stored hash does not match its "
        "content (the event was edited)"
    ]


def _event_at(repo: Repo, seq: int) -> str:
    conn = sqlite3.connect(db(repo))
    try:
        return str(conn.execute("SELECT at FROM events WHERE seq = ?", (seq,)).fetchone()[0])
    finally:
        conn.close()


def test_tamper_event_deleted_with_sqlite(saved: Repo) -> None:
    conn = sqlite3.connect(db(saved))
    seqs = [
        r[0] for r in conn.execute("SELECT seq FROM events WHERE task = ? ORDER BY seq", (TASK,))
    ]
    conn.close()
    victim = seqs[5]
    edit_store(saved, "DELETE FROM events WHERE seq = ?", victim)
    code, data = audit(saved, TASK)
    assert code == 1
    evidence = findings(data, "hash-chain")
    assert len(evidence) == 1
    assert f"does not follow event #{seqs[4]}" in evidence[0]
    assert f"event #{seqs[6]}" in evidence[0] and "an event was deleted or reordered" in evidence[0]


def test_tamper_automated_approval_inserted_with_sqlite(saved: Repo) -> None:
    bound, at = git(saved.worktree(TASK), "rev-parse", "HEAD"), "2030-01-01T00:00:00Z"
    edit_store(
        saved,
        "INSERT INTO approvals (task, kind, bound_to, presented_at, approved_at, provenance, "
        "message_hash, revoked_at, revoke_reason) VALUES (?, 'changes', ?, ?, ?, "
        "'automated --yes', '', NULL, '')",
        TASK,
        bound,
        at,
        at,
    )
    code, data = audit(saved, TASK)
    assert code == 1
    evidence = findings(data, "approvals")
    assert (
        f"changes approval of {bound[:12]} at {at} came from 'automated --yes', not from a "
        "human (R-CKP-02, R-CKP-05)" in evidence
    )
    assert (
        "the approvals table holds 1 changes approval(s) but the audit trail records 0" in evidence
    )
    assert (
        f"changes approval of {bound[:12]} at {at} is bound to {bound[:12]} presented at "
        f"{at}, but no such presentation is recorded (R-CKP-03, R-CKP-13, R-CKP-15)" in evidence
    )


def test_tamper_task_branch_rewritten_behind_taskgates_back(saved: Repo) -> None:
    wt = saved.worktree(TASK)
    head = git(wt, "rev-parse", "HEAD")
    try:
        git(wt, "reset", "-q", "--hard", "HEAD~1")
        commit_in(wt, "src/auth/login.py", "def login():\n    return 1\n", "[agent:quality] v2")
        code, data = audit(saved, TASK)
        assert code == 1
        evidence = findings(data, "git")
        assert any(
            f"({head[:12]}) is no longer on branch {TASK}: the branch was rewritten behind "
            "taskgate's back" in e
            for e in evidence
        ), evidence
    finally:
        git(wt, "reset", "-q", "--hard", head)


def test_missing_worktree_and_branch_are_reported(saved: Repo) -> None:
    agent = saved.ok("status", TASK, "--json").json()["required_agents"][0]
    path = saved.task_dir(TASK) / "agents" / agent / "code"
    head = git(saved.path, "rev-parse", f"{TASK}-{agent}")
    git(saved.path, "worktree", "remove", "--force", str(path))
    git(saved.path, "branch", "-q", "-D", f"{TASK}-{agent}")
    try:
        code, data = audit(saved, TASK)
        assert code == 1
        evidence = findings(data, "git")
        assert f"branch {TASK}-{agent} is missing (R-WTB-01, R-WTB-02)" in evidence
        assert f"worktree {path} is missing (R-WTB-01)" in evidence
    finally:
        git(saved.path, "branch", "-q", f"{TASK}-{agent}", head)
        git(saved.path, "worktree", "add", "-q", str(path), f"{TASK}-{agent}")


def test_audit_all_tasks_and_bad_input(saved: Repo) -> None:
    code, data = audit(saved)
    assert code == 0 and [t["task"] for t in data["tasks"]] == [TASK]
    assert saved.run("audit", "no-such-task").code == 2
    assert saved.run("audit", "../etc").code == 2


def test_unreadable_store_exits_5(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    repo.ok("start", TASK)
    db(repo).write_bytes(b"this is not a database" * 100)
    result = repo.run("audit", TASK)
    assert result.code == 5 and "recover" in result.err


def test_check_1_2_untagged_commit_and_tool_usage(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    to_implementation(repo, TASK)
    code, data = audit(repo, TASK)
    assert code == 0, data
    sha = commit_in(repo.worktree(TASK), "src/auth/session.py", "x = 1\n", "main wrote this")
    path = str(repo.worktree(TASK) / "src/auth/login.py")
    store = SqliteStore(db(repo))  # the hooks' record, written through the store's API
    try:
        with store.write() as tx:
            tx.append_event(
                TASK,
                "tool_usage",
                {"tool": "Edit", "file_path": path, "agent": "main"},
                "2030-01-01T00:00:00Z",
            )
            tx.append_event(
                TASK,
                "tool_usage",
                {"tool": "Write", "file_path": path, "agent": "quality"},
                "2030-01-01T00:00:01Z",
            )
            tx.append_event(
                TASK,
                "tool_usage",
                {"tool": "Edit", "file_path": "notes.md"},
                "2030-01-01T00:00:02Z",
            )
    finally:
        store.close()
    code, data = audit(repo, TASK)
    assert code == 1
    evidence = findings(data, "1.2")
    assert evidence == [
        f"main agent used Edit on {path} at 2030-01-01T00:00:00Z during IMPLEMENTATION",
        f"commit {sha[:12]} (main wrote this) on the task branch is not tagged [agent:A] and "
        "changes src/auth/session.py",
    ]
    assert ar.canonical_check_id("0.2") == "1.2"  # C-13


def test_R_AGT_22_added_agent_missing_from_task_md(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    flow_to_synthesis(repo, TASK)
    required = repo.ok("status", TASK, "--json").json()["required_agents"]
    extra = next(a for a in STAKEHOLDERS if a not in required)
    repo.ok("agent", "add", TASK, extra, "--why", "the plan needs it")
    task_md = repo.task_dir(TASK) / "task.md"
    assert f"### {extra}" in task_md.read_text()  # `agent add` lists it (R-AGT-22)
    assert audit(repo, TASK)[0] == 0
    # Someone removes it from task.md behind taskgate's back: the audit notices.
    entry = f"### {extra}\n\n_pending: {TASK}-{extra}-requirements.md_\n\n"
    assert entry in task_md.read_text()
    task_md.write_text(task_md.read_text().replace(entry, ""))
    code, data = audit(repo, TASK)
    assert code == 1
    assert findings(data, "agent-additions") == [
        f"added agent {extra} is missing from the Stakeholder Agent Reports of task.md"
    ]
    task_md.write_text(
        task_md.read_text().replace(
            "## Stakeholder Agent Reports\n", f"## Stakeholder Agent Reports\n\n### {extra}\n"
        )
    )
    assert audit(repo, TASK)[0] == 0
    edit_store(repo, "UPDATE agents SET justification = '' WHERE agent = ?", extra)
    code, data = audit(repo, TASK)
    assert findings(data, "agent-additions") == [f"agent {extra} was added without a justification"]


def test_agent_invocation_never_completed(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    to_requirements(repo, TASK)
    agent = repo.ok("status", TASK, "--json").json()["required_agents"][0]
    repo.ok("agent", "set", TASK, agent, "WORKING")
    assert audit(repo, TASK)[0] == 0  # running in the current phase is normal
    repo.ok("transition", TASK, "CLASSIFIED", "--reason", "agent blocker", cwd=repo.worktree(TASK))
    code, data = audit(repo, TASK)
    assert code == 1
    (evidence,) = findings(data, "agents-completed")
    assert evidence.startswith(f"{agent} was invoked for requirements at ")
    assert evidence.endswith("and never completed, but the task is now in CLASSIFIED")


# -- pure checks ---------------------------------------------------------------------------------


def _ev(seq: int, event_kind: str, **payload: Any) -> ar.Event:
    return ar.Event(seq, event_kind, f"2030-01-01T00:00:{seq:02d}Z", payload)


def test_pure_skipped_state_and_missing_gate_evidence() -> None:
    events = (
        _ev(1, "classification", agents=["architect"]),
        _ev(2, "transition", **{"from": "INIT", "to": "CLASSIFIED"}),
        _ev(3, "transition", **{"from": "CLASSIFIED", "to": "REQUIREMENTS"}),
        _ev(4, "transition", **{"from": "REQUIREMENTS", "to": "SYNTHESIS"}),
        _ev(5, "transition", **{"from": "SYNTHESIS", "to": "VALIDATION"}),
    )
    log = tuple(
        ar.Logged(n, str(e.payload["from"]), str(e.payload["to"]), e.at)
        for n, e in enumerate(events[1:])
    )
    i = ar.AuditInput(
        TASK,
        "VALIDATION",
        "HIGH",
        "code",
        ("architect",),
        ("architect",),
        log,
        events,
        report_sizes={"architect": 10},
    )
    results = {r.id: r for r in ac.run_checks(i)}
    trn = [f.evidence for f in results["transitions"].findings]
    assert trn == [
        "transition #3 (SYNTHESIS -> VALIDATION at 2030-01-01T00:00:05Z) is not in the "
        "transition table (R-TRN-03)"
    ]
    art = [f.evidence for f in results["artifacts"].findings]
    assert art == [
        "REQUIREMENTS -> SYNTHESIS at 2030-01-01T00:00:04Z: no COMPLETE from architect in "
        "requirements (R-AST-01)",
        "REQUIREMENTS -> SYNTHESIS at 2030-01-01T00:00:04Z: report of architect is missing or "
        "under 100 bytes (R-DOC-04)",
    ]
    assert all(f.root_cause and f.fix for r in results.values() for f in r.findings)


def test_pure_approval_before_presentation_and_automated_allowed() -> None:
    events = (
        _ev(1, "approval", kind="plan", bound_to="h", provenance="automated --yes"),
        _ev(2, "presentation", kind="plan", bound_to="h"),
        _ev(3, "transition", **{"from": "SYNTHESIS", "to": "IMPLEMENTATION"}),
    )
    approval = ar.ApprovalRecord(
        "plan", "h", "2030-01-01T00:00:02Z", "2030-01-01T00:00:01Z", "automated --yes"
    )
    shown = ar.PresentationRecord("plan", "h", "2030-01-01T00:00:02Z")
    base = ar.AuditInput(
        TASK, "IMPLEMENTATION", events=events, approvals=(approval,), presentations=(shown,)
    )
    result = ac.check_approvals(base)
    evidence = [f.evidence for f in result.findings]
    assert any("came from 'automated --yes', not from a human" in e for e in evidence)
    assert any("precedes its presentation" in e for e in evidence)
    assert any("was given before anything was presented (R-CKP-04)" in e for e in evidence)
    allowed = ac.check_approvals(
        ar.AuditInput(
            TASK,
            "IMPLEMENTATION",
            events=events,
            approvals=(approval,),
            presentations=(shown,),
            auto_approve_allowed=True,
        )
    )
    assert allowed.notes and not any("not from a human" in f.evidence for f in allowed.findings)


@pytest.mark.parametrize(
    ("path", "source"),
    [
        ("src/a.py", True),
        ("pom.xml", True),
        ("src/main/java/A.kt", True),
        ("README.md", False),
        (".taskgate/tasks/t/task.md", False),
        ("docs/x.txt", False),
    ],
)
def test_pure_source_files(path: str, source: bool) -> None:
    assert ar.is_source_file(path) is source


def test_artifacts_evidence_deleted_with_sqlite(saved: Repo) -> None:
    edit_store(saved, "DELETE FROM events WHERE task = ? AND kind = 'validation'", TASK)
    code, data = audit(saved, TASK)
    assert code == 1
    (evidence,) = findings(data, "artifacts")
    assert evidence.startswith("VALIDATION -> REVIEW at ")
    assert evidence.endswith(": no passing build recorded in VALIDATION (R-VAL-01)")
    assert findings(data, "hash-chain")  # the deletion also breaks the chain


def test_completed_and_cleaned_up_task_and_rewritten_main(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", config=PASSING_BUILD)
    to_complete(repo, TASK)
    code, data = audit(repo, TASK)
    assert code == 0, json.dumps(data, indent=1)
    merged = repo.ok("status", TASK, "--json").json()
    repo.ok("cleanup", TASK)  # R-CMP-08 runs the build on main first; it passes here
    code, data = audit(repo, TASK)
    assert code == 0, json.dumps(data, indent=1)
    assert data["tasks"][0]["state"] == "CLEANUP"
    head = repo.git("rev-parse", "main")
    repo.git("reset", "-q", "--hard", "main~1")  # main rewritten behind taskgate's back
    code, data = audit(repo, TASK)
    assert code == 1
    assert findings(data, "git") == [
        f"the merged commit {head[:12]} is not on main: the main branch was rewritten"
    ]
    assert merged["state"] == "COMPLETE"


def test_killed_during_complete_points_at_the_resuming_command(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", config=PASSING_BUILD)
    to_awaiting(repo, TASK)
    approve_changes(repo, TASK)
    crashed = repo.run("complete", TASK, env={"TASKGATE_FAILPOINT": "complete:after-archival"})
    assert crashed.code == -9
    code, data = audit(repo, TASK)
    assert code == 1
    assert "the journaled step 'complete' was interrupted (pending in the task row)" in findings(
        data, "git"
    )
    result = repo.run("recover", TASK, "--json")
    (d,) = result.json()
    assert d["procedure"] == "P1" and f"taskgate complete {TASK}" in d["actions"][0]
    repo.ok("complete", TASK)
    assert audit(repo, TASK)[0] == 0
