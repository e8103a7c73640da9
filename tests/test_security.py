"""Trust (issue 14, DESIGN.md Trust): fail closed when the configuration is gone, and forged
approvals from inside an agent's sandbox record nothing. Real CLI, real git, real bwrap."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import Repo, git, make_repo
from taskgate.engine.workspace import GOVERNED_MARKER

# -- fail closed: taskgate.toml and .taskgate/ gone -----------------------------------------


def pre_tool_use(repo: Repo, tool: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    """The PreToolUse answer for one call, through the hook entry point."""
    data = {
        "session_id": "claude-1",
        "cwd": str(repo.path),
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": tool_input,
    }
    result = repo.run("hook", "PreToolUse", session=None, stdin=json.dumps(data))
    assert result.code == 0, result.err
    answer: dict[str, Any] = json.loads(result.out) if result.out.strip() else {}
    return answer


def denied(answer: dict[str, Any]) -> str:
    """The reason of a deny ("" when the call is allowed)."""
    out = answer.get("hookSpecificOutput", {})
    return (
        str(out.get("permissionDecisionReason", ""))
        if out.get("permissionDecision") == "deny"
        else ""
    )


GUARDED_CALLS = [
    ("Write", {"file_path": "src/app.py", "content": "x = 1\n"}),
    ("Edit", {"file_path": "README.md", "old_string": "sample", "new_string": "evil"}),
    ("Bash", {"command": "echo evil >> README.md"}),
    ("Bash", {"command": "taskgate init"}),
]


def test_init_marks_the_repository_as_governed(repo: Repo) -> None:
    marker = repo.path / ".git" / GOVERNED_MARKER
    assert marker.read_text().strip() == str(repo.path / ".taskgate" / "tasks")
    assert GOVERNED_MARKER in repo.ok("init").out or marker.is_file()  # idempotent


@pytest.mark.parametrize(("tool", "tool_input"), GUARDED_CALLS)
def test_the_hook_still_denies_when_config_and_store_are_removed(
    repo: Repo, tool: str, tool_input: dict[str, Any]
) -> None:
    git(repo.path, "add", "taskgate.toml")
    git(repo.path, "commit", "-qm", "config")
    assert not denied(pre_tool_use(repo, "Write", {"file_path": "src/app.py", "content": ""}))
    # what an agent would do: git rm the config, a script removes the state directory
    git(repo.path, "rm", "-q", "taskgate.toml")
    subprocess.run([sys.executable, "-c", "import shutil; shutil.rmtree('.taskgate')"],
                   cwd=repo.path, check=True)  # fmt: skip
    assert not (repo.path / "taskgate.toml").exists()
    assert not (repo.path / ".taskgate").exists()
    if "file_path" in tool_input:
        tool_input = {**tool_input, "file_path": str(repo.path / tool_input["file_path"])}
    reason = denied(pre_tool_use(repo, tool, tool_input))
    assert "R-LCK-08" in reason and "store" in reason
    assert "restore .taskgate/ and taskgate.toml" in reason and GOVERNED_MARKER in reason


def test_a_repository_never_initialised_is_not_governed(tmp_path: Path) -> None:
    path = tmp_path / "plain"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    repo = Repo(path)
    assert not denied(pre_tool_use(repo, "Write", {"file_path": str(path / "a.py"), "content": ""}))


def test_the_marker_remembers_a_custom_tasks_root(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo.path / ".git" / GOVERNED_MARKER).unlink()
    (repo.path / "taskgate.toml").write_text('[workspace]\ntasks_root = "work/tasks"\n')
    repo.ok("init")
    marker = repo.path / ".git" / GOVERNED_MARKER
    assert marker.read_text().strip() == str(repo.path / "work" / "tasks")
    os.remove(repo.path / "taskgate.toml")
    shutil.rmtree(repo.path / ".taskgate")
    from taskgate.hooks.context import load_layout

    layout = load_layout(str(repo.path))
    assert layout is not None and layout.tasks_root == str(repo.path / "work" / "tasks")
