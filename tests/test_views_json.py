"""Views are written by engine/views.pretty_json, which must write exactly what
json.dumps(indent=2, sort_keys=True, ensure_ascii=False) writes (issue 18: the same bytes,
about four times faster)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from taskgate.engine.views import pretty_json

SCALARS = (
    st.none() | st.booleans() | st.integers() | st.floats() | st.text()
    | st.sampled_from(["é\n\"\\\t\u2028\x00😀", "", "a\r\nb"])
)  # fmt: skip
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=5), inner, max_size=4)
        | st.dictionaries(st.integers(), inner, max_size=3)
    ),
    max_leaves=30,
)


def _reference(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


@settings(max_examples=500, deadline=None)
@given(VALUES)
def test_byte_identical_to_json_dumps(value: Any) -> None:
    assert pretty_json(value) == _reference(value)


def test_an_audit_trail_shape() -> None:
    trail = {
        "_seq": 3, "events": 2, "chain_head": None, "tool_usage": [
            {"timestamp": "t", "tool": "Edit", "nested": {"list": [1, 2.5, None, True]}},
            {"timestamp": "t2", "empty": {}, "none": []},
        ], "tuple": ("a", 1), "subclass": type("S", (str,), {})("x"),
    }  # fmt: skip
    assert pretty_json(trail) == _reference(trail)


def test_repeated_shapes_and_percent_signs() -> None:
    rows = [{"a%s": i, "%": "x%d", "nested": {"%(k)s": [i, {"a%s": None}]}} for i in range(3)]
    value = {"rows": rows, "again": {"rows": rows}, "%": "%%"}
    assert pretty_json(value) == _reference(value)


# -- audit-trail.json's tool_usage entries reused from the file written before (issue 18) ----

PAYLOADS = st.dictionaries(
    st.sampled_from(["tool", "file", "session", "note", "agent", "events", "tool_usage"]),
    st.text(max_size=6) | st.sampled_from(["\n    {", '"', "\\"]) | st.integers()
    | st.lists(st.text(max_size=3), max_size=2) | st.dictionaries(st.text(max_size=3),
                                                                   st.integers(), max_size=2),
    max_size=4,
)  # fmt: skip
KINDS = st.sampled_from(["tool_usage", "tool_usage", "transition", "commit", "agent_invoked"])


@settings(max_examples=60, deadline=None)
@given(batches=st.lists(st.lists(st.tuples(KINDS, PAYLOADS), max_size=5), min_size=1, max_size=6))
def test_the_trail_reusing_its_entries_is_the_trail_rendered_whole(
    batches: list[list[tuple[str, dict[str, Any]]]],
) -> None:
    """Each rendering after appended events: the file equals the whole rendering; every
    rendering after the first reused the entries written before."""
    import tempfile
    from pathlib import Path

    from taskgate.engine import views
    from taskgate.store.records import TaskRow
    from taskgate.store.sqlite import SqliteStore

    with tempfile.TemporaryDirectory() as root:
        store = SqliteStore(Path(root) / "state.db")
        task_dir = Path(root) / "t"
        task_dir.mkdir()
        at = "2026-01-01T00:00:00Z"
        with store.write() as tx:
            tx.insert_task(TaskRow("t", "INIT", "s", "h", 1, at, at))
        rendered = 0  # events the last rendering covered
        try:
            for number, batch in enumerate(batches):
                with store.write() as tx:
                    for kind, payload in batch:
                        tx.append_event("t", kind, payload, at)
                with store.read() as tx:
                    snap = tx.snapshot("t")
                assert snap is not None
                reused = views._reusable(task_dir / "audit-trail.json",
                                         task_dir / views.TRAIL_KEY, snap)  # fmt: skip
                assert (reused is not None) == (number > 0 and rendered > 0)
                views._write_trail(task_dir, snap)
                rendered = len(snap.events)
                text = (task_dir / "audit-trail.json").read_text(encoding="utf-8")
                assert text == _reference(views.audit_trail_json(snap)) + "\n"
        finally:
            store.close()


def test_a_trail_edited_in_place_or_its_key_wrong_is_rendered_whole(tmp_path: Any) -> None:
    from taskgate.engine import views
    from taskgate.store.records import TaskRow
    from taskgate.store.sqlite import SqliteStore

    store = SqliteStore(tmp_path / "state.db")
    at = "2026-01-01T00:00:00Z"
    path, key = tmp_path / "audit-trail.json", tmp_path / views.TRAIL_KEY
    with store.write() as tx:
        tx.insert_task(TaskRow("t", "INIT", "s", "h", 1, at, at))
        tx.append_event("t", "tool_usage", {"file": "a.py"}, at)
    for damage in ("in place", "key", "chain"):
        with store.write() as tx:
            tx.append_event("t", "tool_usage", {"file": "b.py"}, at)
        with store.read() as tx:
            snap = tx.snapshot("t")
        assert snap is not None
        views._write_trail(tmp_path, snap)
        if damage == "in place":  # an edit keeps the key file but not the file's key
            path.write_text(path.read_text().replace("a.py", "x.py"))
        elif damage == "key":
            key.write_text("garbage")
        else:  # rendered from another history: its head is not the store's
            path.write_text(path.read_text().replace(snap.events[-1].hash, "0" * 64))
            key.write_text(views.snapshot_file_key(path.stat()))
        with store.write() as tx:
            tx.append_event("t", "tool_usage", {"file": "c.py"}, at)
        with store.read() as tx:
            snap = tx.snapshot("t")
        assert snap is not None
        assert views._reusable(path, key, snap) is None
        views._write_trail(tmp_path, snap)
        assert path.read_text() == _reference(views.audit_trail_json(snap)) + "\n"
    store.close()
