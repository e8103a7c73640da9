"""Codex's own terminal UI (the real `codex` 0.169.0 in tmux) with taskgate's hooks: a person
types a prompt, the model's apply_patch into `.taskgate/` is blocked by the hook and the TUI
says so; nothing is written (issue 13, "Codex as an interactive client").
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conftest import make_repo
from realclients.clients import offline_env
from realclients.codex_runner import offline_codex
from realclients.mock_openai import (
    KEY_ENV,
    MockOpenAI,
    Turn,
    add_file_patch,
    codex_config,
    custom_tool_call,
    message,
)

SESSION = f"taskgate-codex-tui-{os.getpid()}"


def tmux(*args: str) -> str:
    """Run tmux (the test's own server socket) and return stdout."""
    done = subprocess.run(["tmux", "-L", SESSION, *args], capture_output=True, text=True,
                          timeout=30, check=True)  # fmt: skip
    return done.stdout


def wait(what: str, check: Callable[[], bool], timeout_s: float = 40.0) -> None:
    """Poll `check` until it holds; fail with the screen when it does not."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}; screen:\n{screen()}")


def screen() -> str:
    return tmux("capture-pane", "-p", "-t", SESSION)


@pytest.fixture
def terminal() -> Iterator[None]:
    try:
        yield
    finally:
        subprocess.run(["tmux", "-L", SESSION, "kill-server"], capture_output=True, check=False)


def test_the_tui_shows_the_denial_and_nothing_is_written(terminal: None, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    home = Path(os.environ["HOME"])
    forged = repo.path / ".taskgate" / "forged.txt"

    def script(turn: Turn) -> list[dict[str, object]]:
        if turn.calls_made() == 0:
            return [custom_tool_call("apply_patch", add_file_patch(".taskgate/forged.txt", "x"))]
        return [message("all done")]

    with MockOpenAI(script) as mock:
        config = codex_config(home, mock)
        # The person trusted this folder before (no first-run question).
        config.write_text(
            config.read_text() + f'\n[projects."{repo.path}"]\ntrust_level = "trusted"\n'
        )
        offline = offline_codex(tmp_path / "codex-bin", mock)  # codex without any network
        bins = f"{offline.parent}{os.pathsep}{Path(sys.executable).parent}"
        env = offline_env(home, tmp_path / "tmp", {KEY_ENV: "not-a-real-key", "TERM": "xterm"})
        env["PATH"] = f"{bins}{os.pathsep}{env['PATH']}"
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2] / "src")
        install = subprocess.run(
            [sys.executable, "-m", "taskgate", "hooks", "install", "--client", "codex"],
            cwd=repo.path, env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert install.returncode == 0, install.stdout + install.stderr
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        codex = f"{offline} -p taskgate"  # the profile install wrote (the docs' flow)
        command = f"cd {shlex.quote(str(repo.path))} && exec env -i {exports} {codex}"
        tmux("new-session", "-d", "-s", SESSION, "-x", "200", "-y", "50", command)
        wait("the prompt", lambda: "Ask Codex to do anything" in screen())
        assert "need review" not in screen()  # the hooks are trusted
        tmux("send-keys", "-t", SESSION, "write the file")
        wait("the typed prompt", lambda: "write the file" in screen())
        tmux("send-keys", "-t", SESSION, "Enter")
        wait("the model's last turn", lambda: len(mock.turns) >= 2)
        wait("the denial on screen", lambda: "Blocked by hook" in screen())
    assert "[R-LCK-09]" in screen()
    blocked = "Command blocked by PreToolUse hook: [R-LCK-09]"
    assert any(out.startswith(blocked) for out in mock.all_outputs()), mock.all_outputs()
    assert not forged.exists()
    assert any("write the file" in t.user_text() for t in mock.turns)  # what the person typed
