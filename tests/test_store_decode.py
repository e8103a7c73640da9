"""store/sqlite._load decodes exactly what json.loads decodes, and fails where it fails
(issue 18: the C scanner without json.loads' overhead for the store's own compact JSON)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskgate.store.sqlite import _load

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)


@given(JSON, st.sampled_from(["", " ", "\n", "\t "]), st.sampled_from(["", " ", "\r\n"]))
def test_same_value_as_json_loads(value: Any, before: str, after: str) -> None:
    text = before + json.dumps(value, sort_keys=True, separators=(",", ":")) + after
    assert _load(text) == json.loads(text)


@pytest.mark.parametrize(
    "text", ["", " ", "{", '{"a":1}x', '{"a":1} {}', "\ufeff{}", "nul", "[1,]", "{'a':1}"]
)
def test_the_same_failures_as_json_loads(text: str) -> None:
    with pytest.raises(ValueError) as ours:
        _load(text)
    with pytest.raises(ValueError) as theirs:
        json.loads(text)
    assert str(ours.value) == str(theirs.value)


def test_null_and_constants() -> None:
    assert _load(None) is None
    assert _load("NaN") != _load("NaN")  # as json.loads: a float nan
    assert _load("Infinity") == json.loads("Infinity")
