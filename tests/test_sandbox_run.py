"""`taskgate run` with agent processes, confined by default (issue 14): the demo's two tasks
done by bench/scripted_agent.py through the `command` backend, with the real CLI."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
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


def trust_check(repo: Repo, task: str) -> dict[str, object]:
    """The `trust` check of `taskgate audit TASK --json`."""
    result = repo.run("audit", task, "--json", session="run")
    data = result.json()
    audit = data[0] if isinstance(data, list) else data
    audits = audit.get("tasks", [audit]) if isinstance(audit, dict) else audit
    checks = [c for a in audits for c in a["checks"] if c["id"] == "trust"]
    assert len(checks) == 1, data
    return checks[0]


@needs_bwrap
def test_confined_task_audit_and_status_say_how_agents_ran(tmp_path: Path) -> None:
    repo = sample(tmp_path)
    repo.ok("run", "add-slugify", "--yes", session="run")
    trust = trust_check(repo, "add-slugify")
    assert trust["passed"] and "agents ran confined" in trust["notes"]  # type: ignore[operator]
    status = repo.ok("status", "add-slugify", "--json", session="run").json()
    assert status["confinement"]["mode"] == "confined"
    assert status["confinement"]["approvals_provable"] is True


def test_unconfined_task_says_approvals_cannot_be_proven_human(tmp_path: Path) -> None:
    repo = sample(tmp_path, "none")
    repo.ok("run", "add-slugify", "--yes", session="run")
    trust = trust_check(repo, "add-slugify")
    assert trust["passed"]
    assert any("cannot be proven human" in n for n in trust["notes"])  # type: ignore[attr-defined]
    text = repo.ok("status", "add-slugify", session="run").out
    assert "agents: unconfined; approvals cannot be proven human" in text


def _approve_on_a_terminal(repo: Repo, *args: str) -> int:
    """`taskgate approve` with stdin on a pseudo-terminal: the person's own terminal."""
    leader, follower = os.openpty()
    try:
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), TASKGATE_SESSION="run")
        proc = subprocess.run(
            [sys.executable, "-m", "taskgate", "approve", *args],
            cwd=repo.path, env=env, stdin=follower, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        os.close(leader)
        os.close(follower)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.returncode


@needs_bwrap
def test_confined_task_holds_approvals_to_human_only_channels(tmp_path: Path) -> None:
    repo = sample(tmp_path)
    stopped = repo.run("run", "add-slugify", session="run")  # no TTY: stops at the plan
    assert stopped.code == 4, stopped.out + stopped.err
    _approve_on_a_terminal(repo, "add-slugify", "plan")
    assert trust_check(repo, "add-slugify")["passed"]
    stopped = repo.run("run", "add-slugify", session="run")  # stops at the change review
    assert stopped.code == 4, stopped.out + stopped.err
    repo.ok("present", "add-slugify", session="run")
    repo.ok("approve", "add-slugify", "changes", session="run")  # a pipe: non-interactive
    trust = trust_check(repo, "add-slugify")
    assert not trust["passed"]
    evidence = " ".join(f["evidence"] for f in trust["findings"])  # type: ignore[attr-defined]
    assert "changes approval" in evidence and "'non-interactive'" in evidence
    assert "plan approval" not in evidence
