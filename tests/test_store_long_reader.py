"""A connection left open on the store never reads a damaged database while taskgate writes
(trust: recovery never loses work; R-LCK-09).

SQLite's locks are POSIX locks, owned by the process: closing any descriptor of state.db drops
every lock the process holds on it (sqlite.org/howtocorrupt 2.2). PreToolUse read the store's
header with open()+close() (hooks/context.load_actor), so a process that runs it and holds a
connection (`taskgate serve`'s HTTP hooks, the hook process itself, a test calling it in
process) lost its SHARED lock; the next process to close its last connection then
checkpointed and deleted state.db-wal and state.db-shm under it, and that connection read
"database disk image is malformed". Here: this process and a second one each hold a
connection and run PreToolUse in process (as `taskgate serve` does), while the installed hook
command and the CLI write and close theirs; every connection keeps reading the store whole.
(Before the fix even a new connection in this process read "malformed": connections to one
file in one process share its wal-index mapping, the deleted state.db-shm.)
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from flow import copy_repo, implementation_template
from test_hooks_dispatch import TASK, fixture, hook

ROUNDS = 6
COUNT = "SELECT COUNT(*), MAX(seq) FROM events"

# A second long-lived process: holds a connection, and on each line of stdin runs PreToolUse
# in process (hook input: the line) and answers with what its connection reads.
SERVER = textwrap.dedent(
    """
    import json, sqlite3, sys
    from taskgate.hooks.dispatch import pre_tool_use
    db = sqlite3.connect(sys.argv[1], isolation_level=None)
    db.execute("SELECT COUNT(*) FROM events").fetchone()
    for line in sys.stdin:
        pre_tool_use(json.loads(line))
        try:
            row = list(db.execute("SELECT COUNT(*), MAX(seq) FROM events").fetchone())
        except sqlite3.Error as exc:
            row = str(exc)
        print(json.dumps(row), flush=True)
    """
)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with implementation_template(tmp_path_factory, "reader", TASK, second=False) as repo:
        yield repo.path


def events(db: Path) -> list[int]:
    """(count, last seq) of the events as a fresh connection reads them."""
    with contextlib.closing(sqlite3.connect(db)) as fresh:
        return list(fresh.execute(COUNT).fetchone())


def test_open_connections_read_the_store_whole_across_hook_and_cli_writes(
    template: Path, tmp_path: Path
) -> None:
    from taskgate.hooks.dispatch import pre_tool_use

    repo = copy_repo(template, tmp_path / "repo")
    db = repo.path / ".taskgate" / "state.db"
    worktree = repo.worktree(TASK)
    reader = sqlite3.connect(db, isolation_level=None)  # left open across every write
    assert reader.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    reader.execute(COUNT).fetchone()
    env = {"PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(db)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=repo.path,
        env={**os.environ, **env},
    )  # fmt: skip
    assert server.stdin is not None and server.stdout is not None
    try:
        before = events(db)
        for n in range(ROUNDS):
            denied = fixture("pre_tool_use_bash", repo, tool_input={"command": "echo x > f.py"},
                             cwd=str(worktree))  # fmt: skip
            assert pre_tool_use(denied) is not None  # in this process, which holds `reader`
            pre = fixture("pre_tool_use_bash", repo, tool_input={"command": "git status"},
                          cwd=str(worktree))  # fmt: skip
            assert pre_tool_use(pre) is None  # the effect check's baseline
            server.stdin.write(json.dumps(denied) + "\n")
            server.stdin.flush()
            assert json.loads(server.stdout.readline()) == events(db)
            # A write the effect check catches: the hook process records it and moves it aside.
            (worktree / f"f{n}.py").write_text("x\n")
            line = {"command": f"echo x > f{n}.py"}
            post = fixture("post_tool_use_write", repo, tool_name="Bash", tool_input=line,
                           cwd=str(worktree))  # fmt: skip
            run = hook(repo, post)
            assert run.code == 0, run.err
            assert not (worktree / f"f{n}.py").exists(), run.out
            repo.ok("violations", TASK, "--resolve", "all", "--reason", "test")  # the CLI writes
            fresh = events(db)
            assert list(reader.execute(COUNT).fetchone()) == fresh  # not "malformed"
            assert reader.execute("PRAGMA quick_check").fetchone()[0] == "ok"
        assert events(db)[0] >= before[0] + 2 * ROUNDS  # every round wrote, nothing was lost
        server.stdin.write(json.dumps(denied) + "\n")
        server.stdin.flush()
        assert json.loads(server.stdout.readline()) == events(db)
    finally:
        server.stdin.close()
        server.wait(timeout=60)
        reader.close()
    audit = repo.run("audit", TASK, "--json").json()
    chain = [c for t in audit["tasks"] for c in t["checks"] if c["id"] == "hash-chain"]
    assert chain and all(c["passed"] for c in chain), chain


@pytest.mark.parametrize("name", ["state.db", "a%20b?c#d.db", "sp ace%.db"])
def test_a_store_opened_read_write_is_never_created(tmp_path: Path, name: str) -> None:
    """store/dbfile.uri with mode=rw (SqliteStore, `todo`'s fast path): an existing file is
    opened, whatever its name holds; a missing one is an error, never a new empty store (the
    moment `recover --rebuild` has moved the old one aside)."""
    from taskgate.store.dbfile import uri

    path = tmp_path / name
    with pytest.raises(sqlite3.OperationalError):
        sqlite3.connect(uri(path, "rw"), uri=True).execute("SELECT 1")
    assert not path.exists() and not list(tmp_path.iterdir())
    with contextlib.closing(sqlite3.connect(path)) as made:
        made.execute("CREATE TABLE t (x)")
        made.execute("INSERT INTO t VALUES (42)")
        made.commit()
    with contextlib.closing(sqlite3.connect(uri(path, "rw"), uri=True)) as opened:
        assert opened.execute("SELECT x FROM t").fetchone() == (42,)
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
