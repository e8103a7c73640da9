"""tests/fixtures/hooks/codex holds what the real Codex CLI (0.169.0) sends its hooks (issue 13).

One scripted `codex exec` makes a shell call, an apply_patch and an MCP call; a foreign hook
captures the exact stdin of every event. Each fixture must have the same fields (and tool input
fields) as the captured input, and taskgate's Codex hook program must answer every fixture
without an error. `TASKGATE_UPDATE_FIXTURES=1` rewrites the fixtures from the capture.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import SRC, make_repo
from realclients.codex_runner import MCP_SERVER, Codex, codex_fixture  # noqa: F401
from realclients.mock_openai import add_file_patch, custom_tool_call, mcp_call, shell
from taskgate.hooks.codex_install import LAUNCHER

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hooks" / "codex"
EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop")


def _name(data: dict[str, Any]) -> str:
    event = re.sub(r"(?<!^)([A-Z])", r"_\1", data["hook_event_name"]).lower()
    tool = str(data.get("tool_name", "")).lower().replace("mcp__fs__", "mcp_")
    return f"{event}_{tool}" if tool else event


def _normalise(data: dict[str, Any], repo: Path, home: Path, tmp: Path) -> dict[str, Any]:
    text = json.dumps(data)
    for old, new in ((str(repo), "REPO"), (str(home), "/home/user"), (str(tmp), "/tmp/t")):
        text = text.replace(old, new)
    result: dict[str, Any] = json.loads(text)
    for key, value in (("session_id", "s1"), ("turn_id", "t1"), ("tool_use_id", "call_1")):
        if key in result:
            result[key] = value
    if result.get("transcript_path"):
        result["transcript_path"] = "/home/user/.codex/sessions/rollout-s1.jsonl"
    return result


def _capture(codex: Codex, tmp_path: Path) -> dict[str, dict[str, Any]]:
    repo = make_repo(tmp_path / "repo")
    out = tmp_path / "inputs"
    out.mkdir()
    script = tmp_path / "capture.sh"
    script.write_text(f'#!/bin/sh\ncat > "{out}/$(date +%s%N).json"\n')
    script.chmod(0o755)
    group = {"hooks": [{"type": "command", "command": str(script), "timeout": 30}]}
    hooks = {event: [{"matcher": "*", **group} if "Tool" in event else group] for event in EVENTS}
    (codex.home / ".codex" / "hooks.json").write_text(json.dumps({"hooks": hooks}))
    server = tmp_path / "mcp_fs.py"
    server.write_text(MCP_SERVER)
    config = codex.home / ".codex" / "config.toml"
    config.write_text(
        config.read_text()
        + f"\n[mcp_servers.fs]\ncommand = {json.dumps(sys.executable)}\n"
        + f"args = [{json.dumps(str(server))}]\n"
    )
    run = codex.exec(
        repo.path,
        shell("git status"),
        custom_tool_call("apply_patch", add_file_patch("src/app.py", "print('hi')")),
        mcp_call("fs", "write_file", {"path": str(tmp_path / "notes.md"), "content": "x"}),
        prompt="add the app",
        extra=("--dangerously-bypass-hook-trust",),
    )
    assert run.code == 0, run.err
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(out.glob("*.json")):
        data = json.loads(path.read_text())
        found.setdefault(_name(data), _normalise(data, repo.path, codex.home, tmp_path))
    return found


def _shape(data: dict[str, Any]) -> tuple[list[str], list[str]]:
    tool_input = data.get("tool_input")
    return sorted(data), sorted(tool_input) if isinstance(tool_input, dict) else []


def test_the_fixtures_have_what_codex_sends(codex: Codex, tmp_path: Path) -> None:
    captured = _capture(codex, tmp_path)
    expected = {"session_start", "user_prompt_submit", "stop", "pre_tool_use_bash",
                "post_tool_use_bash", "pre_tool_use_apply_patch", "post_tool_use_apply_patch",
                "pre_tool_use_mcp_write_file", "post_tool_use_mcp_write_file"}  # fmt: skip
    assert set(captured) == expected, sorted(captured)
    if os.environ.get("TASKGATE_UPDATE_FIXTURES"):
        FIXTURES.mkdir(parents=True, exist_ok=True)
        for name, data in captured.items():
            (FIXTURES / f"{name}.json").write_text(json.dumps(data, indent=2) + "\n")
    for name, data in captured.items():
        fixture = json.loads((FIXTURES / f"{name}.json").read_text())
        assert _shape(fixture) == _shape(data), name


@pytest.mark.parametrize("name", sorted(p.stem for p in FIXTURES.glob("*.json")))
def test_the_hook_program_answers_every_fixture(name: str, tmp_path: Path) -> None:
    """Each captured input, in a real repository, is answered with exit 0 and JSON (or
    nothing), never with taskgate's 'cannot judge this call'."""
    repo = make_repo(tmp_path / "repo")
    data = json.loads((FIXTURES / f"{name}.json").read_text().replace("REPO", str(repo.path)))
    event = data["hook_event_name"]
    done = subprocess.run([sys.executable, "-S", str(LAUNCHER), event], input=json.dumps(data),
                          capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "PYTHONPATH": str(SRC)})  # fmt: skip
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout) if done.stdout.strip() else {}
    assert "R-REC-14" not in json.dumps(answer), answer
    if name == "pre_tool_use_apply_patch":  # src/app.py in the main worktree: allowed
        assert answer == {}, answer
