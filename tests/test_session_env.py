"""Where the session id comes from (DESIGN "Sessions", issue 13): --session, else
TASKGATE_SESSION, else CLAUDE_CODE_SESSION_ID, which Claude Code exports to every Bash command;
and no agent that taskgate starts inherits any of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import Repo
from taskgate.engine.core import session_from_env


def lease(repo: Repo, task: str) -> str:
    return str(repo.ok("status", task, "--json").json()["lock"]["session_id"])


def test_claude_code_session_id_is_the_fallback(repo: Repo) -> None:
    repo.ok("start", "add-login", session=None, env={"CLAUDE_CODE_SESSION_ID": "claude-1"})
    assert lease(repo, "add-login") == "claude-1"
    # TASKGATE_SESSION wins over it, --session over both
    both = {"CLAUDE_CODE_SESSION_ID": "claude-1"}
    wt = repo.worktree("add-login")
    refused = repo.run("classify", "add-login", session="other", env=both, cwd=wt)
    assert refused.code == 3 and "R-TRN-07" in refused.err, refused.err
    repo.ok("--session", "claude-1", "classify", "add-login", session="other", env=both, cwd=wt)


def test_no_session_at_all_says_how_to_set_one(repo: Repo) -> None:
    result = repo.run("start", "add-login", session=None)
    assert result.code == 2
    assert "CLAUDE_CODE_SESSION_ID" in result.err


def test_session_from_env_order() -> None:
    assert session_from_env({}) == ""
    assert session_from_env({"CLAUDE_CODE_SESSION_ID": " c "}) == "c"
    assert session_from_env({"TASKGATE_SESSION": "t", "CLAUDE_CODE_SESSION_ID": "c"}) == "t"
    assert session_from_env({"TASKGATE_SESSION": " ", "CLAUDE_CODE_SESSION_ID": "c"}) == "c"


def test_agents_inherit_no_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `taskgate run` started inside Claude Code must not hand its session to the agents."""
    from taskgate.agents.base import AgentRequest, Mode, TaskBrief
    from taskgate.agents.command import agent_env

    monkeypatch.setenv("CLAUDE_CODE_SESSION_ID", "the-persons-claude-session")
    monkeypatch.setenv("TASKGATE_SESSION", "run@host")
    request = AgentRequest(
        brief=TaskBrief("add-login"),
        agent="quality",
        mode=Mode.IMPLEMENTATION,
        worktree=tmp_path,
        agent_dir=tmp_path,
        task_dir=tmp_path,
        report_path=tmp_path / "r.md",
        task_md=tmp_path / "task.md",
        prompt="",
    )
    env = agent_env(request)
    assert "CLAUDE_CODE_SESSION_ID" not in env and "TASKGATE_SESSION" not in env
    assert session_from_env(env) == ""
    assert env["TASKGATE_AGENT"] == "quality"
