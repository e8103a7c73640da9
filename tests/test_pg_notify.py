"""Hooks per machine on a shared PostgreSQL store stay fast and never stale (issue 20).

Every write that changes the PreToolUse data advances the store's snapshot clock and NOTIFYs
it; a machine's hook trusts its local file only at the server's current clock, and `taskgate
serve` keeps the data in memory checked against that clock. Against a real PostgreSQL server
(tests/pgserver.py): two clones of one repository ("machines") share one database, a task is
released on A, and B's command hook and B's HTTP hook deny at once."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path

import psycopg
import pytest

import pgserver
from conftest import Repo, make_repo
from server_helpers import start_server
from taskgate.store import pg_schema, pg_warm
from taskgate.store.postgres import CLOCK_FILE, PgStore
from taskgate.store.records import TaskRow, TransitionRow
from taskgate.store.select import server_snapshot


@pytest.fixture
def url(pg: pgserver.PgServer) -> str:
    return pg.fresh_database()


def _row(name: str, session: str = "s1") -> TaskRow:
    return TaskRow(name, "INIT", session, "host", 1, "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z")


def _clock(url: str) -> int:
    with psycopg.connect(url) as conn:
        found = conn.execute(pg_schema.CLOCK_READ).fetchone()
    assert found is not None
    return int(found[0])


def test_a_write_that_changes_hook_data_advances_the_clock_and_notifies(
    url: str, tmp_path: Path
) -> None:
    store = PgStore(url, tmp_path)
    listener = psycopg.connect(url, autocommit=True)
    listener.execute(f"LISTEN {pg_schema.CHANNEL}")
    before = _clock(url)
    with store.write() as tx:
        tx.insert_task(_row("t1"))
    after = _clock(url)
    assert after > before
    assert [n.payload for n in listener.notifies(timeout=5, stop_after=1)] == [str(after)]
    assert (tmp_path / CLOCK_FILE).read_text() == f"{after}\n"  # the file's clock, beside it
    with store.write() as tx:  # a transition row alone is not hook data: the clock stays
        tx.add_transition(TransitionRow("t1", 0, "INIT", "CLASSIFIED", "2026", "r", {}))
    assert _clock(url) == after
    with pytest.raises(RuntimeError), store.write() as tx:  # rolled back: no clock, no news
        tx.insert_task(_row("t2", "s2"))
        raise RuntimeError("the step failed")
    assert _clock(url) == after
    assert list(listener.notifies(timeout=0.5)) == []
    listener.close()
    store.close()


def test_this_machines_file_is_used_only_at_the_servers_clock(url: str, tmp_path: Path) -> None:
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a_dir.mkdir(), b_dir.mkdir()
    (tmp_path / "taskgate.toml").write_text(f'[store]\nurl = "{url}"\n')
    a, b = PgStore(url, a_dir), PgStore(url, b_dir)
    with a.write() as tx:
        tx.insert_task(_row("t1"))
    seen = server_snapshot(str(tmp_path), str(a_dir))
    assert seen is not None and [t["name"] for t in seen.held_by("s1")] == ["t1"]
    # At the server's clock the file is the store's data (a marker no server read gives).
    text = (a_dir / "hook-snapshot.json").read_text()
    assert "t1\tINIT\t" in text
    (a_dir / "hook-snapshot.json").write_text(text.replace("t1\tINIT\t", "t1\tFROM-FILE\t"))
    trusted = server_snapshot(str(tmp_path), str(a_dir))
    assert trusted is not None and trusted.task("t1") == {
        "name": "t1", "state": "FROM-FILE", "agents": [], "session": None,
    }  # fmt: skip
    # Machine B releases the task: A's file is not touched, and is no longer trusted.
    with b.write() as tx:
        current = tx.task("t1")
        assert current is not None
        tx.update_task("t1", current.seq, lock_released_at="2026-01-02T00:00:00Z")
    assert "FROM-FILE" in (a_dir / "hook-snapshot.json").read_text()
    now = server_snapshot(str(tmp_path), str(a_dir))
    assert now is not None and now.held_by("s1") == [] and now.held_entry("t1") is None
    assert now.task("t1") is not None and now.task("t1")["state"] == "INIT"  # type: ignore[index]
    a.close(), b.close()


def test_serve_reads_once_until_another_machine_writes_then_never_stale(
    url: str, tmp_path: Path
) -> None:
    store = PgStore(url, tmp_path)
    with store.write() as tx:
        tx.insert_task(_row("t1"))
    warm = pg_warm.Warm(url)
    try:
        first = warm.get()
        for _ in range(20):
            assert warm.get() is first  # warm: one full read, then one clock query each
        assert warm.reads == 1
        for i in range(5):  # another machine's write; the next read sees it, no waiting
            with store.write() as tx:
                current = tx.task("t1")
                assert current is not None
                tx.update_task("t1", current.seq, state=f"S{i}")
            assert [t["state"] for t in warm.get()["tasks"]] == [f"S{i}"]
    finally:
        warm.close()
        store.close()


def _hook_input(session: str, path: Path) -> str:
    return json.dumps({
        "hook_event_name": "PreToolUse", "session_id": session, "cwd": str(path.parent),
        "tool_name": "Write", "tool_input": {"file_path": str(path), "content": "x\n"},
    })  # fmt: skip


def _command_hook(repo: Repo, session: str, path: Path) -> str:
    done = repo.run("hook", "PreToolUse", stdin=_hook_input(session, path), session=None)
    assert done.code == 0, done.err
    return done.out


def _http_hook(base: str, hook_secret: str, session: str, path: Path) -> str:
    request = urllib.request.Request(
        f"{base}/hooks/PreToolUse",
        data=_hook_input(session, path).encode(),
        headers={"X-Taskgate-Hook-Secret": hook_secret, "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.status == 200
        return response.read().decode()


def test_released_on_machine_a_denied_at_once_by_machine_bs_command_and_http_hooks(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TASKGATE_DATABASE_URL", url)
    a = make_repo(tmp_path / "a")
    b_path = tmp_path / "b"
    subprocess.run(["git", "clone", "-q", str(a.path), str(b_path)], check=True)
    b = Repo(b_path)
    b.ok("init")
    b.ok("start", "add-login")  # session s1 owns the task on machine B
    target = b.worktree("add-login") / "src" / "login.py"
    served = start_server(b.path, tmp_path / "serve-state", env={"TASKGATE_DATABASE_URL": url})
    try:
        [hook_secret] = list((tmp_path / "serve-state").glob("serve/*/hook-secret"))
        door = hook_secret.read_text().strip()
        for _ in range(3):  # warm: the owner may write its worktree, other sessions may not
            assert "deny" not in _http_hook(served.base, door, "s1", target)
            assert "deny" in _http_hook(served.base, door, "s2", target)
        assert "deny" not in _command_hook(b, "s1", target)  # B's own file, at the clock
        clock = b.path / ".taskgate" / CLOCK_FILE  # which the owner's agent may not forge
        assert "deny" in _command_hook(b, "s1", clock)
        assert "deny" in _http_hook(served.base, door, "s1", clock)
        a.ok("release", "add-login", "--force", "--reason", "hand over", session=None)
        # Machine A's write reached neither B's file nor B's memory; both deny at once.
        assert (b.path / ".taskgate" / CLOCK_FILE).exists()
        assert "deny" in _http_hook(served.base, door, "s1", target)
        assert "deny" in _command_hook(b, "s1", target)
        with psycopg.connect(url) as conn:
            owner = conn.execute("SELECT lock_released_at FROM tasks").fetchone()
        assert owner is not None and owner[0] is not None
    finally:
        served.stop()


def test_a_database_restored_from_a_backup_never_brings_back_a_clock_a_machine_saw(
    url: str, tmp_path: Path
) -> None:
    """A restore takes the clock back with the data; writes after it must not reach a value
    a machine's file (or serve's memory) was written at, or that stale copy is trusted."""
    store = PgStore(url, tmp_path)
    with store.write() as tx:
        tx.insert_task(_row("r1", "s1"))
    backup = _clock(url)
    seen = []
    for n in range(3):  # later history, each clock seen by some machine
        with store.write() as tx:
            tx.insert_task(_row(f"r{n + 2}", f"s{n + 2}"))
        seen.append(_clock(url))
    with psycopg.connect(url, autocommit=True) as conn:  # the restore: the clock goes back
        conn.execute(f"UPDATE {pg_schema.CLOCK_TABLE} SET seq = %s WHERE id = 1", (backup,))
    for n in range(3):
        with store.write() as tx:
            tx.insert_task(_row(f"after{n}", f"a{n}"))
        assert _clock(url) not in seen
        assert _clock(url) > max(seen)
    store.close()
