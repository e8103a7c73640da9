"""The HTTP hook endpoint of `taskgate serve`: the same decisions as `taskgate hook EVENT`
(one decision function, two faces), behind its own secret."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from conftest import SRC, Repo
from flow import to_implementation
from server_helpers import BASE, PORT, fingerprint
from taskgate.server import hookdoor, secret
from taskgate.server.app import build_app
from taskgate.server.context import Server, ServerContext
from taskgate.server.security import Gate, allowed_hosts
from taskgate.server.watch import Hub

FIXTURES = Path(__file__).parent / "fixtures" / "hooks"
TASK = "add-login"


def _input(name: str, repo: Repo, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (FIXTURES / f"{name}.json").read_text().replace("REPO", str(repo.path))
    )
    for key, value in changes.items():
        data[key] = {**data[key], **value} if isinstance(value, dict) else value
    return data


def _command(repo: Repo, event: str, body: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    env.pop("TASKGATE_SESSION", None)
    proc = subprocess.run(
        [sys.executable, "-m", "taskgate", "hook", event],
        cwd=repo.path,
        env=env,
        input=body,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip() or "{}"


@contextmanager
def _door(repo: Repo, state_dir: Path) -> Iterator[tuple[TestClient, str]]:
    ctx = ServerContext.open(repo.path, state_dir)
    token = secret.load_or_create(state_dir / "secret")
    hook_secret = secret.load_or_create(state_dir / "hook-secret")
    server = Server(ctx, Gate(token, allowed_hosts("127.0.0.1", PORT)), Hub())
    app = build_app(
        server,
        watch=False,
        extra_routes=hookdoor.routes(hook_secret),
        hook_door=hookdoor.HookDoor(hook_secret),
    )  # as `taskgate serve` wires it
    with TestClient(app, base_url=BASE) as client:
        yield client, hook_secret


@pytest.fixture
def impl(tmp_path: Path) -> Repo:
    from conftest import make_repo

    repo = make_repo(tmp_path / "repo")
    to_implementation(repo, TASK)
    return repo


def test_http_answers_exactly_as_the_command_hook(impl: Repo, tmp_path: Path) -> None:
    worktree = impl.worktree(TASK)
    cases = [
        (
            "PreToolUse",
            _input(
                "pre_tool_use_write",
                impl,
                tool_input={"file_path": str(impl.path / ".taskgate/state.db")},
            ),
        ),
        (
            "PreToolUse",
            _input(
                "pre_tool_use_write",
                impl,
                session_id="s1",
                tool_input={"file_path": str(worktree / "src/x.py")},
            ),
        ),
        ("PreToolUse", _input("pre_tool_use_read", impl)),
        (
            "PreToolUse",
            _input(
                "pre_tool_use_bash",
                impl,
                tool_input={"command": "sqlite3 .taskgate/state.db 'DELETE FROM tasks'"},
            ),
        ),
        ("PreToolUse", "this is not json"),
        ("Stop", _input("stop", impl)),
    ]
    with _door(impl, tmp_path / "st") as (client, hook_secret):
        for event, data in cases:
            body = data if isinstance(data, str) else json.dumps(data)
            over_http = client.post(
                f"/hooks/{event}", content=body, headers={hookdoor.HEADER: hook_secret}
            )
            assert over_http.status_code == 200, over_http.text
            assert over_http.json() == json.loads(_command(impl, event, body)), (event, body)
        denied = client.post(
            "/hooks/pre-tool-use",
            content=json.dumps(cases[0][1]),
            headers={hookdoor.HEADER: hook_secret},
        ).json()
        assert denied["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_the_door_needs_its_own_secret_and_refuses_prompts(impl: Repo, tmp_path: Path) -> None:
    prompt = json.dumps(_input("user_prompt_submit", impl, prompt="approved"))
    write = json.dumps(_input("pre_tool_use_read", impl))
    with _door(impl, tmp_path / "st") as (client, hook_secret):
        dashboard_token = (tmp_path / "st" / "secret").read_text().strip()
        assert client.post("/hooks/PreToolUse", content=write).status_code == 401
        assert (
            client.post(
                "/hooks/PreToolUse", content=write, headers={hookdoor.HEADER: dashboard_token}
            ).status_code
            == 401
        )
        before = fingerprint(impl.path)
        refused = client.post(
            "/hooks/UserPromptSubmit", content=prompt, headers={hookdoor.HEADER: hook_secret}
        )
        assert refused.status_code == 403 and "command hook" in refused.json()["error"]
        assert fingerprint(impl.path) == before
        unknown = client.post(
            "/hooks/NoSuchEvent", content=write, headers={hookdoor.HEADER: hook_secret}
        )
        assert unknown.status_code == 400
        # The hook secret opens no dashboard page, and a foreign Host no door at all.
        assert client.get("/", headers={hookdoor.HEADER: hook_secret}).status_code == 401
        rebound = client.post(
            "/hooks/PreToolUse",
            content=write,
            headers={hookdoor.HEADER: hook_secret, "host": "evil.test"},
        )
        assert rebound.status_code == 421
    assert (tmp_path / "st" / "hook-secret").stat().st_mode & 0o077 == 0
