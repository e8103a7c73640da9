"""The real Claude Code loads taskgate's hooks wherever the agent starts (issue 13).

Claude Code reads project settings only from `.claude/` of the directory it starts in (checked
here: project-scope hooks do not load in the task worktree or a subdirectory), so `taskgate
hooks install` writes the user scope by default, and `hooks status` names every worktree where
project-scope hooks would not load.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from realclients.conftest import OWNER, TASK, Claude, OwnedRepo, copy_template
from realclients.mock_anthropic import call, say


def _write_denied(claude: Claude, repo: OwnedRepo, cwd: Path, target: Path, rule: str) -> None:
    run = claude.run(
        "add the login module",
        cwd,
        [call("Write", file_path=str(target), content="def login(): ...\n"), say("stopped")],
        session=OWNER,
    )
    result = claude.mock.last().last_tool_result()
    assert result is not None and result["is_error"] is True, result
    assert f"[{rule}]" in result["text"], result["text"]
    assert not target.exists()  # the effect on disk: nothing was written
    assert [d["tool_name"] for d in run.result["permission_denials"]] == ["Write"]


@pytest.mark.parametrize("where", ["main", "main-subdir", "task", "task-subdir", "agent"])
def test_hooks_act_wherever_claude_starts(
    where: str, claude: Claude, hooks_installed: Path, templates: dict[str, Path], tmp_path: Path
) -> None:
    repo = copy_template(templates, "implementation", tmp_path / "repo")
    task_wt = repo.worktree(TASK)
    agent = sorted(p.name for p in (repo.task_dir(TASK) / "agents").iterdir())[0]
    agent_wt = repo.task_dir(TASK) / "agents" / agent / "code"
    cwd = {
        "main": repo.path,
        "main-subdir": repo.path / ".taskgate",
        "task": task_wt,
        "task-subdir": task_wt / "src",
        "agent": agent_wt,
    }[where]
    cwd.mkdir(parents=True, exist_ok=True)
    if where == "agent":  # the main agent may not edit a stakeholder agent's worktree
        _write_denied(claude, repo, cwd, agent_wt / "src" / "login.py", "R-AGT-13")
    else:  # Guard 7: the main agent does not implement in IMPLEMENTATION
        _write_denied(claude, repo, cwd, task_wt / "src" / "login.py", "R-AGT-12")


def test_project_scope_does_not_reach_the_task_worktree_and_status_says_so(
    claude: Claude, templates: dict[str, Path], tmp_path: Path
) -> None:
    """The failure the issue reports, reproduced with the real client, and its detection."""
    repo = copy_template(templates, "implementation", tmp_path / "repo")
    repo.ok("hooks", "install", "--project")
    task_wt = repo.worktree(TASK)
    target = task_wt / "src" / "login.py"
    claude.run(
        "add the login module",
        task_wt,
        [call("Write", file_path=str(target), content="x = 1\n"), say("done")],
        session=OWNER,
    )
    assert target.exists()  # unguarded: what `hooks status` must now report
    status = repo.run("hooks", "status", "--json")
    assert status.code == 1, status.out
    problems = "\n".join(status.json()["problems"])
    assert f"Claude Code started in {task_wt} would not load" in problems
    assert "taskgate hooks install" in problems
    # user scope: every worktree is covered, status is clean
    repo.ok("hooks", "install")
    assert repo.run("hooks", "status", "--json").json()["problems"] == []


def test_disable_all_hooks_in_a_worktree_is_reported(
    claude: Claude, hooks_installed: Path, templates: dict[str, Path], tmp_path: Path
) -> None:
    """A `disableAllHooks` in a worktree's local settings switches off even the user-scope
    hooks in the real client; `hooks status` names the file."""
    repo = copy_template(templates, "implementation", tmp_path / "repo")
    task_wt = repo.worktree(TASK)
    assert repo.run("hooks", "status", "--json").json()["problems"] == []
    local = task_wt / ".claude" / "settings.local.json"
    local.parent.mkdir()
    local.write_text('{"disableAllHooks": true}')
    target = task_wt / "src" / "login.py"
    claude.run(
        "add the login module",
        task_wt,
        [call("Write", file_path=str(target), content="x = 1\n"), say("done")],
        session=OWNER,
    )
    assert target.exists()  # the client ran no hook: what status must report
    status = repo.run("hooks", "status", "--json")
    assert status.code == 1
    assert any(str(local) in p and "disableAllHooks" in p for p in status.json()["problems"])
