"""The engine-path hook events answered without the engine (hooks/quick.py, issue 18): the
same answers and the same store as the engine's path, and the hand-written parts equal the
library functions they replace."""

from __future__ import annotations

import re
import shlex

from hypothesis import given
from hypothesis import strategies as st

from taskgate.hooks.dispatch import _shell_quote, client_generated

_TAG = re.compile(r"\s*<([a-z][a-z0-9_-]*)(?:\s[^>]*)?>")


def _by_regex(prompt: str) -> bool:
    found = _TAG.match(prompt)
    return found is not None and f"</{found.group(1)}>" in prompt


prompts = st.text(alphabet=st.sampled_from(list("<>/ \t\nab-_1Z\u00a0x")), max_size=30)


@given(prompts | st.text(max_size=30))
def test_client_generated_equals_the_regex(prompt: str) -> None:
    assert client_generated(prompt) == _by_regex(prompt)


def test_client_generated_examples() -> None:
    assert client_generated("<task-notification>done</task-notification>")
    assert client_generated("  <command-name x='1'>/clear</command-name>")
    assert not client_generated("approved <b>bold</b>")
    assert not client_generated("<b>not closed")


@given(st.text(max_size=20))
def test_shell_quote_equals_shlex(text: str) -> None:
    assert _shell_quote(text) == shlex.quote(text)
