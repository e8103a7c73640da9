"""`taskgate recover --rebuild` beside processes that use the store: a write made by a process
that had the old store open lands in the rebuilt store or fails loudly, never in the file
kept aside (DESIGN.md: recovery never loses work; R-REC-12, R-REC-13, R-LCK-09).

The rebuild moves state.db (with -wal and -shm) into .taskgate/lost-<time>/ and puts the
rebuilt file in its place; a SQLite connection follows the file it opened, not its name.
Each race is made exact with TASKGATE_WAIT (taskgate/failpoints.py): the rebuild waits with
the new store built and the old one locked (`rebuild:built`), with the old one moved aside
and no store at the path (`rebuild:moved`), or finding a writer holding the lock
(`rebuild:busy`). Real processes, real SQLite files, the real CLI and the installed hook;
the assertions are on the rows of the live store and of the file kept aside, and on `audit`.

The store here lost fix-typo's last step (a lost WAL: behind its views), while add-login,
in IMPLEMENTATION, is intact in it: its hooks and commands keep writing to the old store
until the rebuild replaces it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import SRC, Repo
from flow import copy_repo, implementation_template
from taskgate.engine.checkpoints import message_hash
from taskgate.hooks.install import default_program, hook_command
from taskgate.store.records import event_hash
from test_hooks_dispatch import fixture
from test_next_race import _arrive, _popen
from test_rebuild import DB, aside_dirs, checkpoint_copy, lose_wal

TASK = "add-login"
OTHER = "fix-typo"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with implementation_template(tmp_path_factory, "rebuildrace", TASK, second=True) as repo:
        yield repo.path


def damaged(template: Path, tmp_path: Path, damage: str = "lost-wal") -> Repo:
    """A copy of the template with a store to rebuild.

    lost-wal: the store lost fix-typo's last step (`say`, in the lost WAL): behind its views
    for fix-typo, intact for add-login (the rebuild restores fix-typo and records it).
    snapshot-ahead: the hook snapshot saw events the store lacks; the views are not ahead, so
    the rebuild keeps every task as the store has it and appends nothing: the rebuilt
    snapshot is not ahead of the old file either (nothing else tells a hook it was replaced).
    """
    repo = copy_repo(template, tmp_path / "repo")
    if damage == "lost-wal":
        checkpoint_copy(repo, tmp_path / "old.db")
        repo.ok("say", OTHER, "what is the status?", session="s2")
        lose_wal(repo, tmp_path / "old.db")
        assert repo.run("status", OTHER).code == 5  # the damage the rebuild answers
    else:
        ((top,),) = rows(repo.path / DB, "SELECT MAX(seq) FROM events")
        (repo.path / ".taskgate" / "hook-snapshot.seq").write_text(f"{top + 5}\n")
    return repo


@pytest.fixture
def repo(template: Path, tmp_path: Path) -> Repo:
    return damaged(template, tmp_path)


def rows(db: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return [tuple(r) for r in conn.execute(sql, args)]
    finally:
        conn.close()


def events(db: Path) -> set[tuple[Any, ...]]:
    """Every event of the store: (seq, task, kind, payload, hash)."""
    return set(rows(db, "SELECT seq, task, kind, payload, hash FROM events"))


def with_path(db: Path, text: str) -> list[tuple[Any, ...]]:
    """The events whose payload holds `text` (a file path, a prompt's hash)."""
    found = rows(db, "SELECT seq, task, kind FROM events WHERE instr(payload, ?) > 0", text)
    return found


def kept_aside(repo: Repo) -> Path:
    (aside,) = aside_dirs(repo)
    return aside / "state.db"


def nothing_only_aside(repo: Repo) -> None:
    """The file kept aside holds no event the live store lacks (nothing landed there)."""
    assert events(kept_aside(repo)) <= events(repo.path / DB)


def audit_chain(repo: Repo, task: str = TASK) -> None:
    """`taskgate audit T`: the hash chain and the git anchor hold."""
    repo.ok("status", task)  # views re-rendered from the live store
    audit = repo.run("audit", task, "--json")
    checks = {c["id"]: c for t in audit.json()["tasks"] for c in t["checks"]}
    assert checks["hash-chain"]["passed"], checks["hash-chain"]
    assert checks["anchor"]["passed"], checks["anchor"]


def rebuild(repo: Repo, **env: str) -> Any:
    """`taskgate recover --rebuild --json` in the background."""
    return _popen(repo.path, "s9", "recover", "--rebuild", env=env)


def finished(proc: Any) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err


# -- (a) a long-lived process that opened the store before the rebuild ------------------------

# Opens the store (SqliteStore, as every command and `taskgate serve` do), reads it, then on
# each line of stdin appends one chained event to add-login and moves its row (Engine.touch).
WRITER = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from taskgate.store.hook_tx import now
    from taskgate.store.sqlite import SqliteStore
    store = SqliteStore(Path(sys.argv[1]), timeout=float(sys.argv[2]))
    with store.read() as tx:
        tx.task("add-login")
    print("open", flush=True)
    for line in sys.stdin:
        if line.strip() == "read":  # what its connection reads of fix-typo
            with store.read() as tx:
                print(json.dumps({"seq": tx.task("fix-typo").seq}), flush=True)
            continue
        if line.strip() == "snapshot":  # the hook snapshot rewritten from its connection
            print(json.dumps({"snapshot": store.refresh_snapshot()}), flush=True)
            continue
        at = now()
        try:
            with store.write() as tx:
                row = tx.task("add-login")
                event = tx.append_event("add-login", "tool_usage", {"session": "s1",
                    "tool": "Write", "file_path": line.strip(), "agent": "main", "note": ""}, at)
                tx.update_task("add-login", row.seq, updated_at=at)
            print(json.dumps({"committed": event.seq}), flush=True)
        except Exception as exc:
            print(json.dumps({"error": type(exc).__name__, "message": str(exc)}), flush=True)
    """
)


def test_a_process_that_opened_the_old_store_writes_into_the_rebuilt_one(
    repo: Repo, tmp_path: Path
) -> None:
    """While the rebuild holds the old store (built, not yet in place) a write waits and, at
    its short timeout, fails loudly; after the rebuild the same connection's next write
    lands in the rebuilt store, not in the file kept aside."""
    db = repo.path / DB
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), "0.5"], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=repo.path,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )  # fmt: skip
    assert writer.stdin is not None and writer.stdout is not None
    try:
        assert writer.stdout.readline().strip() == "open"
        gate = tmp_path / "built"
        proc = rebuild(repo, TASKGATE_WAIT=f"rebuild:built={gate}")
        _arrive(gate, proc)  # the old store read and locked, the new one built
        writer.stdin.write("during.py\n")
        writer.stdin.flush()
        during = json.loads(writer.stdout.readline())
        assert during["error"] == "OperationalError" and "locked" in during["message"], during
        gate.touch()
        code, out, err = finished(proc)
        assert code == 0, out + err  # rebuilt, fix-typo proven
        snap = repo.path / ".taskgate" / "hook-snapshot.json"
        rebuilt = snap.read_bytes()
        writer.stdin.write("snapshot\n")  # never the old file's rows over the new store's
        writer.stdin.flush()
        assert json.loads(writer.stdout.readline()) == {"snapshot": "unchanged"}
        assert snap.read_bytes() == rebuilt
        writer.stdin.write("read\n")  # a long-lived reader (`taskgate serve`) follows too
        writer.stdin.flush()
        ((seq,),) = rows(db, "SELECT seq FROM tasks WHERE name = ?", OTHER)
        assert json.loads(writer.stdout.readline()) == {"seq": seq}
        writer.stdin.write("after.py\n")
        writer.stdin.flush()
        after = json.loads(writer.stdout.readline())
        assert "committed" in after, after
    finally:
        writer.stdin.close()
        writer.wait(timeout=60)
    assert with_path(db, "after.py") == [(after["committed"], TASK, "tool_usage")]
    assert with_path(db, "during.py") == []  # refused, not half-written anywhere
    assert with_path(kept_aside(repo), "after.py") == []
    nothing_only_aside(repo)
    (seq,) = rows(db, "SELECT seq FROM tasks WHERE name = ?", TASK)[0]
    (old_seq,) = rows(kept_aside(repo), "SELECT seq FROM tasks WHERE name = ?", TASK)[0]
    assert seq == old_seq + 1  # its compare-and-swap ran against the rebuilt row
    audit_chain(repo)
    assert repo.run("status", OTHER).code == 0  # its lost step restored from its views


# -- (b) the installed hook racing the rebuild -------------------------------------------------


def _tree(root: int) -> list[int]:
    """`root` and every process below it."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    parents[int(entry)] = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += [p for p, parent in parents.items() if parent == pid]
    return found


def _holds_open(root: int, path: Path) -> bool:
    """A process of `root`'s tree has `path` open (its store connection)."""
    target = os.path.realpath(path)
    for pid in _tree(root):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    return True
            except OSError:
                continue
    return False


def _hook_input(repo: Repo, event: str) -> tuple[dict[str, Any], str]:
    """The hook input and the text its event's payload holds."""
    if event == "PostToolUse":
        target = repo.worktree(TASK) / "notes.md"
        target.write_text("notes\n")
        data = fixture("post_tool_use_write", repo, tool_input={"file_path": str(target)},
                       cwd=str(repo.worktree(TASK)))  # fmt: skip
        return data, str(target)
    prompt = "what is the status of the login form?"
    data = {"session_id": "s1", "transcript_path": "", "cwd": str(repo.path),
            "permission_mode": "default", "hook_event_name": "UserPromptSubmit",
            "prompt": prompt}  # fmt: skip
    return data, message_hash(prompt)


@pytest.mark.parametrize("damage", ["lost-wal", "snapshot-ahead"])
@pytest.mark.parametrize("event", ["PostToolUse", "UserPromptSubmit"])
def test_a_hook_that_opened_the_old_store_records_into_the_rebuilt_one(
    template: Path, tmp_path: Path, event: str, damage: str
) -> None:
    """The hook process opens the store while the rebuild holds it, waits for its write lock,
    and gets it once the rebuild is over: it finds its file replaced and its engine's path
    records the event in the rebuilt store."""
    repo = damaged(template, tmp_path, damage)
    db = repo.path / DB
    gate = tmp_path / "built"
    proc = rebuild(repo, TASKGATE_WAIT=f"rebuild:built={gate}")
    _arrive(gate, proc)
    data, mark = _hook_input(repo, event)
    env = {k: v for k, v in os.environ.items() if k != "TASKGATE_SESSION"}
    hooked = subprocess.Popen(
        ["/bin/sh", "-c", hook_command(default_program(), event)], cwd=repo.path,
        env={**env, "TASKGATE_DEBUG": "1"}, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert hooked.stdin is not None
    hooked.stdin.write(json.dumps(data))
    hooked.stdin.close()
    hooked.stdin = None  # communicate() below reads its answer
    deadline = time.monotonic() + 120
    while not _holds_open(hooked.pid, db):  # its connection is on the old file
        assert hooked.poll() is None, hooked.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.02)
    gate.touch()
    code, out, err = finished(proc)
    assert code == 0, out + err
    out, err = hooked.communicate(timeout=120)
    assert hooked.returncode == 0, err
    if event == "UserPromptSubmit":
        assert "[QUESTION]" in out, out
    kind = "tool_usage" if event == "PostToolUse" else "interruption"
    assert [(t, k) for _, t, k in with_path(db, mark)] == [(TASK, kind)]
    assert with_path(kept_aside(repo), mark) == []
    assert "state.db was replaced" in err, err  # the race happened as described
    nothing_only_aside(repo)
    audit_chain(repo)


# -- (c) a writer holding the store's write lock when the rebuild starts ----------------------


def _begin_step(db: Path, name: str) -> sqlite3.Connection:
    """A writer in the middle of a step: the write lock held, one chained event added. Its
    number is past the lost step's (a write into a store behind its views otherwise takes
    the lost events' numbers, and the rebuild cannot restore them beside it: another matter)."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    (prev,) = conn.execute(
        "SELECT hash FROM events WHERE task = ? ORDER BY seq DESC LIMIT 1", (TASK,)
    ).fetchone()
    at, payload = "2026-11-27T01:00:00Z", {"session": "s1", "tool": "Write", "file_path": name,
                                           "agent": "main", "note": ""}  # fmt: skip
    conn.execute(
        "INSERT INTO events (seq, task, at, kind, payload, prev_hash, hash) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (1000, TASK, at, "tool_usage", json.dumps(payload, sort_keys=True, separators=(",", ":")),
         prev, event_hash(prev, TASK, at, "tool_usage", payload)),
    )  # fmt: skip
    return conn


def test_the_rebuild_waits_for_a_writer_that_holds_the_lock(repo: Repo, tmp_path: Path) -> None:
    db = repo.path / DB
    writer = _begin_step(db, "inflight.py")
    gate = tmp_path / "busy"
    gate.touch()  # the rebuild passes its wait point and waits for the lock
    proc = rebuild(repo, TASKGATE_WAIT=f"rebuild:busy={gate}")
    try:
        _arrive(gate, proc)  # it found the lock held
        assert not aside_dirs(repo)  # and moved nothing
        writer.execute("COMMIT")
    finally:
        writer.close()
    code, out, err = finished(proc)
    assert code == 0, out + err
    assert "waiting up to" in err and "write lock" in err, err
    assert [(t, k) for _, t, k in with_path(db, "inflight.py")] == [(TASK, "tool_usage")]
    nothing_only_aside(repo)
    audit_chain(repo)


def test_the_rebuild_refuses_when_a_writer_keeps_the_lock(repo: Repo, tmp_path: Path) -> None:
    db = repo.path / DB
    before = events(db)
    view = repo.task_dir(OTHER) / "task.json"
    rendered = view.read_bytes()
    writer = _begin_step(db, "inflight.py")
    try:
        result = repo.run("recover", "--rebuild", env={"TASKGATE_LOCK_TIMEOUT": "0.5"})
        assert result.code == 6, result.out + result.err  # Locked: the environment
        text = " ".join(result.err.split())
        assert "write lock" in text and "nothing was changed" in text, text
        assert "run 'taskgate recover --rebuild' again" in text, text
        assert not aside_dirs(repo) and view.read_bytes() == rendered
        writer.execute("COMMIT")  # the writer's step is kept
    finally:
        writer.close()
    assert events(db) - before and with_path(db, "inflight.py")
    out = repo.run("recover", "--rebuild", "--json")
    assert out.code == 0, out.out + out.err
    assert with_path(db, "inflight.py")
    nothing_only_aside(repo)
    audit_chain(repo)


# -- between the old store moved aside and the new one in place --------------------------------


def test_a_command_started_with_no_store_at_the_path_waits_for_the_rebuild(
    repo: Repo, tmp_path: Path
) -> None:
    """No store at the path because a rebuild is putting the new one in place: a command
    waits for it (not "the store is missing", exit 5) and writes into the rebuilt store."""
    db = repo.path / DB
    moved, waiting = tmp_path / "moved", tmp_path / "waiting"
    proc = rebuild(repo, TASKGATE_WAIT=f"rebuild:moved={moved}")
    _arrive(moved, proc)
    assert not db.exists()
    waiting.touch()
    said = _popen(repo.path, "s1", "say", TASK, "is the form done?",
                  env={"TASKGATE_WAIT": f"rebuild:waited-for={waiting}"})  # fmt: skip
    _arrive(waiting, said)  # it found no store and a rebuild running
    moved.touch()
    code, out, err = finished(proc)
    assert code == 0, out + err
    code, out, err = finished(said)
    assert code == 0, out + err
    said_hash = message_hash("is the form done?")  # recorded instead of the words
    assert [t for _, t, _ in with_path(db, said_hash)] == [TASK]
    nothing_only_aside(repo)
    audit_chain(repo)


def test_the_files_kept_aside_are_the_old_ones_byte_for_byte(
    template: Path, tmp_path: Path
) -> None:
    """The rebuild's lock connection writes nothing and, closing last, folds no log into the
    file kept aside: state.db and its state.db-wal (frames not yet checkpointed, as a hook
    process leaves them) are kept as they were found."""
    repo = damaged(template, tmp_path, "snapshot-ahead")
    db = repo.path / DB
    leave_log = (
        "import os, sqlite3, sys\n"
        "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute('CREATE TABLE scratch (x)')\n"
        "c.execute('DROP TABLE scratch')\n"
        "os._exit(0)\n"  # like the hook process: its connection never closes
    )
    subprocess.run([sys.executable, "-c", leave_log, str(db)], check=True)
    wal = Path(f"{db}-wal")
    old_db, old_wal = db.read_bytes(), wal.read_bytes()
    assert old_wal  # frames the database file does not hold yet
    out = repo.run("recover", "--rebuild", "--json")
    assert out.code == 0, out.out + out.err
    aside = kept_aside(repo)
    assert aside.read_bytes() == old_db
    assert Path(f"{aside}-wal").read_bytes() == old_wal
    nothing_only_aside(repo)


def test_a_command_started_during_the_rebuild_waits_or_fails_plainly(
    repo: Repo, tmp_path: Path
) -> None:
    """`taskgate say` started while the rebuild holds the old store: with a lock timeout
    shorter than the rebuild it fails with exit 6 ("locked", run it again) and records
    nothing anywhere; with the default it waits, opens the rebuilt store and records there."""
    db = repo.path / DB
    gate = tmp_path / "built"
    proc = rebuild(repo, TASKGATE_WAIT=f"rebuild:built={gate}")
    _arrive(gate, proc)
    hasty = repo.run("say", TASK, "first question?", session="s1",
                     env={"TASKGATE_LOCK_TIMEOUT": "0.5"})  # fmt: skip
    assert hasty.code == 6, hasty.out + hasty.err
    assert "locked" in hasty.err and "run the command again" in " ".join(hasty.err.split())
    patient = _popen(repo.path, "s1", "say", TASK, "second question?")
    deadline = time.monotonic() + 120
    while not _holds_open(patient.pid, db):  # it opened the old file and waits for its lock
        assert patient.poll() is None, patient.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.02)
    gate.touch()
    code, out, err = finished(proc)
    assert code == 0, out + err
    code, out, err = finished(patient)
    assert code == 0, out + err
    assert with_path(db, message_hash("first question?")) == []
    assert with_path(kept_aside(repo), message_hash("first question?")) == []
    assert [t for _, t, _ in with_path(db, message_hash("second question?"))] == [TASK]
    nothing_only_aside(repo)
    audit_chain(repo)
