"""cli/jsonout.dumps_records writes exactly what json.dumps(indent=2, sort_keys=True) writes
(issue 18: `status --json` through the C encoder must not change a byte)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from taskgate.cli.jsonout import dumps_records

SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
VALUES = SCALARS | st.lists(SCALARS, max_size=4)
RECORDS = st.lists(st.dictionaries(st.text(), VALUES, max_size=6), max_size=6)


def _reference(rows: Any) -> str:
    return json.dumps(rows, indent=2, sort_keys=True, default=str)


@given(RECORDS)
def test_flat_records_are_byte_identical(rows: list[dict[str, Any]]) -> None:
    assert dumps_records(rows) == _reference(rows)


def test_status_shaped_rows_and_fallbacks() -> None:
    rows = [
        {"task_name": "t\u00e9-1", "state": "IMPLEMENTATION", "session_id": "s\n1",
         "owned_by_me": True, "released": False, "risk_level": None,
         "required_agents": ["architect", "quality"], "updated_at": "2026-01-01T00:00:00Z"},
        {"task_name": "t2", "required_agents": [], "x": 1.5},
        {},
    ]  # fmt: skip
    assert dumps_records(rows) == _reference(rows)
    nested: list[Any] = [{"a": {"b": [1, {"c": 2}]}}, ("tuple",)]
    assert dumps_records(nested) == _reference(nested)  # not flat: json.dumps itself
    assert dumps_records([]) == "[]"


def test_the_status_projection_equals_the_full_rows(repo: Any) -> None:
    from taskgate.store.base import Tx
    from taskgate.store.sqlite import SqliteStore

    for name in ("alpha", "beta"):
        (repo.path / "todo.md").write_text(
            (repo.path / "todo.md").read_text()
            + f"\n## {name}: T\n- Purpose: p\n- Scope: s\n- Components: c\n- Files: src/{name}\n"
        )
    repo.git("commit", "-qam", "tasks")
    repo.ok("start", "alpha", session="s-alpha")
    repo.ok("start", "beta", session="s-beta")
    repo.ok("release", "beta", "--force", "--reason", "bench", session=None)
    store = SqliteStore(repo.path / ".taskgate" / "state.db")
    try:
        with store.read() as tx:
            projected = tx.task_summaries()
            assert projected == Tx.task_summaries(tx)  # the generic one, from full rows
    finally:
        store.close()
    assert [row[0] for row in projected] == ["alpha", "beta"]
    assert projected[1][3] is not None and projected[0][3] is None  # beta released


def test_rows_of_one_shape_and_percent_signs_in_keys() -> None:
    rows = [
        {"a%s": "x", "%": None, "b": ["%d", 1]},
        {"a%s": "y%", "%": True, "b": []},
        {"other": 1.5},
        {"a%s": "z", "%": False, "b": ["q"]},
    ]
    assert dumps_records(rows) == _reference(rows)
    same = [{"task": f"t{i}", "owner": None, "state": "S"} for i in range(5)]
    assert dumps_records(same) == _reference(same)
