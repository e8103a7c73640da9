"""A step's events read on demand (store/event_log.py, issue 18): a step no longer reads and
decodes the task's whole history, and every answer is the one the whole history gives.

The reference computations below are the code before the change, verbatim: every event of
the task read into a tuple, and the facts, the invocations, the views and the store record
computed from it. The tests run them and the new ones on the same stores — SQLite and
PostgreSQL — inside the step's transaction and after it ended (the views are rendered after
the commit), and compare the results and the rendered bytes."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import Repo
from store_kinds import kind_fixture, store_fixture  # noqa: F401
from taskgate.engine import facts, invocations, store_record, views
from taskgate.engine.core import Engine
from taskgate.engine.workspace import find_workspace
from taskgate.store import event_log
from taskgate.store.base import Store, StoreCorrupt
from taskgate.store.event_log import EventLog
from taskgate.store.records import EventRow, TaskRow, TaskSnapshot

AT = "2026-01-01T00:00:00Z"
KINDS = ["tool_usage"] * 5 + [
    "transition", "agent_invoked", "agent_completed", "commit", "validation", "approval",
    "interruption", "agent-door", "subagent_stop",
]  # fmt: skip
EVENTS = st.lists(
    st.tuples(
        st.sampled_from(KINDS),
        st.fixed_dictionaries(
            {"agent": st.sampled_from(["architect", "quality", "style"])},
            optional={
                "type": st.sampled_from(["stop", "redirect"]),
                "file": st.text(max_size=4),
                "from": st.just("A"),
                "to": st.just("B"),
            },
        ),
    ),
    max_size=40,
)
_names = itertools.count()


# -- the code before the change (every event read), verbatim ------------------------------------


def old_open_invocations(snap: TaskSnapshot) -> dict[str, EventRow]:
    running: dict[str, EventRow] = {}
    for e in snap.events:
        if e.kind == "agent_invoked":
            running[str(e.payload.get("agent"))] = e
        elif e.kind == "agent_completed":
            running.pop(str(e.payload.get("agent")), None)
    return running


def old_audit_completeness(snap: TaskSnapshot) -> tuple[str, ...]:
    kinds = [e.kind for e in snap.events]
    problems = []
    if "transition" not in kinds:
        problems.append("no state_transitions recorded")
    if "agent_invoked" not in kinds:
        problems.append("no agent_invocations recorded")
    if "commit" not in kinds:
        problems.append("no commits recorded")
    running: set[str] = set()
    for e in snap.events:
        if e.kind == "agent_invoked":
            running.add(str(e.payload.get("agent")))
        elif e.kind == "agent_completed":
            running.discard(str(e.payload.get("agent")))
    if running:
        problems.append(f"agent invocations still running: {', '.join(sorted(running))}")
    return tuple(problems)


def old_commit_tags(snap: TaskSnapshot) -> list[str]:
    return [f"[agent:{e.payload.get('agent')}]" for e in snap.events if e.kind == "commit"]


def old_interruptions(snap: TaskSnapshot) -> list[dict[str, Any]]:
    return [
        {"type": e.payload.get("type"), "timestamp": e.at}
        for e in snap.events
        if e.kind == "interruption"
    ]


def old_audit_trail_json(snap: TaskSnapshot, since: int = 0) -> dict[str, Any]:
    t = snap.task
    trail: dict[str, Any] = {
        "_seq": t.seq,
        "_note": views.VIEW_NOTE,
        "task_name": t.name,
        "session_id": t.session_id,
        "started_at": t.created_at,
        "state_transitions": [],
        "agent_invocations": [],
        "tool_usage": [],
        "commits": [],
        "build_verifications": [],
        "approvals": [],
        "events": len(snap.events),
        "chain_head": snap.events[-1].hash if snap.events else None,
    }
    running: dict[str, dict[str, Any] | None] = {}
    for i, e in enumerate(snap.events):
        p = e.payload
        if e.kind == "transition":
            trail["state_transitions"].append(
                {
                    "from_state": p.get("from"),
                    "to_state": p.get("to"),
                    "timestamp": e.at,
                    "verification_passed": True,
                }
            )
        elif e.kind == "agent_invoked":
            entry: dict[str, Any] = {
                "agent_name": p.get("agent"),
                "agent_mode": p.get("mode"),
                "working_dir": p.get("working_dir"),
                "invocation_timestamp": e.at,
                "status": "running",
            }
            running[str(p.get("agent"))] = entry
            trail["agent_invocations"].append(entry)
        elif e.kind == "agent_completed":
            done = running.pop(str(p.get("agent")), None) or {
                "agent_name": p.get("agent"),
                "agent_mode": p.get("mode"),
            }
            if done not in trail["agent_invocations"]:
                trail["agent_invocations"].append(done)
            done |= {
                "status": "completed",
                "completion_timestamp": e.at,
                "report_location": p.get("report"),
            }
        elif e.kind == "tool_usage":
            if i >= since:
                trail["tool_usage"].append({"timestamp": e.at, **p})
        elif e.kind == "commit":
            trail["commits"].append({"timestamp": e.at, **p})
        elif e.kind == "validation":
            trail["build_verifications"].append({"timestamp": e.at, **p})
        elif e.kind == "approval":
            trail["approvals"].append({"timestamp": e.at, **p})
    return trail


def old_tool_usage_before(snap: TaskSnapshot, count: int) -> int:
    return sum(1 for e in snap.events[:count] if e.kind == "tool_usage")


# -- helpers --------------------------------------------------------------------------------------


def _new_task(store: Store, events: list[tuple[str, dict[str, Any]]]) -> str:
    name = f"t{next(_names)}-{os.getpid()}"
    with store.write() as tx:
        tx.insert_task(TaskRow(name, "INIT", f"s-{name}", "h", 1, AT, AT))
        for kind, payload in events:
            tx.append_event(name, kind, payload, AT)
    return name


def _eager(store: Store, name: str) -> TaskSnapshot:
    with store.read() as tx:
        snap = tx.snapshot(name)
    assert snap is not None and snap.events.complete  # type: ignore[attr-defined]
    return snap


def _questions(data: st.DataObject, length: int) -> list[tuple[Any, ...]]:
    position = st.integers(-length - 2, length + 2)
    kinds = st.sets(st.sampled_from(sorted(set(KINDS))), max_size=4)
    one = st.one_of(
        st.tuples(st.just("index"), position),
        st.tuples(st.just("slice"), st.none() | position, st.none() | position),
        st.tuples(st.just("kinds"), kinds),
        st.tuples(st.just("count_of"), st.sampled_from(sorted(set(KINDS))), position),
        st.tuples(st.just("select"), kinds, position),
        st.tuples(st.just("len")),
        st.tuples(st.just("reversed"), st.integers(0, length + 2)),
    )
    return data.draw(st.lists(one, max_size=8))


def _answer(events: Any, question: tuple[Any, ...]) -> Any:
    """The answer of `events` (an EventLog, or the tuple of every event: the reference)."""
    what, *args = question
    if what == "index":
        try:
            return events[args[0]]
        except IndexError:
            return "IndexError"
    if what == "slice":
        return tuple(events[args[0] : args[1]])
    if what == "kinds":
        if isinstance(events, EventLog):
            return event_log.of_kinds(events, args[0])
        return tuple(e for e in events if e.kind in args[0])
    if what == "count_of":
        if isinstance(events, EventLog):
            return event_log.count_of(events, args[0], args[1])
        return sum(1 for e in events[: max(args[1], 0)] if e.kind == args[0])
    if what == "select":
        kinds, start = args
        if isinstance(events, EventLog):
            return event_log.select(events, kinds, start)
        start = min(max(start, 0), len(events))
        return [(i >= start, e) for i, e in enumerate(events) if i >= start or e.kind in kinds]
    if what == "reversed":  # the first n from the end, as a search from the end takes them
        return list(itertools.islice(reversed(events), args[0]))
    return len(events)


def _same_consumers(lazy: TaskSnapshot, whole: TaskSnapshot, task_dir: Path,
                    since: int, tail: dict[str, Any] | None) -> None:  # fmt: skip
    """The facts, invocations and views the new code computes from `lazy` are the ones the
    code before it computed from every event (`whole`)."""
    assert invocations.open_invocations(lazy) == old_open_invocations(whole)
    assert facts.audit_completeness(lazy) == old_audit_completeness(whole)
    commits = event_log.of_kinds(lazy.events, ["commit"])
    tags = [f"[agent:{e.payload.get('agent')}]" for e in commits]
    assert tags == old_commit_tags(whole)
    expected_task = views.task_json(whole)
    assert expected_task["interruptions"] == old_interruptions(whole)
    assert views.task_json(lazy) == expected_task
    since = min(since, len(whole.events))
    trail = views.audit_trail_json(lazy, since)
    assert trail == old_audit_trail_json(whole, since)
    assert views.trail_text(trail) == (views.pretty_json(old_audit_trail_json(whole, since))
                                       + "\n").encode()  # fmt: skip
    assert event_log.count_of(lazy.events, "tool_usage", since) == old_tool_usage_before(
        whole, since
    )
    assert store_record._next(lazy, tail) == store_record._next(whole, tail)
    path, key = task_dir / "audit-trail.json", task_dir / views.TRAIL_KEY
    if path.exists():
        assert views._reusable(path, key, lazy) == views._reusable(path, key, whole)


# -- the log and its consumers against the whole history ------------------------------------------


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(first=EVENTS, more=EVENTS, data=st.data())
def test_a_lazy_log_answers_as_the_whole_history_in_its_step_and_after_it(
    store: Store, tmp_path: Path, first: list[Any], more: list[Any], data: st.DataObject
) -> None:
    """Random histories on both stores: a step's lazy snapshot, and the one it extends after
    appending events, answer every question (positions, slices, kinds, counts, selections)
    and give every consumer's result exactly as the tuple of every event does, inside the
    transaction and after it ended; a rendering of the views reuses as the whole one did."""
    name = _new_task(store, first)
    tail = data.draw(st.sampled_from([1, 2, 5, event_log.TAIL]))
    saved, event_log.TAIL = event_log.TAIL, tail  # how many a snapshot reads first
    try:
        _compare_in_step_and_after(store, tmp_path, name, first, more, data)
    finally:
        event_log.TAIL = saved


def _compare_in_step_and_after(store: Store, tmp_path: Path, name: str, first: list[Any],
                               more: list[Any], data: st.DataObject) -> None:  # fmt: skip
    task_dir = tmp_path / name
    task_dir.mkdir()
    before = _eager(store, name)
    views._write_trail(task_dir, before)  # the trail the step's rendering finds
    tail = store_record._next(before, None)
    since = data.draw(st.integers(0, len(first) + len(more)))
    with store.write() as tx:
        lazy = tx.snapshot(name, lazy=True)
        assert lazy is not None
        assert len(lazy.events) == len(before.events)
        for question in _questions(data, len(first)):
            assert _answer(lazy.events, question) == _answer(tuple(before.events), question)
        _same_consumers(lazy, before, task_dir, since, tail)
        for kind, payload in more:
            tx.append_event(name, kind, payload, AT)
        after = tx.snapshot(name, since=lazy)
        assert after is not None
        questions = _questions(data, len(first) + len(more))
    whole = _eager(store, name)
    assert tx.closed
    for question in questions:  # after the commit: read through tx.detached
        assert _answer(after.events, question) == _answer(tuple(whole.events), question)
    _same_consumers(after, whole, task_dir, since, tail)
    assert after.events == whole.events and tuple(after.events) == tuple(whole.events)
    assert after == whole


def test_a_fresh_log_reads_only_what_is_asked(store: Store, store_kind: str) -> None:
    """A step's snapshot of a task with 300 tool_usage events and a few protocol events reads
    its length and last event, then only what the questions need, never the whole history."""
    history = [("tool_usage", {"file": f"f{i}"}) for i in range(300)]
    history[10] = ("agent_invoked", {"agent": "quality"})
    history[200] = ("transition", {"from": "A", "to": "B"})
    name = _new_task(store, history)
    with store.write() as tx:
        snap = tx.snapshot(name, lazy=True)
        assert snap is not None
        log = snap.events
        assert isinstance(log, EventLog) and not log.complete
        assert len(log) == 300 and log[-1].payload == {"file": "f299"}
        assert len(log._tail) == event_log.TAIL  # the last ones, no more
        assert [e.kind for e in log.of_kinds(["agent_invoked", "transition"])] == [
            "agent_invoked", "transition",
        ]  # fmt: skip
        assert log[295:][0].payload == {"file": "f295"}
        assert len(log._tail) == event_log.TAIL
        assert log.count_of("tool_usage", 250) == 248
        assert len(log._tail) == 51
        found = next(e for e in reversed(log) if e.kind == "transition")  # at position 200
        assert found.payload == {"from": "A", "to": "B"}
        assert len(log._tail) == 102  # read back in a chunk as long as what it had
        assert not log.complete
        walk = reversed(log)
        assert next(walk).payload == {"file": "f299"}
        assert log[0].kind == "tool_usage" and log.complete  # read to the start meanwhile
        assert [e.payload for e in itertools.islice(walk, 2)] == [{"file": "f298"},
                                                                  {"file": "f297"}]  # fmt: skip
        assert [e.seq for e in reversed(log)] == [e.seq for e in reversed(list(log))]
        assert len(list(log)) == 300


def test_events_changed_around_taskgate_after_the_step_are_refused(
    store: Store, store_kind: str, tmp_path: Path
) -> None:
    """An event deleted behind taskgate's back between a step's commit and its rendering: the
    log finds fewer events than it counted and raises StoreCorrupt, never a shorter history."""
    name = _new_task(store, [("tool_usage", {"file": f"f{i}"}) for i in range(100)])
    with store.write() as tx:
        snap = tx.snapshot(name, lazy=True)
        assert snap is not None
    sql = "DELETE FROM events WHERE task = ? AND seq = (SELECT MIN(seq) FROM events WHERE task = ?)"
    if store_kind == "postgres":
        import psycopg

        with psycopg.connect(os.environ["TASKGATE_DATABASE_URL"], autocommit=True) as conn:
            conn.execute(sql.replace("?", "%s"), (name, name))
    else:
        import sqlite3

        db = sqlite3.connect(tmp_path / "state.db")
        db.execute(sql, (name, name))
        db.commit()
        db.close()
    with pytest.raises(StoreCorrupt, match="changed while a step read them"):
        list(snap.events)


# -- the whole step, through the CLI, on both stores ---------------------------------------------


def test_a_steps_views_are_the_whole_historys(store_kind: str, repo: Repo) -> None:
    """Transitions through the CLI of a task with hundreds of events the hooks recorded
    (tool_usage, interruptions, invocations): every view byte is what the code before the
    change renders from every event, and `taskgate audit` finds nothing."""
    task = "add-login"
    repo.ok("start", task)
    wt = repo.worktree(task)
    repo.ok("classify", task, cwd=wt)
    engine = Engine(find_workspace(repo.path), session_id="s1", cwd=repo.path)
    try:
        for round_ in range(3):
            with engine.store.write() as tx:
                for i in range(150):
                    kind = "interruption" if i == 70 else "tool_usage"
                    tx.append_event(task, kind, {"session": "s1", "file": f"m{i}", "type": "x"},
                                    AT)  # fmt: skip
                tx.append_event(task, "agent_invoked", {"session": "s1", "agent": "quality"}, AT)
                tx.append_event(task, "agent_completed", {"session": "s1", "agent": "quality"},
                                AT)  # fmt: skip
            target = ["REQUIREMENTS"] if round_ % 2 == 0 else ["CLASSIFIED", "--reason", "back"]
            repo.ok("transition", task, *target, cwd=wt)
            with engine.store.read() as tx:
                whole = tx.snapshot(task)
            assert whole is not None and len(whole.events) > 150 * (round_ + 1)
            task_dir = repo.task_dir(task)
            trail = (task_dir / "audit-trail.json").read_text(encoding="utf-8")
            assert trail == views.pretty_json(old_audit_trail_json(whole)) + "\n"
            task_json = json.loads((task_dir / "task.json").read_text(encoding="utf-8"))
            assert task_json["interruptions"] == old_interruptions(whole)
            assert task_json["_events"] == len(whole.events)
            assert (task_dir / "task.json").read_text(encoding="utf-8") == (
                views.pretty_json(views.task_json(whole)) + "\n"
            )
    finally:
        engine.close()
    repo.ok("audit", task)
