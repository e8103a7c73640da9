"""The `claude` backend against a fake `claude` that speaks Claude Code's headless JSON.

The fake follows the documented `claude -p --output-format json` result object: type "result",
subtype "success" / "error_max_turns" / "error_during_execution", is_error, result,
session_id, total_cost_usd, num_turns, duration_ms (docs/agents.md lists the version).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from taskgate.agents.base import Mode, ResultStatus
from taskgate.agents.claude import DEFAULT_ALLOWED_TOOLS, ClaudeBackend, result_object
from taskgate.agents.config import AgentSettings
from taskgate.agents.invoke import invoke
from taskgate.protocol.states import Decision
from test_agent_command import fake
from test_agents_backends import TaskEnv, make_task_env

FAKE_CLAUDE = """
import json, os, pathlib, subprocess, sys, time
behaviour = os.environ.get("FAKE_CLAUDE", "success")
prompt = sys.stdin.read()
pathlib.Path(os.environ["FAKE_LOG"]).write_text(json.dumps(
    {"argv": sys.argv[1:], "cwd": os.getcwd(), "prompt": prompt,
     "agent": os.environ.get("TASKGATE_AGENT")}))
def result(text, subtype="success", is_error=False, **extra):
    data = {"type": "result", "subtype": subtype, "is_error": is_error, "duration_ms": 1200,
            "duration_api_ms": 1100, "num_turns": 4, "session_id": "sess-123",
            "total_cost_usd": 0.0123, "usage": {"input_tokens": 10, "output_tokens": 20}}
    if text is not None:
        data["result"] = text
    data.update(extra)
    print(json.dumps(data))
mode = os.environ["TASKGATE_MODE"]
if behaviour == "success":
    if mode == "requirements":
        pathlib.Path(os.environ["TASKGATE_REPORT_PATH"]).write_text("A requirement. " * 10)
    if mode == "implementation":
        pathlib.Path("feature.py").write_text("VALUE = 1\\n")
        subprocess.run(["git", "add", "feature.py"], check=True)
        subprocess.run(["git", "-c", "user.name=c", "-c", "user.email=c@x", "commit", "-q",
                        "-m", "[agent:" + os.environ["TASKGATE_AGENT"] + "] add feature"],
                       check=True)
    answer = {"status": "COMPLETE", "work_remaining": False, "verdict": "APPROVED",
              "reason": "looks right", "message": "done"}
    result("I have finished.\\n\\n```json\\n" + json.dumps(answer) + "\\n```")
elif behaviour == "stream":
    print(json.dumps({"type": "system", "subtype": "init", "session_id": "sess-123"}))
    print(json.dumps({"type": "assistant", "message": {"content": []}}))
    result('{"status": "COMPLETE", "verdict": "REJECTED", "reason": "no tests"}')
elif behaviour == "max_turns":
    result(None, subtype="error_max_turns", is_error=True, errors=[])
elif behaviour == "during_execution":
    result(None, subtype="error_during_execution", is_error=True, errors=["API Error: 529"])
    sys.exit(1)
elif behaviour == "no_block":
    result("I reviewed it and it looks fine to me.")
elif behaviour == "garbage":
    print("<html>502 Bad Gateway</html>")
elif behaviour == "crash":
    sys.stderr.write("Error: Invalid API key - Please run /login\\n")
    sys.exit(1)
elif behaviour == "hang":
    time.sleep(600)
"""


def claude_env(tmp_path: Path, behaviour: str, **options: object) -> TaskEnv:
    """Agents run the fake claude (found by name on PATH, like the real one)."""
    bin_dir = tmp_path / "bin"
    fake(bin_dir, "claude", FAKE_CLAUDE)
    env = {"FAKE_CLAUDE": behaviour, "FAKE_LOG": str(tmp_path / "log.json")}
    config = {"backend": "claude", "claude": {"executable": str(bin_dir / "claude"), "env": env,
                                              **options}}  # fmt: skip
    # The fake logs outside the worktree, which confinement forbids (test_sandbox.py runs
    # the backends confined).
    return make_task_env(tmp_path, {**config, "sandbox": "none"})


def test_headless_invocation_and_success(tmp_path: Path) -> None:
    env = claude_env(tmp_path, "success", model="sonnet", max_turns=30)
    request = env.request("architect", Mode.REVIEW)
    result = invoke(request)
    assert result.status is ResultStatus.COMPLETE and result.verdict is Decision.APPROVED
    assert result.reason == "looks right" and result.backend == "claude"
    assert result.meta["session_id"] == "sess-123" and result.meta["total_cost_usd"] == 0.0123
    log = json.loads((tmp_path / "log.json").read_text())
    argv = log["argv"]
    assert argv[:3] == ["-p", "--output-format", "json"]
    assert argv[argv.index("--permission-mode") + 1] == "acceptEdits"
    assert argv[argv.index("--allowedTools") + 1] == ",".join(DEFAULT_ALLOWED_TOOLS)
    assert argv[argv.index("--model") + 1] == "sonnet" and "--max-turns" in argv
    assert request.prompt not in argv and log["prompt"] == request.prompt  # prompt on stdin
    assert log["cwd"] == str(env.worktree("architect")) and log["agent"] == "architect"


def test_requirements_and_implementation_with_real_side_effects(tmp_path: Path) -> None:
    env = claude_env(tmp_path, "success")
    assert invoke(env.request("quality", Mode.REQUIREMENTS)).ok
    impl = invoke(env.request("quality", Mode.IMPLEMENTATION))
    assert impl.ok and [c.subject for c in impl.commits] == ["[agent:quality] add feature"]


def test_the_last_result_line_of_a_stream_is_used(tmp_path: Path) -> None:
    env = claude_env(tmp_path, "stream")
    result = invoke(env.request("test", Mode.REVIEW))
    assert result.verdict is Decision.REJECTED and result.reason == "no tests"


@pytest.mark.parametrize(
    ("behaviour", "words"),
    [
        ("max_turns", "claude run failed (error_max_turns)"),
        ("during_execution", "API Error: 529"),
        ("no_block", "no JSON result object"),
        ("garbage", "claude printed no result object"),
        ("crash", "Invalid API key"),
    ],
)
def test_failures_become_errors(tmp_path: Path, behaviour: str, words: str) -> None:
    env = claude_env(tmp_path, behaviour)
    result = invoke(env.request("test", Mode.REVIEW))
    assert result.status is ResultStatus.ERROR
    assert words in result.reason, result.reason


def test_a_hanging_claude_times_out(tmp_path: Path) -> None:
    env = claude_env(tmp_path, "hang")
    result = invoke(replace(env.request("test", Mode.REVIEW), timeout_s=0.5))
    assert result.status is ResultStatus.TIMEOUT


def test_settings_and_result_object_parsing() -> None:
    backend = ClaudeBackend.from_settings(
        AgentSettings("claude", {"allowed_tools": ["Read"], "permission_mode": "plan"})
    )
    assert backend.command() == ["claude", "-p", "--output-format", "json", "--permission-mode",
                                 "plan", "--allowedTools", "Read"]  # fmt: skip
    assert result_object('{"type": "assistant"}') is None
    assert result_object('noise\n{"type": "result", "subtype": "success"}\n') is not None
