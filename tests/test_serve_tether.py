"""`taskgate serve` ends with its repository (server/tether.py), and a test run leaves no server
behind (tests/servers_left.py, conftest.py's session teardown).

Real servers in subprocesses; waits are bounded polls for the process to end, never a claim
about how fast it ends.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from conftest import Repo, make_repo
from flow import to_requirements
from server_helpers import Running, start_server
from servers_left import belongs, is_serve, servers_under, stop_servers_under
from taskgate.server.door import door_path
from taskgate.server.tether import INTERVAL_S

WAIT_S = 60.0  # a bound for a loaded machine, not a speed claim


def ended(proc: subprocess.Popen[str], wait_s: float = WAIT_S) -> bool:
    """Poll until the process has exited (True), or give up after `wait_s` (False)."""
    deadline = time.monotonic() + wait_s
    while proc.poll() is None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def stderr_of(server: Running) -> str:
    assert server.proc.stderr is not None
    return server.proc.stderr.read()


def tree(path: Path) -> dict[str, str]:
    """Every file under `path` with a hash of its bytes (sockets by their kind)."""
    found = {}
    for item in sorted(path.rglob("*")):
        if item.is_socket():
            found[str(item.relative_to(path))] = "socket"
        elif item.is_file():
            found[str(item.relative_to(path))] = hashlib.sha256(item.read_bytes()).hexdigest()
    return found


def hook_call(server: Running) -> int:
    """One PreToolUse over HTTP, as the installed entries send it: the status."""
    [secret_file] = list(server.state_dir.glob("serve/*/hook-secret"))
    port = int(server.base.rsplit(":", 1)[1])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        body = ('{"session_id": "s1", "hook_event_name": "PreToolUse", "tool_name": "Bash", '
                '"tool_input": {"command": "git status"}, "cwd": "/"}')  # fmt: skip
        secret = secret_file.read_text().strip()
        conn.request("POST", "/hooks/PreToolUse", body=body.encode(),
                     headers={"X-Taskgate-Hook-Secret": secret})  # fmt: skip
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def remove(path: Path) -> None:
    """`rm -rf path` while the server may still open its store: SQLite can create state.db-wal
    in .taskgate between rmtree's unlinks and its rmdir (seen once in CI), as it would under a
    person's `rm -rf`; like that person, remove it again (bounded)."""
    for _ in range(50):
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            return
        time.sleep(0.05)
    shutil.rmtree(path)  # still there: fail with rmtree's own error


def test_a_server_whose_repository_is_deleted_ends_by_itself(repo: Repo, tmp_path: Path) -> None:
    server = start_server(repo.path, tmp_path / "st")
    try:
        assert hook_call(server) == 200
        remove(repo.path)
        assert ended(server.proc), "the server still runs after its repository was deleted"
    finally:
        server.stop()
    err = stderr_of(server)
    assert server.proc.returncode == 0, err
    # .taskgate, or state.db when the check fell between rmtree's unlinks of the two
    assert re.search(re.escape(str(repo.path / ".taskgate")) + r"(/state\.db)? was removed", err)
    assert not repo.path.exists()  # nothing re-created where the repository was
    assert not list((tmp_path / "st").glob("serve/*/server.json"))


def test_a_server_whose_taskgate_directory_is_replaced_ends_and_leaves_the_new_one_alone(
    repo: Repo, tmp_path: Path
) -> None:
    """Another repository at the same path (a test's directory re-created, a fresh clone): the
    old server stops, and neither the new store nor the new server's door socket is touched."""
    server = start_server(repo.path, tmp_path / "st")
    try:
        repo.ok("start", "add-login")  # the old server saw a live store
        old_door = door_path(repo.path / ".git")
        assert old_door.is_socket()
        repo.path.rename(tmp_path / "moved-away")
        fresh = make_repo(repo.path)
        fresh.ok("start", "fix-typo")
        # another server's agent door at the same path (bound here, as that server would)
        door_path(repo.path / ".git").parent.mkdir(mode=0o700, exist_ok=True)
        other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        other.bind(str(door_path(repo.path / ".git")))
        before = tree(repo.path / ".taskgate"), tree(repo.path / ".git" / "taskgate")
        assert ended(server.proc), "the server still runs after .taskgate was replaced"
        other.close()
    finally:
        server.stop()
    err = stderr_of(server)
    assert server.proc.returncode == 0, err
    assert f"{repo.path / '.taskgate'} was replaced by another file" in err
    assert (tree(repo.path / ".taskgate"), tree(repo.path / ".git" / "taskgate")) == before
    assert door_path(repo.path / ".git").is_socket()  # the other server's socket is still there
    assert fresh.ok("status", "--json").json()  # the new repository's store reads as before


def test_a_server_whose_store_is_replaced_ends(repo: Repo, tmp_path: Path) -> None:
    """`recover --rebuild` moves a rebuilt state.db in: the server's connections would still
    read the old file, so it stops rather than answer from a store nobody else sees."""
    server = start_server(repo.path, tmp_path / "st")
    db = repo.path / ".taskgate" / "state.db"
    try:
        assert hook_call(server) == 200
        shutil.copyfile(db, tmp_path / "copy.db")
        os.replace(tmp_path / "copy.db", db)
        assert ended(server.proc), "the server still runs after its store was replaced"
    finally:
        server.stop()
    err = stderr_of(server)
    assert server.proc.returncode == 0, err
    assert f"{db} was replaced by another file" in err


def test_a_server_in_use_keeps_running(repo: Repo, tmp_path: Path) -> None:
    """Store writes, view renders, snapshot replacements and HTTP hooks across several of
    the server's checks: it keeps running and answering."""
    server = start_server(repo.path, tmp_path / "st")
    try:
        to_requirements(repo, "add-login")
        (repo.path / ".taskgate" / "scratch").write_text("x")
        (repo.path / ".taskgate" / "scratch").unlink()
        until = time.monotonic() + 3 * INTERVAL_S  # at least two checks happen meanwhile
        state = "WORKING"
        while time.monotonic() < until:
            assert hook_call(server) == 200
            state = "IN_PROGRESS" if state == "WORKING" else "WORKING"
            repo.ok("agent", "set", "add-login", "quality", state)
            assert server.proc.poll() is None, stderr_of(server)
        assert hook_call(server) == 200
    finally:
        code = server.stop()
    err = stderr_of(server)
    assert code == 0, err
    assert "was removed" not in err and "was replaced" not in err


def test_the_teardown_stops_this_runs_servers_and_no_other(tmp_path: Path) -> None:
    mine, other = tmp_path / "mine", tmp_path / "other"
    ours = start_server(make_repo(mine / "repo").path, mine / "st")
    theirs = start_server(make_repo(other / "repo").path, other / "st")
    try:
        assert ours.proc.pid in servers_under(mine)
        assert theirs.proc.pid not in servers_under(mine)
        assert stop_servers_under(mine) == [ours.proc.pid]
        assert ended(ours.proc)
        assert ours.proc.returncode == 0  # SIGTERM: uvicorn's graceful shutdown
        assert theirs.proc.poll() is None
        assert hook_call(theirs) == 200
    finally:
        ours.stop()
        theirs.stop()


def test_the_teardown_kills_a_server_that_ignores_sigterm(tmp_path: Path) -> None:
    fake = tmp_path / "bin" / "taskgate"
    fake.parent.mkdir()
    fake.write_text(
        "import signal, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('ready', flush=True)\ntime.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, str(fake), "serve", "--port", "0"], cwd=tmp_path,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        assert stop_servers_under(tmp_path, grace_s=0.5) == [proc.pid]
        assert ended(proc)
        assert proc.returncode == -signal.SIGKILL
    finally:
        proc.kill()
        proc.wait()


def test_what_counts_as_a_server() -> None:
    assert is_serve(["/v/bin/python", "-m", "taskgate", "--repo", "/r", "serve", "--port", "0"])
    assert is_serve(["/v/bin/python", "/v/bin/taskgate", "serve"])
    assert not is_serve(["/v/bin/python", "-m", "taskgate", "status"])
    assert not is_serve(["/v/bin/python", "-m", "pytest", "-k", "taskgate", "serve"])
    assert not belongs(os.getpid(), Path(os.environ["HOME"]))  # pytest itself is no server


def test_the_watcher_never_reopens_a_store_that_is_gone(tmp_path: Path) -> None:
    """SQLite creates a missing `-shm` even for a read-only connection: a probe reopened while
    `rm -rf` runs put `state.db-shm` back into the directory being removed. With the store
    lost (`gone`), the watcher opens nothing; the same store and watcher without it create
    the file (the test's own check)."""
    import sqlite3

    from taskgate.server.watch import Hub, SqliteProbe, Watcher

    db = tmp_path / "state.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE tasks (name TEXT, seq INTEGER)")
    conn.commit()
    conn.close()  # the last connection: -wal and -shm are removed
    shm = tmp_path / "state.db-shm"
    assert not shm.exists()
    for gone, creates in ((lambda: "state.db was removed", False), (None, True)):
        opened: list[int] = []

        def probe(opened: list[int] = opened) -> SqliteProbe:
            opened.append(1)
            return SqliteProbe(db, ())

        watcher = Watcher(probe, Hub(), interval=0.01, gone=gone)
        watcher.start()
        deadline = time.monotonic() + (30 if creates else 1.0)  # 1 s: about 5 chances to open
        while not shm.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        watcher.stop()
        assert shm.exists() is creates and bool(opened) is creates, (gone, opened)
