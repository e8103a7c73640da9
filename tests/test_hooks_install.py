"""`taskgate hooks install/uninstall/status`: marked entries, idempotent, foreign hooks kept;
user scope by default (Claude Code reads project settings only from the directory it starts in:
tests/realclients), project scope on request, the shipped plugin in step with both."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from conftest import Repo
from taskgate.hooks.dispatch import EVENTS
from taskgate.hooks.install import MARKER, default_program

FOREIGN: dict[str, Any] = {
    "permissions": {"allow": ["Bash(npm test)"]},
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "./lint-bash.sh"}]},
        ],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
    },
}


def settings(repo: Repo) -> Path:
    """The user-scope settings file (the default scope) in the hermetic HOME."""
    return Path(os.environ["HOME"]) / ".claude" / "settings.json"


def project(repo: Repo) -> Path:
    """The project-scope settings file."""
    return repo.path / ".claude" / "settings.json"


def ours(data: dict[str, Any], event: str) -> list[dict[str, Any]]:
    """taskgate's entries for one event."""
    return [
        h
        for group in data.get("hooks", {}).get(event, [])
        for h in group["hooks"]
        if MARKER in h["command"]
    ]


def test_install_adds_every_event_and_is_idempotent(repo: Repo) -> None:
    first = repo.ok("hooks", "install", "--json").json()
    assert first["changes"] == dict.fromkeys(EVENTS, "added")
    assert first["program"] == default_program()
    data = json.loads(settings(repo).read_text())
    for event in EVENTS:
        [entry] = ours(data, event)
        assert entry["command"].startswith(f"{default_program()} {event}")
        assert entry["type"] == "command"
    pre = data["hooks"]["PreToolUse"][0]
    import re  # Claude Code's matcher is a JavaScript regex here; Python's agrees on it

    for tool in ("Edit", "Write", "Bash", "Agent", "Task", "mcp__fs__write_file", "NewTool"):
        assert re.search(pre["matcher"], tool), tool
    for tool in ("Read", "Grep", "Glob", "LS", "TodoWrite"):
        assert not re.search(pre["matcher"], tool), tool  # read-only tools start no process
    assert pre["hooks"][0]["command"].endswith(f"|| exit 2 {MARKER}")  # fail closed
    assert pre["hooks"][0]["onFailure"] == "block"  # also on a timeout (Claude Code 2.1)
    assert not project(repo).exists()
    before = settings(repo).read_bytes()
    again = repo.ok("hooks", "install", "--json").json()
    assert again["changes"] == dict.fromkeys(EVENTS, "unchanged")
    assert settings(repo).read_bytes() == before


def test_foreign_hooks_keep_their_place_and_survive_uninstall(repo: Repo) -> None:
    settings(repo).parent.mkdir()
    settings(repo).write_text(json.dumps(FOREIGN, indent=2))
    repo.ok("hooks", "install")
    data = json.loads(settings(repo).read_text())
    # the person's permissions stay (the sandbox settings add deny rules next to them)
    assert data["permissions"]["allow"] == FOREIGN["permissions"]["allow"]
    assert data["hooks"]["PreToolUse"][0] == FOREIGN["hooks"]["PreToolUse"][0]  # still first
    assert data["hooks"]["Stop"][0] == FOREIGN["hooks"]["Stop"][0]
    assert len(data["hooks"]["PreToolUse"]) == 2
    out = repo.ok("hooks", "uninstall").out
    assert "PreToolUse: removed" in out
    assert json.loads(settings(repo).read_text()) == FOREIGN
    assert "nothing changed" in repo.ok("hooks", "uninstall").out


def test_an_outdated_entry_is_updated_in_place(repo: Repo) -> None:
    repo.ok("hooks", "install")
    data = json.loads(settings(repo).read_text())
    data["hooks"]["SessionStart"].append({"hooks": [{"type": "command", "command": "echo hi"}]})
    data["hooks"]["SessionStart"][0]["hooks"][0]["command"] = f"/old/taskgate hook X {MARKER}"
    settings(repo).write_text(json.dumps(data))
    result = repo.ok("hooks", "install", "--json").json()
    assert result["changes"]["SessionStart"] == "updated"
    fresh = json.loads(settings(repo).read_text())["hooks"]["SessionStart"]
    assert "launch.py SessionStart" in fresh[0]["hooks"][0]["command"]
    assert fresh[1]["hooks"][0]["command"] == "echo hi"


def test_project_scope_on_request(repo: Repo) -> None:
    repo.ok("hooks", "install", "--project")
    assert ours(json.loads(project(repo).read_text()), "PreToolUse")
    assert not settings(repo).exists()
    repo.ok("hooks", "uninstall", "--project")
    assert json.loads(project(repo).read_text()) == {}


def test_user_scope_installs_outside_a_repository(tmp_path: Path, repo: Repo) -> None:
    elsewhere = tmp_path / "not-a-repo"
    elsewhere.mkdir()
    repo.ok("hooks", "install", "--user", cwd=elsewhere)
    assert ours(json.loads(settings(repo).read_text()), "SessionStart")


def test_status_names_worktrees_where_project_hooks_would_not_load(repo: Repo) -> None:
    repo.ok("start", "add-login")
    repo.ok("hooks", "install", "--project")
    result = repo.run("hooks", "status", "--json")
    assert result.code == 1
    problems = result.json()["problems"]
    task_wt = repo.worktree("add-login")
    assert any(f"started in {task_wt} would not load" in p for p in problems), problems
    assert any(f"root of {repo.path}," in p for p in problems), problems  # not subdirectories
    repo.ok("hooks", "install")
    assert repo.ok("hooks", "status", "--json").json()["problems"] == []


def test_the_shipped_plugin_matches_install(repo: Repo) -> None:
    from taskgate.hooks.install import plugin_dir, plugin_hooks

    path = Path(repo.ok("hooks", "plugin-path").out.strip())
    assert path == plugin_dir()
    assert json.loads((path / "hooks" / "hooks.json").read_text()) == plugin_hooks()
    manifest = json.loads((path / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "taskgate"
    assert (path / "bin" / "hook").is_file()


def test_status_verifies_the_wiring_and_self_tests_each_event(repo: Repo) -> None:
    missing = repo.run("hooks", "status", "--json")
    assert missing.code == 1
    assert missing.json()["changes"] == dict.fromkeys(EVENTS, "missing")
    repo.ok("hooks", "install")
    result = repo.run("hooks", "status", "--json")
    assert result.code == 0, result.out
    assert result.json()["changes"] == dict.fromkeys(EVENTS, "ok")
    # the self-test used a session holding no task: nothing was recorded anywhere
    assert not (repo.path / ".taskgate" / "tasks").exists() or not any(
        (repo.path / ".taskgate" / "tasks").iterdir()
    )


def test_invalid_settings_are_refused_and_left_alone(repo: Repo) -> None:
    settings(repo).parent.mkdir()
    settings(repo).write_text("{ not json")
    run = repo.run("hooks", "install")
    assert run.code == 2
    assert "not valid JSON" in run.err
    assert settings(repo).read_text() == "{ not json"
    settings(repo).write_text(json.dumps({"hooks": {"PreToolUse": "oops"}}))
    assert repo.run("hooks", "uninstall").code == 2
