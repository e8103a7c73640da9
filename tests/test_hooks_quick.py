"""The engine-path hook events answered without the engine (hooks/quick.py, issue 18): the
same answers and the same store as the engine's path, and the hand-written parts equal the
library functions they replace."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from taskgate.hooks.dispatch import AGENT_COMMAND_VARS, _shell_quote, client_generated

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


def _under(clients: int, tmp_path: Path, env: dict[str, str]) -> str:
    """started_by_agent() in a Python process under `clients` nested shells whose command
    name is `claude` (a symlink to bash: /proc/PID/stat names the link)."""
    claude = tmp_path / "claude"
    if not claude.exists():
        claude.symlink_to(shutil.which("bash") or "/bin/bash")
    probe = shlex.join([sys.executable, "-c", _PROBE]) + "; true"  # `; true`: no exec
    line = probe
    for _ in range(clients):
        line = f"{shlex.quote(str(claude))} -c {shlex.quote(line)}; true"
    full = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src"), **env}
    for var in AGENT_COMMAND_VARS:
        if var not in env:
            full.pop(var, None)
    out = subprocess.run(["/bin/sh", "-c", line], env=full, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


_PROBE = "from taskgate.hooks.dispatch import started_by_agent; print(repr(started_by_agent()))"


def test_started_by_agent_reads_the_ancestors_from_proc(tmp_path: Path) -> None:
    """A client started from inside another client's command (a second `claude` among the
    hook's ancestors) is named; one client, or none, is the person's own session."""
    assert _under(0, tmp_path, {}) == "''"
    assert _under(1, tmp_path, {}) == "''"
    assert _under(2, tmp_path, {}) == repr("another coding client is among its ancestors")
    assert _under(3, tmp_path, {}) == repr("another coding client is among its ancestors")
    assert _under(0, tmp_path, {"CLAUDE_CODE_EXECPATH": "/x"}) == repr(
        "CLAUDE_CODE_EXECPATH is set"
    )
