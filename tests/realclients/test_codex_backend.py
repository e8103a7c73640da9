"""The `codex` backend with the real Codex CLI (0.169.0) against the mock Responses API server.

Each test runs a real taskgate agent invocation (`invoke`, as `taskgate run` does) whose agent
is `codex exec`, in a repository outside the system temp directory: Codex makes /tmp writable
by default, so a repository under /tmp would prove nothing about the writable roots. The
model's tool calls are shell commands; what they did is read from the disk, git and the tool
results Codex sent back to the model.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import Repo, git
from realclients.clients import codex_bin
from realclients.codex_runner import offline_codex
from realclients.mock_openai import KEY_ENV, MockOpenAI, Turn, codex_config, message, shell
from taskgate.agents.base import Mode, ResultStatus
from taskgate.agents.invoke import invoke
from test_agents_backends import TASK, TaskEnv, make_task_env

OUTSIDE_TMP = Path("/var/tmp")  # not /tmp, not $TMPDIR: Codex does not make it writable
LEAKY = ("OPENAI_", "CODEX_", "TASKGATE_")


def result_line(**fields: object) -> str:
    """The taskgate result object the model ends its final message with."""
    answer = {"status": "COMPLETE", "work_remaining": False, "verdict": None, "reason": "",
              "message": "done", **fields}  # fmt: skip
    return "Done.\n" + json.dumps(answer)


class Model:
    """A scripted model: shell commands one per turn, then the final message."""

    def __init__(self) -> None:
        self.commands: list[str] = []
        self.final = result_line()

    def __call__(self, turn: Turn) -> list[dict[str, object]]:
        done = turn.calls_made()
        if done < len(self.commands):
            return [shell(self.commands[done])]
        return [message(self.final)]


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A fresh directory outside the system temp directory, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="taskgate-codex-", dir=OUTSIDE_TMP))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch, outside_tmp: Path) -> Iterator[tuple[Model, MockOpenAI]]:
    """The scripted model behind a mock server; Codex's config in the hermetic HOME (its model
    catalog outside /tmp and HOME, which taskgate's own sandbox replaces)."""
    for name in list(os.environ):
        if name.startswith(LEAKY):
            monkeypatch.delenv(name)
    monkeypatch.setenv(KEY_ENV, "not-a-real-key")
    script = Model()
    with MockOpenAI(script) as mock:
        codex_config(Path(os.environ["HOME"]), mock, catalog=outside_tmp / "catalog.json")
        yield script, mock


def task_env(root: Path, sandbox: str, mock: MockOpenAI) -> TaskEnv:
    """Agents on the real codex; `sandbox` is taskgate's own ([agents] sandbox). Without it,
    codex runs in a network namespace of its own (offline_codex); inside taskgate's
    bubblewrap no further namespace can be made, and codex reaches the mock on loopback."""
    codex = offline_codex(root / "bin", mock) if sandbox == "none" else codex_bin()
    config = {"backend": "codex", "sandbox": sandbox, "codex": {"executable": str(codex)}}
    env = make_task_env(root, config)
    Repo(env.ws.repo).ok("init")
    return env


def digest(path: Path) -> str:
    """A file's content hash ('' when absent)."""
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else ""


@pytest.mark.parametrize("sandbox", ["none", "auto"])
def test_an_implementation_agent_commits_on_its_branch(
    outside_tmp: Path, model: tuple[Model, MockOpenAI], sandbox: str
) -> None:
    script, mock = model
    env = task_env(outside_tmp, sandbox, mock)
    script.commands = [
        "printf 'def slug(text):\\n    return text.lower()\\n' > slug.py && git add slug.py && "
        "git commit -q -m '[agent:quality] add slug' && git log --format=%s -1",
    ]
    result = invoke(env.request("quality", Mode.IMPLEMENTATION))
    assert result.status is ResultStatus.COMPLETE, (result.raw_output[-3000:], mock.all_outputs())
    assert [c.subject for c in result.commits] == ["[agent:quality] add slug"]
    worktree = env.worktree("quality")
    assert git(worktree, "symbolic-ref", "HEAD") == f"refs/heads/{TASK}-quality"
    assert git(env.ws.repo, "show", f"{TASK}-quality:slug.py").startswith("def slug")
    assert git(worktree, "status", "--porcelain") == ""
    assert not mock.errors and not mock.other  # nothing but /v1/responses was asked


@pytest.mark.parametrize("where", ["outside /tmp", "under /tmp"])
def test_what_the_agent_must_not_write_stays_read_only(
    outside_tmp: Path, tmp_path: Path, model: tuple[Model, MockOpenAI], where: str
) -> None:
    """Codex's own sandbox (taskgate's off): every write outside the writable roots fails at
    the OS level, and the files, the store and the refs are as they were; under /tmp too,
    which Codex would make writable by default."""
    script, mock = model
    env = task_env(outside_tmp if where == "outside /tmp" else tmp_path, "none", mock)
    repo = env.ws.repo
    store = repo / ".taskgate" / "state.db"
    other = env.worktree("test")
    guarded = [repo / "README.md", store, env.ws.task_md(TASK), other / "README.md",
               repo / ".git" / "config"]  # fmt: skip
    before = {path: digest(path) for path in guarded}
    refs = git(repo, "for-each-ref", "--format=%(refname) %(objectname)")
    targets = [*guarded, env.worktree() / "README.md", env.ws.report_path(TASK, "test")]
    script.commands = [
        *(f"echo forged >> {p}; echo exit=$?" for p in targets),
        "git update-ref refs/heads/main HEAD; echo exit=$?",
        f"git branch -f {TASK}-test HEAD~0; echo exit=$?",
        "git config core.hooksPath /tmp; echo exit=$?",
        "echo fine > mine.txt; echo exit=$?",
    ]
    script.final = result_line(status="ERROR", message="tried everything")
    invoke(env.request("quality", Mode.IMPLEMENTATION))
    outputs = mock.all_outputs()
    assert len(outputs) == len(script.commands), outputs
    for command, output in zip(script.commands[:-1], outputs, strict=False):
        assert "exit=0" not in output, (command, output)
    assert "Read-only file system" in outputs[0] and "exit=0" in outputs[-1]
    assert {path: digest(path) for path in guarded} == before
    assert git(repo, "for-each-ref", "--format=%(refname) %(objectname)") == refs
    assert not env.ws.report_path(TASK, "test").exists()
    assert (env.worktree("quality") / "mine.txt").read_text() == "fine\n"


def test_a_requirements_agent_writes_its_report(
    outside_tmp: Path, model: tuple[Model, MockOpenAI]
) -> None:
    """R-DOC-04: the report reaches the task directory although only the agent's private
    directory and worktree are writable; writing the real path directly fails."""
    _, mock = model
    env = task_env(outside_tmp, "none", mock)
    report = env.ws.report_path(TASK, "architect")
    text = "Security requirements.\n" + "Passwords are hashed with a salt; tokens expire.\n" * 4

    def requirements(turn: Turn) -> list[dict[str, object]]:
        prompt = turn.user_text()
        staged = prompt.split("Write " + report.name + " at ", 1)[1].split(":", 1)[0]
        steps = [f"echo direct > {report}; echo exit=$?",
                 f"cat > {staged} <<'EOF'\n{text}EOF\necho exit=$?"]  # fmt: skip
        done = turn.calls_made()
        return [shell(steps[done])] if done < len(steps) else [message(result_line())]

    mock.script = requirements
    result = invoke(env.request("architect", Mode.REQUIREMENTS))
    assert result.status is ResultStatus.COMPLETE, (result.raw_output[-3000:], mock.all_outputs())
    direct, staged = mock.all_outputs()
    assert "Read-only file system" in direct and "exit=0" in staged
    assert report.read_text() == text
    assert result.report_path == report


def test_error_events_while_codex_retries_do_not_fail_a_run(
    outside_tmp: Path, model: tuple[Model, MockOpenAI]
) -> None:
    """Codex prints `error` events ("Reconnecting... 1/2") while it retries a failed request;
    a turn that then completes is the agent's answer, not an ERROR."""
    script, mock = model
    mock.drop_first = 1
    env = task_env(outside_tmp, "none", mock)
    settings = env.agents.settings("architect")
    retries = ["-c", "model_providers.taskgate-mock.request_max_retries=2",
               "-c", "model_providers.taskgate-mock.stream_max_retries=2"]  # fmt: skip
    options = {**settings.options, "args": retries}
    request = env.request("architect", Mode.REVIEW)
    request = replace(request, settings=replace(settings, options=options))
    script.final = result_line(verdict="APPROVED", reason="fine")
    result = invoke(request)
    assert result.status is ResultStatus.COMPLETE, (result.reason, result.raw_output[-2000:])
    assert mock.other == ["POST /v1/responses -> stream cut"]
    retried = [line for line in result.raw_output.splitlines() if '"type":"error"' in line]
    assert retried, result.raw_output  # the retry was reported in the JSONL stream
