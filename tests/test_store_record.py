"""store-record.jsonl (engine/store_record.py): appended a line per rendering, it adds up to
exactly the rows the store holds, whatever happened to the file (issue 18: it was rendered
whole into audit-trail.json on every step). Real SQLite stores; the assertions compare what
the file replays to with the store's rows, and say which renderings rewrote the file."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taskgate.engine import store_record
from taskgate.store.records import (
    AgentRow,
    ApprovalRow,
    PresentationRow,
    TaskRow,
    TaskSnapshot,
    TransitionRow,
    ValidationRow,
    VerdictRow,
)
from taskgate.store.sqlite import SqliteStore

AT = "2026-01-01T00:00:00Z"
TASK = "t1"


def wanted(snap: TaskSnapshot) -> dict[str, Any]:
    """The store's rows as the file holds them (tuples are JSON lists)."""
    return dict(json.loads(json.dumps(store_record.whole(snap))))


def replayed(task_dir: Path) -> store_record.Replay:
    got = store_record.replay(task_dir / store_record.FILE_NAME)
    assert got is not None
    return got


class Task:
    """A task in a real store, changed one write at a time."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.store = SqliteStore(root / "state.db")
        self.dir = root / "tasks" / TASK
        self.dir.mkdir(parents=True)
        self.n = 0
        with self.store.write() as tx:
            tx.insert_task(TaskRow(TASK, "INIT", "s1", "host", 1, AT, AT))

    def snap(self) -> TaskSnapshot:
        with self.store.read() as tx:
            found = tx.snapshot(TASK)
        assert found is not None
        return found

    def apply(self, op: str) -> None:
        self.n += 1
        n = self.n
        with self.store.write() as tx:
            current = tx.task(TASK)
            assert current is not None
            if op == "event":
                tx.append_event(TASK, "tool_usage", {"tool": "Edit", "n": n}, AT)
            elif op == "events":
                for i in range(30):
                    tx.append_event(TASK, "tool_usage", {"file": f"f{i}" * 40, "n": n}, AT)
            elif op == "transition":
                tx.add_transition(TransitionRow(TASK, n, "INIT", "CLASSIFIED", AT, "r"))
                tx.update_task(TASK, current.seq, state="CLASSIFIED", updated_at=f"{n}")
            elif op == "agent":
                tx.put_agent(AgentRow(TASK, f"a{n % 3}", "RUNNING", "p", AT, retry_count=n))
            elif op == "verdict":
                tx.put_verdict(VerdictRow(TASK, "a0", n % 2, "sha", "APPROVED", "ok", AT))
            elif op == "approval":
                tx.add_approval(ApprovalRow(TASK, "plan", f"sha{n}", AT, AT, "terminal"))
            elif op == "revoke":
                tx.revoke_approvals(TASK, "plan", AT, f"changed {n}")
            elif op == "presentation":
                tx.add_presentation(PresentationRow(TASK, "plan", f"sha{n}", AT))
            elif op == "validation":
                tx.add_validation(ValidationRow(TASK, "sha", "make", 0, True, AT, tests={"n": n}))
            else:
                tx.update_task(TASK, current.seq, updated_at=f"touched {n}")

    def render(self) -> TaskSnapshot:
        snap = self.snap()
        store_record.render(self.dir, snap)
        return snap

    @property
    def path(self) -> Path:
        return self.dir / store_record.FILE_NAME


OPS = st.sampled_from(
    [
        "event",
        "events",
        "transition",
        "agent",
        "verdict",
        "approval",
        "revoke",
        "presentation",
        "validation",
        "touch",
    ]
)


@pytest.fixture
def task(tmp_path: Path) -> Task:
    t = Task(tmp_path)
    t.render()
    return t


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.lists(OPS, min_size=0, max_size=3), min_size=1, max_size=10))
def test_the_appended_file_adds_up_to_the_store(
    steps: list[list[str]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """After any sequence of writes, each followed by a rendering, the file replays to the
    store's rows, like a file written whole; and no rendering rewrote it."""
    t = Task(tmp_path_factory.mktemp("record"))
    t.render()
    inode = os.stat(t.path).st_ino
    for ops in steps:
        for op in ops:
            t.apply(op)
        snap = t.render()
        got = replayed(t.dir)
        assert got.damage == [] and got.record == wanted(snap)
        assert os.stat(t.path).st_ino == inode  # appended, never replaced
    whole = t.dir.parent / "whole"
    store_record.rewrite(whole, snap)
    assert replayed(whole).record == got.record


def test_a_rendering_that_changed_nothing_appends_nothing(task: Task) -> None:
    before = task.path.read_bytes()
    task.render()
    assert task.path.read_bytes() == before
    task.apply("touch")  # the task row changed: one line
    task.render()
    assert task.path.read_bytes().count(b"\n") == before.count(b"\n") + 1


def test_a_long_line_is_followed_by_a_short_one(task: Task) -> None:
    """The next step reads the last line only: a long history never makes it long."""
    for _ in range(10):
        task.apply("events")
    snap = task.render()
    last = task.path.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    assert len(last) < 4096 and b'"add":{}' in last
    assert replayed(task.dir).record == wanted(snap)


def test_a_torn_last_line_is_cut_off_and_the_record_carries_on(task: Task) -> None:
    """A crash while appending leaves part of a line: a reader stops before it and says so;
    the next rendering cuts it off and appends (nothing of the store is lost)."""
    task.apply("transition")
    before = task.render()
    task.apply("agent")
    task.render()
    data = task.path.read_bytes()
    cut = data.rstrip(b"\n").rfind(b"\n") + 1
    task.path.write_bytes(data[: cut + (len(data) - cut) // 2])  # half the last line
    got = replayed(task.dir)
    assert got.record == wanted(before)
    assert got.damage and "torn line" in got.damage[0]
    inode = os.stat(task.path).st_ino
    task.apply("event")
    snap = task.render()
    got = replayed(task.dir)
    assert got.damage == [] and got.record == wanted(snap)
    assert os.stat(task.path).st_ino == inode


def test_a_long_torn_append_is_cut_off_whole(task: Task) -> None:
    """The torn part may be longer than the line that follows it: all of it goes."""
    with task.path.open("ab") as handle:
        handle.write(b'{"v":1,"add":{"events":[' + b"x" * 5000)
    task.apply("touch")
    snap = task.render()
    got = replayed(task.dir)
    assert got.damage == [] and got.record == wanted(snap)


def test_a_garbled_last_line_makes_the_next_rendering_rewrite_it_whole(task: Task) -> None:
    task.apply("transition")
    task.render()
    with task.path.open("ab") as handle:
        handle.write(b'{"v":1,"seq":99}\n')  # no hash: does not verify
    got = replayed(task.dir)
    assert got.damage and "does not verify" in got.damage[0]
    task.apply("event")
    snap = task.render()
    got = replayed(task.dir)
    assert got.damage == [] and got.record == wanted(snap)


@pytest.mark.parametrize("recompute", [False, True])
def test_a_line_edited_in_the_middle_is_found(task: Task, recompute: bool) -> None:
    """Without its hash recomputed an edited line ends what is read; with it, the line
    verifies but the rows differ from the store: `taskgate audit` compares them (and the
    events' own chain and the git anchor prove what a rebuild restores)."""
    for op in ("transition", "approval", "event"):
        task.apply(op)
        task.render()
    lines = task.path.read_bytes().split(b"\n")[:-1]
    entry = json.loads(lines[2])  # the approval's line
    entry["set"]["approvals"][0]["provenance"] = "forged"
    if recompute:
        entry.pop("hash")
        edited = store_record._line(entry, entry["prev"]).rstrip(b"\n")
        forged = json.loads(edited)
        later = json.loads(lines[3])
        later.pop("hash")
        lines[3] = store_record._line(later, forged["hash"]).rstrip(b"\n")
        lines[2] = edited
    else:
        lines[2] = json.dumps(entry, sort_keys=True, separators=(",", ":")).encode()
    task.path.write_bytes(b"\n".join(lines) + b"\n")
    got = replayed(task.dir)
    if recompute:
        assert got.damage == [] and got.record is not None
        assert got.record["approvals"][0]["provenance"] == "forged"
        assert got.record != wanted(task.snap())
    else:
        assert got.damage and "line 3 of 4 does not verify" in got.damage[0]
    store_record.rewrite(task.dir, task.snap())  # what `recover --repair` does
    got = replayed(task.dir)
    assert got.damage == [] and got.record == wanted(task.snap())


def test_a_record_ahead_of_the_store_is_never_rewritten(task: Task) -> None:
    """Lost steps (a lost WAL): the record is the evidence a rebuild restores from."""
    old = task.snap()
    task.apply("transition")
    task.apply("event")
    task.render()
    before = task.path.read_bytes()
    store_record.render(task.dir, old)
    assert task.path.read_bytes() == before


def test_a_record_of_another_history_is_rewritten_whole(task: Task, tmp_path: Path) -> None:
    other = Task(tmp_path / "other")
    other.apply("touch")
    other.apply("event")  # its event differs from the task's first one
    other.render()
    for _ in range(3):
        task.apply("event")
    task.path.write_bytes(other.path.read_bytes())  # a copy from elsewhere
    snap = task.render()
    assert replayed(task.dir).record == wanted(snap)


def test_a_missing_record_is_rendered_whole(task: Task) -> None:
    task.apply("transition")
    task.path.unlink()
    snap = task.render()
    got = replayed(task.dir)
    assert got.damage == [] and got.record == wanted(snap)


def test_renderings_at_the_same_time_append_each_row_once(task: Task) -> None:
    """Two processes rendering the same task (a step and a reader refreshing stale views)
    take turns on the file's lock: no row twice, none lost."""
    snaps = []
    for op in ("transition", "event", "agent", "events", "approval"):
        task.apply(op)
        snaps.append(task.snap())
    errors: list[BaseException] = []

    def run() -> None:
        try:
            for snap in snaps:
                store_record.render(task.dir, snap)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    got = replayed(task.dir)
    assert got.damage == [] and got.record == wanted(snaps[-1])
