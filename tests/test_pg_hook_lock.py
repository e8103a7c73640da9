"""A hook that writes to a PostgreSQL store gives up on a held writer lock within its bound.

Claude Code cancels a command hook after 30 s and carries on as if it never ran. The hooks
that write through the engine (UserPromptSubmit, PostToolUse, Stop, SessionEnd on a
PostgreSQL workspace) waited for the store's writer lock as long as a command does,
TASKGATE_LOCK_TIMEOUT (60 s): held by a long command, the hook was killed and its event lost
without a word. A hook's waits now share one budget, TASKGATE_PG_HOOK_WAIT (store/pg_wait.py),
and a hook that gives up says on stderr what it waited for, how long and what to do.

Against a real server (tests/pgserver.py): the test holds the writer lock from its own
connection and runs the installed hook program as Claude Code runs it (and `taskgate --repo X
hook EVENT`, which must be recognised as a hook too), with the 30 s Claude allows as the
subprocess's timeout; the store must be exactly as before, and the same event is recorded
once the lock is free."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

import pgserver
from conftest import SRC, Repo, make_repo
from taskgate.hooks import codex_install
from taskgate.hooks.install import default_program, hook_command
from taskgate.store import pg_wait
from taskgate.store.postgres import WRITER_LOCK
from test_pg_wait import hold, limited_database, release
from test_sqlite_hook_lock import event_input

TASK = "add-login"
CLAUDE_HOOK_TIMEOUT = 30  # seconds: Claude Code cancels a command hook after this
BOUND = 2.0  # TASKGATE_PG_HOOK_WAIT in these tests
# What a command would wait; without a hook bound the hook would wait this long and be killed.
ENV = {pg_wait.HOOK_ENV: f"{BOUND:g}", "TASKGATE_LOCK_TIMEOUT": "100"}


def store_state(url: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Every task row (name, session, released, seq) and every event (task, kind, hash)."""
    with psycopg.connect(url) as conn:
        tasks = conn.execute(
            "SELECT name, session_id, lock_released_at, seq FROM tasks ORDER BY name"
        ).fetchall()
        events = conn.execute("SELECT task, kind, hash FROM events ORDER BY seq").fetchall()
    return tasks, events


def hold_writer_lock(url: str) -> psycopg.Connection[Any]:
    """Another connection holding the store's writer lock (as a long command would)."""
    holder = psycopg.connect(url)  # not autocommit: the lock lasts until the rollback
    holder.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK,))
    return holder


def run_hook(
    repo: Repo, how: str, event: str, data: dict[str, Any], bound: float = BOUND
) -> subprocess.Popen[str]:
    """The hook as Claude Code runs it (the installed program through a shell), or the console
    command with global options before `hook`."""
    env = {k: v for k, v in os.environ.items() if k != "TASKGATE_SESSION"}
    env.update(ENV, PYTHONPATH=str(SRC))
    env[pg_wait.HOOK_ENV] = f"{bound:g}"
    if how == "installed":
        argv = ["/bin/sh", "-c", hook_command(default_program(), event)]
    elif how == "codex":  # `hooks install --client codex`: Codex also cancels a hook after 30 s
        argv = ["/bin/sh", "-c", hook_command(codex_install.default_program(), event)]
    else:  # `taskgate --repo X hook EVENT`, `taskgate --session S hook EVENT`
        option = ["--repo", str(repo.path)] if how == "--repo" else ["--session=s1"]
        argv = [sys.executable, "-m", "taskgate", *option, "hook", event]
    proc = subprocess.Popen(argv, cwd=repo.path, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(data))
    proc.stdin.close()
    proc.stdin = None  # communicate() must not flush it
    return proc


def within_claudes_timeout(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    """(code, stdout, stderr); fails when the hook outlives the 30 s Claude Code gives it."""
    try:
        out, err = proc.communicate(timeout=CLAUDE_HOOK_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"the hook ran past Claude Code's {CLAUDE_HOOK_TIMEOUT} s") from None
    return proc.returncode, out, err


@pytest.mark.parametrize(
    ("how", "event"),
    [
        ("installed", "UserPromptSubmit"),
        ("installed", "PostToolUse"),
        ("installed", "SessionEnd"),
        ("--repo", "UserPromptSubmit"),
        ("--session", "PostToolUse"),
        ("codex", "UserPromptSubmit"),
        ("codex", "PostToolUse"),
    ],
)
def test_a_hook_gives_up_on_a_held_writer_lock_within_its_bound_and_writes_nothing(
    pg: pgserver.PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str, event: str
) -> None:
    url = pg.fresh_database()
    monkeypatch.setenv("TASKGATE_DATABASE_URL", url)
    repo = make_repo(tmp_path / "repo")
    repo.ok("start", TASK)
    data = event_input(repo, event)
    before = store_state(url)
    holder = hold_writer_lock(url)
    try:
        code, out, err = within_claudes_timeout(run_hook(repo, how, event, data))
        assert store_state(url) == before  # nothing half-written: not one event, no task change
    finally:
        holder.rollback()
        holder.close()
    # The documented answer of an event that guards nothing: exit 0, the session goes on; the
    # reason on stderr, saying what it waited for, for how long at most, and what to do.
    assert code == 0, (out, err)
    gave_up = [line for line in err.splitlines() if "gave up waiting for the writer lock" in line]
    assert len(gave_up) == 1, err
    assert pg_wait.HOOK_ENV in gave_up[0] and "was not recorded" in gave_up[0], gave_up
    waited = float(re.findall(r"for more than ([0-9.]+) s", gave_up[0])[0])
    assert waited <= BOUND  # the lock wait stayed within the hook's budget
    assert "hint: " in err and "pg_stat_activity" in err and "at most 20 s" in err, err
    assert "TASKGATE_LOCK_TIMEOUT" not in err  # not the command's bound
    if event == "UserPromptSubmit":  # Claude is told too (additionalContext)
        context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
        assert "did not record this UserPromptSubmit" in context and "writer lock" in context
        assert "taskgate recover" not in context  # nothing to repair: only to say it again

    # The same event with the lock free is recorded: the one above really was lost, and said so.
    code, out, err = within_claudes_timeout(run_hook(repo, how, event, data))
    assert code == 0 and "writer lock" not in err, (out, err)
    after = store_state(url)
    assert len(after[1]) > len(before[1]) and after[1][: len(before[1])] == before[1]
    audit = repo.run("audit", TASK)
    assert audit.code == 0, audit.out + audit.err


def test_pretooluse_does_not_wait_for_the_writer_lock_and_still_guards(
    pg: pgserver.PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PreToolUse reads the store without the writer lock: a held lock neither delays its
    answer nor opens the guard (fail closed, R-REC-14, is pg_wait's for an unreachable store)."""
    url = pg.fresh_database()
    monkeypatch.setenv("TASKGATE_DATABASE_URL", url)
    repo = make_repo(tmp_path / "repo")
    repo.ok("start", TASK)
    target = repo.worktree(TASK) / "src" / "login.py"
    before = store_state(url)
    holder = hold_writer_lock(url)
    try:
        answers = {}
        for session in ("s1", "s2"):
            data = {
                "hook_event_name": "PreToolUse", "session_id": session, "cwd": str(repo.path),
                "tool_name": "Write", "tool_input": {"file_path": str(target), "content": "x\n"},
            }  # fmt: skip
            code, out, err = within_claudes_timeout(run_hook(repo, "installed", "PreToolUse", data))
            assert code == 0 and "writer lock" not in err, (out, err)
            answers[session] = (
                json.loads(out)["hookSpecificOutput"]["permissionDecision"] if out.strip() else ""
            )
    finally:
        holder.rollback()
        holder.close()
    assert answers == {"s1": "", "s2": "deny"}  # the owner's write goes on; another's is denied
    assert store_state(url) == before
    assert not target.exists()


def test_a_hooks_connection_wait_and_lock_wait_share_one_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a hook waited for a connection is taken from what it may wait for the lock, so the
    two together stay within TASKGATE_PG_HOOK_WAIT (the 30 s Claude allows is not split)."""
    import _thread

    from taskgate.store import select

    monkeypatch.setenv(pg_wait.HOOK_ENV, "5")
    ident = _thread.get_ident()
    assert not pg_wait.in_hook() and pg_wait.bound(60) == 60
    select.answer_warm(True)  # this thread answers a hook (as serve's hook threads do)
    try:
        assert pg_wait.in_hook() and pg_wait.hook_left() == 5
        pg_wait.spent(3.5)
        assert pg_wait.hook_left() == 1.5 and pg_wait.bound(60) == 1.5
        pg_wait.spent(4)
        assert pg_wait.hook_left() == 0
    finally:
        select.answer_warm(False)
    assert pg_wait._SPENT.get(ident) is None  # the next request's hook has the whole budget
    pg_wait.spent(10)  # outside a hook: nothing counted
    assert pg_wait._SPENT.get(ident) is None


def test_a_hook_that_waited_to_connect_waits_only_the_rest_for_the_lock(
    pg: pgserver.PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server is full when the hook starts (it waits for a connection), then the writer
    lock is held: what it waits for the lock is what the connection left of its budget, so its
    waits together stay within TASKGATE_PG_HOOK_WAIT (each alone within it is not enough: 20 s
    for each would outlast Claude Code's 30 s)."""
    url, admin = limited_database(pg)
    monkeypatch.setenv("TASKGATE_DATABASE_URL", url)
    repo = make_repo(tmp_path / "repo")
    repo.ok("start", TASK)
    data = event_input(repo, "UserPromptSubmit")
    before = store_state(admin)
    holder = hold_writer_lock(admin)  # the superuser: outside the role's connection limit
    held = hold(url)
    try:
        proc = run_hook(repo, "installed", "UserPromptSubmit", data, bound=4)
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert "is full" in first and "waiting up to 4 s" in first, first
        time.sleep(1.5)  # part of the budget goes to the connection
        release(held)
        code, out, err = within_claudes_timeout(proc)
        assert store_state(admin) == before
    finally:
        release(held)
        holder.rollback()
        holder.close()
    assert code == 0, (out, err)
    connected = [float(x) for x in re.findall(r"after waiting ([0-9.]+) s", err)]
    locked = [float(x) for x in re.findall(r"writer lock .* for more than ([0-9.]+) s", err)]
    assert connected and locked, err
    assert sum(connected) >= 1.5 - 0.1  # it did wait to connect
    assert sum(connected) + locked[0] <= 4 + 0.1  # printed to 0.1 s


def test_the_migrations_writer_lock_is_bounded_too(
    pg: pgserver.PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store that still needs its migrations takes the writer lock to apply them; that wait
    had no lock_timeout at all (a command, or a hook, waited as long as the holder). Now a
    command waits TASKGATE_LOCK_TIMEOUT and a hook its budget; nothing is created meanwhile."""
    url = pg.fresh_database()
    monkeypatch.setenv("TASKGATE_DATABASE_URL", url)
    repo = make_repo(tmp_path / "repo")
    empty = pg.fresh_database()  # the workspace's database, never opened: no tables yet
    monkeypatch.setenv("TASKGATE_DATABASE_URL", empty)
    holder = hold_writer_lock(empty)
    try:
        env = {k: v for k, v in os.environ.items() if k != "TASKGATE_SESSION"}
        env.update(PYTHONPATH=str(SRC), TASKGATE_LOCK_TIMEOUT="2")
        try:
            done = subprocess.run([sys.executable, "-m", "taskgate", "status"], cwd=repo.path,
                                  env=env, capture_output=True, text=True,
                                  timeout=CLAUDE_HOOK_TIMEOUT)  # fmt: skip
        except subprocess.TimeoutExpired:
            raise AssertionError("the command waited for the migrations' lock unbounded") from None
        assert done.returncode == 6, done  # locked
        assert "writer lock" in done.stderr and "for more than 2 s" in done.stderr, done.stderr
        code, out, err = within_claudes_timeout(
            run_hook(repo, "installed", "UserPromptSubmit", event_input(repo, "UserPromptSubmit"))
        )
        assert code == 0 and "gave up waiting for the writer lock" in err, (out, err)
        with psycopg.connect(empty) as conn:
            tables = conn.execute(
                "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'public'"
            ).fetchone()
        assert tables == (0,)  # nothing created while it waited
    finally:
        holder.rollback()
        holder.close()


def test_a_hooks_connection_attempt_gives_up_sooner(
    pg: pgserver.PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One attempt that gets no answer lasts libpq's connect_timeout: 10 s for a command, 5 s
    in a hook, so the hook's budget (at most 20 s) plus one such attempt stays under Claude
    Code's 30 s. Read from the open connection's own parameters."""
    from taskgate.store import select
    from taskgate.store.postgres import HOOK_CONNECT_TIMEOUT, PgStore

    url = pg.fresh_database()
    command = PgStore(url, tmp_path / "a")
    try:
        assert command._conn.info.get_parameters()["connect_timeout"] == "10"
    finally:
        command.close()
    select.answer_warm(True)  # this thread answers a hook
    try:
        in_hook = PgStore(url, tmp_path / "b")
    finally:
        select.answer_warm(False)
    try:
        params = in_hook._conn.info.get_parameters()
        assert params["connect_timeout"] == str(HOOK_CONNECT_TIMEOUT) == "5"
    finally:
        in_hook.close()
