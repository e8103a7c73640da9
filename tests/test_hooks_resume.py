"""SessionStart of a session resuming the task it holds, without the engine (hooks/resume.py,
issue 18): in every state a session can hold a task in, and at every checkpoint situation that
changes the recovery hint, the hook as shipped and the engine's path (the quick path switched
off) give the same answer and leave the same store, snapshot files and anchors; wherever the
store is in a state the quick path cannot vouch for, the engine's path answers; and the hook
process that answers loads none of the engine."""

from __future__ import annotations

import io
import json
import os
import shlex
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from conftest import Repo, git, make_repo
from flow import (
    PASSING_BUILD,
    PLAN,
    agents_of,
    copy_repo,
    implement_to_presented_changes,
    module_home,
    write_reports,
)
from taskgate.hooks import dispatch, quick, resume
from taskgate.hooks.install import default_program
from taskgate.protocol.names import task_name_problem
from taskgate.store import snapshot

TASK = "add-login"
NOW = "2026-11-26T12:00:00Z"
ENGINE = "taskgate.engine.core"


def _stop(repo: Path) -> None:
    """What `taskgate run` records when it stops on purpose (issue 17: extra.last_stop)."""
    from taskgate.engine.core import Engine
    from taskgate.engine.workspace import find_workspace

    engine = Engine(find_workspace(repo), session_id="s1")
    stop = {"cause": "post-merge-build", "state": "IMPLEMENTATION", "issue": "the build broke",
            "next": f"taskgate validate {TASK}", "at": NOW}  # fmt: skip
    try:
        engine.step(TASK, lambda tx, snap: engine.touch(
            tx, snap, extra={**snap.task.extra, "last_stop": stop}))  # fmt: skip
    finally:
        engine.close()


@pytest.fixture(scope="module")
def states(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """One repository driven through the protocol, copied aside at each state and at each
    checkpoint situation the hint tells apart."""
    with pytest.MonkeyPatch.context() as mp:
        module_home(mp, tmp_path_factory)
        mp.setenv("TASKGATE_FAKE_NOW", NOW)
        root = tmp_path_factory.mktemp("states")
        repo = make_repo(root / "work", config=PASSING_BUILD)
        kept: dict[str, Path] = {}

        def keep(name: str) -> None:
            kept[name] = copy_repo(repo.path, root / name).path

        repo.ok("start", TASK)
        keep("INIT")
        repo.ok("classify", TASK, cwd=repo.worktree(TASK))
        keep("CLASSIFIED")
        repo.ok("transition", TASK, "REQUIREMENTS", cwd=repo.worktree(TASK))
        keep("REQUIREMENTS")
        write_reports(repo, TASK)
        repo.ok("transition", TASK, "SYNTHESIS", cwd=repo.worktree(TASK))
        task_md = repo.task_dir(TASK) / "task.md"
        task_md.write_text(task_md.read_text() + PLAN)
        keep("SYNTHESIS")  # the plan not presented yet
        repo.ok("present", TASK)
        keep("SYNTHESIS-presented")
        repo.ok("request-changes", TASK, "keep sessions in redis instead")
        keep("SYNTHESIS-changes-requested")  # the presentation voided (R-CKP-15)
        task_md.write_text(task_md.read_text() + "- Sessions live in redis.\n")
        repo.ok("present", TASK)
        repo.ok("approve", TASK, "plan")
        keep("SYNTHESIS-approved")
        for situation in ("SYNTHESIS-approval-revoked", "SYNTHESIS-agent-added"):
            other = copy_repo(kept["SYNTHESIS-approved"], root / situation)
            if situation.endswith("revoked"):  # the plan approval revoked, its showing void
                other.ok("request-changes", TASK, "and log every failed login")
            else:  # R-AGT-19: the approval revoked, the showing voided by `agent_added`
                new = next(a for a in ("usability", "performance", "security")
                           if a not in agents_of(other, TASK))  # fmt: skip
                other.ok("agent", "add", TASK, new, "--why", "user-facing form")
            kept[situation] = other.path
        implement_to_presented_changes(repo, TASK, keep)
        repo.ok("approve", TASK, "changes")
        keep("AWAITING_USER_APPROVAL-approved")
        stopped = copy_repo(kept["IMPLEMENTATION"], root / "IMPLEMENTATION-stopped").path
        _stop(stopped)
        kept["IMPLEMENTATION-stopped"] = stopped
        yield kept


# What each situation's hint starts with (protocol/recovery.hint): the cases really differ.
HINTS = {
    "INIT": "safe to restart: classify",
    "CLASSIFIED": "safe to restart: move to REQUIREMENTS",
    "REQUIREMENTS": "check agent completion",
    "SYNTHESIS": "resume SYNTHESIS: finish the implementation plan",
    "SYNTHESIS-presented": "CHECKPOINT RECOVERY: Task waiting for PLAN APPROVAL",
    "SYNTHESIS-changes-requested": "resume SYNTHESIS: finish the implementation plan",
    "SYNTHESIS-approved": "plan approved: run the entry guards",
    "SYNTHESIS-approval-revoked": "resume SYNTHESIS: finish the implementation plan",
    "SYNTHESIS-agent-added": "resume SYNTHESIS: finish the implementation plan",
    "IMPLEMENTATION": "check agent status and resume",
    "IMPLEMENTATION-stopped": "run stopped deliberately (post-merge-build)",
    "VALIDATION": "re-run validation",
    "REVIEW": "check review status",
    "AWAITING_USER_APPROVAL": "CHECKPOINT RECOVERY: Task waiting for CHANGE REVIEW",
    "AWAITING_USER_APPROVAL-presented": "CHECKPOINT RECOVERY: Task waiting for CHANGE REVIEW",
    "AWAITING_USER_APPROVAL-approved": "changes approved for ",
}


def _input(repo: Path, session: str = "s1") -> str:
    return json.dumps({"session_id": session, "transcript_path": "", "cwd": str(repo),
                       "hook_event_name": "SessionStart", "source": "resume"})  # fmt: skip


def _hook(repo: Path, session: str = "s1") -> tuple[str, bool]:
    """The installed hook command's stdout (the repository's path written <repo>) and
    whether its process loaded the engine (its path answered)."""
    argv = shlex.split(default_program())
    env = {k: v for k, v in os.environ.items() if k not in ("TASKGATE_DEBUG", "CLAUDE_ENV_FILE")}
    proc = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:], "SessionStart"], cwd=repo,
        input=_input(repo, session), capture_output=True, text=True, check=True, env=env,
    )  # fmt: skip
    loaded = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()}
    return proc.stdout.replace(str(repo), "<repo>"), ENGINE in loaded


def _by_engine(repo: Path, monkeypatch: pytest.MonkeyPatch, session: str = "s1") -> str:
    """The engine's path in this process (hooks/quick.session_start switched off)."""
    monkeypatch.delenv("TASKGATE_DEBUG", raising=False)
    monkeypatch.delenv("CLAUDE_ENV_FILE", raising=False)
    monkeypatch.setattr(quick, "session_start", lambda data: None)
    out = io.StringIO()
    try:
        assert dispatch.run_hook(["SessionStart"], io.StringIO(_input(repo, session)), out) == 0
    finally:
        monkeypatch.undo()
    return out.getvalue().replace(str(repo), "<repo>")


@pytest.fixture
def fake_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASKGATE_FAKE_NOW", NOW)


def _store(repo: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of the store, and its schema (sqlite_master)."""
    conn = sqlite3.connect(repo / ".taskgate" / "state.db")
    try:
        tables = [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        rows = {t: conn.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall() for t in tables}
        rows["sqlite_master"] = conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
        ).fetchall()
        return rows
    finally:
        conn.close()


def _snapshot_files(repo: Path) -> dict[str, Any]:
    """The hook snapshot, its sequence file, and what hook-snapshot.gen names: the clock and
    whether it is this very file (the key is the copy's own inode and times)."""
    state = repo / ".taskgate"
    found: dict[str, Any] = {}
    for name in (snapshot.FILE_NAME, snapshot.SEQ_FILE):
        path = state / name
        found[name] = path.read_text() if path.exists() else None
    gen = state / snapshot.GEN_FILE
    if gen.exists():
        clock, _, key = gen.read_text().strip().partition(" ")
        here = snapshot.file_key((state / snapshot.FILE_NAME).stat())
        found[snapshot.GEN_FILE] = (clock, key == here)
    found["files"] = sorted(p.name for p in state.iterdir() if not p.name.startswith("state.db"))
    return found


def _state(repo: Path) -> dict[str, Any]:
    """The store's rows and schema, the snapshot files, the refs (anchors included)."""
    refs = git(repo, "for-each-ref", "--format=%(refname) %(objectname)")
    return {**_store(repo), "snapshot files": _snapshot_files(repo), "refs": refs}


def _same(one: Path, other: Path) -> None:
    a, b = _state(one), _state(other)
    assert sorted(a) == sorted(b)
    for part in a:
        assert a[part] == b[part], part


def _pair(src: Path, tmp_path: Path) -> tuple[Path, Path]:
    """Two copies of a prepared repository whose hook-snapshot.gen names their own file (as
    the original's named its: a copy has other inodes), for the two paths."""
    pair = []
    for side in ("quick", "engine"):
        repo = copy_repo(src, tmp_path / side).path
        clock = sqlite3.connect(repo / ".taskgate" / "state.db")
        try:
            (seq,) = clock.execute("SELECT seq FROM snapshot_clock WHERE id = 1").fetchone()
        finally:
            clock.close()
        key = snapshot.file_key((repo / ".taskgate" / snapshot.FILE_NAME).stat())
        (repo / ".taskgate" / snapshot.GEN_FILE).write_text(f"{seq} {key}\n")
        pair.append(repo)
    return pair[0], pair[1]


def _views(repo: Path) -> dict[str, str]:
    task_dir = repo / ".taskgate" / "tasks" / TASK
    return {v: (task_dir / v).read_text() for v in ("task.json", "audit-trail.json")}


@pytest.mark.parametrize("situation", sorted(HINTS))
def test_both_paths_resume_alike(
    states: dict[str, Path],
    tmp_path: Path,
    situation: str,
    monkeypatch: pytest.MonkeyPatch,
    fake_now: None,
) -> None:
    quick_repo, engine_repo = _pair(states[situation], tmp_path)
    _same(quick_repo, engine_repo)
    fast, engine_loaded = _hook(quick_repo)
    slow = _by_engine(engine_repo, monkeypatch)
    assert not engine_loaded, "the quick path did not answer"
    assert fast == slow
    text = json.loads(fast)["hookSpecificOutput"]["additionalContext"]
    assert text.splitlines()[0].startswith(f"=== RESUMING TASK: {TASK} (State: ")
    assert text.splitlines()[1].startswith(HINTS[situation]), text
    _same(quick_repo, engine_repo)
    # The views the next reader renders from the two stores are the same files.
    for repo in (quick_repo, engine_repo):
        Repo(repo).ok("status", TASK)
    assert _views(quick_repo) == _views(engine_repo)


def test_stale_views_are_left_for_the_next_reader(
    states: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_now: None
) -> None:
    """The usual resume: the session's work left the views stale (a question recorded
    without the engine, hooks/prompt.py). The quick path answers without rendering them;
    `taskgate audit` accepts them; the next reader renders what the engine's path would."""
    quick_repo, engine_repo = _pair(states["IMPLEMENTATION"], tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in dispatch.AGENT_COMMAND_VARS}
    for repo in (quick_repo, engine_repo):
        question = {
            "session_id": "s1",
            "transcript_path": "",
            "cwd": str(repo),
            "hook_event_name": "UserPromptSubmit",
            "prompt": "what is the status?",
        }
        argv = shlex.split(default_program())
        subprocess.run([*argv, "UserPromptSubmit"], cwd=repo, input=json.dumps(question),
                       text=True, check=True, capture_output=True, env=env)  # fmt: skip
    _same(quick_repo, engine_repo)
    stale = json.loads((quick_repo / ".taskgate" / "tasks" / TASK / "task.json").read_text())
    fast, engine_loaded = _hook(quick_repo)
    slow = _by_engine(engine_repo, monkeypatch)
    assert not engine_loaded and fast == slow
    _same(quick_repo, engine_repo)
    view = json.loads((quick_repo / ".taskgate" / "tasks" / TASK / "task.json").read_text())
    assert view == stale  # not rendered by the hook
    (row,) = [r for r in _store(quick_repo)["tasks"] if r[0] == TASK]
    assert view["_seq"] < row[7]  # and stale: the store moved on (`seq`)
    audit = Repo(quick_repo).run("audit", TASK, "--json").json()
    checks = {c["id"]: c for c in audit["tasks"][0]["checks"]}
    assert checks["views"]["passed"], checks["views"]
    for repo in (quick_repo, engine_repo):
        Repo(repo).ok("status", TASK)
    assert _views(quick_repo) == _views(engine_repo)


def _edit(repo: Path, statement: str) -> None:
    conn = sqlite3.connect(repo / ".taskgate" / "state.db")
    try:
        conn.execute(statement)
        conn.commit()
    finally:
        conn.close()


def _snapshot_edited(repo: Path) -> None:
    path = repo / ".taskgate" / snapshot.FILE_NAME
    path.write_text(path.read_text().replace("\tIMPLEMENTATION\t", "\tREVIEW\t"))


def _views_ahead(repo: Path) -> None:
    path = repo / ".taskgate" / "tasks" / TASK / "task.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "_seq": data["_seq"] + 5}))


# name -> (situation, what is done to both copies, whether the quick path still answers)
TAMPERED: dict[str, tuple[str, Callable[[Path], None], bool]] = {
    "gen file missing": (
        "IMPLEMENTATION", lambda r: (r / ".taskgate" / snapshot.GEN_FILE).unlink(), True,
    ),
    "gen file names another file": (
        "SYNTHESIS-presented",
        lambda r: (r / ".taskgate" / snapshot.GEN_FILE).write_text("1 0:0:0:0:0\n"),
        True,
    ),
    "snapshot edited (R-LCK-09)": ("IMPLEMENTATION", _snapshot_edited, False),
    "views ahead of the store (StoreLost)": ("IMPLEMENTATION", _views_ahead, False),
    "a snapshot clock trigger dropped": (
        "IMPLEMENTATION", lambda r: _edit(r, "DROP TRIGGER snapshot_clock_events_insert"), False,
    ),
    "a column of agents dropped": (
        "IMPLEMENTATION", lambda r: _edit(r, "ALTER TABLE agents DROP COLUMN invoked_at"), False,
    ),
    "a column of tasks dropped": (
        "IMPLEMENTATION", lambda r: _edit(r, "ALTER TABLE tasks DROP COLUMN cleanup_timestamp"),
        False,
    ),
    "the task's extra does not parse": (
        "IMPLEMENTATION",
        lambda r: _edit(r, f"UPDATE tasks SET extra = '{{' WHERE name = '{TASK}'"),
        False,
    ),
    "a transition's evidence does not parse": (
        "IMPLEMENTATION", lambda r: _edit(r, "UPDATE transitions SET evidence = 'x' WHERE idx = 1"),
        False,
    ),
    "the plan's presentation payload does not parse": (
        "SYNTHESIS-presented",
        lambda r: _edit(r, "UPDATE events SET payload = 'nope' WHERE kind = 'presentation'"),
        False,
    ),
    "an unknown state": (
        "IMPLEMENTATION",
        lambda r: _edit(r, f"UPDATE tasks SET state = 'LIMBO' WHERE name = '{TASK}'"),
        False,
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(TAMPERED))
def test_what_the_quick_path_cannot_vouch_for_goes_to_the_engine(
    states: dict[str, Path],
    tmp_path: Path,
    case: str,
    monkeypatch: pytest.MonkeyPatch,
    fake_now: None,
) -> None:
    situation, tamper, answers = TAMPERED[case]
    quick_repo, engine_repo = _pair(states[situation], tmp_path)
    for repo in (quick_repo, engine_repo):
        tamper(repo)
    _same(quick_repo, engine_repo)
    fast, engine_loaded = _hook(quick_repo)
    slow = _by_engine(engine_repo, monkeypatch)
    assert engine_loaded != answers, "the quick path answered" if answers else "the engine did"
    assert fast == slow
    _same(quick_repo, engine_repo)


def test_a_session_holding_no_task_and_a_new_one_agree_too(
    states: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_now: None
) -> None:
    """hooks/quick.session_start's other answer, with the gen file to rewrite."""
    quick_repo, engine_repo = _pair(states["REVIEW"], tmp_path)
    for repo in (quick_repo, engine_repo):
        (repo / ".taskgate" / snapshot.GEN_FILE).unlink()
    fast, engine_loaded = _hook(quick_repo, "someone-else")
    slow = _by_engine(engine_repo, monkeypatch, "someone-else")
    assert not engine_loaded and fast == slow
    assert "No active tasks" in fast
    _same(quick_repo, engine_repo)


def test_the_hook_process_resumes_without_the_engine(
    states: dict[str, Path], tmp_path: Path
) -> None:
    """The installed command in SYNTHESIS-presented (the deepest read: approvals, events,
    presentations) loads neither the engine nor the json package, typing, pathlib or re."""
    repo, _ = _pair(states["SYNTHESIS-presented"], tmp_path)
    argv = shlex.split(default_program())
    proc = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:], "SessionStart"], cwd=repo,
        input=_input(repo), capture_output=True, text=True, check=True,
    )  # fmt: skip
    loaded = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()}
    heavy = {"json", "sqlite3", "typing", "dataclasses", "subprocess", "pathlib", "re",
             "datetime", ENGINE, "taskgate.store.records"}  # fmt: skip
    assert {"taskgate.hooks.resume", "taskgate.protocol.recovery"} <= loaded
    assert not heavy & loaded, sorted(heavy & loaded)


# -- the constants the quick path keeps beside the engine's -----------------------------------


def test_the_task_columns_are_the_stores() -> None:
    from taskgate.store.sqlite_tx import _TASK_COLUMNS

    assert tuple(_TASK_COLUMNS) == resume.TASK_COLUMNS


def test_the_reads_name_every_column_of_their_tables(tmp_path: Path) -> None:
    """Every column of the task's tables is read (or ordered by) as Tx.snapshot does: a
    column a later migration adds must be added to hooks/resume._READS."""
    repo = make_repo(tmp_path / "repo")
    conn = sqlite3.connect(repo.path / ".taskgate" / "state.db")
    try:
        for table, (columns, order) in resume._READS.items():
            have = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
            named = {c.strip() for c in f"{columns}, {order}".split(",")}
            assert named == have, table
    finally:
        conn.close()


@given(st.text(alphabet="abz09._-/A \u00e9", max_size=70))
@example("main")
@example("a..b")
@example("x.lock")
@example("x.")
@example("-x")
@example("a" * 64)
@example("a" * 65)
@example("")
def test_the_name_check_is_the_engines(name: str) -> None:
    assert resume._valid_name(name) == (task_name_problem(name) is None)
