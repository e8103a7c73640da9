"""`taskgate run` with the `codex` backend and the real Codex CLI (0.169.0): a HIGH-risk task
from todo.md to CLEANUP, the code on main, `taskgate audit` PASSED (issue 13).

The repository is outside the system temp directory (Codex makes /tmp writable, which would
hide a missing writable root). The mock model reads each prompt the way an agent would: the
mode, the agent's name, the team, and the paths it must write (as the prompt names them), and
answers with shell commands and, last, the taskgate result object.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import SRC, Repo, Run, git
from realclients.clients import codex_bin, offline_command
from realclients.mock_openai import KEY_ENV, MockOpenAI, Turn, codex_config, message, shell
from taskgate.agents.sandbox import choose
from taskgate.orchestrator.demo import create_sample

TASK = "add-slugify"
OUTSIDE_TMP = Path("/var/tmp")
LEAKY = ("OPENAI_", "CODEX_", "TASKGATE_")
PLAN = """
## Implementation Plan

### Purpose
Titles need URL-safe names.

### Approach
One module per stakeholder, each with its tests.

### Benefits
Small, reviewable parts.

### Files to Create
{files}

### Files to Modify
- none

### API Design
`OWNER: str` in each module.

### Behavior Specifications
Each module names its owner.

### Test Cases
- the existing tests keep passing

### Implementation Sequence
{sequence}

### Decision Log
- Parts are independent, so the agents work in parallel.

### Risks and Mitigations
- none beyond the review.

### Success Criteria
- run_tests.py passes; every part is on main.
"""


def answer(**fields: object) -> str:
    """The final message: a sentence and the taskgate result object."""
    result = {"status": "COMPLETE", "work_remaining": False, "verdict": None, "reason": "",
              "message": "done", **fields}  # fmt: skip
    return "Finished.\n" + json.dumps(result)


def heredoc(path: str, text: str, append: bool = False) -> str:
    """A shell command writing `text` to `path`."""
    return f"cat {'>>' if append else '>'} {path} <<'TASKGATE_EOF'\n{text}\nTASKGATE_EOF"


class Agent:
    """The mock model as a stakeholder agent: what to run for the prompt of one invocation."""

    def __init__(self) -> None:
        self.modes: list[tuple[str, str]] = []  # (mode, agent) of every invocation

    def steps(self, prompt: str) -> tuple[list[str], str]:
        mode = _find(r"Mode: (\w+)\.", prompt)
        agent = _find(r"You are the (\S+) stakeholder agent", prompt)
        team = _find(r"Team: ([^.]+)\.", prompt).split(", ")
        if mode == "REQUIREMENTS":
            report = _find(r"must meet to\s+(\S+)", prompt)
            text = f"# {agent} requirements\n\n" + f"The {agent} view: keep parts small.\n" * 5
            return [heredoc(report, text)], answer()
        if mode == "SYNTHESIS":
            task_md = _find(r"The task document: (\S+)", prompt)
            files = "\n".join(f"- src/textkit/part_{a}.py" for a in team)
            sequence = "\n".join(f"{i}. {a} writes part_{a}.py" for i, a in enumerate(team, 1))
            plan = PLAN.format(files=files, sequence=sequence)
            return [heredoc(task_md, plan, append=True)], answer()
        if mode == "IMPLEMENTATION":
            tag = _find(r'every commit message starts with "(\[agent:[^]]+\]) "', prompt)
            part = f"src/textkit/part_{agent}.py"
            write = f'printf \'"""Written by {agent}."""\\n\\nOWNER = "{agent}"\\n\' > {part}'
            commit = f"git add {part} && git commit -q -m '{tag} add part_{agent}'"
            return [f"{write} && {commit} && git log --format=%s -1"], answer()
        if mode == "REVIEW":
            diff = "git diff --stat main...HEAD"
            return [diff], answer(verdict="APPROVED", reason="every part as planned")
        raise AssertionError(f"unknown mode in prompt: {prompt[:300]}")

    def __call__(self, turn: Turn) -> list[dict[str, object]]:
        prompt = turn.user_text()
        commands, final = self.steps(prompt)
        done = turn.calls_made()
        if done == 0:
            self.modes.append((_find(r"Mode: (\w+)\.", prompt), _find(r"the (\S+) stake", prompt)))
        return [shell(commands[done])] if done < len(commands) else [message(final)]


def _find(pattern: str, text: str) -> str:
    found = re.search(pattern, text)
    assert found, f"{pattern!r} not in the prompt:\n{text[:2000]}"
    return found.group(1)


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="taskgate-codex-run-", dir=OUTSIDE_TMP))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize(("sandbox", "hooks"), [("none", False), ("auto", False), ("none", True)])
def test_a_high_risk_task_reaches_cleanup_with_codex_agents(
    outside_tmp: Path, monkeypatch: pytest.MonkeyPatch, sandbox: str, hooks: bool
) -> None:
    """sandbox "none": Codex's own sandbox with taskgate's writable roots is the boundary;
    "auto": taskgate's bubblewrap is, and Codex runs inside it without its own. `hooks`: the
    person also installed taskgate's Codex hooks (user scope, so they run inside the agents'
    Codex too): they must not stand in the agents' way."""
    for name in list(os.environ):
        if name.startswith(LEAKY):
            monkeypatch.delenv(name)
    monkeypatch.setenv(KEY_ENV, "not-a-real-key")
    path = create_sample(outside_tmp / "textkit", auto_approve=True)
    todo = path / "todo.md"
    todo.write_text(
        todo.read_text().replace(
            "tests/test_slugify.py\n", "tests/test_slugify.py\n- Risk: HIGH\n", 1
        )
    )
    config = path / "taskgate.toml"
    config.write_text(
        config.read_text().replace('backend = "scripted"\n', "")
        + f'backend = "codex"\nsandbox = "{sandbox}"\n'
        + f"\n[agents.codex]\nexecutable = {json.dumps(str(codex_bin()))}\n"
    )
    git(path, "commit", "-qam", "codex agents; add-slugify is HIGH risk")
    repo = Repo(path)
    repo.ok("init")
    agent = Agent()
    with MockOpenAI(agent) as mock:
        home = Path(os.environ["HOME"])
        codex_config(home, mock, catalog=outside_tmp / "catalog.json")
        if hooks:
            on_path = {"PATH": f"{codex_bin().parent}{os.pathsep}{os.environ['PATH']}"}
            repo.ok("hooks", "install", "--client", "codex", env=on_path)
        # The whole run in a network namespace of its own, so nothing it starts reaches a
        # network; not with taskgate's bubblewrap, which cannot mount /proc in there (it
        # would fall back to unconfined): its agents share the network and reach the mock
        # on loopback.
        env = {**os.environ, "PYTHONPATH": str(SRC), "TASKGATE_SESSION": "run"}
        cmd = [sys.executable, "-m", "taskgate", "run", TASK, "--yes"]
        if sandbox == "none":
            cmd = offline_command(cmd, mock.unix_socket, mock.port)
        proc = subprocess.run(cmd, cwd=path, env=env, capture_output=True, text=True,
                              timeout=600, check=False)  # fmt: skip
    run = Run(proc.returncode, proc.stdout, proc.stderr)
    assert run.code == 0, f"{run.out}\n{run.err}\n{mock.errors}\n{mock.all_outputs()[:3]}"
    assert not mock.errors, mock.errors
    status = repo.ok("status", TASK, "--json", session="run").json()
    assert status["state"] == "CLEANUP", status
    team = [a for mode, a in agent.modes if mode == "IMPLEMENTATION"]
    assert len(team) >= 3, agent.modes  # HIGH risk: the full team implements
    assert {mode for mode, _ in agent.modes} == {
        "REQUIREMENTS", "SYNTHESIS", "IMPLEMENTATION", "REVIEW"
    }  # fmt: skip
    for name in team:
        assert f'OWNER = "{name}"' in git(path, "show", f"main:src/textkit/part_{name}.py")
    # Which sandbox Codex itself applied, as it told the model server.
    modes = {json.loads(t.headers["x-codex-turn-metadata"])["sandbox_mode"] for t in mock.turns}
    outer = sandbox == "auto" and choose("auto").confined
    assert modes == {"danger-full-access" if outer else "workspace-write"}
    if hooks:  # the hooks did run inside the agents' Codex (their SessionStart context)
        assert any("No active tasks for current session" in json.dumps(t.input)
                   for t in mock.turns)  # fmt: skip
    audit = repo.run("audit", TASK, "--json", session="run")
    assert audit.code == 0, audit.out + audit.err
    assert audit.json()["verdict"] == "PASSED"
