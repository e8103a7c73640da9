"""A hook on the default SQLite store gives up on a held write lock within its budget.

Claude Code cancels a command hook after 30 s and carries on as if it never ran. On SQLite a
hook waited for the store's write lock up to TASKGATE_LOCK_TIMEOUT (60 s) in the fast path
(store/hook_tx.HookTx) and then as long again in the engine's path it hands over to
(SqliteStore): a process holding the lock longer (stopped, hung, a long `recover --rebuild`)
had the hook killed and its event lost without a word. Both waits now take their time from
the hook's one budget (TASKGATE_PG_HOOK_WAIT, store/pg_wait.py), and a hook that gives up says
on stderr what it waited for, how long, and what to do.

Real processes: another process holds the write lock (BEGIN IMMEDIATE) while the installed
hook program runs as Claude Code runs it (and `taskgate --repo X hook EVENT`, the Codex hook
program), with the 30 s Claude allows as the subprocess's timeout; the store must be exactly
as before, and the same event is recorded once the lock is free (`taskgate audit` passes)."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import SRC, Repo, make_repo
from taskgate.errors import Locked
from taskgate.hooks import codex_install
from taskgate.hooks.install import default_program, hook_command
from taskgate.store import hook_tx, pg_wait
from taskgate.store.sqlite import SqliteStore

TASK = "add-login"
CLAUDE_HOOK_TIMEOUT = 30  # seconds: Claude Code cancels a command hook after this
BOUND = 2.0  # TASKGATE_PG_HOOK_WAIT in these tests
# What a command waits; without the hook's budget the hook waits this long (twice) and is killed.
ENV = {pg_wait.HOOK_ENV: f"{BOUND:g}", "TASKGATE_LOCK_TIMEOUT": "100"}

HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
sys.stdin.read()
conn.execute("ROLLBACK")
"""


def db_path(repo: Repo) -> Path:
    return repo.path / ".taskgate" / "state.db"


def store_state(repo: Repo) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Every task row (name, session, released, seq, updated) and every event (task, kind, hash)."""
    conn = sqlite3.connect(f"file:{db_path(repo)}?mode=ro", uri=True)
    try:
        tasks = conn.execute(
            "SELECT name, session_id, lock_released_at, seq, updated_at FROM tasks ORDER BY name"
        ).fetchall()
        events = conn.execute("SELECT task, kind, hash FROM events ORDER BY seq").fetchall()
    finally:
        conn.close()
    return tasks, events


def hold_write_lock(repo: Repo) -> subprocess.Popen[str]:
    """Another process holding the store's write lock (as a stopped or long command would),
    until its stdin is closed."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(db_path(repo))],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def release(holder: subprocess.Popen[str]) -> None:
    if holder.stdin is not None and not holder.stdin.closed:
        holder.stdin.close()
    holder.wait(timeout=30)


def event_input(repo: Repo, event: str, session: str = "s1") -> dict[str, Any]:
    base = {"hook_event_name": event, "session_id": session, "cwd": str(repo.path)}
    target = repo.worktree(TASK) / "src" / "login.py"
    if event == "UserPromptSubmit":
        return base | {"prompt": "status please"}
    if event == "PostToolUse":
        return base | {
            "tool_name": "Edit",
            "tool_input": {"file_path": str(target), "old_string": "a", "new_string": "b"},
            "tool_response": {"success": True},
        }
    if event == "PreToolUse":
        return base | {"tool_name": "Write",
                       "tool_input": {"file_path": str(target), "content": "x\n"}}  # fmt: skip
    if event == "SessionEnd":
        return base | {"reason": "exit"}
    if event == "SubagentStop":
        return base | {"stop_hook_active": False, "agent_type": "reviewer", "agent_id": "a1"}
    raise AssertionError(event)


def run_hook(repo: Repo, how: str, event: str, data: dict[str, Any]) -> tuple[int, str, str]:
    """(code, stdout, stderr) of the hook as Claude Code runs it (the installed program through
    a shell), Codex's, or the console command with global options before `hook`; fails when
    it outlives the 30 s Claude Code gives it."""
    env = {k: v for k, v in os.environ.items() if k != "TASKGATE_SESSION"}
    env.update(ENV, PYTHONPATH=str(SRC))
    if how == "installed":
        argv = ["/bin/sh", "-c", hook_command(default_program(), event)]
    elif how == "codex":
        argv = ["/bin/sh", "-c", hook_command(codex_install.default_program(), event)]
    else:
        argv = [sys.executable, "-m", "taskgate", "--repo", str(repo.path), "hook", event]
    try:
        done = subprocess.run(argv, cwd=repo.path, env=env, input=json.dumps(data),
                              capture_output=True, text=True,
                              timeout=CLAUDE_HOOK_TIMEOUT)  # fmt: skip
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the hook ran past Claude Code's {CLAUDE_HOOK_TIMEOUT} s") from None
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize(
    ("how", "event"),
    [
        ("installed", "UserPromptSubmit"),
        ("installed", "PostToolUse"),
        ("installed", "SubagentStop"),
        ("installed", "SessionEnd"),
        ("--repo", "UserPromptSubmit"),
        ("codex", "PostToolUse"),
    ],
)
def test_a_hook_gives_up_on_a_held_sqlite_write_lock_within_its_budget_and_writes_nothing(
    tmp_path: Path, how: str, event: str
) -> None:
    repo = make_repo(tmp_path / "repo")
    repo.ok("start", TASK)
    data = event_input(repo, event)
    before = store_state(repo)
    holder = hold_write_lock(repo)
    try:
        code, out, err = run_hook(repo, how, event, data)
        assert store_state(repo) == before  # nothing half-written: not one event, no task change
    finally:
        release(holder)
    # An event that guards nothing: exit 0, the session goes on; the reason on stderr: what it
    # waited for, how long (the fast path's wait and the engine's together), what to do.
    assert code == 0, (out, err)
    gave_up = [line for line in err.splitlines() if "gave up waiting for the writer lock" in line]
    assert len(gave_up) == 1, err
    line = gave_up[0]
    assert pg_wait.HOOK_ENV in line and "was not recorded" in line and "state.db" in line, line
    waited = float(re.findall(r"for more than ([0-9.]+) s", line)[0])
    assert BOUND - 0.1 <= waited <= BOUND + 0.5  # one budget for both waits, not one each
    assert "hint: " in err and "fuser" in err and "at most 20 s" in err, err
    assert "TASKGATE_LOCK_TIMEOUT" not in err  # not the command's bound
    if event == "UserPromptSubmit":  # Claude is told too (additionalContext)
        context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
        assert "did not record this UserPromptSubmit" in context and "write lock" in context
        assert "Run 'taskgate status'" not in context  # nothing to repair: only to say it again

    # The same event with the lock free is recorded: the one above really was lost, and said so.
    code, out, err = run_hook(repo, how, event, data)
    assert code == 0 and "writer lock" not in err, (out, err)
    after = store_state(repo)
    assert len(after[1]) > len(before[1]) and after[1][: len(before[1])] == before[1]
    audit = repo.run("audit", TASK)
    assert audit.code == 0, audit.out + audit.err


def test_pretooluse_needs_no_write_lock_and_still_guards(tmp_path: Path) -> None:
    """PreToolUse reads the store without the write lock: a held lock neither delays its
    answer nor opens the guard (fail closed, R-REC-14)."""
    repo = make_repo(tmp_path / "repo")
    repo.ok("start", TASK)
    target = repo.worktree(TASK) / "src" / "login.py"
    (repo.path / ".taskgate" / "hook-snapshot.json").unlink()  # the store itself is read
    before = store_state(repo)
    holder = hold_write_lock(repo)
    try:
        answers = {}
        for session in ("s1", "s2"):
            data = event_input(repo, "PreToolUse", session)
            code, out, err = run_hook(repo, "installed", "PreToolUse", data)
            assert code == 0 and "writer lock" not in err, (out, err)
            answers[session] = (
                json.loads(out)["hookSpecificOutput"]["permissionDecision"] if out.strip() else ""
            )
    finally:
        release(holder)
    assert answers == {"s1": "", "s2": "deny"}  # the owner's write goes on; another's is denied
    assert store_state(repo) == before
    assert not target.exists()


def test_the_fast_paths_wait_and_the_engines_share_one_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HookTx gives up on the held lock after the hook's budget; the engine's path it hands
    over to (SqliteStore, as engine/core.open_store opens it with TASKGATE_LOCK_TIMEOUT) gets
    only what is left, nothing, and says so; a command still waits its own timeout."""
    import _thread

    from taskgate.store import select

    repo = make_repo(tmp_path / "repo")
    repo.ok("start", TASK)
    monkeypatch.setenv(pg_wait.HOOK_ENV, "1.5")
    state_dir = str(db_path(repo).parent)
    before = store_state(repo)
    holder = hold_write_lock(repo)
    select.answer_warm(True)  # this thread answers a hook (as serve's hook threads do)
    try:
        assert pg_wait.in_hook() and pg_wait.hook_spent() == 0
        with pytest.raises(hook_tx.Unusable, match="write lock"), hook_tx.HookTx(state_dir):
            raise AssertionError("the lock is held")
        assert pg_wait.hook_spent() >= 1.5 and pg_wait.hook_left() < 0.01
        spent = pg_wait.hook_spent()
        with pytest.raises(Locked, match="was not recorded") as caught:
            SqliteStore(db_path(repo), timeout=100)  # _migrate's BEGIN IMMEDIATE
        assert "TASKGATE_PG_HOOK_WAIT = 1.5 s" in str(caught.value)
        assert pg_wait.hook_spent() - spent < 0.5  # not another budget (1.5 s), nor 100 s
    finally:
        select.answer_warm(False)
        release(holder)
    assert pg_wait._SPENT.get(_thread.get_ident()) is None
    assert store_state(repo) == before
    # Outside a hook: the caller's timeout, nothing counted, the lock taken once it is free.
    assert not pg_wait.in_hook()
    with hook_tx.HookTx(state_dir, timeout=5) as tx:
        assert tx._wait == 5
    store = SqliteStore(db_path(repo), timeout=100)
    assert store._lock_wait() == 100
    store.close()


@pytest.mark.parametrize("lean", [True, False])
def test_serves_http_hook_gives_up_within_the_budget_and_records_once_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], lean: bool
) -> None:
    """`taskgate serve`'s HTTP hooks (its worker threads: the lean path and Starlette's route)
    answer from the same store: a held write lock is waited for within the hook budget, not
    TASKGATE_LOCK_TIMEOUT, nothing is written, and the same call is recorded once it is free."""
    from taskgate.server import hookdoor
    from test_hookdoor_fast import SECRET, answer, client

    monkeypatch.setenv(pg_wait.HOOK_ENV, f"{BOUND:g}")
    monkeypatch.setenv("TASKGATE_LOCK_TIMEOUT", "100")
    repo = make_repo(tmp_path / "repo")
    repo.ok("start", TASK)
    body = json.dumps(event_input(repo, "PostToolUse")).encode()
    before = store_state(repo)
    with client(repo.path, tmp_path / "st", lean) as c:
        holder = hold_write_lock(repo)
        try:
            status, _, content = answer(c, "POST", "/hooks/PostToolUse", body,
                                        {hookdoor.HEADER: SECRET})  # fmt: skip
            assert store_state(repo) == before
        finally:
            release(holder)
        assert status == 200, content
        err = capfd.readouterr().err
        gave_up = [line for line in err.splitlines() if "gave up waiting for the writer" in line]
        assert len(gave_up) == 1 and pg_wait.HOOK_ENV in gave_up[0], err
        waited = float(re.findall(r"for more than ([0-9.]+) s", gave_up[0])[0])
        assert BOUND - 0.1 <= waited <= BOUND + 0.5
        status, _, content = answer(c, "POST", "/hooks/PostToolUse", body,
                                    {hookdoor.HEADER: SECRET})  # fmt: skip
        assert status == 200, content
    after = store_state(repo)
    assert len(after[1]) > len(before[1]) and after[1][: len(before[1])] == before[1]
    audit = repo.run("audit", TASK)
    assert audit.code == 0, audit.out + audit.err
