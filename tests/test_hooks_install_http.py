"""`taskgate hooks install --http` (issue 18): HTTP entries for the agent-side events, the
SessionStart autostart command, UserPromptSubmit kept a command; switching faces, uninstall and
status; the autostart script itself (it never fails a session, it reports what went wrong)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import SRC, Repo
from taskgate.hooks.install import AUTOSTART, HTTP_EVENTS, SECRET_HEADER
from taskgate.server import secret


def _settings() -> Path:
    return Path(os.environ["HOME"]) / ".claude" / "settings.json"


def _load() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(_settings().read_text())
    return data


def _install(repo: Repo, state: Path, *extra: str) -> dict[str, Any]:
    args = ("hooks", "install", "--http", "--port", "7399", "--state-dir", str(state), *extra)
    out: dict[str, Any] = repo.ok(*args, "--json").json()
    return out


def test_http_entries_carry_the_server_secret_and_fail_closed(repo: Repo, tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = _install(repo, state)
    assert set(first["changes"].values()) == {"added"}
    data = _load()
    hook_secret = (secret.server_dir(state, repo.path / ".git") / "hook-secret").read_text()
    hook_secret = hook_secret.strip()
    for event in HTTP_EVENTS:
        [entry] = data["hooks"][event][0]["hooks"]
        assert entry["type"] == "http"
        assert entry["url"] == f"http://127.0.0.1:7399/hooks/{event}"
        assert entry["headers"] == {SECRET_HEADER: hook_secret}
    assert data["hooks"]["PreToolUse"][0]["hooks"][0]["onFailure"] == "block"
    assert data["hooks"]["PostToolUse"][0]["hooks"][0]["onFailure"] == "block"
    [prompt] = data["hooks"]["UserPromptSubmit"][0]["hooks"]
    assert prompt["type"] == "command"  # approvals never travel over HTTP
    start, session = data["hooks"]["SessionStart"][0]["hooks"]
    assert str(AUTOSTART) in start["command"] and str(state) in start["command"]
    assert session["command"].split()[-3] == "SessionStart"
    assert _settings().stat().st_mode & 0o077 == 0  # the file holds the secret
    before = _settings().read_bytes()
    assert set(_install(repo, state)["changes"].values()) == {"unchanged"}
    assert _settings().read_bytes() == before
    # Back to commands: every HTTP entry and the autostart command are replaced, not added to.
    back = repo.ok("hooks", "install", "--json").json()
    assert set(back["changes"].values()) <= {"updated", "unchanged"}
    data = _load()
    for event, groups in data["hooks"].items():
        [entry] = groups[0]["hooks"]
        assert entry["type"] == "command" and "autostart" not in entry["command"], event
    assert hook_secret not in _settings().read_text()
    _install(repo, state)
    repo.ok("hooks", "uninstall")
    assert "hooks" not in _load()


def test_status_says_the_server_is_down_and_codex_refuses_http(repo: Repo, tmp_path: Path) -> None:
    _install(repo, tmp_path / "state")
    down = repo.run("hooks", "status", "--json")
    assert down.code != 0
    problems = down.json()["problems"]
    assert any("no server answers http://127.0.0.1:7399/hooks/PreToolUse" in p for p in problems)
    assert down.json()["changes"]["UserPromptSubmit"] == "ok"
    refused = repo.run("hooks", "install", "--http", "--client", "codex")
    assert refused.code == 2 and "--http is for Claude Code" in refused.out + refused.err


def _stop(pid: int) -> None:
    """SIGTERM, then SIGKILL when the server is still there after 5 s (a SIGTERM that lands
    while uvicorn starts up can go unanswered)."""
    import signal
    import time

    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)


def _server_pid(state: Path) -> int:
    """The autostarted server's pid (its port listens a moment before server.json exists)."""
    import time

    for _ in range(200):
        found = next(state.glob("serve/*/server.json"), None)
        if found is not None and found.read_text().strip():
            return int(json.loads(found.read_text())["pid"])
        time.sleep(0.05)
    raise AssertionError("the server never wrote server.json")


def _autostart(repo: Path, port: int, state: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-S", str(AUTOSTART), "--repo", str(repo), "--port", str(port)]
    return subprocess.run(
        [*argv, "--state-dir", str(state)],
        input="{}",
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )


def test_autostart_reports_a_foreign_listener_and_a_failed_start(
    tmp_path: Path,
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        taken = _autostart(tmp_path, port, tmp_path / "state")
        assert taken.returncode == 0
        message = json.loads(taken.stdout)["systemMessage"]  # not taskgate's: said, not hidden
        assert "something other than taskgate serve" in message and str(port) in message
        assert not (tmp_path / "state" / "autostart.log").exists()  # nothing was started
    plain = tmp_path / "not-a-repo"
    plain.mkdir()
    failed = _autostart(plain, port, tmp_path / "state")
    assert failed.returncode == 0  # a session is never failed by it
    message = json.loads(failed.stdout)["systemMessage"]
    assert "taskgate serve did not start" in message and "block" in message
    assert (tmp_path / "state" / "autostart.log").read_text().strip()


def test_two_sessions_starting_at_once_share_one_server(repo: Repo, tmp_path: Path) -> None:

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    state = tmp_path / "state"
    argv = [sys.executable, "-S", str(AUTOSTART), "--repo", str(repo.path), "--port", str(port)]
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    starters = [
        subprocess.Popen([*argv, "--state-dir", str(state)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(2)
    ]  # fmt: skip
    outs = [p.communicate("{}", timeout=60)[0] for p in starters]
    pid = _server_pid(state)
    try:
        assert [p.returncode for p in starters] == [0, 0]
        assert outs == ["", ""], outs  # both found a server answering: no false alarm
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        pids = {json.loads(f.read_text())["pid"] for f in state.glob("serve/*/server.json")}
        assert pids == {pid}
    finally:
        _stop(pid)


def test_status_posts_each_event_to_the_running_server(repo: Repo, tmp_path: Path) -> None:

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    state = tmp_path / "state"
    repo.ok("hooks", "install", "--http", "--port", str(port), "--state-dir", str(state))
    started = _autostart(repo.path, port, state)
    assert started.returncode == 0 and started.stdout == "", started.stdout
    pid = _server_pid(state)
    try:
        report = repo.run("hooks", "status", "--json")
        assert report.code == 0, report.out + report.err
        assert set(report.json()["changes"].values()) == {"ok"}  # PreToolUse denied the sample
    finally:
        _stop(pid)
