"""store/canon.py: the C-encoder JSON and the builtin SHA-256 give exactly the bytes of
`json.dumps(..., sort_keys=True)` and hashlib, so the chain a hook process appends without
`json` or `hashlib` is the chain `taskgate audit` recomputes (issue 18)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskgate.store import canon

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(values)
def test_the_encodings_are_the_json_packages(value: Any) -> None:
    assert canon.compact(value) == json.dumps(value, sort_keys=True, separators=(",", ":"))
    assert canon.spaced(value) == json.dumps(value, sort_keys=True)


@given(st.text(), st.text(), st.dictionaries(st.text(), values, max_size=5))
def test_the_event_hash_is_sha256_of_the_canonical_json(task: str, kind: str, payload: Any) -> None:
    body = json.dumps(
        [canon.GENESIS_HASH, task, "2026-01-01T00:00:00Z", kind, payload],
        sort_keys=True,
        separators=(",", ":"),
    )
    expected = hashlib.sha256(body.encode("utf-8")).hexdigest()
    assert canon.event_hash(canon.GENESIS_HASH, task, "2026-01-01T00:00:00Z", kind, payload) == (
        expected
    )


def test_what_json_refuses_is_refused() -> None:
    for bad in ({"a": object()}, {"k": {1, 2}}):
        try:
            canon.compact(bad)
        except TypeError:
            continue
        raise AssertionError(f"{bad!r} was encoded")


def test_a_failed_encode_leaves_no_false_circular_reference() -> None:
    """The C encoder is built once; a failure mid-way must not poison the next encode."""
    inner: dict[str, Any] = {"x": [1, {"y": object()}]}
    with pytest.raises(TypeError):
        canon.compact({"a": inner})
    inner["x"][1]["y"] = 2
    assert canon.compact({"a": inner}) == '{"a":{"x":[1,{"y":2}]}}'
