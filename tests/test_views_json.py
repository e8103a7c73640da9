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
