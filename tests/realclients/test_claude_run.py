"""`taskgate run` with the `claude` backend: the real Claude Code as every stakeholder agent of a
HIGH-risk task, against the scripted model, to CLEANUP with the code on main and `taskgate
audit` PASSED (issue 13), in a repository under the system temp directory and outside it.

The "model" reads the prompt taskgate renders (agents/prompts.py) to act: requirements mode
writes the report with Write, synthesis reads task.md and writes the plan into it, one agent
implements and commits with Bash `git add` / `git commit`, the others report no change, review
approves; each run ends with the result object of prompts.RESULT_CONTRACT. taskgate's hooks are
installed too, so the agents' own tool calls pass PreToolUse as the agent that taskgate started.
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

from conftest import SRC, Repo, git
from realclients.clients import claude_bin, offline_command, offline_env
from realclients.mock_anthropic import MockAnthropic, Request, Turn, call, say
from taskgate.orchestrator.demo import create_sample

TASK = "add-slugify"
TODO = f"""\
# Tasks

## {TASK}: Add a slugify helper
- Purpose: titles need URL-safe names for the web pages
- Scope: a slugify function in src/textkit/slugify.py and its tests
- Components: slugify function, unit tests
- Files: src/textkit/slugify.py, tests/test_slugify.py
- Risk: HIGH
"""
SLUGIFY = '''"""URL-safe names."""


def slugify(text: str) -> str:
    """Lower-case words joined by dashes."""
    return "-".join(text.lower().split())
'''
TEST = '''"""Tests for slugify()."""

import importlib.util
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location(
    "slugify", Path(__file__).resolve().parents[1] / "src/textkit/slugify.py"
)
assert _SPEC and _SPEC.loader
_MOD = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_MOD)


def test_slugify() -> None:
    assert _MOD.slugify("Hello  World") == "hello-world"
'''
PLAN = """
## Implementation Plan

### Purpose
URL-safe names for titles.

### Approach
One pure function and its unit test.

### Benefits
Web pages get stable addresses.

### Files to Create
- src/textkit/slugify.py
- tests/test_slugify.py

### Files to Modify
- none

### API Design
`def slugify(text: str) -> str`

### Behavior Specifications
Lower-case words joined by single dashes.

### Test Cases
- test_slugify: "Hello  World" -> "hello-world"

### Implementation Sequence
1. IMPLEMENTER implements slugify.py and its test.

### Decision Log
- No unicode folding for now.

### Risks and Mitigations
- Empty input gives an empty slug; documented.

### Success Criteria
- run_tests.py passes.
"""
REPORT = "# Requirements\n\n" + "slugify must be pure, total and tested; no new dependency. " * 4


def _result(**fields: object) -> str:
    data = {"status": "COMPLETE", "work_remaining": False, "verdict": None, "reason": ""}
    data.update(fields)
    return "Done.\n" + json.dumps(data)


def _found(pattern: str, text: str) -> str:
    match = re.search(pattern, text)
    assert match, f"{pattern!r} not in the prompt:\n{text[:3000]}"
    return match.group(1)


def _file_text(read_result: str) -> str:
    """The file content from Claude Code's Read result (`N→line` or `N\\tline` per line)."""
    lines = []
    for line in read_result.splitlines():
        match = re.match(r"^\s*\d+(?:\t|→)(.*)$", line)
        if match:
            lines.append(match.group(1))
    return "\n".join(lines) + "\n"


def agent_model(request: Request) -> Turn:
    """What each stakeholder agent's model does, decided from taskgate's prompt."""
    prompt = json.dumps(request.messages[:1])
    prompt = json.loads(prompt)[0]["content"]
    text = prompt if isinstance(prompt, str) else "\n".join(b.get("text", "") for b in prompt)
    mode = _found(r"Mode: (REQUIREMENTS|SYNTHESIS|IMPLEMENTATION|REVIEW)", text)
    agent = _found(r"You are the (\S+) stakeholder agent", text)
    team = sorted(_found(r"Team: ([^.]+)\.", text).split(", "))
    done = request.tool_results()
    step = len(done)
    if mode == "REQUIREMENTS":
        report = _found(r"must meet to\s+(\S+)\s+\(Markdown", text)
        return call("Write", file_path=report, content=REPORT) if step == 0 else say(_result())
    if mode == "SYNTHESIS":
        task_md = _found(r"The task document: (\S+)", text)
        if step == 0:
            return call("Read", file_path=task_md)
        if step == 1:
            body = _file_text(done[0]["text"]) + PLAN.replace("IMPLEMENTER", team[0])
            return call("Write", file_path=task_md, content=body)
        return say(_result())
    if mode == "IMPLEMENTATION":
        if agent != team[0]:
            return say(_result(no_change=f"the plan gives {agent} nothing to change"))
        worktree = Path(_found(r"Your worktree \(your working directory, [^)]*\): (\S+)", text))
        steps = [
            call("Write", file_path=str(worktree / "src/textkit/slugify.py"), content=SLUGIFY),
            call("Write", file_path=str(worktree / "tests/test_slugify.py"), content=TEST),
            call("Bash", command="git add src/textkit/slugify.py tests/test_slugify.py"),
            call("Bash", command=f'git commit -q -m "[agent:{agent}] slugify and its test"'),
        ]
        failed = [r for r in done if r.get("is_error")]
        assert not failed, failed  # reported through mock.errors: the run then fails loudly
        return steps[step] if step < len(steps) else say(_result())
    return say(_result(verdict="APPROVED"))


@pytest.fixture(params=["tmp", "outside-tmp"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """Where the repository lives: under the system temp directory, or outside it."""
    if request.param == "tmp":
        yield tmp_path
        return
    outside = Path(tempfile.mkdtemp(prefix="taskgate-realclients-", dir="/var/tmp"))
    try:
        yield outside
    finally:
        shutil.rmtree(outside, ignore_errors=True)


def test_run_with_the_claude_backend_takes_a_high_risk_task_to_cleanup(
    place: Path, hooks_installed: Path, clients_dir: Path
) -> None:
    path = create_sample(place / "textkit", auto_approve=True)
    (path / "todo.md").write_text(TODO)
    config = path / "taskgate.toml"
    config.write_text(
        config.read_text().replace('backend = "scripted"', 'backend = "claude"')
        + f'\n[agents.claude]\nexecutable = "{claude_bin()}"\n'
    )
    git(path, "commit", "-qam", "HIGH-risk task with the claude backend")
    repo = Repo(path)
    repo.ok("init")
    home = Path(os.environ["HOME"])
    with MockAnthropic(agent_model) as mock:
        env = offline_env(home, place / "client-tmp")
        env.update(
            ANTHROPIC_BASE_URL=f"http://127.0.0.1:{mock.port}",
            ANTHROPIC_API_KEY="dummy-key",
            PYTHONPATH=str(SRC),
            PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
            TASKGATE_SESSION="run-claude",
        )
        cmd = [sys.executable, "-m", "taskgate", "run", TASK, "--yes"]
        proc = subprocess.run(
            offline_command(cmd, mock.unix_socket, mock.port),
            cwd=path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert not mock.errors, mock.errors
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    data = repo.ok("status", TASK, "--json", session="run-claude").json()
    assert (data["state"], data["risk_level"]) == ("CLEANUP", "HIGH")
    assert (path / "src/textkit/slugify.py").read_text() == SLUGIFY  # the code is on main
    assert "slugify" in git(path, "log", "-1", "--format=%s", "main")
    audit = repo.run("audit", TASK, session="run-claude")
    assert audit.code == 0 and "PASSED" in audit.out, audit.out + audit.err
