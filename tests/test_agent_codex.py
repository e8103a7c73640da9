"""The `codex` backend against a fake `codex` that speaks `codex exec --json` (JSONL events).

Event shapes follow codex-rs/exec/src/exec_events.rs: thread.started, turn.started,
item.started / item.completed with items such as agent_message, command_execution,
turn.completed with usage, turn.failed with error.message, and the top-level error event.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from taskgate.agents.base import Mode, ResultStatus
from taskgate.agents.codex import CodexBackend, read_events
from taskgate.agents.config import AgentSettings
from taskgate.agents.invoke import invoke
from taskgate.errors import UsageError
from taskgate.protocol.states import Decision
from test_agent_command import fake
from test_agents_backends import TaskEnv, make_task_env

FAKE_CODEX = """
import json, os, pathlib, subprocess, sys, time
behaviour = os.environ.get("FAKE_CODEX", "success")
args = sys.argv[1:]
prompt = sys.stdin.read() if args[-1] == "-" else args[-1]
pathlib.Path(os.environ["FAKE_LOG"]).write_text(json.dumps(
    {"argv": args, "cwd": os.getcwd(), "prompt": prompt}))
def emit(kind, **fields):
    print(json.dumps({"type": kind, **fields}), flush=True)
last = args[args.index("--output-last-message") + 1] if "--output-last-message" in args else None
emit("thread.started", thread_id="0199a213-81c0-7800-8aa1-bbab2a035a53")
emit("turn.started")
answer = json.dumps({"status": "COMPLETE", "verdict": "APPROVED", "reason": "ok",
                     "work_remaining": os.environ["TASKGATE_MODE"] == "implementation"})
if behaviour in ("success", "no_file"):
    if os.environ["TASKGATE_MODE"] == "implementation":
        emit("item.started", item={"id": "item_1", "type": "command_execution",
                                    "command": "git commit", "aggregated_output": "",
                                    "exit_code": None, "status": "in_progress"})
        pathlib.Path("codex.txt").write_text("hello\\n")
        subprocess.run(["git", "add", "codex.txt"], check=True)
        subprocess.run(["git", "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-q", "-m",
                        "[agent:" + os.environ["TASKGATE_AGENT"] + "] codex change"], check=True)
        emit("item.completed", item={"id": "item_1", "type": "command_execution",
                                      "command": "git commit", "aggregated_output": "",
                                      "exit_code": 0, "status": "completed"})
    emit("item.completed", item={"id": "item_0", "type": "reasoning", "text": "thinking"})
    text = "Done.\\n" + answer
    emit("item.completed", item={"id": "item_2", "type": "agent_message", "text": text})
    if last and behaviour == "success":
        pathlib.Path(last).write_text(text)
    emit("turn.completed", usage={"input_tokens": 24763, "cached_input_tokens": 24448,
                                  "output_tokens": 122})
elif behaviour == "turn_failed":
    emit("error", message="stream disconnected before completion")
    emit("turn.failed", error={"message": "stream disconnected before completion"})
    sys.exit(1)
elif behaviour == "no_message":
    emit("turn.completed", usage={"input_tokens": 1, "cached_input_tokens": 0, "output_tokens": 1})
elif behaviour == "garbage_message":
    emit("item.completed", item={"id": "item_2", "type": "agent_message", "text": "All good!"})
    emit("turn.completed", usage={"input_tokens": 1, "cached_input_tokens": 0, "output_tokens": 1})
elif behaviour == "hang":
    time.sleep(600)
"""
FAKE_NOT_JSON = "import sys\nprint('Reading prompt from stdin...')\nsys.exit(0)\n"


def codex_env(tmp_path: Path, behaviour: str, body: str = FAKE_CODEX, **opts: object) -> TaskEnv:
    """Agents run the fake codex."""
    bin_dir = tmp_path / "bin"
    fake(bin_dir, "codex", body)
    env = {"FAKE_CODEX": behaviour, "FAKE_LOG": str(tmp_path / "log.json")}
    config = {"backend": "codex", "codex": {"executable": str(bin_dir / "codex"), "env": env,
                                            **opts}}  # fmt: skip
    # The fake logs outside the worktree, which confinement forbids (test_sandbox.py runs
    # the backends confined).
    return make_task_env(tmp_path, {**config, "sandbox": "none"})


def test_exec_invocation_and_last_message(tmp_path: Path) -> None:
    env = codex_env(tmp_path, "success", model="gpt-5-codex")
    request = env.request("architect", Mode.REVIEW)
    result = invoke(request)
    assert result.status is ResultStatus.COMPLETE and result.verdict is Decision.APPROVED
    assert result.meta["thread_id"].startswith("0199a213")
    assert result.meta["usage"]["output_tokens"] == 122
    log = json.loads((tmp_path / "log.json").read_text())
    argv = log["argv"]
    assert argv[:5] == ["exec", "--json", "--sandbox", "workspace-write", "--cd"]
    assert argv[5] == str(env.worktree("architect")) == log["cwd"]
    assert argv[argv.index("--add-dir") + 1] == str(env.ws.common_dir)
    assert argv[argv.index("--model") + 1] == "gpt-5-codex"
    assert argv[-1] == "-" and log["prompt"] == request.prompt


def test_the_message_from_the_event_stream_when_no_file(tmp_path: Path) -> None:
    env = codex_env(tmp_path, "no_file", add_git_dir=False)
    result = invoke(env.request("quality", Mode.IMPLEMENTATION))
    assert result.ok and result.work_remaining
    assert [c.subject for c in result.commits] == ["[agent:quality] codex change"]
    argv = json.loads((tmp_path / "log.json").read_text())["argv"]
    assert "--add-dir" not in argv


@pytest.mark.parametrize(
    ("behaviour", "words"),
    [
        ("turn_failed", "stream disconnected before completion"),
        ("no_message", "without a final agent message"),
        ("garbage_message", "no JSON result object"),
    ],
)
def test_failures_become_errors(tmp_path: Path, behaviour: str, words: str) -> None:
    env = codex_env(tmp_path, behaviour)
    result = invoke(env.request("test", Mode.REVIEW))
    assert result.status is ResultStatus.ERROR and words in result.reason, result.reason


def test_output_that_is_not_jsonl_is_an_error(tmp_path: Path) -> None:
    env = codex_env(tmp_path, "x", body=FAKE_NOT_JSON)
    result = invoke(env.request("test", Mode.REVIEW))
    assert result.status is ResultStatus.ERROR and "no JSON events" in result.reason


def test_a_hanging_codex_times_out(tmp_path: Path) -> None:
    env = codex_env(tmp_path, "hang")
    result = invoke(replace(env.request("test", Mode.REVIEW), timeout_s=0.5))
    assert result.status is ResultStatus.TIMEOUT


def test_sandbox_is_validated() -> None:
    with pytest.raises(UsageError, match="sandbox must be one of"):
        CodexBackend.from_settings(AgentSettings("codex", {"sandbox": "yolo"}))


def test_read_events_ignores_noise() -> None:
    events = read_events('noise\n[1]\n{"type": "turn.completed", "usage": 5}\n')
    assert events.completed and events.usage == {} and events.count == 1
