"""A team's PostgreSQL server that is full or restarting is waited for a bounded time (issue 20).

Against a real server (tests/pgserver.py), the real CLI and the installed hook program in
subprocesses: 53300 (too many connections, made exact by a role's CONNECTION LIMIT whose
connections the test holds), 57P03 (a server in a smart shutdown, kept there by a connection
the test holds, then restarted), and permanent refusals (a missing database or role, a socket
where nothing listens) that still fail at once (store/pg_wait.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

import pgserver
from conftest import SRC, Repo, Run, make_repo
from taskgate.hooks.install import default_program, hook_command
from taskgate.store import pg_wait, pg_warm
from taskgate.store.postgres import PgStore, StoreUnreachable

TASK = "add-login"
LIMIT = 2
EXIT_ENVIRONMENT = 6


def _dbname(url: str) -> str:
    return url.split("///", 1)[1].split("?", 1)[0]


def limited_database(pg: pgserver.PgServer) -> tuple[str, str]:
    """A fresh database owned by a new role allowed LIMIT connections: (its URL as that role,
    its URL as the superuser, whom no connection limit applies to)."""
    admin = pg.fresh_database()
    role = "r_" + uuid.uuid4().hex[:10]
    with psycopg.connect(pg.url(), autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT {LIMIT}")  # type: ignore[arg-type]
        conn.execute(f"ALTER DATABASE {_dbname(admin)} OWNER TO {role}")  # type: ignore[arg-type]
    return admin.replace(f"user={pgserver.SUPERUSER}", f"user={role}"), admin


def hold(url: str) -> list[psycopg.Connection[Any]]:
    """Every connection the role may have: the next one is refused with 53300."""
    held = [psycopg.connect(url) for _ in range(LIMIT)]
    with pytest.raises(psycopg.OperationalError, match="too many connections for role"):
        psycopg.connect(url)
    return held


def release(held: list[psycopg.Connection[Any]]) -> None:
    for conn in held:
        conn.close()


def cli(repo: Repo, *args: str, env: dict[str, str], session: str = "s1") -> Any:
    full = dict(os.environ, PYTHONPATH=str(SRC), TASKGATE_SESSION=session, **env)
    return subprocess.Popen([sys.executable, "-m", "taskgate", *args], cwd=repo.path, env=full,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def hook(repo: Repo, session: str, path: Path, env: dict[str, str]) -> Any:
    """The installed PreToolUse hook program, started as Claude Code starts it (a shell, no
    TASKGATE_SESSION), for a Write of `path` (tests/test_hooks_dispatch.py's hook)."""
    full = {k: v for k, v in os.environ.items() if k != "TASKGATE_SESSION"}
    full.update(env)
    proc = subprocess.Popen(["/bin/sh", "-c", hook_command(default_program(), "PreToolUse")],
                            cwd=repo.path, env=full, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({
        "hook_event_name": "PreToolUse", "session_id": session, "cwd": str(repo.path),
        "tool_name": "Write", "tool_input": {"file_path": str(path), "content": "x\n"},
    }))  # fmt: skip
    proc.stdin.close()
    proc.stdin = None  # communicate() must not flush it
    return proc


def waiting_line(proc: Any) -> str:
    """The line the process prints when it starts waiting (it blocks until then)."""
    line = str(proc.stderr.readline())
    assert "waiting up to" in line, (line, proc.communicate(timeout=120))
    return line


def finish(proc: Any, first: str = "") -> Run:
    out, err = proc.communicate(timeout=180)
    return Run(proc.returncode, out, first + err)


def decision(run: Run) -> tuple[str, str]:
    assert run.code == 0, run.err
    if not run.out.strip():
        return "allow", ""
    out = json.loads(run.out)["hookSpecificOutput"]
    return out["permissionDecision"], out.get("permissionDecisionReason", "")


def store_rows(admin: str) -> tuple[list[tuple[Any, ...]], int]:
    """(tasks as (name, session, released), number of events), read as the superuser."""
    with psycopg.connect(admin) as conn:
        tasks = conn.execute("SELECT name, session_id, lock_released_at FROM tasks").fetchall()
        events = conn.execute("SELECT COUNT(*) FROM events").fetchone()
    return tasks, int(events[0]) if events else 0


# -- 53300: a full server ----------------------------------------------------------------------


def test_a_full_server_is_waited_for_then_the_command_and_the_hook_succeed(
    pg: pgserver.PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, admin = limited_database(pg)
    monkeypatch.setenv("TASKGATE_DATABASE_URL", url)
    repo = make_repo(tmp_path / "repo")
    held = hold(url)
    proc = cli(repo, "start", TASK, env={"TASKGATE_LOCK_TIMEOUT": "120"})
    first = waiting_line(proc)
    assert "is full (too many connections for role" in first and "up to 120 s" in first
    release(held)
    done = finish(proc, first)
    assert done.code == 0, done.err
    assert "connected to PostgreSQL database" in done.err and "after waiting" in done.err
    tasks, events = store_rows(admin)
    assert tasks == [(TASK, "s1", None)] and events > 0  # the claim is in the store
    assert repo.worktree(TASK).is_dir()

    # The installed hook program: the owner's write is allowed once a connection is free.
    target = repo.worktree(TASK) / "src" / "login.py"
    held = hold(url)
    proc = hook(repo, "s1", target, {pg_wait.HOOK_ENV: "20"})
    first = waiting_line(proc)
    assert "is full" in first and "up to 20 s" in first and pg_wait.HOOK_ENV in first
    release(held)
    answer = finish(proc, first)
    assert decision(answer) == ("allow", ""), answer
    assert "after waiting" in answer.err
    assert decision(finish(hook(repo, "s2", target, {})))[0] == "deny"  # the guard is live
    audit = repo.run("audit", TASK)
    assert audit.code == 0, audit.out + audit.err


def test_a_server_that_stays_full_fails_after_the_bound_with_exit_6_and_nothing_written(
    pg: pgserver.PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, admin = limited_database(pg)
    monkeypatch.setenv("TASKGATE_DATABASE_URL", url)
    repo = make_repo(tmp_path / "repo")
    before = store_rows(admin)
    held = hold(url)
    try:
        bound = 3.0
        began = time.monotonic()
        done = repo.run("start", TASK, env={"TASKGATE_LOCK_TIMEOUT": f"{bound:g}"})
        elapsed = time.monotonic() - began
        assert done.code == EXIT_ENVIRONMENT, done.out + done.err
        assert elapsed >= bound  # it waited the whole bound
        assert "waiting up to 3 s" in done.err and "it stayed full" in done.err
        assert "CONNECTION LIMIT" in done.err and "TASKGATE_LOCK_TIMEOUT" in done.err  # hint
        assert store_rows(admin) == before  # nothing half-written
        assert not repo.task_dir(TASK).exists()

        target = repo.path / "src" / "login.py"
        answer = finish(hook(repo, "s1", target, {pg_wait.HOOK_ENV: "1"}))
        verdict, reason = decision(answer)
        assert verdict == "deny" and "it stayed full" in reason and "R-REC-14" in reason
        assert "waiting up to 1 s" in answer.err
        assert not target.exists()

        # A hook that writes through the engine waits a hook's bound, not the command's:
        # the installed program, and `taskgate hook EVENT`.
        env = {pg_wait.HOOK_ENV: "1", "TASKGATE_LOCK_TIMEOUT": "100"}
        prompt = json.dumps({"hook_event_name": "UserPromptSubmit", "session_id": "s1",
                             "cwd": str(repo.path), "prompt": "status please"})  # fmt: skip
        installed = subprocess.run(
            ["/bin/sh", "-c", hook_command(default_program(), "UserPromptSubmit")],
            cwd=repo.path, env={**os.environ, **env}, input=prompt, capture_output=True,
            text=True, timeout=120,
        )  # fmt: skip
        via_cli = repo.run("hook", "UserPromptSubmit", env=env, stdin=prompt, session=None)
        for err in (installed.stderr, via_cli.err):
            assert "waiting up to 1 s" in err and "it stayed full" in err, err
    finally:
        release(held)
    assert store_rows(admin) == before


def test_a_server_at_max_connections_is_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """'sorry, too many clients already' (53300 at max_connections), from a server of its own
    that allows 4 connections, all held by the test."""
    server = pgserver.start_server()
    try:
        url = server.fresh_database()
        monkeypatch.setenv("TASKGATE_DATABASE_URL", url)
        repo = make_repo(tmp_path / "repo")
        server.stop("fast")
        server.start(max_connections=4)
        held = [psycopg.connect(url) for _ in range(4)]
        with pytest.raises(psycopg.OperationalError, match="sorry, too many clients already"):
            psycopg.connect(url)
        proc = cli(repo, "start", TASK, env={"TASKGATE_LOCK_TIMEOUT": "120"})
        first = waiting_line(proc)
        assert "is full (sorry, too many clients already)" in first
        release(held)
        done = finish(proc, first)
        assert done.code == 0, done.err
        assert store_rows(url)[0] == [(TASK, "s1", None)]
    finally:
        pgserver.remove(server)


def test_migrate_waits_for_a_full_server_too(
    pg: pgserver.PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = limited_database(pg)
    monkeypatch.setenv("TASKGATE_DATABASE_URL", url)
    repo = make_repo(tmp_path / "repo")
    held = hold(url)
    proc = cli(repo, "migrate", "--json", env={"TASKGATE_LOCK_TIMEOUT": "120"}, session="")
    first = waiting_line(proc)
    assert "is full" in first and "up to 120 s" in first
    release(held)
    done = finish(proc, first)
    assert done.code == 0, done.err
    assert json.loads(done.out)["store"] == "postgresql" and "after waiting" in done.err


def test_serves_hook_data_waits_once_for_a_full_server(
    pg: pgserver.PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`taskgate serve`'s PreToolUse data (store/pg_warm.py) waits a hook's bound, once: a
    second wait would outlast the HTTP hook's 10 s."""
    url, _ = limited_database(pg)
    PgStore(url, tmp_path).close()  # the schema, the clock
    monkeypatch.setenv(pg_wait.HOOK_ENV, "2")
    said: list[str] = []
    free_when_waiting: list[list[psycopg.Connection[Any]]] = []

    def say(line: str) -> None:
        said.append(line)
        if "waiting up to" in line:
            for held in free_when_waiting:
                release(held)

    monkeypatch.setattr(pg_wait, "say", say)
    warm = pg_warm.Warm(url)
    held = hold(url)
    try:
        began = time.monotonic()
        with pytest.raises(StoreUnreachable, match="it stayed full"):
            warm.get()
        assert time.monotonic() - began >= 2  # it waited the bound
        assert len([line for line in said if "waiting up to 2 s" in line]) == 1  # once
        free_when_waiting.append(held)  # this time the connections come free while it waits
        assert warm.get()["tasks"] == []
        assert "after waiting" in said[-1]
    finally:
        release(held)
        warm.close()


# -- permanent refusals: never waited for ------------------------------------------------------


@pytest.mark.parametrize("broken", ["database", "role", "socket"])
def test_a_permanent_refusal_fails_at_once(
    pg: pgserver.PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broken: str
) -> None:
    url = pg.fresh_database()
    monkeypatch.setenv("TASKGATE_DATABASE_URL", url)
    repo = make_repo(tmp_path / "repo")
    bad = {
        "database": url.replace(_dbname(url), "no_such_db"),  # 3D000
        "role": url.replace(f"user={pgserver.SUPERUSER}", "user=no_such_role"),  # 28000
        "socket": url.replace(f"port={pg.port}", "port=1"),  # nothing listens
    }[broken]
    bound = 100.0
    env = {"TASKGATE_DATABASE_URL": bad, "TASKGATE_LOCK_TIMEOUT": f"{bound:g}"}
    began = time.monotonic()
    done = repo.run("start", TASK, env=env)
    elapsed = time.monotonic() - began
    assert done.code == EXIT_ENVIRONMENT, done.out + done.err
    assert "waiting" not in done.err and "start PostgreSQL" in done.err
    assert elapsed < bound / 2  # failed at once, not after the bound
    env[pg_wait.HOOK_ENV] = "20"
    began = time.monotonic()
    answer = finish(hook(repo, "s1", repo.path / "x.py", env))
    elapsed = time.monotonic() - began
    verdict, reason = decision(answer)
    assert verdict == "deny" and "waiting" not in answer.err
    # The installed hook runs `python -S` (no psycopg): the reason still names the database.
    assert "StoreUnreachable: cannot reach PostgreSQL database" in reason, reason
    assert elapsed < 20 / 2
    assert store_rows(url) == ([], 0)


# -- 57P03: a server shutting down, then restarted ----------------------------------------------


def _until_refused(url: str, text: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            psycopg.connect(url, connect_timeout=2).close()
        except psycopg.OperationalError as exc:
            if text in str(exc):
                return
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_a_restarting_server_is_waited_for_by_a_command_a_hook_and_a_long_lived_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = pgserver.start_server()  # its own cluster: this test stops and restarts it
    try:
        url = server.fresh_database()
        monkeypatch.setenv("TASKGATE_DATABASE_URL", url)
        repo = make_repo(tmp_path / "repo")
        owner = PgStore(url, tmp_path / "state", timeout=120)  # a long-lived store (serve)
        held = psycopg.connect(url, autocommit=True)  # keeps a smart shutdown going
        stopping = threading.Thread(target=server.stop, args=("smart",))
        stopping.start()
        _until_refused(url, "the database system is shutting down")  # 57P03
        proc = cli(repo, "start", TASK, env={"TASKGATE_LOCK_TIMEOUT": "120"})
        first = waiting_line(proc)
        assert "is starting up or shutting down (the database system is shutting down)" in first
        # The installed hook program waits for the restart too (its bound: a hook's).
        target = repo.path / "src" / "login.py"
        guard = hook(repo, "s1", target, {pg_wait.HOOK_ENV: "20"})
        guard_first = waiting_line(guard)
        assert "the database system is shutting down" in guard_first and "20 s" in guard_first
        # The long-lived store's connection breaks; its reconnect waits the same way.
        said: list[str] = []
        waits = threading.Event()
        monkeypatch.setattr(pg_wait, "say", lambda line: (said.append(line), waits.set()))
        held.execute("SELECT pg_terminate_backend(%s)", (owner._conn.info.backend_pid,))
        outcome: list[BaseException | None] = []

        def reconnect() -> None:
            try:
                with pytest.raises(StoreUnreachable), owner.read() as tx:
                    tx.task(TASK)  # the step the broken connection was in fails (exit 6)
                with owner.read() as tx:  # the next one reconnects, waiting for the server
                    tx.task(TASK)
                outcome.append(None)
            except BaseException as exc:  # asserted below
                outcome.append(exc)

        thread = threading.Thread(target=reconnect)
        thread.start()
        assert waits.wait(60), outcome
        assert "shutting down" in said[0] and "up to 120 s" in said[0]
        held.close()
        stopping.join()
        assert not server.running()
        server.start()
        done = finish(proc, first)
        thread.join(timeout=180)
        answered = finish(guard, guard_first)
        reason = decision(answered)[1]
        assert "after waiting" in answered.err and "R-REC-14" not in reason, reason
        assert done.code == 0, done.err
        assert "after waiting" in done.err
        assert outcome == [None] and "after waiting" in said[-1], (outcome, said)
        tasks, events = store_rows(url)
        assert tasks == [(TASK, "s1", None)] and events > 0
        owner.close()
    finally:
        pgserver.remove(server)


def test_the_refusals_are_classified_from_the_servers_words() -> None:
    """libpq gives a refused login no SQLSTATE: the kinds come from PostgreSQL's messages."""
    failed = 'connection to server on socket "/s/.s.PGSQL.5432" failed: FATAL:  '
    for words, kind in [
        ("sorry, too many clients already", pg_wait.FULL),
        ('too many connections for role "alice"', pg_wait.FULL),
        ('too many connections for database "team"', pg_wait.FULL),
        (
            "remaining connection slots are reserved for roles with the SUPERUSER attribute",
            pg_wait.FULL,
        ),
        ("the database system is starting up", pg_wait.RESTARTING),
        ("the database system is shutting down", pg_wait.RESTARTING),
        ("the database system is not yet accepting connections", pg_wait.RESTARTING),
        ("the database system is in recovery mode", pg_wait.RESTARTING),
        ('password authentication failed for user "alice"', None),  # 28P01
        ('database "team" does not exist', None),  # 3D000
        ('role "alice" does not exist', None),
    ]:
        assert pg_wait.kind_of(RuntimeError(failed + words)) == kind, words
    gone = RuntimeError("failed: No such file or directory\n\tIs the server running locally?")
    assert pg_wait.kind_of(gone) is None  # nothing listens: a stopped server fails at once
    assert pg_wait.kind_of(gone, after=pg_wait.RESTARTING) == pg_wait.RESTARTING  # a restart
    closed = RuntimeError("failed: server closed the connection unexpectedly")
    assert pg_wait.kind_of(closed) is None  # a crash on its own: at once
    assert pg_wait.kind_of(closed, after=pg_wait.RESTARTING) == pg_wait.RESTARTING
    dns = RuntimeError('could not translate host name "db.example" to address')
    assert pg_wait.kind_of(dns, after=pg_wait.RESTARTING) is None


# -- the installed hook (python -S) on a PostgreSQL workspace -----------------------------------


def test_the_installed_hooks_that_write_reach_a_postgresql_store(
    pg: pgserver.PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """hooks/launch.py runs `python -S`, which leaves psycopg (site-packages) off the path; the
    events that write through the engine failed with 'psycopg is not installed' (R-REC-14)."""
    url = pg.fresh_database()
    monkeypatch.setenv("TASKGATE_DATABASE_URL", url)
    repo = make_repo(tmp_path / "repo")
    repo.ok("start", TASK)
    _, before = store_rows(url)
    full = {k: v for k, v in os.environ.items() if k != "TASKGATE_SESSION"}
    for event, extra, said in [
        ("SessionStart", {"source": "startup"}, f"RESUMING TASK: {TASK}"),
        ("UserPromptSubmit", {"prompt": "status please"}, "Status requested"),
    ]:
        done = subprocess.run(["/bin/sh", "-c", hook_command(default_program(), event)],
                              cwd=repo.path, env=full, capture_output=True, text=True,
                              input=json.dumps({"hook_event_name": event, "session_id": "s1",
                                                "cwd": str(repo.path), **extra}),
                              timeout=120)  # fmt: skip
        assert done.returncode == 0 and "psycopg" not in done.stdout + done.stderr, done
        assert said in json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    _, after = store_rows(url)
    assert after > before  # the prompt was recorded in the team's store
