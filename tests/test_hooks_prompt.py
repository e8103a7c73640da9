"""UserPromptSubmit of a session holding a task without the engine (hooks/prompt.py, issue 18):
both paths fed the same prompts in every state leave the same store, the same anchors and the
same answer; the path without the engine is taken exactly for the prompts the engine records
as interruptions, and the hook process that takes it loads none of the engine."""

from __future__ import annotations

import io
import json
import os
import shlex
import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import Repo, git, make_repo
from flow import (
    PASSING_BUILD,
    copy_repo,
    implement_to_presented_changes,
    module_home,
    write_reports,
)
from taskgate.engine import anchor, checkpoints, conversation
from taskgate.hooks import dispatch, prompt
from taskgate.hooks.install import default_program
from taskgate.store import canon

TASK = "add-login"
NOW = "2026-11-26T12:00:00Z"
# Every class of R-INT-03 and the checkpoint words, in the order a person might send them.
PROMPTS = [
    "what is the status?",
    "Where are we?",
    "please run an audit",
    "Why did you pick bcrypt",
    "ok thanks",
    "keep going?",
    "Rename login to sign_in please",
    "LGTM",
    "continue",
    "no, hold off",
    "\U0001f44d",
    "Could you add error handling details?",
    "what about another task in the meantime?",
    "status",
]


@pytest.fixture(scope="module")
def states(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """One repository driven through the protocol, copied aside at each state."""
    with pytest.MonkeyPatch.context() as mp:
        module_home(mp, tmp_path_factory)
        root = tmp_path_factory.mktemp("states")
        repo = make_repo(root / "work", config=PASSING_BUILD)
        kept: dict[str, Path] = {}

        def keep(name: str) -> None:
            shutil.copytree(repo.path, root / name, symlinks=True)
            kept[name] = root / name

        repo.ok("start", TASK)
        keep("INIT")
        to_requirements_from_init(repo)
        keep("REQUIREMENTS")
        write_reports(repo, TASK)
        repo.ok("transition", TASK, "SYNTHESIS", cwd=repo.worktree(TASK))
        task_md = repo.task_dir(TASK) / "task.md"
        task_md.write_text(task_md.read_text() + _PLAN)
        keep("SYNTHESIS")
        repo.ok("present", TASK)
        keep("SYNTHESIS-presented")
        repo.ok("approve", TASK, "plan")
        implement_to_presented_changes(repo, TASK, keep)
        yield kept


def to_requirements_from_init(repo: Repo) -> None:
    """INIT (already started) -> CLASSIFIED -> REQUIREMENTS."""
    repo.ok("classify", TASK, cwd=repo.worktree(TASK))
    repo.ok("transition", TASK, "REQUIREMENTS", cwd=repo.worktree(TASK))


_PLAN = """
## Implementation Plan

### Files to Create
- src/auth/login.py

### API Design
`def login(user: str, password: str) -> Session`

### Behavior Specifications
A wrong password raises AuthError; a right one returns a Session.

### Test Cases
- test_login_ok, test_login_wrong_password

### Implementation Sequence
1. quality implements login.py; 2. test writes the tests.

### Decision Log
- Sessions are in memory for now.
"""


def _send(repo: Path, text: str) -> str:
    """The hook's stdout for one prompt of session s1, run in this process."""
    data = {
        "session_id": "s1",
        "transcript_path": "",
        "cwd": str(repo),
        "permission_mode": "default",
        "hook_event_name": "UserPromptSubmit",
        "prompt": text,
    }
    out = io.StringIO()
    assert dispatch.run_hook(["UserPromptSubmit"], io.StringIO(json.dumps(data)), out) == 0
    return out.getvalue()


def _store(repo: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of the store."""
    conn = sqlite3.connect(repo / ".taskgate" / "state.db")
    try:
        tables = [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: conn.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall() for t in tables}
    finally:
        conn.close()


def _anchors(repo: Path) -> list[str]:
    """The messages of the task's anchor commits, newest first."""
    name = anchor.ref(TASK)
    if subprocess.run(["git", "rev-parse", "-q", "--verify", name], cwd=repo).returncode:
        return []  # none yet (INIT: no checkpoint so far)
    out = git(repo, "log", "-z", "--format=%B", name, "--")
    return [m.strip() for m in out.split("\0") if m.strip()]


def _state(repo: Path) -> tuple[Any, ...]:
    snapshot = repo / ".taskgate" / "hook-snapshot.json"
    return (_store(repo), _anchors(repo), snapshot.read_text() if snapshot.exists() else None)


@pytest.fixture
def both(monkeypatch: pytest.MonkeyPatch) -> Callable[[Path, Path, str], tuple[str, str, bool]]:
    """Send one prompt to `quick` (the hook as shipped) and to `engine` (the path without
    the engine switched off); returns both answers and whether the quick path answered."""
    monkeypatch.setenv("TASKGATE_FAKE_NOW", NOW)
    for var in dispatch.AGENT_COMMAND_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(dispatch, "started_by_agent", lambda: "")  # pytest's own ancestry
    real = prompt.record
    taken: list[bool] = []

    def spied(data: dict[str, Any], text: str, found: Any = None) -> str | None:
        assert found, "the workspace holds_no_task found is passed on (one discovery)"
        answer = real(data, text, found)
        taken.append(answer is not None)
        return answer

    def send(quick: Path, engine: Path, text: str) -> tuple[str, str, bool]:
        taken.clear()
        monkeypatch.setattr(prompt, "record", spied)
        fast = _send(quick, text)
        monkeypatch.setattr(prompt, "record", lambda data, text, found=None: None)
        slow = _send(engine, text)
        return fast, slow, any(taken)

    return send


@pytest.mark.parametrize(
    "state",
    [
        "INIT",
        "REQUIREMENTS",
        "SYNTHESIS",
        "SYNTHESIS-presented",
        "IMPLEMENTATION",
        "VALIDATION",
        "REVIEW",
        "AWAITING_USER_APPROVAL",
        "AWAITING_USER_APPROVAL-presented",
    ],
)
def test_both_paths_record_the_same_prompts_alike(
    states: dict[str, Path],
    tmp_path: Path,
    state: str,
    both: Callable[[Path, Path, str], tuple[str, str, bool]],
) -> None:
    quick = copy_repo(states[state], tmp_path / "quick").path
    engine = copy_repo(states[state], tmp_path / "engine").path
    assert _state(quick) == _state(engine)
    fast_answers = 0
    for text in PROMPTS:
        before = len(_store(engine)["events"])
        fast, slow, taken = both(quick, engine, text)
        assert fast == slow, text
        assert _state(quick) == _state(engine), text
        # The quick path answers exactly the prompts the engine records as interruptions.
        added = _store(engine)["events"][before:]
        assert taken == ([row[3] for row in added] == ["interruption"]), (text, added)
        fast_answers += taken
    assert fast_answers >= 5, state  # the path is really taken
    # The views the next command renders from the two stores are the same files.
    for repo in (quick, engine):
        Repo(repo).ok("status", TASK)
    for view in ("task.json", "audit-trail.json"):
        assert (quick / ".taskgate" / "tasks" / TASK / view).read_text() == (
            engine / ".taskgate" / "tasks" / TASK / view
        ).read_text()


def _hook_with_importtime(
    repo: Repo, data: dict[str, str]
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """The installed UserPromptSubmit hook command run under `-X importtime`, outside any agent
    session: the process and the names of the modules it imported."""
    argv = shlex.split(default_program())
    env = {k: v for k, v in os.environ.items() if k not in dispatch.AGENT_COMMAND_VARS}
    proc = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:], "UserPromptSubmit"],
        cwd=repo.path, input=json.dumps(data), capture_output=True, text=True, check=True,
        env={**env, "TASKGATE_DEBUG": "1"},
    )  # fmt: skip
    return proc, {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()}


def test_the_hook_process_records_a_question_without_the_engine(
    states: dict[str, Path], tmp_path: Path
) -> None:
    """The installed hook command, a question in IMPLEMENTATION: recorded, anchored, the
    views left stale (audit accepts it), and the process loads neither the engine nor
    subprocess, dataclasses, typing, hashlib or the json package (nor the engine package: the
    anchor is written by taskgate.anchor_write)."""
    repo = copy_repo(states["IMPLEMENTATION"], tmp_path / "repo")
    heavy = {"json", "sqlite3", "argparse", "typing", "dataclasses", "subprocess", "hashlib",
             "contextlib", "taskgate.engine.core", "taskgate.store.records", "datetime",
             "pathlib", "taskgate.protocol.states_extra", "taskgate.engine.workspace",
             "taskgate.engine", "taskgate.engine.anchor"}  # fmt: skip
    data = {"session_id": "s1", "transcript_path": "", "cwd": str(repo.path),
            "hook_event_name": "UserPromptSubmit",
            "prompt": "What architecture is this?"}  # fmt: skip
    proc, loaded = _hook_with_importtime(repo, data)
    assert "taskgate.hooks.prompt" in loaded
    assert not heavy & loaded, sorted(heavy & loaded)
    answer = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    assert answer.startswith(f"taskgate: task '{TASK}' [QUESTION] State: IMPLEMENTATION.")
    events = _store(repo.path)["events"]
    payload = json.loads(events[-1][4])
    assert (events[-1][3], payload["type"], payload["provenance"]) == (
        "interruption", "QUESTION", "human-prompt",
    )  # fmt: skip
    assert payload["message_hash"] == checkpoints.message_hash("What architecture is this?")
    assert _anchors(repo.path)[0].splitlines()[3:5] == [
        f"seq {events[-1][0]}", f"hash {events[-1][6]}",
    ]  # fmt: skip
    view = json.loads((repo.task_dir(TASK) / "task.json").read_text())
    (row,) = [r for r in _store(repo.path)["tasks"] if r[0] == TASK]
    assert view["_seq"] == row[7] - 1  # stale until the next reader renders it
    checks = {c["id"]: c for c in repo.run("audit", TASK, "--json").json()["tasks"][0]["checks"]}
    assert all(checks[c]["passed"] for c in ("hash-chain", "views", "anchor")), checks
    repo.ok("status", TASK)  # the next reader renders the views
    rendered = json.loads((repo.task_dir(TASK) / "task.json").read_text())
    assert rendered["interruptions"][-1]["type"] == "QUESTION"


@pytest.mark.parametrize("state", ["INIT", "REQUIREMENTS", "IMPLEMENTATION"])
def test_a_prompt_outside_a_checkpoint_is_judged_without_re_or_enum(
    states: dict[str, Path], tmp_path: Path, state: str
) -> None:
    """Issue 18, fifth pass: outside a checkpoint R-INT-03's keywords are matched with str
    methods (protocol/messages._Words) and mid-work words holding none of the words a change
    request needs (messages._may_request) are not judged at the change review, so the hook
    process never imports `re` (nor `sre`'s parser and compiler); the verdict is taken with
    plain str values (messages.judge_plain), so it imports no `enum` (with functools,
    collections, types), no taskgate.enum_lite and no protocol/states; from the third prompt
    on, no zlib (the anchor's commits in zlib's stored form); each prompt is still recorded
    as the engine would record it."""
    repo = copy_repo(states[state], tmp_path / "repo")
    sent = {"What is this?": "QUESTION", "where are we": "STATUS_REQUEST",
            "please /audit-session": "AUDIT", "ok thanks": "OTHER",
            "keep going?": "QUESTION"}  # fmt: skip
    if state == "IMPLEMENTATION":  # mid-work words holding an edit verb ("keep") need `re`
        del sent["keep going?"]
    for at, (text, kind) in enumerate(sent.items()):
        data = {"session_id": "s1", "transcript_path": "", "cwd": str(repo.path),
                "hook_event_name": "UserPromptSubmit", "prompt": text}  # fmt: skip
        proc, loaded = _hook_with_importtime(repo, data)
        assert "taskgate.protocol.messages" in loaded
        unwanted = {"re", "_sre", "re._compiler", "re._parser", "enum", "functools",
                    "collections", "types", "taskgate.enum_lite", "taskgate.protocol.states",
                    "taskgate.hooks.policy", "__future__"}  # fmt: skip
        if at >= 2:  # git wrote the first anchor (compressed), the hook the next in stored form
            unwanted.add("zlib")  # taskgate.looseobject: the parent read without it
        assert not unwanted & loaded, (text, sorted(unwanted & loaded))
        answer = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
        assert answer.startswith(f"taskgate: task '{TASK}' [{kind}] State: {state}."), answer
        payload = json.loads(_store(repo.path)["events"][-1][4])
        assert (payload["type"], payload["provenance"]) == (kind, "human-prompt")


def test_an_edited_stale_view_is_still_reported(states: dict[str, Path], tmp_path: Path) -> None:
    """Audit accepts a task.json behind by the prompt's interruption, not one whose
    interruption log was rewritten."""
    repo = copy_repo(states["IMPLEMENTATION"], tmp_path / "repo")
    view = repo.task_dir(TASK) / "task.json"
    data = {"session_id": "s1", "transcript_path": "", "cwd": str(repo.path),
            "hook_event_name": "UserPromptSubmit", "prompt": "how is it going?"}  # fmt: skip
    argv = shlex.split(default_program())
    env = {k: v for k, v in os.environ.items() if k not in dispatch.AGENT_COMMAND_VARS}
    for _ in range(2):
        subprocess.run([*argv, "UserPromptSubmit"], cwd=repo.path, input=json.dumps(data),
                       capture_output=True, text=True, check=True, env=env)  # fmt: skip
    stale = json.loads(view.read_text())
    assert len(stale["interruptions"]) < 2  # not rendered by the hook
    checks = {c["id"]: c for c in repo.run("audit", TASK, "--json").json()["tasks"][0]["checks"]}
    assert checks["views"]["passed"], checks["views"]
    view.write_text(json.dumps({**stale, "interruptions": [{"type": "X", "timestamp": NOW}]}))
    checks = {c["id"]: c for c in repo.run("audit", TASK, "--json").json()["tasks"][0]["checks"]}
    assert not checks["views"]["passed"]


def test_the_constants_agree_with_the_engine() -> None:
    assert prompt.HUMAN_PROMPT == checkpoints.HUMAN_PROMPT
    assert prompt.MAX_MESSAGE_CHARS == conversation.MAX_MESSAGE_CHARS
    from taskgate.protocol.states import State

    assert {s.value for s in State} == prompt.STATE_NAMES


@given(st.text(max_size=40))
def test_the_message_hash_is_the_engines(text: str) -> None:
    if text:
        assert canon.sha256_hex(text.encode("utf-8")) == checkpoints.message_hash(text)


# -- the anchor without rev-parse ------------------------------------------------------------


def _write(repo: Repo, seq: int) -> bool:
    return anchor.write(repo.path, repo.path / ".git", TASK, seq, f"{seq:064x}", NOW)


def _parents(repo: Repo) -> list[str]:
    lines = git(repo.path, "log", "--format=%H %P", anchor.ref(TASK)).splitlines()
    return [line.partition(" ")[2].strip() for line in lines]


def test_anchors_chain_through_loose_and_packed_refs(repo: Repo) -> None:
    assert _write(repo, 1)  # the first: rev-parse finds nothing, mktree
    assert _write(repo, 2)  # read from the loose ref file
    git(repo.path, "pack-refs", "--all")  # now only in packed-refs: rev-parse reads it
    assert not (repo.path / ".git" / anchor.ref(TASK)).exists()
    assert _write(repo, 3)
    assert _write(repo, 4)
    parents = _parents(repo)
    assert len(parents) == 4 and parents[-1] == ""
    assert all(len(p.split()) == 1 for p in parents[:-1])
    assert [m.splitlines()[3] for m in _anchors(repo.path)] == [f"seq {i}" for i in (4, 3, 2, 1)]
    assert git(repo.path, "fsck", "--no-dangling").strip() == ""


def test_an_anchor_ref_that_moved_or_names_no_commit_is_left_alone(repo: Repo) -> None:
    assert _write(repo, 1)
    tree = git(repo.path, "rev-parse", "HEAD^{tree}")
    loose = repo.path / ".git" / anchor.ref(TASK)
    loose.write_text(tree + "\n")  # not a commit: commit-tree -p refuses it
    assert not _write(repo, 2)
    assert loose.read_text().strip() == tree
    loose.write_text("garbage\n")  # no object id: rev-parse decides (it finds none)
    assert not _write(repo, 3)
    assert loose.read_text() == "garbage\n"


def _invoked(engine: Any, record: dict[str, Any], tx: Any, snap: Any) -> None:
    engine.event(tx, TASK, "agent_invoked", record)


def test_an_open_invocation_leaves_the_prompt_to_the_engine(
    states: dict[str, Path],
    tmp_path: Path,
    both: Callable[[Path, Path, str], tuple[str, str, bool]],
) -> None:
    """The engine's step first closes invocations whose process is gone (issue 16): with one
    open, the path without the engine steps aside and both paths record the same."""
    from taskgate.engine.core import Engine
    from taskgate.engine.workspace import find_workspace

    dead = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True)
    pid = int(dead.stdout)
    pair = []
    for name in ("quick", "engine"):
        repo = copy_repo(states["IMPLEMENTATION"], tmp_path / name).path
        engine = Engine(find_workspace(repo), session_id="s1")
        record = {"agent": "quality", "mode": "implementation", "pid": pid,
                  "pid_started": "1", "host": engine.host}  # fmt: skip
        try:
            engine.step(TASK, partial(_invoked, engine, record))
        finally:
            engine.close()
        pair.append(repo)
    fast, slow, taken = both(pair[0], pair[1], "what is the status?")
    assert not taken and fast == slow
    assert _state(pair[0]) == _state(pair[1])
    kinds = [row[3] for row in _store(pair[1])["events"][-2:]]
    assert kinds == ["agent_completed", "interruption"]


def _pre_tool_use(repo: Path) -> None:
    """The session's first guarded call: PreToolUse leaves its effect-check baseline."""
    data = {"session_id": "s1", "transcript_path": "", "cwd": str(repo),
            "hook_event_name": "PreToolUse", "tool_name": "Bash",
            "tool_input": {"command": "git status"}}  # fmt: skip
    assert dispatch.run_hook(["PreToolUse"], io.StringIO(json.dumps(data)), io.StringIO()) == 0


@pytest.mark.parametrize("changed", [False, True])
def test_the_effect_check_runs_first_as_in_the_engines_step(
    states: dict[str, Path],
    tmp_path: Path,
    both: Callable[[Path, Path, str], tuple[str, str, bool]],
    changed: bool,
) -> None:
    """A watched session (IMPLEMENTATION: its main agent may not write): a change nobody may
    make is quarantined by the engine's step before the prompt is recorded, so the path
    without the engine steps aside; with nothing changed it records the prompt and takes
    the baseline again, as the step's after_step does."""
    pair = [copy_repo(states["IMPLEMENTATION"], tmp_path / n).path for n in ("quick", "engine")]
    for repo in pair:
        _pre_tool_use(repo)
        base = json.loads((repo / ".taskgate" / "effects" / "s1.json").read_text())
        assert base["guarded"]
        if changed:
            (repo / ".taskgate" / "tasks" / TASK / "code" / "sneaky.py").write_text("x = 1\n")
        os.utime(repo / ".taskgate" / "effects" / "s1.json", ns=(0, 0))
    fast, slow, taken = both(pair[0], pair[1], "what is the status?")
    assert taken is not changed and fast == slow
    if changed:  # both took the engine's path; the quarantine's commit ids differ by time
        kinds = [[row[3] for row in _store(repo)["events"]] for repo in pair]
        assert kinds[0] == kinds[1] and kinds[0][-2:] == ["effect_violation", "interruption"], kinds
    else:
        assert _state(pair[0]) == _state(pair[1])
    for repo in pair:
        base = json.loads((repo / ".taskgate" / "effects" / "s1.json").read_text())
        assert base["guarded"] and base["task"] == TASK
        assert (repo / ".taskgate" / "effects" / "s1.json").stat().st_mtime_ns > 0  # taken again


_EVENTS = st.lists(
    st.sampled_from(
        [
            ("presentation", {"kind": "plan"}),
            ("presentation", {"kind": "changes"}),
            ("transition", {"to": "SYNTHESIS"}),
            ("transition", {"to": "AWAITING_USER_APPROVAL"}),
            ("transition", {"to": "IMPLEMENTATION"}),
            ("agent_added", {"agent": "x"}),
            ("change_request", {"kind": "plan"}),
            ("change_request", {"kind": "changes"}),
            ("interruption", {"type": "QUESTION"}),
            ("tool_usage", {"file_path": "a"}),
        ]
    ),
    max_size=7,
)


@pytest.fixture(scope="module")
def scratch_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with pytest.MonkeyPatch.context() as mp:
        home = tmp_path_factory.mktemp("home")
        mp.setenv("HOME", str(home))
        (home / ".gitconfig").write_text("[user]\n\tname = T\n\temail = t@example.com\n")
        repo = make_repo(tmp_path_factory.mktemp("store") / "repo")
        repo.ok("start", TASK)
        yield repo.path / ".taskgate" / "state.db"


@settings(max_examples=300, deadline=None)
@given(_EVENTS, st.booleans())
@example([("presentation", {"kind": "plan"}), ("transition", {"to": "SYNTHESIS"})], True)
@example([("presentation", {"kind": "plan"}), ("agent_added", {"agent": "x"})], True)
@example([("presentation", {"kind": "changes"}), ("agent_added", {"agent": "x"})], True)
@example([("presentation", {"kind": "changes"}), ("change_request", {"kind": "changes"})], True)
@example([("presentation", {"kind": "plan"}), ("change_request", {"kind": "changes"})], True)
@example([("presentation", {"kind": "changes"}),
          ("transition", {"to": "AWAITING_USER_APPROVAL"})], True)  # fmt: skip
@example([("presentation", {"kind": "plan"})], False)
def test_the_presentation_in_force_is_read_as_the_engine_reads_it(
    scratch_store: Path, events: list[tuple[str, dict[str, str]]], rows: bool
) -> None:
    """hooks/prompt._presented against engine/checkpoints.current_presentation on the same
    events (a presentation row for each kind, or none)."""
    from taskgate.hooks.jsonio import loads
    from taskgate.store.sqlite import SqliteStore

    conn = sqlite3.connect(scratch_store)
    try:
        conn.execute("DELETE FROM events WHERE task = ?", (TASK,))
        conn.execute("DELETE FROM presentations WHERE task = ?", (TASK,))
        for kind, payload in events:
            row = (TASK, NOW, kind, json.dumps(payload))
            conn.execute("INSERT INTO events (task, at, kind, payload, prev_hash, hash) "
                         "VALUES (?, ?, ?, ?, '', '')", row)  # fmt: skip
        if rows:
            for kind in ("plan", "changes"):
                conn.execute("INSERT INTO presentations (task, kind, bound_to, at) "
                             "VALUES (?, ?, 'x', ?)", (TASK, kind, NOW))  # fmt: skip
        conn.commit()
        store = SqliteStore(scratch_store)
        try:
            with store.read() as tx:
                snap = tx.snapshot(TASK)
        finally:
            store.close()
        assert snap is not None
        for kind in ("plan", "changes"):
            engine = checkpoints.current_presentation(snap, kind) is not None
            assert prompt._presented(conn, TASK, kind, loads) == engine, (kind, events)
    finally:
        conn.close()


def test_a_task_name_the_engine_refuses_is_left_to_it(
    states: dict[str, Path],
    tmp_path: Path,
    both: Callable[[Path, Path, str], tuple[str, str, bool]],
) -> None:
    """A task row whose name is no valid task name (a store edited behind taskgate's back):
    the engine's step refuses it before any path or ref is made from it; so does this path."""
    pair = [copy_repo(states["IMPLEMENTATION"], tmp_path / n).path for n in ("quick", "engine")]
    for repo in pair:
        conn = sqlite3.connect(repo / ".taskgate" / "state.db")
        conn.execute("PRAGMA foreign_keys=OFF")
        for table in ("tasks", "events", "transitions", "agents", "presentations",
                      "approvals", "validations", "verdicts"):  # fmt: skip
            column = "name" if table == "tasks" else "task"
            conn.execute(f"UPDATE {table} SET {column} = '../x' WHERE {column} = ?", (TASK,))
        conn.commit()
        conn.close()
    fast, slow, taken = both(pair[0], pair[1], "what is the status?")
    assert not taken and fast == slow
    assert _store(pair[0]) == _store(pair[1])
    assert not (pair[0] / ".git" / "refs" / "taskgate" / "x").exists()


def test_a_symbolic_anchor_ref_is_replaced_not_followed(repo: Repo) -> None:
    """An anchor ref made symbolic (to main) behind taskgate's back: the next anchor replaces
    the ref itself and main stays where it was."""
    main = git(repo.path, "rev-parse", "main")
    git(repo.path, "symbolic-ref", anchor.ref(TASK), "refs/heads/main")
    assert _write(repo, 1)
    assert git(repo.path, "rev-parse", "main") == main
    assert git(repo.path, "rev-parse", anchor.ref(TASK) + "^") == main
    loose = (repo.path / ".git" / anchor.ref(TASK)).read_text()
    assert not loose.startswith("ref:")
