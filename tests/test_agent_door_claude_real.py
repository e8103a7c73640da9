"""The agent door with the real Claude Code (2.1.332) and `hooks install --sandbox`'s settings:
what a sandboxed session's Bash gets when it runs its own `taskgate transition` while
`taskgate serve` is running (issue 14). Needs the pinned clients, bwrap and socat."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from conftest import Repo, make_repo
from flow import to_classified
from server_helpers import start_server
from taskgate.hooks.install import sandbox_settings
from test_sandbox_client_real import _available

pytestmark = pytest.mark.skipif(not _available(), reason="the pinned Claude Code is not here")

TASK = "add-login"


def _bash(repo: Repo, command: str) -> str:
    from realclients.clients import run_claude
    from realclients.mock_anthropic import MockAnthropic, call, say

    home = Path(os.environ["HOME"])
    settings = sandbox_settings(repo.path)
    settings["sandbox"]["enableWeakerNestedSandbox"] = True  # see test_sandbox_client_real
    settings_file = repo.path.parent / "sandbox-settings.json"
    settings_file.write_text(json.dumps(settings))
    with MockAnthropic() as mock:
        mock.script([call("Bash", command=command, description="taskgate"), say("done")])
        run = run_claude(
            "go", cwd=repo.worktree(TASK), home=home, port=mock.port,
            unix_socket=mock.unix_socket, args=["--settings", str(settings_file)],
        )  # fmt: skip
        assert run.code == 0, run.err[-2000:]
        results = mock.last().tool_results()
    return str(results[0]["text"])


def test_a_sandboxed_session_s_taskgate_transition_and_the_door(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    to_classified(repo, TASK)
    server = start_server(repo.path, tmp_path / "st")
    try:
        out = _bash(
            repo,
            f"PYTHONPATH={Path(__file__).parent.parent / 'src'} {sys.executable} -P -m taskgate "
            f"--session s1 transition {TASK} REQUIREMENTS; echo rc=$?",
        )
    finally:
        server.stop()
    state = repo.ok("status", TASK, "--json").json()["state"]
    # Linux: Claude Code's seccomp filter blocks Unix sockets (allowUnixSockets is macOS only),
    # so the door is not reached and the store stays as it was; macOS: through the door.
    if sys.platform.startswith("linux"):
        assert state == "CLASSIFIED" and "rc=0" not in out
        assert "does not allow Unix sockets" in out and "Traceback" not in out
    else:
        assert state == "REQUIREMENTS" and "rc=0" in out
