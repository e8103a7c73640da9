"""The clients' sandbox settings derived from the layout (hooks/client_sandbox.py, issue 14).

The real-binary proof (a sandboxed Bash write into .taskgate/ fails at the OS level) belongs
to the real-clients suite; here: the settings' shape, the key names against the installed
Claude Code binary when there is one, and merging into someone's settings."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import pytest

from taskgate.hooks.client_sandbox import (
    claude_sandbox_settings,
    codex_sandbox_settings,
    has_ours,
    merge_settings,
    unmerge_settings,
)
from taskgate.hooks.policy import Layout

CLAUDE_BINARIES = [
    Path(os.environ.get("TASKGATE_CLAUDE_BINARY", "/nonexistent")),
    Path("/tmp/rc/node_modules/@anthropic-ai/claude-code/bin/claude.exe"),
]


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    repo = tmp_path / "repo"
    return Layout(str(repo), str(repo / ".git"), str(repo / ".taskgate"),
                  str(repo / ".taskgate" / "tasks"))  # fmt: skip


def test_claude_settings_confine_bash_and_deny_the_file_tools(layout: Layout) -> None:
    home = "/home/me"
    settings = claude_sandbox_settings(layout, home=home)
    sandbox = settings["sandbox"]
    assert sandbox["enabled"] is True and sandbox["failIfUnavailable"] is True
    assert sandbox["allowUnsandboxedCommands"] is False
    deny = sandbox["filesystem"]["denyWrite"]
    repo = layout.repo
    for path in (
        f"{repo}/.taskgate/state.db",
        f"{repo}/.taskgate/state.db-wal",
        f"{repo}/.taskgate/hook-snapshot.json",
        f"{repo}/.taskgate/hook-snapshot.clock",  # PostgreSQL: trusted with the file (issue 20)
        f"{repo}/taskgate.toml",
        f"{repo}/.claude",
        f"{repo}/.git/refs/heads/main",
        f"{repo}/.git/hooks",
        f"{repo}/.git/config",
        f"{repo}/.git/taskgate-governed",
        f"{repo}/.taskgate/tasks/*/task.json",
        f"{repo}/.taskgate/tasks/*/*.flag",
        f"{home}/.claude/settings.json",
        f"{home}/.codex/config.toml",
    ):
        assert "/" + path in deny, path
    assert all(p.startswith("//") for p in deny)  # absolute in Claude Code's spelling
    assert sandbox["filesystem"]["allowWrite"] == [f"/{repo}/.taskgate/tasks", f"/{repo}/.git"]
    rules = settings["permissions"]["deny"]
    assert f"Edit(/{repo}/.taskgate/state.db)" in rules
    assert f"Write(/{repo}/.taskgate/state.db)" in rules
    assert f"Write(/{repo}/.claude/**)" in rules and f"Edit(/{repo}/.git/hooks/**)" in rules
    assert f"Edit(/{home}/.claude/settings.json)" in rules


def test_a_custom_main_branch_is_protected_too(layout: Layout) -> None:
    deny = claude_sandbox_settings(layout, home="/h", main_branch="trunk")["sandbox"]
    assert f"/{layout.repo}/.git/refs/heads/trunk" in deny["filesystem"]["denyWrite"]


def _binary() -> Path | None:
    return next((p for p in CLAUDE_BINARIES if p.is_file()), None)


@pytest.mark.skipif(_binary() is None, reason="no Claude Code binary here")
def test_the_key_names_are_in_the_installed_claude_codes_schema(layout: Layout) -> None:
    binary = _binary()
    assert binary is not None
    keys = {"failIfUnavailable", "allowUnsandboxedCommands", "denyWrite", "allowWrite"}
    with binary.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as m:
        for key in keys:
            assert m.find(f"{key}:".encode()) != -1, key  # the zod schema's property
        assert m.find(b'path:["sandbox","failIfUnavailable"]') != -1
        assert m.find(b'path:["sandbox","allowUnsandboxedCommands"]') != -1
    settings = claude_sandbox_settings(layout, home="/h")
    assert keys <= set(settings["sandbox"]) | set(settings["sandbox"]["filesystem"])


def test_codex_settings(layout: Layout) -> None:
    settings = codex_sandbox_settings(layout)
    assert settings["sandbox_mode"] == "workspace-write"
    assert settings["sandbox_workspace_write"]["writable_roots"] == [
        layout.tasks_root,
        layout.common_dir,
    ]


def test_merge_keeps_foreign_entries_and_unmerge_restores_them(layout: Layout) -> None:
    ours = claude_sandbox_settings(layout, home="/h")
    theirs = {
        "model": "opus",
        "sandbox": {"enabled": False, "allowUnsandboxedCommands": True,
                    "filesystem": {"denyWrite": ["//secrets"]}},
        "permissions": {"deny": ["Read(./.env)"], "allow": ["Bash(ls:*)"]},
        "hooks": {"PreToolUse": []},
    }  # fmt: skip
    merged = merge_settings(theirs, ours)
    assert merged["model"] == "opus" and merged["hooks"] == {"PreToolUse": []}
    assert merged["sandbox"]["enabled"] is True  # a weaker value is not kept
    assert merged["sandbox"]["allowUnsandboxedCommands"] is False
    assert merged["sandbox"]["filesystem"]["denyWrite"][0] == "//secrets"
    assert merged["permissions"]["deny"][0] == "Read(./.env)"
    assert merge_settings(merged, ours) == merged  # idempotent
    assert has_ours(merged, ours) == []
    assert "sandbox.allowUnsandboxedCommands" in has_ours(theirs, ours)
    assert theirs["sandbox"]["enabled"] is False  # the input is not changed
    back = unmerge_settings(merged, ours)
    assert back["sandbox"]["filesystem"] == {"denyWrite": ["//secrets"]}
    assert back["permissions"] == {"deny": ["Read(./.env)"], "allow": ["Bash(ls:*)"]}
    assert "enabled" not in back["sandbox"] and back["model"] == "opus"
    assert unmerge_settings(merge_settings({}, ours), ours) == {}
