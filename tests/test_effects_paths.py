"""The effect check's files under `<state dir>/effects/` never share a path.

Each session's baseline is `<safe_name(session)>.json`; the unwatched-patterns cache sits
beside them. It was `unwatched.json`, which is also the baseline of a session named
`unwatched`, so each overwrote the other (a baseline replaced by the cache is taken again,
and what changed before it goes unseen).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from taskgate.hooks.effects import baseline_path
from taskgate.hooks.ignored import cache_path

STATE = "/repo/.taskgate"


@given(st.text(max_size=40) | st.sampled_from(["unwatched", ".unwatched", "..unwatched", ""]))
def test_no_session_baseline_is_the_unwatched_cache(session: str) -> None:
    assert baseline_path(STATE, session) != cache_path(STATE)


def test_a_session_named_unwatched_keeps_its_own_baseline() -> None:
    assert baseline_path(STATE, "unwatched") == "/repo/.taskgate/effects/unwatched.json"
    assert cache_path(STATE) == "/repo/.taskgate/effects/.unwatched.json"
