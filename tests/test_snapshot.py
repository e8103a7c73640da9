"""The PreToolUse snapshot (store/snapshot.py): written only under the store's write lock, so
it is the latest committed state or absent, never stale; crashes leave no stale file."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taskgate.store import snapshot
from taskgate.store.base import Conflict
from taskgate.store.records import ApprovalRow, TaskRow
from taskgate.store.sqlite import SqliteStore

SRC = Path(__file__).resolve().parent.parent / "src"
AT = "2026-01-01T00:00:00Z"


def row(name: str, session: str = "s1") -> TaskRow:
    return TaskRow(name, "INIT", session, "host", 1, AT, AT)


def truth(store: SqliteStore) -> dict[str, object]:
    """What the store holds, read like the hook's fallback does."""
    with sqlite3.connect(store.path) as conn:
        return snapshot.collect(conn, json.loads)


def on_disk(store: SqliteStore) -> dict[str, object] | None:
    return snapshot.parse(store.snapshot_path.read_text(), json.loads)


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    s = SqliteStore(tmp_path / "state.db")
    with s.write() as tx:
        tx.insert_task(row("t1", "s1"))
        tx.insert_task(row("t2", "s2"))
    return s


def test_every_change_to_what_it_holds_rewrites_it(store: SqliteStore) -> None:
    assert on_disk(store) == truth(store)
    with store.write() as tx:
        current = tx.task("t1")
        assert current is not None
        tx.update_task("t1", current.seq, state="CLASSIFIED", required_agents=("architect",))
    assert on_disk(store) == truth(store)
    [t1] = [t for t in truth(store)["tasks"] if t["name"] == "t1"]  # type: ignore[attr-defined]
    assert (t1["state"], t1["agents"], t1["plan_approved"]) == ("CLASSIFIED", ["architect"], False)
    with store.write() as tx:
        tx.add_approval(ApprovalRow("t1", "plan", "sha256:x", AT, AT, "human-prompt", "h"))
    assert on_disk(store) == truth(store)
    with store.write() as tx:
        tx.append_event("t1", "validation", {"responsible": "main"}, AT)
    [t1] = [t for t in on_disk(store)["tasks"] if t["name"] == "t1"]  # type: ignore[index]
    assert (t1["plan_approved"], t1["main_may_fix"]) == (True, True)
    with store.write() as tx:
        assert tx.revoke_approvals("t1", "plan", AT, "plan changed") == 1
        current = tx.task("t1")
        assert current is not None
        tx.update_task("t1", current.seq, lock_released_at=AT)
    assert on_disk(store) == truth(store)
    [t1] = [t for t in on_disk(store)["tasks"] if t["name"] == "t1"]  # type: ignore[index]
    assert t1["session"] is None and "plan_approved" not in t1


def test_other_writes_leave_the_file_alone(store: SqliteStore) -> None:
    """Tool-usage events and bookkeeping (every PostToolUse) must not cost a rewrite."""
    before = os.stat(store.snapshot_path)
    with store.write() as tx:
        tx.append_event("t1", "tool_usage", {"tool": "Edit"}, AT)
        current = tx.task("t1")
        assert current is not None
        tx.update_task("t1", current.seq, updated_at="2026-01-02T00:00:00Z")
        tx.add_approval(ApprovalRow("t1", "changes", "sha", AT, AT, "human-prompt", "h"))
    after = os.stat(store.snapshot_path)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_a_rolled_back_write_keeps_the_file(store: SqliteStore) -> None:
    before = store.snapshot_path.read_text()
    with pytest.raises(RuntimeError), store.write() as tx:
        current = tx.task("t1")
        assert current is not None
        tx.update_task("t1", current.seq, state="CLASSIFIED")
        raise RuntimeError("refused")
    assert store.snapshot_path.read_text() == before == snapshot.render(truth(store))


def test_refresh_finds_a_file_changed_outside_taskgate(store: SqliteStore) -> None:
    assert store.refresh_snapshot() == "unchanged"
    store.snapshot_path.write_text(store.snapshot_path.read_text().replace("INIT", "VALIDATION"))
    assert store.refresh_snapshot() == "replaced"
    assert on_disk(store) == truth(store)
    store.snapshot_path.unlink()
    assert store.refresh_snapshot() == "written"
    with sqlite3.connect(store.path) as conn:  # the store itself edited around taskgate
        conn.execute("UPDATE tasks SET state = 'REVIEW' WHERE name = 't2'")
    assert store.refresh_snapshot() == "replaced"
    assert on_disk(store) == truth(store)


def test_refresh_waits_for_the_write_lock_and_gives_up_when_busy(store: SqliteStore) -> None:
    other = sqlite3.connect(store.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        assert store.refresh_snapshot(wait_s=0.05) == "busy"
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert store.refresh_snapshot(wait_s=0.05) == "unchanged"


def test_a_read_only_store_cannot_refresh(store: SqliteStore) -> None:
    from taskgate.store.base import StoreCorrupt

    with pytest.raises(StoreCorrupt):
        SqliteStore(store.path, read_only=True).refresh_snapshot()


@pytest.mark.parametrize(
    ("failpoint", "committed"), [("store.snapshot_dropped", False), ("store.committed", True)]
)
def test_a_crash_leaves_the_latest_snapshot_or_none(
    store: SqliteStore, failpoint: str, committed: bool
) -> None:
    """SIGKILL between dropping the file and committing, or between committing and writing
    the new file: either way no file remains that disagrees with the store."""
    script = (
        "import sys\n"
        f"sys.path.insert(0, {str(SRC)!r})\n"
        "from taskgate.store.sqlite import SqliteStore\n"
        f"s = SqliteStore(__import__('pathlib').Path({str(store.path)!r}))\n"
        "with s.write() as tx:\n"
        "    t = tx.task('t1')\n"
        "    tx.update_task('t1', t.seq, state='CLASSIFIED')\n"
    )
    env = {**os.environ, "TASKGATE_FAILPOINT": failpoint}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, check=False)
    assert proc.returncode == -9, proc.stderr
    assert not store.snapshot_path.exists()
    [t1] = [t for t in truth(store)["tasks"] if t["name"] == "t1"]  # type: ignore[attr-defined]
    assert t1["state"] == ("CLASSIFIED" if committed else "INIT")
    assert store.refresh_snapshot() == "written"
    assert on_disk(store) == truth(store)


def _per_task(conn: sqlite3.Connection) -> dict[str, object]:
    """collect() as it was before issue 18: two queries per held task (the reference)."""
    tasks = []
    rows = conn.execute(
        "SELECT name, state, session_id, required_agents, lock_released_at FROM tasks ORDER BY name"
    ).fetchall()
    for name, state, session, agents, released in rows:
        entry: dict[str, object] = {"name": name, "state": state, "agents": json.loads(agents)}
        entry["session"] = None if released is not None else session
        if entry["session"] is not None:
            approved = conn.execute(
                "SELECT COUNT(*) FROM approvals WHERE task = ? AND kind = 'plan' "
                "AND revoked_at IS NULL",
                (name,),
            ).fetchone()[0]
            last = conn.execute(
                "SELECT payload FROM events WHERE task = ? AND kind = 'validation' "
                "ORDER BY seq DESC LIMIT 1",
                (name,),
            ).fetchone()
            payload = json.loads(last[0]) if last else {}
            entry["plan_approved"] = bool(approved)
            entry["main_may_fix"] = payload.get("responsible") == "main"
        tasks.append(entry)
    return {"format": snapshot.FORMAT, "tasks": tasks}


def test_the_set_based_collect_equals_the_per_task_one(tmp_path: Path) -> None:
    s = SqliteStore(tmp_path / "state.db")
    with s.write() as tx:
        for i in range(12):
            tx.insert_task(row(f"t{i:02d}", f"s{i}"))
        for i in range(0, 12, 2):
            tx.add_approval(ApprovalRow(f"t{i:02d}", "plan", "p", AT, AT, "human-prompt", "h"))
        tx.add_approval(ApprovalRow("t01", "changes", "c", AT, AT, "human-prompt", "h"))
        assert tx.revoke_approvals("t04", "plan", AT, "changed") == 1
        for i in range(0, 12, 3):
            tx.append_event(f"t{i:02d}", "validation", {"responsible": "other"}, AT)
            tx.append_event(f"t{i:02d}", "tool_usage", {"tool": "Edit"}, AT)
            tx.append_event(f"t{i:02d}", "validation", {"responsible": "main"}, AT)
        tx.append_event("t05", "validation", {"responsible": "main"}, AT)
        for i in (5, 6):
            current = tx.task(f"t{i:02d}")
            assert current is not None
            tx.update_task(f"t{i:02d}", current.seq, lock_released_at=AT)
    with sqlite3.connect(s.path) as conn:
        assert snapshot.collect(conn, json.loads) == _per_task(conn)
        # The hook's check builds the same text with SQLite concatenating the lines.
        assert snapshot.file_text(conn, json.loads) == s.snapshot_path.read_text()
    assert on_disk(s) == truth(s)


def test_the_index_reads_what_a_decision_asks_for(store: SqliteStore) -> None:
    """A session's held tasks and any task by name are one lookup each in the bytes; a
    damaged line is an error the hook answers from the store (hooks/context.Tasks)."""
    with store.write() as tx:
        current = tx.task("t2")
        assert current is not None
        tx.update_task("t2", current.seq, lock_released_at=AT, required_agents=("qa", "dev"))
        tx.insert_task(row("t3", "s3"))
    index = snapshot.read(str(store.path.parent), json.loads)
    assert index is not None and index.count == 3
    assert [t["name"] for t in index.held_by("s1")] == ["t1"]
    assert index.held_by("s2") == [] and index.held_entry("t2") is None
    assert index.held_entry("t3") == {"name": "t3", "state": "INIT", "agents": [],
                                      "session": "s3", "plan_approved": False,
                                      "main_may_fix": False}  # fmt: skip
    assert index.task("t2") == {"name": "t2", "state": "INIT", "agents": ["qa", "dev"],
                                "session": None}  # fmt: skip
    assert index.task("t") is None and index.task("t2\tx") is None
    assert {"format": snapshot.FORMAT, "tasks": index.tasks()} == truth(store)
    text = store.snapshot_path.read_text().replace('["qa","dev"]', "[qa")
    store.snapshot_path.write_text(text)
    damaged = snapshot.read(str(store.path.parent), json.loads)
    assert damaged is not None and damaged.held_by("s1")[0]["name"] == "t1"  # not damaged
    with pytest.raises(ValueError):
        damaged.task("t2")


def test_a_hand_edited_agents_list_is_normalised_not_written_raw(store: SqliteStore) -> None:
    """SQLite builds the task lines from the stored text (issue 18); a list stored with a
    newline inside (edited around taskgate) would break a line, so the file is rendered
    from the parsed rows instead, and the hook's check (the same builder) refuses it."""
    with sqlite3.connect(store.path) as conn:
        conn.execute("UPDATE tasks SET required_agents = ? WHERE name = 't2'", ('[\n"qa"]',))
    store.snapshot_path.unlink()
    assert store.refresh_snapshot() == "written"
    assert on_disk(store) == truth(store)
    assert store.snapshot_path.read_text() == snapshot.render(truth(store))
    with sqlite3.connect(store.path) as conn, pytest.raises(ValueError):
        snapshot.file_text(conn, json.loads)


def test_many_held_tasks_are_found_by_session_not_parsed(tmp_path: Path) -> None:
    """Each of 2,000 tasks held by its own session (the transition bench's store): a lookup
    parses the one held line of its session."""
    s = SqliteStore(tmp_path / "state.db")
    with s.write() as tx:
        for i in range(2000):
            tx.insert_task(row(f"t{i:04d}", f"session-{i}"))
    calls: list[str] = []

    def loads(text: str) -> object:
        calls.append(text)
        return json.loads(text)

    index = snapshot.read(str(s.path.parent), loads)
    assert index is not None and index.count == 2000
    assert [t["name"] for t in index.held_by("session-1234")] == ["t1234"]
    assert index.held_by("nobody") == []
    assert len(calls) == 2  # the header and that one line
    assert on_disk(s) == truth(s)


# -- the step's rewrite of its own tasks' lines (issue 18) -----------------------------------

_NAMES = ["0-first", "a", "a-b", "b", "t1", "t2", "zz", "ü-task"]
_OPS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "insert",
                "state",
                "agents",
                "release",
                "claim",
                "approve",
                "revoke",
                "validation",
                "tool",
            ]
        ),
        st.sampled_from(_NAMES),
        st.integers(0, 3),
    ),
    min_size=1,
    max_size=4,
)


def _apply(tx: Any, op: str, name: str, n: int) -> None:
    current = tx.task(name)
    if op == "insert":
        if current is None:
            tx.insert_task(row(name, f"s-{name}") if n else row(name, None))  # type: ignore[arg-type]
        return
    if current is None:
        return
    if op == "state":
        tx.update_task(name, current.seq, state=["INIT", "CLASSIFIED", "REVIEW", "DONE"][n])
    elif op == "agents":
        tx.update_task(name, current.seq, required_agents=("architect", "qa", "style")[:n])
    elif op == "release":
        tx.update_task(name, current.seq, lock_released_at=AT)
    elif op == "claim":
        tx.update_task(name, current.seq, session_id=f"s-{name}-{n}", lock_released_at=None)
    elif op == "approve":
        tx.add_approval(ApprovalRow(name, "plan" if n else "changes", "sha", AT, AT, "p", "h"))
    elif op == "revoke":
        tx.revoke_approvals(name, "plan", AT, "changed")
    elif op == "validation":
        tx.append_event(name, "validation", {"responsible": "main" if n % 2 else "agent"}, AT)
    else:
        tx.append_event(name, "tool_usage", {"tool": "Edit"}, AT)


def _full_text(store: SqliteStore) -> str:
    with sqlite3.connect(store.path) as conn:
        return snapshot.file_text(conn, json.loads)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(_OPS, min_size=1, max_size=8))
def test_a_step_rewrites_its_tasks_lines_exactly_as_a_whole_rebuild(
    steps: list[list[tuple[str, str, int]]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The lines of the tasks a write changed, spliced into the file it found, equal the
    file rebuilt from every task; and the whole rebuild is not what ran."""
    store = SqliteStore(tmp_path_factory.mktemp("patch") / "state.db")
    whole: list[int] = []
    real = snapshot.file_text

    def counted(conn: Any, loads: Any) -> str:
        whole.append(1)
        return real(conn, loads)

    try:
        for ops in steps:
            try:
                snapshot.file_text = counted  # type: ignore[assignment]
                with store.write() as tx:
                    for op in ops:
                        _apply(tx, op[0], op[1], op[2])
            except Conflict:
                continue  # two tasks claimed by one session: refused, nothing written
            finally:
                snapshot.file_text = real  # type: ignore[assignment]
            if store.snapshot_path.exists() or whole:
                assert store.snapshot_path.read_text() == _full_text(store)
        assert len(whole) <= 1  # the first write finds no file: only it rebuilds whole
    finally:
        store.close()


def test_a_file_older_than_the_store_is_rebuilt_whole_not_patched(store: SqliteStore) -> None:
    """After a power loss the file can be older than a committed step (neither is fsynced):
    its generation is behind, so the next step rebuilds it from every task."""
    old = store.snapshot_path.read_bytes()
    with store.write() as tx:
        current = tx.task("t2")
        assert current is not None
        tx.update_task("t2", current.seq, state="REVIEW")
    store.snapshot_path.write_bytes(old)  # the step's rewrite lost, the commit kept
    with store.write() as tx:
        current = tx.task("t1")
        assert current is not None
        tx.update_task("t1", current.seq, state="CLASSIFIED")
    assert store.snapshot_path.read_text() == _full_text(store)
    assert {t["name"]: t["state"] for t in on_disk(store)["tasks"]} == {  # type: ignore[index]
        "t1": "CLASSIFIED",
        "t2": "REVIEW",
    }


def test_a_file_its_generation_does_not_vouch_for_is_rebuilt_whole(store: SqliteStore) -> None:
    """hook-snapshot.gen missing (a taskgate before it, or a crash between the two writes),
    naming another clock, or another file (one written over in place): the next step builds
    the file from every task."""
    gen = store.snapshot_path.with_name(snapshot.GEN_FILE)
    for damage in ("missing", "clock", "in place"):
        text = store.snapshot_path.read_text()
        vouched = gen.read_text()
        store.snapshot_path.write_text(text.replace("t2\tINIT", "t2\tREVIEW"))  # not the store's
        if damage == "missing":
            gen.unlink()
        elif damage == "clock":
            clock = (snapshot.read_generation(str(gen.parent)) or (0, ""))[0]
            gen.write_text(f"{clock + 7} {snapshot.file_key(os.stat(store.snapshot_path))}\n")
        else:
            gen.write_text(vouched)  # the clock is right; the file is not the one it names
        with store.write() as tx:
            current = tx.task("t1")
            assert current is not None
            tx.update_task("t1", current.seq, state=f"S-{damage}")
        assert store.snapshot_path.read_text() == _full_text(store)
        with sqlite3.connect(store.path) as conn:
            found = snapshot.read_generation(str(gen.parent))
            assert found is not None and found[0] == snapshot.generation(conn)


def test_a_lock_taken_over_by_another_session_moves_its_held_line(store: SqliteStore) -> None:
    """The held line is keyed by the session: a takeover removes it under the old one."""
    with store.write() as tx:
        tx.insert_task(row("t0", "s9"))
    for session in ("s0", "s5", "s3"):
        with store.write() as tx:
            current = tx.task("t0")
            assert current is not None
            tx.update_task("t0", current.seq, session_id=session)
        assert store.snapshot_path.read_text() == _full_text(store)
        assert store.snapshot_path.read_text().count("\tt0\t{") == 1


def test_a_store_changed_around_taskgate_is_rebuilt_whole_at_the_next_step(
    store: SqliteStore,
) -> None:
    """The sqlite3 shell moves the snapshot clock too (its triggers): the next step does
    not splice into a file that no longer matches the store, it builds it from every task."""
    with sqlite3.connect(store.path) as conn:
        conn.execute("UPDATE tasks SET state = 'REVIEW' WHERE name = 't2'")
    with store.write() as tx:
        current = tx.task("t1")
        assert current is not None
        tx.update_task("t1", current.seq, state="CLASSIFIED")
    assert store.snapshot_path.read_text() == _full_text(store)
    assert "t2\tREVIEW\t" in store.snapshot_path.read_text()


def test_writes_held_back_are_spliced_together_at_the_flush(store: SqliteStore) -> None:
    """Inside the engine's views_deferred (Store.hold_snapshot) the writes drop the file and
    the flush rewrites it once: from the file the first one found, with every task they
    changed, when nothing else moved the clock in between; else whole."""
    whole: list[int] = []
    real = snapshot.file_text

    def counted(conn: Any, loads: Any) -> str:
        whole.append(1)
        return real(conn, loads)

    for other_writer in (False, True):
        whole.clear()
        store.hold_snapshot = True
        snapshot.file_text = counted  # type: ignore[assignment]
        try:
            for name, state in (("t1", "A"), ("t2", "B"), ("t1", "C")):
                with store.write() as tx:
                    current = tx.task(name)
                    assert current is not None
                    tx.update_task(name, current.seq, state=f"{state}{other_writer}")
                assert not store.snapshot_path.exists()
                if other_writer:
                    with sqlite3.connect(store.path) as conn:  # around the held writes
                        conn.execute("UPDATE tasks SET state = 'X' WHERE name = 't2'")
            store.refresh_held()
        finally:
            snapshot.file_text = real  # type: ignore[assignment]
            store.hold_snapshot = False
        assert store.snapshot_path.read_text() == _full_text(store)
        assert len(whole) == (1 if other_writer else 0)
