"""The `command` backend against fake executables: the documented env/stdin/stdout contract."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from taskgate.agents.base import Mode, ResultStatus
from taskgate.agents.command import CommandBackend
from taskgate.agents.config import AgentSettings
from taskgate.agents.invoke import invoke
from taskgate.errors import UsageError
from taskgate.protocol.states import Decision
from test_agents_backends import TaskEnv, make_task_env

SRC = Path(__file__).resolve().parent.parent / "src"


def fake(bin_dir: Path, name: str, body: str) -> Path:
    """An executable Python script `bin_dir/name`."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


def command_env(tmp_path: Path, body: str, **options: Any) -> TaskEnv:
    """A task environment whose agents all run the fake `agent` executable."""
    exe = fake(tmp_path / "bin", "agent", body)
    return make_task_env(tmp_path, {"backend": "command", "command": {"command": [str(exe)],
                                                                       **options}})  # fmt: skip


WELL_BEHAVED = """
import json, os, pathlib, sys
prompt = sys.stdin.read()
seen = {k: v for k, v in os.environ.items() if k.startswith(("TASKGATE", "GIT_"))}
seen["cwd"] = os.getcwd()
seen["stdin"] = prompt
seen["prompt_file"] = pathlib.Path(os.environ["TASKGATE_PROMPT_FILE"]).read_text()
pathlib.Path("seen.json").write_text(json.dumps(seen))  # cwd: the worktree (a confined agent
                                                        # writes nowhere else)
if os.environ["TASKGATE_MODE"] == "requirements":
    pathlib.Path(os.environ["TASKGATE_REPORT_PATH"]).write_text("requirement. " * 20)
print("thinking...")
print(json.dumps({"status": "COMPLETE", "verdict": "APPROVED", "message": "done"}))
"""


def test_the_documented_environment_cwd_and_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TASKGATE_SESSION", "orchestrator-session")
    monkeypatch.setenv("GIT_DIR", "/elsewhere")
    env = command_env(tmp_path, WELL_BEHAVED, env={"EXTRA": "1"})
    request = env.request("quality", Mode.REQUIREMENTS, round=2, attempt=3)
    result = invoke(request)
    assert result.status is ResultStatus.COMPLETE, result.reason
    assert result.backend == "command" and result.exit_code == 0 and "thinking" in result.raw_output
    seen = json.loads((env.worktree("quality") / "seen.json").read_text())
    assert seen["cwd"] == str(env.worktree("quality"))
    assert seen["stdin"] == request.prompt == seen["prompt_file"]
    assert seen["TASKGATE_TASK"] == "add-login" and seen["TASKGATE_AGENT"] == "quality"
    assert seen["TASKGATE_MODE"] == "requirements" and seen["TASKGATE_ROUND"] == "2"
    assert seen["TASKGATE_ATTEMPT"] == "3"
    assert seen["TASKGATE_REPORT_PATH"] == str(env.ws.report_path("add-login", "quality"))
    assert seen["TASKGATE_TASK_MD"] == str(env.ws.task_md("add-login"))
    assert seen["TASKGATE_TASK_DIR"] == str(env.ws.task_dir("add-login"))
    assert "TASKGATE_SESSION" not in seen and "GIT_DIR" not in seen
    assert seen["GIT_TERMINAL_PROMPT"] == "0"


def test_result_file_wins_over_stdout(tmp_path: Path) -> None:
    env = command_env(
        tmp_path,
        """
        import json, os, pathlib
        print("not json at all")
        pathlib.Path(os.environ["TASKGATE_RESULT_FILE"]).write_text(
            json.dumps({"status": "COMPLETE", "verdict": "REJECTED", "reason": "tests missing"}))
    """,
    )
    result = invoke(env.request("test", Mode.REVIEW))
    assert result.verdict is Decision.REJECTED and result.reason == "tests missing"


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ("print('{garbage')", ResultStatus.ERROR, "no JSON result object"),
        ("", ResultStatus.ERROR, "(empty)"),
        ("import json; print(json.dumps({'status': 'WORKING'}))", ResultStatus.ERROR,
         "invalid status"),
        ("import json, sys; print(json.dumps({'status': 'COMPLETE', 'message': 'disk full'}));"
         " sys.exit(3)", ResultStatus.ERROR, "exited with code 3: disk full"),
        ("import sys; sys.stderr.write('Traceback: boom\\n'); sys.exit(1)", ResultStatus.ERROR,
         "Traceback: boom"),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", ResultStatus.ERROR,
         "killed by signal 9"),
        ("import json; print(json.dumps({'status': 'BLOCKED', 'message': 'need a token'}))",
         ResultStatus.BLOCKED, "need a token"),
    ],
)  # fmt: skip
def test_failures_are_errors_with_the_reason(
    tmp_path: Path, body: str, status: ResultStatus, words: str
) -> None:
    env = command_env(tmp_path, body)
    result = invoke(env.request("quality", Mode.REVIEW))
    assert result.status is status
    assert words in result.message or words in result.reason, result


def test_a_hanging_agent_is_killed_with_its_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    env = command_env(
        tmp_path,
        f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        open({str(pid_file)!r}, "w").write(str(child.pid))
        print("working", flush=True)
        time.sleep(600)
    """,
    )
    request = env.request("quality", Mode.IMPLEMENTATION)
    assert request.settings is not None  # unconfined: the pid file is outside the worktree and
    # a sandbox has its own pid namespace (tests/test_sandbox.py times out a confined agent)
    request = replace(request, timeout_s=1.0, settings=replace(request.settings, sandbox="none"))
    result = invoke(request)
    assert result.status is ResultStatus.TIMEOUT and "process group was killed" in result.message
    assert "working" in result.raw_output
    assert _dead(int(pid_file.read_text()))  # the grandchild died with the group


def _dead(pid: int) -> bool:
    """True once `pid` is gone (or a zombie nobody has reaped yet)."""
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        stat = Path(f"/proc/{pid}/stat")
        if stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z":
            return True
        time.sleep(0.05)
    return False


def test_a_missing_executable_says_what_to_fix(tmp_path: Path) -> None:
    env = make_task_env(tmp_path, {"quality": {"backend": "command",
                                               "command": [str(tmp_path / "nope")]}})  # fmt: skip
    result = invoke(env.request("quality", Mode.REVIEW))
    assert result.status is ResultStatus.ERROR and result.exit_code == 127
    assert "[agents.quality]" in result.reason


def test_an_agent_cannot_approve(tmp_path: Path) -> None:
    env = command_env(
        tmp_path,
        f"""
        import json, subprocess, sys, os
        env = dict(os.environ, PYTHONPATH={str(SRC)!r})
        proc = subprocess.run([sys.executable, "-m", "taskgate", "approve", "add-login", "plan"],
                              env=env, capture_output=True, text=True)
        print(json.dumps({{"status": "COMPLETE", "verdict": "APPROVED",
                          "message": f"{{proc.returncode}} {{proc.stdout}} {{proc.stderr}}"}}))
    """,
    )
    result = invoke(env.request("architect", Mode.REVIEW))
    assert result.message.startswith("1 ") and "R-CKP-02" in result.message


def test_command_is_required(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"\[agents.quality\]: backend 'command' needs command"):
        CommandBackend.from_settings(AgentSettings("command", where="[agents.quality]"))
