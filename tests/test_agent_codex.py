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

from conftest import git
from taskgate.agents.base import Mode, ResultStatus
from taskgate.agents.codex import CodexBackend, read_events
from taskgate.agents.config import AgentSettings
from taskgate.agents.invoke import invoke
from taskgate.errors import UsageError
from taskgate.git import repo as gitrepo
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
elif behaviour == "report":
    pathlib.Path(os.environ["TASKGATE_REPORT_PATH"]).write_text("Requirements. " * 20)
    emit("item.completed", item={"id": "item_2", "type": "agent_message", "text": answer})
    emit("turn.completed", usage={"input_tokens": 1, "cached_input_tokens": 0, "output_tokens": 1})
elif behaviour in ("tamper", "checkout"):
    gitdir = subprocess.run(["git", "rev-parse", "--absolute-git-dir"], capture_output=True,
                            text=True, check=True).stdout.strip()
    if behaviour == "tamper":
        pathlib.Path(gitdir, "commondir").write_text("/elsewhere")
    else:
        subprocess.run(["git", "checkout", "-q", "-b", "elsewhere"], check=True)
    emit("item.completed", item={"id": "item_2", "type": "agent_message", "text": answer})
    emit("turn.completed", usage={"input_tokens": 1, "cached_input_tokens": 0, "output_tokens": 1})
"""
FAKE_NOT_JSON = "import sys\nprint('Reading prompt from stdin...')\nsys.exit(0)\n"


def codex_env(tmp_path: Path, behaviour: str, body: str = FAKE_CODEX, **opts: object) -> TaskEnv:
    """Agents run the fake codex."""
    bin_dir = tmp_path / "bin"
    fake(bin_dir, "codex", body)
    env = {"FAKE_CODEX": behaviour, "FAKE_LOG": str(tmp_path / "log.json")}
    config = {"backend": "codex", "sandbox": "none",  # Codex's own sandbox (see _inner tests)
              "codex": {"executable": str(bin_dir / "codex"), "env": env, **opts}}  # fmt: skip
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
    # A reviewer writes nothing but its worktree and its private directory ($TMPDIR).
    assert added_dirs(argv) == [str(request.agent_dir / "codex")]
    assert "sandbox_workspace_write.exclude_slash_tmp=true" in argv
    assert "sandbox_workspace_write.exclude_tmpdir_env_var=true" in argv
    assert argv[argv.index("--model") + 1] == "gpt-5-codex"
    assert argv[-1] == "-" and log["prompt"] == request.prompt


def added_dirs(argv: list[str]) -> list[str]:
    """The writable roots a command line adds."""
    return [argv[i + 1] for i, arg in enumerate(argv) if arg == "--add-dir"]


def test_an_implementation_commits_through_a_detached_head(tmp_path: Path) -> None:
    """Writable: the worktree's own git dir and the object store, no ref. The agent commits on
    a detached HEAD; taskgate moves T-A to its commits and checks the branch out again."""
    env = codex_env(tmp_path, "success")
    request = env.request("quality", Mode.IMPLEMENTATION)
    result = invoke(request)
    assert result.ok, result.reason
    assert [c.subject for c in result.commits] == ["[agent:quality] codex change"]
    assert result.meta["codex_sandbox"] == "workspace-write"
    worktree = env.worktree("quality")
    gitdir = git(worktree, "rev-parse", "--absolute-git-dir")
    argv = json.loads((tmp_path / "log.json").read_text())["argv"]
    assert added_dirs(argv) == [str(request.agent_dir / "codex"), gitdir,
                                str(env.ws.common_dir / "objects")]  # fmt: skip
    assert str(env.ws.common_dir) not in added_dirs(argv)
    assert git(worktree, "symbolic-ref", "HEAD") == "refs/heads/add-login-quality"
    assert git(worktree, "log", "-1", "--format=%s", "add-login-quality") == (
        "[agent:quality] codex change"
    )
    prompt = json.loads((tmp_path / "log.json").read_text())["prompt"]
    assert "HEAD is detached at add-login-quality" in prompt


def test_a_report_is_written_in_the_private_directory_and_copied(tmp_path: Path) -> None:
    """R-DOC-04 outside the writable roots: the prompt and $TASKGATE_REPORT_PATH name a copy in
    the agent's private directory; taskgate puts the report where the protocol wants it."""
    env = codex_env(tmp_path, "report")
    request = env.request("architect", Mode.REQUIREMENTS)
    result = invoke(request)
    assert result.ok, result.reason
    staged = request.agent_dir / "codex" / "out" / request.report_path.name
    assert request.report_path.read_text() == staged.read_text() == "Requirements. " * 20
    prompt = json.loads((tmp_path / "log.json").read_text())["prompt"]
    assert str(staged) in prompt and str(request.report_path) not in prompt.split("Sandbox:")[0]


@pytest.mark.parametrize(
    ("behaviour", "words"),
    [
        ("tamper", "commondir; taskgate restored it"),
        ("checkout", "checked out refs/heads/elsewhere"),
    ],
)
def test_tampering_with_the_git_dir_is_undone_and_an_error(
    tmp_path: Path, behaviour: str, words: str
) -> None:
    env = codex_env(tmp_path, behaviour)
    worktree = env.worktree("quality")
    gitdir = Path(git(worktree, "rev-parse", "--absolute-git-dir"))
    commondir = (gitdir / "commondir").read_text()
    result = invoke(env.request("quality", Mode.IMPLEMENTATION))
    assert result.status is ResultStatus.ERROR and words in result.reason, result.reason
    assert (gitdir / "commondir").read_text() == commondir
    assert git(worktree, "symbolic-ref", "HEAD") == "refs/heads/add-login-quality"


def test_under_taskgates_sandbox_codex_runs_without_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nested bubblewrap cannot start (taskgate's sandbox forbids new user namespaces), so
    taskgate's confinement replaces Codex's: danger-full-access inside it, nothing staged."""
    from taskgate.agents import sandbox

    env = codex_env(tmp_path, "success")
    request = env.request("quality", Mode.IMPLEMENTATION)
    backend = CodexBackend.from_settings(request.settings or AgentSettings("codex"))
    assert backend.inner(request) is backend  # sandbox = "none" in these tests
    monkeypatch.setattr(sandbox, "choose", lambda setting: sandbox.Choice(True, bwrap="bwrap"))
    assert backend.inner(request).sandbox == "danger-full-access"
    read_only = replace(backend, sandbox="read-only")
    assert read_only.inner(request) is read_only


def test_the_message_from_the_event_stream_when_no_file(tmp_path: Path) -> None:
    env = codex_env(tmp_path, "no_file", add_git_dir=False, shared_tmp=True)
    request = env.request("quality", Mode.IMPLEMENTATION)
    result = invoke(request)
    assert result.ok and result.work_remaining
    assert [c.subject for c in result.commits] == ["[agent:quality] codex change"]
    argv = json.loads((tmp_path / "log.json").read_text())["argv"]
    assert added_dirs(argv) == [str(request.agent_dir / "codex")]  # no git dir: no commits
    assert not any("exclude_slash_tmp" in arg for arg in argv)  # shared_tmp


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


def test_heal_after_taskgate_was_killed_during_a_run(tmp_path: Path) -> None:
    """SIGKILL/SIGTERM of taskgate between prepare and finish leaves the worktree detached;
    heal() (for recovery) takes the agent's commit onto T-A and attaches HEAD again."""
    from taskgate.agents import codex_sandbox

    env = codex_env(tmp_path, "success")
    request = env.request("quality", Mode.IMPLEMENTATION)
    worktree = env.worktree("quality")
    assert codex_sandbox.heal(request.agent_dir, worktree) == []  # nothing left: a no-op
    conf = codex_sandbox.plan(request, commit=True)
    codex_sandbox.prepare(conf, request)
    (worktree / "part.py").write_text("x = 1\n")
    git(worktree, "add", "part.py")
    git(worktree, "commit", "-q", "-m", "[agent:quality] part")
    assert gitrepo.head_ref(worktree) is None  # what a killed taskgate leaves behind
    done = codex_sandbox.heal(request.agent_dir, worktree)
    assert done and "re-attached" in done[0] and len(done) == 1, done
    assert gitrepo.head_ref(worktree) == "add-login-quality"
    assert git(worktree, "log", "-1", "--format=%s", "add-login-quality") == "[agent:quality] part"
    assert codex_sandbox.heal(request.agent_dir, worktree) == []


def test_the_next_invocation_heals_a_run_killed_with_taskgate(tmp_path: Path) -> None:
    """No recovery command needed: the next invocation of the agent (any backend) first takes
    the killed run's commit onto T-A, so it starts from its branch, not a stray HEAD."""
    from taskgate.agents import codex_sandbox

    env = codex_env(tmp_path, "success")
    request = env.request("quality", Mode.IMPLEMENTATION)
    worktree = env.worktree("quality")
    codex_sandbox.prepare(codex_sandbox.plan(request, commit=True), request)
    (worktree / "part.py").write_text("x = 1\n")
    git(worktree, "add", "part.py")
    git(worktree, "commit", "-q", "-m", "[agent:quality] part")
    assert gitrepo.head_ref(worktree) is None  # what a killed taskgate leaves behind
    invoke(env.request("quality", Mode.REVIEW))
    assert gitrepo.head_ref(worktree) == "add-login-quality"
    assert git(worktree, "log", "-1", "--format=%s", "add-login-quality") == "[agent:quality] part"


def test_a_staged_file_that_is_a_link_is_not_taken_over(tmp_path: Path) -> None:
    """The agent replaced its staged report by a symlink (to something only taskgate could
    read): nothing is copied and the run is an ERROR."""
    from taskgate.agents import codex_sandbox

    env = codex_env(tmp_path, "success")
    request = env.request("architect", Mode.REQUIREMENTS)
    conf = codex_sandbox.plan(request, commit=True)
    codex_sandbox.prepare(conf, request)
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the report\n" * 10)
    (conf.private / "out" / request.report_path.name).symlink_to(secret)
    problems = codex_sandbox.finish(conf, request)
    assert problems and "not a regular file" in problems[0]
    assert not request.report_path.exists()
