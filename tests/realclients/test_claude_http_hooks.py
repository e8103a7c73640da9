"""HTTP hooks with the real Claude Code 2.1.332 (issue 18): `taskgate hooks install --http`
makes the client post PreToolUse (and the other agent-side events) to `taskgate serve`; the
SessionStart command starts that server; a server that is down blocks the call.

Claude Code runs in a network namespace of its own (clients.offline_command), so the server it
talks to is the one its SessionStart hook started inside that namespace: the autostart path is
what these tests exercise, and the namespace's end ends the server with it.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from conftest import Repo
from realclients.conftest import OWNER, Claude, OwnedRepo, copy_template
from realclients.mock_anthropic import call, say


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _install_http(repo: Path, port: int, state: Path) -> dict[str, Any]:
    home = Path(os.environ["HOME"])
    Repo(repo).ok("hooks", "install", "--http", "--port", str(port), "--state-dir", str(state))
    settings = home / ".claude" / "settings.json"
    assert settings.stat().st_mode & 0o077 == 0  # it holds the hook secret
    data: dict[str, Any] = json.loads(settings.read_text())
    return data


def _errors(claude: Claude) -> list[dict[str, Any]]:
    return [r for r in claude.mock.last().tool_results() if r.get("is_error")]


@pytest.fixture
def fresh(templates: dict[str, Path], tmp_path: Path) -> OwnedRepo:
    return copy_template(templates, "fresh", tmp_path / "repo")


def test_a_store_write_is_denied_by_the_server_that_session_start_started(
    claude: Claude, clients_dir: Path, fresh: OwnedRepo, tmp_path: Path
) -> None:
    port, state = _free_port(), tmp_path / "state"
    settings = _install_http(fresh.path, port, state)
    pre = settings["hooks"]["PreToolUse"][0]["hooks"]
    assert [h["type"] for h in pre] == ["http"]  # no command hook could have answered
    assert pre[0]["onFailure"] == "block" and pre[0]["url"].endswith("/hooks/PreToolUse")
    assert settings["hooks"]["UserPromptSubmit"][0]["hooks"][0]["type"] == "command"
    target = fresh.path / ".taskgate" / "notes.txt"
    inside = fresh.path / "notes.txt"
    script = [
        call("Write", file_path=str(target), content="forged\n"),
        call("Write", file_path=str(inside), content="fine\n"),
        say("done"),
    ]
    run = claude.run("write the notes", fresh.path, script, session=OWNER)
    errors = _errors(claude)
    assert len(errors) == 1 and "[R-LCK-09]" in str(errors[0]["text"]), errors
    assert not target.exists()
    assert inside.read_text() == "fine\n"  # the server allowed what the rules allow
    assert [d["tool_name"] for d in run.result["permission_denials"]] == ["Write"]
    log = (state / "autostart.log").read_text()
    assert f"HTTP hooks: POST http://127.0.0.1:{port}/hooks/EVENT" in log, log


def test_a_server_that_is_down_blocks_the_call(
    claude: Claude, clients_dir: Path, fresh: OwnedRepo, tmp_path: Path
) -> None:
    port, state = _free_port(), tmp_path / "state"
    settings = _install_http(fresh.path, port, state)
    # Nothing starts the server: drop the autostart command, keep taskgate's SessionStart.
    start = settings["hooks"]["SessionStart"][0]["hooks"]
    assert "autostart.py" in start[0]["command"]
    del start[0]
    (Path(claude.home) / ".claude" / "settings.json").write_text(json.dumps(settings))
    plain = tmp_path / "plain"  # not a taskgate repository: the command hook would allow
    plain.mkdir()
    target = plain / "note.txt"
    script = [call("Write", file_path=str(target), content="x\n"), say("done")]
    claude.run("write a note", plain, script, session=OWNER)
    errors = _errors(claude)
    assert len(errors) == 1, claude.mock.last().tool_results()
    assert 'blocking because onFailure is "block"' in str(errors[0]["text"]), errors
    assert not target.exists()
    assert not (state / "autostart.log").exists()


def test_the_same_write_is_allowed_once_the_server_runs(
    claude: Claude, clients_dir: Path, fresh: OwnedRepo, tmp_path: Path
) -> None:
    """The counterpart of the test above: only the server's absence blocked that write."""
    port, state = _free_port(), tmp_path / "state"
    _install_http(fresh.path, port, state)
    plain = tmp_path / "plain"
    plain.mkdir()
    target = plain / "note.txt"
    script = [call("Write", file_path=str(target), content="x\n"), say("done")]
    claude.run("write a note", plain, script, session=OWNER)
    assert not _errors(claude), claude.mock.last().tool_results()
    assert target.read_text() == "x\n"


def test_a_wrong_secret_is_refused_and_blocks_the_call(
    claude: Claude, clients_dir: Path, fresh: OwnedRepo, tmp_path: Path
) -> None:
    """The server runs (SessionStart started it) but the entries carry another secret: the
    door answers 401 and Claude Code blocks the call instead of allowing it."""
    port, state = _free_port(), tmp_path / "state"
    settings = _install_http(fresh.path, port, state)
    for groups in settings["hooks"].values():
        for hook in groups[0]["hooks"]:
            if hook["type"] == "http":
                hook["headers"] = {"X-Taskgate-Hook-Secret": "not-the-secret-" + "x" * 30}
    (Path(claude.home) / ".claude" / "settings.json").write_text(json.dumps(settings))
    plain = tmp_path / "plain"
    plain.mkdir()
    target = plain / "note.txt"
    script = [call("Write", file_path=str(target), content="x\n"), say("done")]
    claude.run("write a note", plain, script, session=OWNER)
    errors = _errors(claude)
    assert len(errors) == 1, claude.mock.last().tool_results()
    assert 'blocking because onFailure is "block"' in str(errors[0]["text"]), errors
    assert "ECONNREFUSED" not in str(errors[0]["text"])  # reached, and refused (401)
    assert not target.exists()
    log = (state / "autostart.log").read_text()  # the server was up: refused, not unreachable
    assert f"http://127.0.0.1:{port}" in log, log
