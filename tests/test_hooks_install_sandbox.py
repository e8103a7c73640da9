"""`taskgate hooks install --sandbox` (issue 14): Claude Code's sandbox settings for the
repository's layout plus the agent door's socket, merged without touching a person's entries,
and taken out again by `hooks uninstall` (only when taskgate put them there)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import Repo


def _settings(repo: Repo) -> dict:  # type: ignore[type-arg]
    return json.loads((repo.path / ".claude" / "settings.json").read_text())


def test_install_sandbox_writes_the_settings_and_the_door(repo: Repo) -> None:
    settings = repo.path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"model": "mine", "permissions": {"deny": ["Bash(rm:*)"]}}))
    result = repo.ok("hooks", "install", "--project", "--sandbox")
    assert "sandbox settings in" in result.out and "agent door" in result.out
    data = _settings(repo)
    sandbox = data["sandbox"]
    assert sandbox["enabled"] is True and sandbox["allowUnsandboxedCommands"] is False
    db = str((repo.path / ".taskgate" / "state.db").resolve())
    assert "/" + db in sandbox["filesystem"]["denyWrite"]
    door = str((repo.path / ".git").resolve() / "taskgate" / "door.sock")
    assert sandbox["network"]["allowUnixSockets"] == [door]
    assert f"Write(/{db})" in data["permissions"]["deny"]
    assert "Bash(rm:*)" in data["permissions"]["deny"] and data["model"] == "mine"
    assert data["hooks"]["PreToolUse"]  # the hooks themselves are installed as well
    before = settings.read_bytes()
    again = repo.ok("hooks", "install", "--project", "--sandbox")
    assert "unchanged" in again.out and settings.read_bytes() == before

    out = repo.ok("hooks", "uninstall", "--project").out
    assert "removed taskgate's sandbox settings" in out
    rest = _settings(repo)
    assert "sandbox" not in rest and rest["permissions"]["deny"] == ["Bash(rm:*)"]
    assert rest["model"] == "mine"


def test_uninstall_keeps_a_persons_own_sandbox_settings(repo: Repo) -> None:
    settings = repo.path / ".claude" / "settings.json"
    settings.parent.mkdir()
    own = {"sandbox": {"enabled": True, "allowUnsandboxedCommands": False}}
    settings.write_text(json.dumps(own))
    repo.ok("hooks", "install", "--project")
    repo.ok("hooks", "uninstall", "--project")
    assert _settings(repo)["sandbox"] == own["sandbox"]


def test_sandbox_is_for_claude_code(repo: Repo, tmp_path: Path) -> None:
    result = repo.run("hooks", "install", "--client", "codex", "--sandbox")
    assert result.code == 2 and "--sandbox is for Claude Code" in result.err


def test_shared_user_settings_keep_what_another_repository_relies_on(
    tmp_path: Path, repo: Repo
) -> None:
    from conftest import make_repo

    user = Path(os.environ["HOME"]) / ".claude" / "settings.json"
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text(json.dumps({"sandbox": {"filesystem": {"allowWrite": ["//mine"]}}}))
    other = make_repo(tmp_path / "other")
    repo.ok("hooks", "install", "--sandbox")
    other.ok("hooks", "install", "--sandbox")
    both = json.loads(user.read_text())
    assert len(both["sandbox"]["network"]["allowedDomains"]) == 2
    repo.ok("hooks", "uninstall")
    left = json.loads(user.read_text())["sandbox"]
    assert left["enabled"] is True  # the other repository still relies on it
    mine = str((repo.path / ".taskgate" / "state.db").resolve())
    assert not any(mine in p for p in left["filesystem"]["denyWrite"])
    theirs = str((other.path / ".taskgate" / "state.db").resolve())
    assert any(theirs in p for p in left["filesystem"]["denyWrite"])
    assert len(left["network"]["allowedDomains"]) == 1
    other.ok("hooks", "uninstall")
    assert json.loads(user.read_text()) == {
        "sandbox": {"filesystem": {"allowWrite": ["//mine"]}}
    }  # only the person's own setting is left


def test_where_claude_code_s_sandbox_cannot_run_sessions_stay_unconfined_and_it_is_said(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil
    import sys

    bin_dir = tmp_path / "bin"  # git and bwrap, but no socat: Claude Code's sandbox cannot run
    bin_dir.mkdir()
    for tool in ("git", "bwrap"):
        found = shutil.which(tool)
        if found is None:
            pytest.skip(f"{tool} is not installed")
        (bin_dir / tool).symlink_to(found)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}")
    insisted = repo.run("hooks", "install", "--project", "--sandbox")
    assert insisted.code == 2 and "socat" in insisted.err, insisted.err
    default = repo.ok("hooks", "install", "--project")
    assert "run unconfined" in default.out and "socat" in default.out, default.out
    assert "sandbox" not in _settings(repo) and _settings(repo)["hooks"]["PreToolUse"]
