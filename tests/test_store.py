"""The store interface on both stores (SQLite and a real PostgreSQL, tests/store_kinds.py):
exclusive claims, CAS updates, one lock per session, the hash chain."""

from __future__ import annotations

from pathlib import Path

import pytest

from store_kinds import kind_fixture, store_fixture  # noqa: F401
from taskgate.store.base import Conflict, Store
from taskgate.store.records import GENESIS_HASH, TaskRow, TransitionRow, event_hash
from taskgate.store.schema import SCHEMA_VERSION
from taskgate.store.sqlite import SqliteStore


def row(name: str, session: str = "s1") -> TaskRow:
    return TaskRow(name, "INIT", session, "host", 1, "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z")


def test_schema_version_and_reopen(tmp_path: Path) -> None:
    s = SqliteStore(tmp_path / "db")
    assert s.schema_version() == SCHEMA_VERSION
    s.close()
    assert SqliteStore(tmp_path / "db").schema_version() == SCHEMA_VERSION


def test_R_LCK_01_exclusive_create(store: Store) -> None:
    with store.write() as tx:
        assert tx.insert_task(row("t", "s1")) is True
    with store.write() as tx:
        assert tx.insert_task(row("t", "s2")) is False
        current = tx.task("t")
    assert current is not None and current.session_id == "s1"


def test_R_LCK_19_one_unreleased_lock_per_session(store: Store) -> None:
    with store.write() as tx:
        tx.insert_task(row("a"))
    with pytest.raises(Conflict), store.write() as tx:
        tx.insert_task(row("b"))
    with store.write() as tx:
        tx.update_task("a", 1, lock_released_at="2026-01-01T00:00:01Z")
        assert tx.insert_task(row("b")) is True


def test_update_is_compare_and_swap(store: Store) -> None:
    with store.write() as tx:
        tx.insert_task(row("t"))
        updated = tx.update_task("t", 1, state="CLASSIFIED")
    assert updated.seq == 2 and updated.state == "CLASSIFIED"
    with pytest.raises(Conflict), store.write() as tx:
        tx.update_task("t", 1, state="REQUIREMENTS")
    with store.read() as tx:
        current = tx.task("t")
    assert current is not None and current.state == "CLASSIFIED"


def test_write_rolls_back_on_error(store: Store) -> None:
    with store.write() as tx:
        tx.insert_task(row("t"))
    with pytest.raises(RuntimeError), store.write() as tx:
        tx.update_task("t", 1, state="CLASSIFIED")
        tx.add_transition(TransitionRow("t", 0, "INIT", "CLASSIFIED", "2026-01-01T00:00:00Z"))
        raise RuntimeError("crash in the middle of a step")
    with store.read() as tx:
        snap = tx.snapshot("t")
    assert snap is not None and snap.task.state == "INIT" and snap.transitions == ()


def test_events_are_hash_chained(store: Store) -> None:
    with store.write() as tx:
        tx.insert_task(row("t"))
        first = tx.append_event("t", "claimed", {"a": 1}, "2026-01-01T00:00:00Z")
        second = tx.append_event("t", "transition", {"to": "X"}, "2026-01-01T00:00:01Z")
    assert first.prev_hash == GENESIS_HASH
    assert second.prev_hash == first.hash
    assert second.hash == event_hash(first.hash, "t", second.at, "transition", {"to": "X"})
    with store.read() as tx:
        assert [e.hash for e in tx.events("t")] == [first.hash, second.hash]
