"""The PostgreSQL store (issue 20) against a real PostgreSQL server the session starts itself
(tests/pgserver.py): the interface scenarios of tests/test_store.py rerun on it, the same
hash chain and hook snapshot as SQLite, processes racing across connections, faults."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

import pgserver
from conftest import SRC, Repo, make_repo
from flow import to_requirements
from taskgate.errors import EXIT_ENVIRONMENT, Locked
from taskgate.store import snapshot
from taskgate.store.base import Conflict, Store
from taskgate.store.postgres import PgStore, StoreUnreachable
from taskgate.store.records import AgentRow, ApprovalRow, TaskRow, TransitionRow
from taskgate.store.schema import SCHEMA_VERSION
from taskgate.store.sqlite import SqliteStore

# The interface scenarios of tests/test_store.py run there on both stores (store_kinds.py).


@pytest.fixture
def url(pg: pgserver.PgServer) -> str:
    return pg.fresh_database()


@pytest.fixture
def store(url: str, tmp_path: Path) -> Iterator[PgStore]:
    s = PgStore(url, tmp_path)
    yield s
    s.close()


def row(name: str, session: str = "s1") -> TaskRow:
    return TaskRow(name, "INIT", session, "host", 1, "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z")


def test_schema_is_the_shared_migrations_and_reopen_applies_nothing(
    url: str, tmp_path: Path
) -> None:
    s = PgStore(url, tmp_path)
    assert s.schema_version() == SCHEMA_VERSION
    s.close()
    again = PgStore(url, tmp_path)
    assert again.schema_version() == SCHEMA_VERSION
    with psycopg.connect(url) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM migrations ORDER BY name")]
        index = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'one_lock_per_session'"
        ).fetchone()
    assert names == ["0001_initial"]
    assert index is not None and "WHERE (lock_released_at IS NULL)" in index[0]
    again.close()


def _same_steps(s: Store) -> None:
    """One claim with agents, an approval, a transition and events: what a step writes."""
    with s.write() as tx:
        tx.insert_task(row("t"))
        tx.append_event("t", "claimed", {"session": "s1", "fence": 1}, "2026-01-01T00:00:00Z")
    with s.write() as tx:
        tx.update_task("t", 1, state="CLASSIFIED", required_agents=("rev",))
        tx.put_agent(AgentRow("t", "rev", status="pending", phase="REQUIREMENTS"))
        tx.add_transition(TransitionRow("t", 0, "INIT", "CLASSIFIED", "2026-01-01T00:00:01Z"))
        tx.add_approval(
            ApprovalRow("t", "plan", "h", "2026-01-01T00:00:02Z", "2026-01-01T00:00:03Z", "x")
        )
        tx.append_event("t", "validation", {"responsible": "main"}, "2026-01-01T00:00:04Z")


def test_hash_chain_and_hook_snapshot_are_identical_to_sqlite(
    store: PgStore, tmp_path: Path
) -> None:
    lite_dir = tmp_path / "lite"
    lite_dir.mkdir()
    lite = SqliteStore(lite_dir / "state.db")
    _same_steps(lite)
    _same_steps(store)
    with lite.read() as a, store.read() as b:
        lite_snap, pg_snap = a.snapshot("t"), b.snapshot("t")
    assert lite_snap is not None and pg_snap is not None
    assert [e.hash for e in pg_snap.events] == [e.hash for e in lite_snap.events]
    assert pg_snap == lite_snap  # every row, every field, ids and seqs included
    # The per-machine hook snapshot: written by the write itself, the same bytes as SQLite's.
    pg_file = (tmp_path / snapshot.FILE_NAME).read_text()
    assert pg_file == (lite_dir / snapshot.FILE_NAME).read_text()
    parsed = snapshot.parse(pg_file, json.loads)
    assert parsed is not None
    [entry] = [t for t in parsed["tasks"] if t["session"] is not None]
    assert entry["plan_approved"] is True and entry["main_may_fix"] is True
    assert store.refresh_snapshot() == "unchanged"
    (tmp_path / snapshot.FILE_NAME).write_text('{"format": 1, "tasks": []}\n')
    # Rewritten, but not "replaced": on PostgreSQL another machine's write makes it differ,
    # which is no evidence of a change outside taskgate (no false R-LCK-09 alarm).
    assert store.refresh_snapshot() == "written"
    assert (tmp_path / snapshot.FILE_NAME).read_text() == pg_file
    lite.close()


def test_a_write_that_touches_the_snapshot_drops_it_before_commit(store: PgStore) -> None:
    with store.write() as tx:
        tx.insert_task(row("t"))
    assert store.snapshot_path.exists()
    with pytest.raises(RuntimeError), store.write() as tx:
        tx.update_task("t", 1, state="CLASSIFIED")
        raise RuntimeError("crash")
    with store.read() as tx:
        current = tx.task("t")
    assert current is not None and current.state == "INIT"  # rolled back
    on_disk = snapshot.parse(store.snapshot_path.read_text(), json.loads)
    assert on_disk is not None and on_disk["tasks"][0]["state"] == "INIT"


def test_update_conflict_on_the_partial_index_is_a_conflict(store: PgStore) -> None:
    with store.write() as tx:
        tx.insert_task(row("a"))
        tx.update_task("a", 1, lock_released_at="2026-01-01T00:00:01Z")
        tx.insert_task(row("b"))
    with pytest.raises(Conflict), store.write() as tx:  # re-taking a while holding b
        tx.update_task("a", 2, lock_released_at=None)
    with store.read() as tx:
        a = tx.task("a")
    assert a is not None and a.released and a.seq == 2


# -- processes racing on one database --------------------------------------------------------

_RACER = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from taskgate.store.base import Conflict
    from taskgate.store.postgres import PgStore
    from taskgate.store.records import TaskRow
    url, session, gate, mode = sys.argv[1:5]
    state_dir = Path(sys.argv[5])
    store = PgStore(url, state_dir)
    while not os.path.exists(gate):
        time.sleep(0.005)
    won = []
    if mode == "claim":
        for i in range(10):
            name = f"task-{i}"
            try:
                with store.write() as tx:
                    if tx.active_task_of(session) is not None or tx.task(name) is not None:
                        continue
                    now = "2026-01-01T00:00:00Z"
                    if tx.insert_task(TaskRow(name, "INIT", session, "h-" + session, 1, now, now)):
                        tx.append_event(name, "claimed", {"session": session}, now)
                        won.append(name)
            except Conflict:
                pass
    else:  # take-over: everyone read seq 1 before the gate; one compare-and-swap wins
        try:
            with store.write() as tx:
                tx.update_task("t", 1, session_id=session, fence=2)
                tx.append_event("t", "taken_over", {"session": session, "fence": 2}, "x")
                won.append("t")
        except Conflict:
            pass
    print(",".join(won))
    """
)


def _race(url: str, tmp_path: Path, mode: str, n: int = 30) -> list[tuple[str, str]]:
    gate = tmp_path / "go"
    env = dict(os.environ, PYTHONPATH=str(SRC))
    procs = []
    for i in range(n):
        state = tmp_path / f"machine-{i % 3}-{i}"  # separate hook snapshot dirs
        state.mkdir()
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", _RACER, url, f"s{i}", str(gate), mode, str(state)],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )
        )  # fmt: skip
    gate.write_text("go")
    results = []
    for i, proc in enumerate(procs):
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        results.append((f"s{i}", out.strip()))
    return results


def test_R_LCK_01_thirty_processes_race_for_ten_tasks_one_owner_each(
    store: PgStore, url: str, tmp_path: Path
) -> None:
    results = _race(url, tmp_path, "claim")
    won = {s: w.split(",") for s, w in results if w}
    assert all(len(tasks) == 1 for tasks in won.values()), won  # R-LCK-19: one per session
    claimed = sorted(t for tasks in won.values() for t in tasks)
    assert claimed == sorted(f"task-{i}" for i in range(10)), won  # R-LCK-01: each exactly once
    with store.read() as tx:
        rows = {r.name: r for r in tx.tasks()}
        for name, r in rows.items():
            owner = next(s for s, tasks in won.items() if name in tasks)
            assert r.session_id == owner and r.host == f"h-{owner}"
            events = tx.events(name)
            assert [e.kind for e in events] == ["claimed"]


def test_R_LCK_01_thirty_take_overs_compare_and_swap_one_wins(
    store: PgStore, url: str, tmp_path: Path
) -> None:
    with store.write() as tx:
        tx.insert_task(row("t", "old"))
    results = _race(url, tmp_path, "takeover")
    winners = [s for s, w in results if w == "t"]
    assert len(winners) == 1, results
    with store.read() as tx:
        current = tx.task("t")
        events = tx.events("t")
    assert current is not None and current.session_id == winners[0]
    assert current.fence == 2 and current.seq == 2
    assert [e.kind for e in events] == ["taken_over"]


# -- faults ----------------------------------------------------------------------------------


def test_unreachable_server_is_exit_6_with_a_hint_and_no_password(tmp_path: Path) -> None:
    (tmp_path / "sock").mkdir()
    url = f"postgresql://alice:s3cret-pw@/taskgate?host={tmp_path / 'sock'}&port=5999"
    with pytest.raises(StoreUnreachable) as caught:
        PgStore(url, tmp_path, connect_timeout=2)
    err = caught.value
    assert err.exit_code == EXIT_ENVIRONMENT
    assert "s3cret" not in err.message and "s3cret" not in err.hint
    assert "nothing was changed" in err.message and "start PostgreSQL" in err.hint


def test_writer_lock_timeout_is_locked_not_a_hang(store: PgStore, url: str, tmp_path: Path) -> None:
    other = PgStore(url, tmp_path, timeout=0.2)
    with store.write() as tx:
        tx.insert_task(row("t"))
        with pytest.raises(Locked), other.write():
            pass
    with other.write() as tx:  # the lock is free again once the first writer committed
        assert tx.task("t") is not None
    other.close()


def test_server_stopped_mid_run_then_restarted_nothing_half_written(tmp_path: Path) -> None:
    server = pgserver.start_server()
    try:
        url = server.fresh_database()
        s = PgStore(url, tmp_path)
        with s.write() as tx:
            tx.insert_task(row("t"))
        server.stop("immediate")
        with pytest.raises(StoreUnreachable) as caught, s.write() as tx:
            tx.update_task("t", 1, state="CLASSIFIED")
        assert caught.value.exit_code == EXIT_ENVIRONMENT
        with pytest.raises(StoreUnreachable):
            PgStore(url, tmp_path, connect_timeout=2)
        server.start()
        again = PgStore(url, tmp_path)
        with again.read() as tx:
            current = tx.task("t")
        assert current is not None and current.state == "INIT" and current.seq == 1
        again.close()
    finally:
        pgserver.remove(server)


# -- selection: the embedded path never imports psycopg --------------------------------------


def test_embedded_cli_never_imports_psycopg(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    repo.ok("start", "add-login")
    probe = (
        "import runpy, sys\n"
        "sys.argv = ['taskgate', 'status', 'add-login', '--json']\n"
        "try:\n    runpy.run_module('taskgate', run_name='__main__')\n"
        "except SystemExit as e:\n    assert not e.code, e.code\n"
        "print('LOADED' if any(m.split('.')[0] in ('psycopg', 'psycopg_binary') or "
        "m == 'taskgate.store.postgres' for m in sys.modules) else 'CLEAN', file=sys.stderr)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(SRC), TASKGATE_SESSION="s1")
    env.pop("TASKGATE_DATABASE_URL", None)
    done = subprocess.run([sys.executable, "-c", probe], cwd=repo.path, env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().endswith("CLEAN"), done.stderr


# -- the CLI end to end on PostgreSQL --------------------------------------------------------


def test_cli_init_start_classify_transition_on_postgres(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TASKGATE_DATABASE_URL", url)
    repo = make_repo(tmp_path / "r")
    assert not (repo.path / ".taskgate" / "state.db").exists()  # nothing embedded
    to_requirements(repo, "add-login")
    status = repo.ok("status", "add-login", "--json").json()
    assert status["state"] == "REQUIREMENTS" and status["session_id"] == "s1"
    # The truth is in PostgreSQL: read it there, not through taskgate.
    with psycopg.connect(url) as conn:
        state, host, fence = conn.execute(
            "SELECT state, host, fence FROM tasks WHERE name = 'add-login'"
        ).fetchone()  # type: ignore[misc]
        kinds = [r[0] for r in conn.execute("SELECT kind FROM events ORDER BY seq")]
    assert state == "REQUIREMENTS" and fence == 1 and host
    assert kinds[0] == "claimed" and "transition" in " ".join(kinds)
    # Another session on this machine cannot claim it (R-LCK-01), exit 3.
    assert repo.run("start", "add-login", session="s2").code == 3
    audit = repo.run("audit", "add-login")
    assert audit.code == 0, audit.out + audit.err


def test_cli_postgres_stopped_mid_run_is_exit_6_then_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = pgserver.start_server()
    try:
        url = server.fresh_database()
        monkeypatch.setenv("TASKGATE_DATABASE_URL", url)
        repo = make_repo(tmp_path / "r")
        repo.ok("start", "add-login")
        server.stop("immediate")
        down = repo.run("classify", "add-login", cwd=repo.worktree("add-login"))
        assert down.code == EXIT_ENVIRONMENT, down.out + down.err
        assert "cannot reach PostgreSQL database" in down.err and "hint" in down.err.lower()
        server.start()
        repo.ok("classify", "add-login", cwd=repo.worktree("add-login"))
        assert repo.ok("status", "add-login", "--json").json()["state"] == "CLASSIFIED"
    finally:
        pgserver.remove(server)


def test_password_in_taskgate_toml_is_refused(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "r")
    config = (repo.path / "taskgate.toml").read_text()
    (repo.path / "taskgate.toml").write_text(
        config + '\n[store]\nurl = "postgresql://alice:hunter2@db.example/taskgate"\n'
    )
    done = repo.run("status", "--json")
    assert done.code == 2, done.out + done.err
    assert "carries a password" in done.out and "hunter2" not in done.out + done.err


def test_R_LCK_01_thirty_cli_sessions_on_three_clones_one_owner(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three clones of one repository ("machines": separate worktrees, .taskgate and views)
    share one database: 30 `taskgate start` processes race for one task, one wins."""
    monkeypatch.setenv("TASKGATE_DATABASE_URL", url)
    origin = make_repo(tmp_path / "origin")
    clones = [origin]
    for i in (1, 2):
        path = tmp_path / f"machine-{i}"
        subprocess.run(["git", "clone", "-q", str(origin.path), str(path)], check=True)
        clone = Repo(path)
        clone.ok("init")
        clones.append(clone)
    env = dict(os.environ, PYTHONPATH=str(SRC))
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "taskgate", "start", "add-login", "--json"],
            cwd=clones[i % 3].path, env=dict(env, TASKGATE_SESSION=f"s{i}"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for i in range(30)
    ]  # fmt: skip
    results = [(*p.communicate(timeout=300), p.returncode) for p in procs]
    codes = [code for _, _, code in results]
    assert codes.count(0) == 1 and codes.count(3) == 29, results
    winner = codes.index(0)
    with psycopg.connect(url) as conn:
        owners = conn.execute("SELECT session_id, fence FROM tasks").fetchall()
        claims = conn.execute("SELECT COUNT(*) FROM events WHERE kind = 'claimed'").fetchone()
    assert owners == [(f"s{winner}", 1)] and claims == (1,)
    for i, clone in enumerate(clones):  # only the winner's machine made the worktree
        assert clone.worktree("add-login").exists() == (i == winner % 3)
        seen = clone.ok("status", "add-login", "--json", session=None).json()
        assert seen["session_id"] == f"s{winner}"  # every machine sees the one owner


def _pre_tool_use(repo: Repo, session: str, path: Path) -> str:
    data = {
        "hook_event_name": "PreToolUse", "session_id": session, "cwd": str(path.parent),
        "tool_name": "Write", "tool_input": {"file_path": str(path), "content": "x\n"},
    }  # fmt: skip
    done = repo.run("hook", "PreToolUse", stdin=json.dumps(data), session=None)
    assert done.code == 0, done.err
    return done.out


def test_hook_reads_the_server_so_another_machines_release_counts_at_once(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PreToolUse on a PostgreSQL workspace decides from the server's current data: this
    machine's file only at the server's snapshot clock (tests/test_pg_notify.py)."""
    monkeypatch.setenv("TASKGATE_DATABASE_URL", url)
    a = make_repo(tmp_path / "a")
    b_path = tmp_path / "b"
    subprocess.run(["git", "clone", "-q", str(a.path), str(b_path)], check=True)
    b = Repo(b_path)
    b.ok("init")
    a.ok("start", "add-login")
    target = a.worktree("add-login") / "src" / "login.py"
    assert "deny" not in _pre_tool_use(a, "s1", target)  # the owner writes its worktree
    assert "deny" in _pre_tool_use(a, "s2", target)  # another session may not (R-LCK-04)
    b.ok("release", "add-login", "--force", "--reason", "hand over", session=None)
    assert "deny" in _pre_tool_use(a, "s1", target)  # released on machine B: denied on A
    # The server down: the hook fails closed (denies), and says why.
    monkeypatch.setenv("TASKGATE_DATABASE_URL", url.replace("port=", "port=1"))
    out = _pre_tool_use(a, "s1", target)
    assert "deny" in out and "cannot reach PostgreSQL" in out


def test_connection_killed_inside_a_step_rolls_back_and_the_store_reconnects(
    store: PgStore, url: str
) -> None:
    with store.write() as tx:
        tx.insert_task(row("t"))
    with pytest.raises(StoreUnreachable), store.write() as tx:
        tx.update_task("t", 1, state="CLASSIFIED")
        tx.append_event("t", "transition", {"to": "CLASSIFIED"}, "2026-01-01T00:00:01Z")
        with psycopg.connect(url, autocommit=True) as killer:  # the backend dies mid-step
            killer.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = 'taskgate' AND datname = current_database() "
                "AND pid <> pg_backend_pid()"
            )
        tx.add_transition(TransitionRow("t", 0, "INIT", "CLASSIFIED", "2026-01-01T00:00:01Z"))
    with store.write() as tx:  # the same Store object carries on over a new connection
        snap = tx.snapshot("t")
        assert snap is not None and snap.task.state == "INIT" and snap.task.seq == 1
        assert snap.events == () and snap.transitions == ()  # nothing half-written
        tx.update_task("t", 1, state="CLASSIFIED")


def test_the_password_never_reaches_files_views_git_or_output(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "pw-9f3a1c77e2"
    monkeypatch.setenv("TASKGATE_DATABASE_URL", url + f"&password={secret}")
    repo = make_repo(tmp_path / "r")
    outputs = [repo.ok("start", "add-login"), repo.ok("status", "add-login", "--json")]
    created = repo.ok("init").out
    assert "state.db" not in created  # nothing embedded was created
    monkeypatch.setenv(
        "TASKGATE_DATABASE_URL", url.replace("port=", "port=1") + f"&password={secret}"
    )
    outputs.append(repo.run("status", "--json"))
    assert outputs[-1].code == EXIT_ENVIRONMENT
    for out in outputs:
        assert secret not in out.out + out.err
    for path in repo.path.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    with psycopg.connect(url) as conn:
        dumped = conn.execute("SELECT string_agg(payload, '') FROM events").fetchone()
    assert dumped is not None and secret not in (dumped[0] or "")


def test_the_hooks_libpq_read_equals_the_stores_snapshot(store: PgStore, url: str) -> None:
    from taskgate.store import pg_hook
    from taskgate.store.postgres import read_hook_snapshot

    _same_steps(store)  # an approval: COUNT(*) must come back as an int, not the text "1"
    with store.write() as tx:
        tx.insert_task(row("u", "s2"))
        tx.update_task("u", 1, lock_released_at="2026-01-01T00:00:05Z")
    via_libpq = pg_hook.snapshot(url, json.loads)
    assert via_libpq is not None  # this machine has a libpq (the postgresql client)
    assert via_libpq == read_hook_snapshot(url)
    assert via_libpq == snapshot.parse(store.snapshot_path.read_text(), json.loads)
    with pytest.raises(pg_hook.HookStoreError):
        pg_hook.snapshot(url.replace("port=", "port=1"), json.loads)


def test_store_url_in_taskgate_toml_selects_postgres(url: str, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    config = (repo.path / "taskgate.toml").read_text()
    (repo.path / "taskgate.toml").write_text(config + f'\n[store]\nurl = "{url}"\n')
    repo.ok("init")
    repo.ok("start", "add-login")
    with psycopg.connect(url) as conn:
        owner = conn.execute("SELECT session_id FROM tasks WHERE name = 'add-login'").fetchone()
    assert owner == ("s1",)
    bad = repo.run("status", env={"TASKGATE_DATABASE_URL": "sqlite:///x.db"})
    assert bad.code == 2 and "must be a postgresql:// URL" in bad.err


def test_the_one_query_snapshot_equals_collect_row_by_row(store: PgStore, url: str) -> None:
    """pg_hook.collect (one statement) gives exactly store/snapshot.py's collect (two queries
    per held task): held, released, approved, revoked, with and without validations."""
    from taskgate.store import pg_hook
    from taskgate.store.pg_tx import QmarkConnection

    _same_steps(store)  # t: held, plan approved, a validation by main
    with store.write() as tx:
        tx.insert_task(row("u", "s2"))
        tx.update_task("u", 1, lock_released_at="2026-01-01T00:00:05Z")
        tx.insert_task(row("v", "s3"))
        tx.add_approval(
            ApprovalRow("v", "plan", "h", "2026-01-01T00:00:02Z", "2026-01-01T00:00:03Z", "x")
        )
        tx.revoke_approvals("v", "plan", "2026-01-01T00:00:04Z", "re-entered SYNTHESIS")
        tx.append_event("v", "validation", {"responsible": "agent"}, "2026-01-01T00:00:04Z")
        tx.append_event("v", "validation", {"responsible": "main"}, "2026-01-01T00:00:05Z")
        tx.append_event("v", "validation", {"responsible": "agent"}, "2026-01-01T00:00:06Z")
    with psycopg.connect(url) as conn:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        two = snapshot.collect(QmarkConnection(conn), json.loads)
        one = pg_hook.collect(QmarkConnection(conn), json.loads)
    assert one == two
    assert [t.get("plan_approved") for t in one["tasks"]] == [True, None, False]
    assert [t.get("main_may_fix") for t in one["tasks"]] == [True, None, False]
    assert pg_hook.snapshot(url, json.loads) == two


def test_projections_and_events_after_equal_sqlite(store: PgStore, tmp_path: Path) -> None:
    """PgTx's own task_heads / task_summaries / events_after (issue 18's fast paths) give what
    SQLite gives for the same steps."""
    lite_dir = tmp_path / "lite"
    lite_dir.mkdir()
    lite = SqliteStore(lite_dir / "state.db")
    _same_steps(lite)
    _same_steps(store)
    with lite.read() as a, store.read() as b:
        assert b.task_heads() == a.task_heads() and len(b.task_heads()) == 1
        assert b.task_summaries() == a.task_summaries()
        assert b.events_after("t", 1) == a.events_after("t", 1) and len(b.events_after("t", 1)) == 1
        assert b.events_after("t", 0) == b.events("t") == a.events("t")
        whole = b.snapshot("t")
        assert whole is not None and b.snapshot("t", since=whole) == whole
