"""Fixtures for the real-client suite: the pinned clients, repositories whose tasks are owned by a
known Claude Code session id, taskgate's hooks installed in the hermetic HOME, and a capture of
the exact hook inputs the client sends."""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conftest import SRC, Repo, Run, make_repo
from flow import PLAN, REPORT, agents_of, copy_repo
from realclients.clients import ClaudeRun, ensure_clients, run_claude
from realclients.mock_anthropic import MockAnthropic, Script, Turn

TASK = "add-login"
OWNER = "0b7f6e0c-6a57-4c1e-9d2b-7a1f00000001"  # the Claude session that owns TASK
OTHER = "0b7f6e0c-6a57-4c1e-9d2b-7a1f00000002"  # another Claude session of the same person


class OwnedRepo(Repo):
    """A Repo whose CLI runs default to the OWNER session."""

    def run(self, *args: str, session: str | None = OWNER, **kw: Any) -> Run:
        return super().run(*args, session=session, **kw)


def to_plan_presented(repo: Repo, task: str = TASK, session: str = OWNER) -> None:
    """(started by `session`) -> SYNTHESIS with the plan presented: PLAN APPROVAL waits."""
    wt = repo.worktree(task)
    repo.ok("classify", task, cwd=wt, session=session)
    repo.ok("transition", task, "REQUIREMENTS", cwd=wt, session=session)
    for agent in agents_of(repo, task):  # every agent writes its report
        (repo.task_dir(task) / f"{task}-{agent}-requirements.md").write_text(REPORT)
        repo.ok("agent", "set", task, agent, "COMPLETE", session=session)
    repo.ok("transition", task, "SYNTHESIS", cwd=wt, session=session)
    task_md = repo.task_dir(task) / "task.md"
    task_md.write_text(task_md.read_text() + PLAN)
    repo.ok("present", task, session=session)


def to_implementation(repo: Repo, task: str = TASK, session: str = OWNER) -> None:
    """(started by `session`) -> IMPLEMENTATION, plan approved by the person."""
    to_plan_presented(repo, task, session)
    repo.ok("approve", task, "plan", session=session)
    repo.ok("transition", task, "IMPLEMENTATION", session=session)


@pytest.fixture(scope="session")
def clients_dir() -> Path:
    """Both pinned clients, installed on first use (a failure, never a skip, without npm)."""
    return ensure_clients()


@pytest.fixture(scope="session")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Prepared repositories, copied per test: `fresh` (initialised), `plan` (TASK waiting for
    PLAN APPROVAL) and `implementation` (TASK in IMPLEMENTATION with its agent worktrees), both
    owned by the OWNER session."""
    base = tmp_path_factory.mktemp("templates")
    home = base / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Test\n\temail = test@example.com\n"
        "[init]\n\tdefaultBranch = main\n[commit]\n\tgpgsign = false\n"
    )
    old = os.environ.get("HOME")
    os.environ["HOME"] = str(home)
    try:
        fresh = make_repo(base / "fresh" / "repo").path
        plan = OwnedRepo(make_repo(base / "plan" / "repo").path)
        plan.ok("start", TASK)
        to_plan_presented(plan)
        impl = OwnedRepo(make_repo(base / "impl" / "repo").path)
        impl.ok("start", TASK)
        to_implementation(impl)
    finally:
        if old is not None:
            os.environ["HOME"] = old
    return {"fresh": fresh, "plan": plan.path, "implementation": impl.path}


def copy_template(templates: dict[str, Path], name: str, dest: Path) -> OwnedRepo:
    """A private copy of a prepared repository."""
    return OwnedRepo(copy_repo(templates[name], dest).path)


@dataclass
class Claude:
    """Runs the real `claude` in the test's hermetic HOME against one mock model server."""

    home: Path
    mock: MockAnthropic
    path_dirs: tuple[str, ...]

    def run(
        self,
        prompt: str,
        cwd: Path,
        script: list[Turn] | Script | None = None,
        *args: str,
        session: str | None = None,
        env: dict[str, str] | None = None,
        output: str = "json",
        ok: bool = True,
    ) -> ClaudeRun:
        """One `claude -p` run; `script` replaces what the model says; `session` fixes the id."""
        if script is not None:
            self.mock.script(script)
        extra = ["--session-id", session] if session else []
        path = os.pathsep.join([*self.path_dirs, os.environ.get("PATH", "")])
        result = run_claude(
            prompt,
            cwd=cwd,
            home=self.home,
            port=self.mock.port,
            unix_socket=self.mock.unix_socket,
            args=[*extra, *args],
            env={"PATH": path, "PYTHONPATH": str(SRC), **(env or {})},
            output=output,
        )
        if ok:
            assert result.code == 0, f"claude exit {result.code}\n{result.out}\n{result.err}"
            assert not self.mock.errors, self.mock.errors
        return result


@pytest.fixture
def claude(clients_dir: Path) -> Iterator[Claude]:
    """A Claude runner with its mock model server; HOME is the test's hermetic home."""
    home = Path(os.environ["HOME"])
    bin_dir = str(Path(sys.executable).parent)  # `taskgate` of this checkout, for the agent
    with MockAnthropic() as mock:
        yield Claude(home, mock, (bin_dir,))


@pytest.fixture
def hooks_installed(clients_dir: Path) -> Path:
    """`taskgate hooks install` (user scope) in the hermetic HOME; the settings file."""
    from conftest import Repo as _Repo

    home = Path(os.environ["HOME"])
    _Repo(home).ok("hooks", "install", cwd=home)
    return home / ".claude" / "settings.json"


@pytest.fixture
def capture(hooks_installed: Path, tmp_path: Path) -> Path:
    """Every hook input the client sends, saved as JSON files in the returned directory (a
    foreign user-scope hook next to taskgate's)."""
    out = tmp_path / "hook-inputs"
    out.mkdir()
    script = tmp_path / "capture.sh"
    script.write_text(f'#!/bin/sh\ncat > "{out}/$(date +%s%N)-$1.json"\n')
    script.chmod(0o755)
    data = json.loads(hooks_installed.read_text())
    for event, groups in data["hooks"].items():
        groups.append({"hooks": [{"type": "command", "command": f"{script} {event}"}]})
    hooks_installed.write_text(json.dumps(data, indent=2))
    return out


def captured(directory: Path, event: str = "") -> list[dict[str, Any]]:
    """The captured hook inputs, oldest first (optionally of one event)."""
    files = sorted(directory.glob(f"*-{event or '*'}.json"))
    return [json.loads(f.read_text()) for f in files if f.stat().st_size]


def new_session() -> str:
    """A fresh Claude Code session id."""
    return str(uuid.uuid4())


def lease(repo: Repo, task: str = TASK) -> str:
    """The session id the task's lease names (`status --json`)."""
    return str(repo.ok("status", task, "--json").json()["lock"]["session_id"])


def status(repo: Repo, task: str = TASK) -> dict[str, Any]:
    """`taskgate status TASK --json`."""
    data: dict[str, Any] = repo.ok("status", task, "--json").json()
    return data
