"""`taskgate run` with agent processes, confined by default (issue 14): the demo's two tasks
done by bench/scripted_agent.py through the `command` backend, with the real CLI."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

from conftest import Repo, git
from taskgate.agents import sandbox
from taskgate.orchestrator.demo import create_sample

ROOT = Path(__file__).resolve().parent.parent
AGENT = ROOT / "bench" / "scripted_agent.py"

needs_bwrap = pytest.mark.skipif(not sandbox.probe()[0], reason="bubblewrap does not work here")


def sample(tmp_path: Path, setting: str | None = None) -> Repo:
    """The demo's sample repository with command agents (sandbox = `setting`, or the default)."""
    path = create_sample(tmp_path / "textkit", auto_approve=True)
    toml = path / "taskgate.toml"
    text = toml.read_text().replace('backend = "scripted"', 'backend = "command"')
    if setting:
        text += f'sandbox = "{setting}"\n'
    text += f"\n[agents.command]\ncommand = {json.dumps([sys.executable, str(AGENT)])}\n"
    toml.write_text(text)
    git(path, "commit", "-qam", "command agents")
    repo = Repo(path)
    repo.ok("init")
    return repo


def sandbox_events(repo: Repo, task: str) -> list[dict[str, object]]:
    """The task's `agent_sandbox` events, read from the store."""
    conn = sqlite3.connect(f"file:{repo.path / '.taskgate' / 'state.db'}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT payload FROM events WHERE task = ? AND kind = 'agent_sandbox'", (task,)
        ).fetchall()
    finally:
        conn.close()
    return [json.loads(row[0]) for row in rows]


@needs_bwrap
def test_run_with_confined_agent_processes_completes(tmp_path: Path) -> None:
    repo = sample(tmp_path)
    result = repo.run("run", "add-slugify", "--yes", session="run")
    assert result.code == 0, result.out + result.err
    assert "unconfined" not in result.out + result.err
    assert "slugify" in git(repo.path, "log", "-1", "--format=%s", "main")
    records = list(repo.task_dir("add-slugify").glob("agents/*/*.sandbox.json"))
    assert records
    for record in records:
        data = json.loads(record.read_text())
        assert data["mode"] == "confined" and not data["violations"], (record, data)
    events = sandbox_events(repo, "add-slugify")
    modes = {e["agent_mode"] for e in events}
    assert modes == {"requirements", "synthesis", "implementation", "review"}
    assert {e["mode"] for e in events} == {"confined"}
    assert len(events) == len(records)


def test_run_unconfined_says_so(tmp_path: Path) -> None:
    repo = sample(tmp_path, "none")
    result = repo.run("run", "add-slugify", "--yes", session="run")
    assert result.code == 0, result.out + result.err
    assert "warning: agents run unconfined" in result.out
    records = list(repo.task_dir("add-slugify").glob("agents/*/*.sandbox.json"))
    assert records and all(json.loads(r.read_text())["mode"] == "unconfined" for r in records)
    events = sandbox_events(repo, "add-slugify")
    assert events and {e["mode"] for e in events} == {"unconfined"}
    assert all("none" in str(e["reason"]) for e in events)


def test_sandbox_bwrap_without_bubblewrap_stops_before_any_agent(tmp_path: Path) -> None:
    repo = sample(tmp_path, "bwrap")
    empty = tmp_path / "empty-path"
    empty.mkdir()
    (empty / "git").symlink_to(Path(git_path()))
    result = repo.run("run", "add-slugify", "--yes", session="run", env={"PATH": str(empty)})
    assert result.code == 2, result.out + result.err
    assert "bwrap is not installed" in result.err and "apt-get install bubblewrap" in result.err
    assert not list(repo.path.glob(".taskgate/tasks/add-slugify/agents/*/*.sandbox.json"))


def git_path() -> str:
    import shutil

    found = shutil.which("git")
    assert found
    return found
