"""Hook settings checked at SessionStart (issue 14; hooks/settings_check.py).

The real `taskgate hook SessionStart` in a subprocess, fed the JSON Claude Code sends, with
`taskgate hooks install` done in the hermetic HOME: a removed, changed or switched-off entry is
reported in the answer (systemMessage and additionalContext) and recorded in the audit trail of
the session's task (else the repository's), and `taskgate audit` fails there; when everything is
in place nothing is reported and the store is not touched. tests/realclients has the same with
the real Claude Code.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import SRC, Repo, make_repo
from taskgate.engine.guard_trail import HOOKS_CHANGED, REPOSITORY
from taskgate.hooks import codex_install
from taskgate.server import peers

TASK = "add-login"


def home() -> Path:
    return Path(os.environ["HOME"])


def session_start(repo: Repo, session: str = "s1", *, via: str | None = None,
                  cwd: Path | None = None) -> dict[str, Any]:  # fmt: skip
    """The SessionStart hook as the client runs it (through `via`, a stand-in client)."""
    data = {"session_id": session, "cwd": str(cwd or repo.path), "hook_event_name": "SessionStart",
            "source": "startup", "transcript_path": ""}  # fmt: skip
    hook = [sys.executable, "-m", "taskgate", "hook", "SessionStart"]
    argv = [via, "-c", '"$@"; exit $?', "client", *hook] if via else hook
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    env.pop("TASKGATE_SESSION", None)
    proc = subprocess.run(argv, input=json.dumps(data), capture_output=True, text=True, env=env,
                          cwd=repo.path, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    answer: dict[str, Any] = json.loads(proc.stdout) if proc.stdout.strip() else {}
    return answer


def recorded(repo: Repo) -> list[tuple[str, dict[str, Any]]]:
    conn = sqlite3.connect(f"file:{repo.path / '.taskgate' / 'state.db'}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT task, payload FROM events WHERE kind = ? ORDER BY seq", (HOOKS_CHANGED,)
        ).fetchall()
    finally:
        conn.close()
    return [(t, json.loads(p)) for t, p in rows]


def fingerprint(repo: Repo) -> str:
    conn = sqlite3.connect(f"file:{repo.path / '.taskgate' / 'state.db'}?mode=ro", uri=True)
    try:
        return hashlib.sha256("\n".join(conn.iterdump()).encode()).hexdigest()
    finally:
        conn.close()


def settings() -> Path:
    return home() / ".claude" / "settings.json"


def edit(path: Path, change: Any) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2))


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    """s1 holds TASK; taskgate's hooks are installed in the user scope."""
    repo = make_repo(tmp_path / "r")
    repo.ok("start", TASK)
    repo.ok("hooks", "install")
    return repo


def test_everything_in_place_reports_and_records_nothing(repo: Repo) -> None:
    before = fingerprint(repo)
    answer = session_start(repo)
    assert "systemMessage" not in answer
    assert "hook settings" not in json.dumps(answer)
    assert "RESUMING TASK" in answer["hookSpecificOutput"]["additionalContext"]
    assert fingerprint(repo) == before


def _remove(event: str) -> Any:
    def change(data: dict[str, Any]) -> None:
        del data["hooks"][event]

    return change


def _narrow(data: dict[str, Any]) -> None:
    data["hooks"]["PreToolUse"][0]["matcher"] = "Write"


def _neuter(data: dict[str, Any]) -> None:
    entry = data["hooks"]["PostToolUse"][0]["hooks"][0]
    entry["command"] = "true PostToolUse # taskgate-hook"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (_remove("PreToolUse"), "the PreToolUse entry was removed"),
        (_remove("UserPromptSubmit"), "the UserPromptSubmit entry was removed"),
        (_narrow, "the PreToolUse entry was changed"),
        (_neuter, "the PostToolUse entry was changed"),
    ],
)
def test_a_removed_or_changed_entry_is_reported_and_recorded(
    repo: Repo, change: Any, expected: str
) -> None:
    edit(settings(), change)
    answer = session_start(repo)
    message = answer["systemMessage"]
    assert expected in message and str(settings()) in message and "[R-REC-14]" in message
    context = answer["hookSpecificOutput"]["additionalContext"]
    assert context.startswith(message) and "RESUMING TASK" in context
    assert f"Recorded in the audit trail of '{TASK}'" in message
    [(trail, payload)] = recorded(repo)
    assert trail == TASK and payload["session"] == "s1" and expected in payload["problems"][0]
    audit = repo.run("audit", TASK, "--json")
    assert audit.code == 1
    guards = next(c for c in audit.json()["tasks"][0]["checks"] if c["id"] == "guards")
    assert not guards["passed"] and expected in guards["findings"][0]["evidence"]
    # Reinstalled: the next session finds nothing more; the record stays in the trail.
    repo.ok("hooks", "install")
    assert "systemMessage" not in session_start(repo)
    assert len(recorded(repo)) == 1


def test_disable_all_hooks_is_reported(repo: Repo) -> None:
    local = repo.path / ".claude" / "settings.local.json"
    local.parent.mkdir()
    local.write_text('{"disableAllHooks": true}')
    answer = session_start(repo)
    assert f"{local}: disableAllHooks is set" in answer["systemMessage"]
    assert len(recorded(repo)) == 1


def test_without_a_task_the_repository_trail_records_it_and_audit_fails(repo: Repo) -> None:
    edit(settings(), _remove("Stop"))
    answer = session_start(repo, "s9")  # holds no task
    assert "Recorded in the repository's audit trail" in answer["systemMessage"]
    [(trail, payload)] = recorded(repo)
    assert trail == REPOSITORY and payload["session"] == "s9"
    audit = repo.run("audit", "--json")
    assert audit.code == 1
    repository = next(t for t in audit.json()["tasks"] if t["task"] == REPOSITORY)
    assert repository["verdict"] == "FAILED"
    text = repo.run("audit").out
    assert f"audit {REPOSITORY}" in text and "FAIL  guards" in text


def test_project_scope_entries_are_checked_too(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    repo.ok("start", TASK)
    repo.ok("hooks", "install", "--project")
    project = repo.path / ".claude" / "settings.json"
    edit(project, _remove("SessionEnd"))
    answer = session_start(repo)
    assert f"{project}: the SessionEnd entry was removed" in answer["systemMessage"]


def test_weakened_sandbox_settings_are_reported(repo: Repo) -> None:
    repo.ok("hooks", "install", "--sandbox")
    assert "systemMessage" not in session_start(repo)
    edit(settings(), lambda d: d["sandbox"].update(enabled=False, allowUnsandboxedCommands=True))
    message = session_start(repo)["systemMessage"]
    assert "sandbox.enabled was removed or weakened" in message
    assert "sandbox.allowUnsandboxedCommands" in message


def test_a_removed_sandbox_table_is_reported(repo: Repo) -> None:
    """Removing the whole `sandbox` table takes the door's socket (the old marker) with it:
    install's record says this repository relies on it."""
    repo.ok("hooks", "install", "--sandbox")
    edit(settings(), lambda d: d.pop("sandbox"))
    message = session_start(repo)["systemMessage"]
    assert "sandbox.enabled was removed or weakened" in message


def test_an_install_without_the_sandbox_reports_no_sandbox(repo: Repo) -> None:
    repo.ok("hooks", "install", "--no-sandbox")
    assert "systemMessage" not in session_start(repo)


def test_codex_entries_are_checked(repo: Repo) -> None:
    path = home() / ".codex" / "hooks.json"
    codex_install.install(path, codex_install.default_program())
    assert "systemMessage" not in session_start(repo)
    edit(path, _remove("PreToolUse"))
    assert f"{path}: the PreToolUse entry was removed" in session_start(repo)["systemMessage"]


def test_the_client_that_spawned_the_hook_is_registered_for_the_door(
    repo: Repo, tmp_path: Path
) -> None:
    """The hook registers its nearest `claude`/`codex` ancestor under the session it was
    handed; without such an ancestor (a copy an agent runs by hand) it registers nothing."""
    client = tmp_path / "bin" / "claude"
    client.parent.mkdir()
    client.symlink_to("/bin/sh")  # a process whose name is `claude`
    session_start(repo, "s1")
    registry = Path(peers.registry(repo.path / ".taskgate"))
    assert not registry.exists() or os.listdir(registry) == []
    session_start(repo, "s1", via=str(client))
    [name] = os.listdir(registry)
    identity = json.loads((registry / name).read_text())
    assert identity["kind"] == "client" and identity["session"] == "s1"
    assert name == f"{identity['pid']}-{identity['started']}.json"


def test_a_task_the_session_claims_later_fails_its_audit_too(repo: Repo) -> None:
    """The session held no task at SessionStart (the repository's trail has the record); the
    task it claims afterwards was worked on unguarded, so its audit fails too."""
    edit(settings(), _remove("PreToolUse"))
    session_start(repo, "s9")
    repo.ok("start", "fix-typo", session="s9")
    audit = repo.run("audit", "fix-typo", "--json")
    assert audit.code == 1
    guards = next(c for c in audit.json()["tasks"][0]["checks"] if c["id"] == "guards")
    evidence = guards["findings"][0]["evidence"]
    assert evidence.startswith("repository trail event") and "session s9" in evidence
    # s1's task, which s9 never touched, still passes the check.
    other = repo.run("audit", TASK, "--json").json()["tasks"][0]["checks"]
    assert next(c for c in other if c["id"] == "guards")["passed"]


def test_http_entries_are_compared_with_what_install_http_writes(tmp_path: Path) -> None:
    """`hooks install --http`: the HTTP entries (and the autostart command) are what the
    check compares against; a removed HTTP entry is reported, an intact install is not."""
    repo = make_repo(tmp_path / "r")
    repo.ok("start", TASK)
    repo.ok("hooks", "install", "--http", "--port", "7461", "--state-dir", str(tmp_path / "st"))
    assert "systemMessage" not in session_start(repo)
    edit(settings(), _remove("PostToolUse"))
    assert "the PostToolUse entry was removed" in session_start(repo)["systemMessage"]
