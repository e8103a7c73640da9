"""Decision parity (issue 18): every real Claude Code hook input in tests/fixtures/hooks, sent
through `taskgate hook EVENT` (the command face) and through `POST /hooks/EVENT` of the server
(the HTTP face), gives the same answer. The stateful events (SessionStart, PostToolUse, Stop,
SessionEnd) run in order on two copies of the same repository, one per face, so each face
starts from the same store; answers are compared with the copy's path written as REPO."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from starlette.testclient import TestClient

from conftest import SRC, Repo, make_repo
from flow import copy_repo, to_implementation
from server_helpers import BASE, PORT
from taskgate.server import hookdoor, secret
from taskgate.server.app import build_app
from taskgate.server.context import Server, ServerContext
from taskgate.server.security import Gate, allowed_hosts
from taskgate.server.watch import Hub

FIXTURES = Path(__file__).parent / "fixtures" / "hooks"
TASK = "add-login"
# Fixture file -> event; UserPromptSubmit is refused by the HTTP door (it stays a command).
ORDER = (
    "session_start",
    "pre_tool_use_read",
    "pre_tool_use_write",
    "pre_tool_use_edit",
    "pre_tool_use_bash",
    "pre_tool_use_task",
    "post_tool_use_write",
    "stop",
    "subagent_stop",
    "session_end",
)


def _bodies(root: Path, cwd: Path, session: str) -> list[tuple[str, str]]:
    """(event, body) for every fixture, rooted at `root`, run from `cwd` as `session`."""
    out = []
    for name in ORDER:
        text = (FIXTURES / f"{name}.json").read_text().replace("REPO", str(root))
        data = json.loads(text)
        data["cwd"], data["session_id"] = str(cwd), session
        out.append((data["hook_event_name"], json.dumps(data)))
    return out


def _command(cwd: Path, event: str, body: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    env.pop("TASKGATE_SESSION", None)
    proc = subprocess.run(
        [sys.executable, "-m", "taskgate", "hook", event],
        cwd=cwd,
        env=env,
        input=body,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip() or "{}"


def _normal(answer: str, root: Path) -> object:
    return json.loads(answer.replace(str(root), "REPO"))


def _faces(base: Repo, tmp_path: Path, session: str, where: str) -> list[str]:
    by_command = copy_repo(base.path, tmp_path / f"cmd-{where}")
    by_http = copy_repo(base.path, tmp_path / f"http-{where}")
    state = tmp_path / f"state-{where}"
    ctx = ServerContext.open(by_http.path, state)
    hook_secret = secret.load_or_create(state / "hook-secret")
    gate = Gate(secret.load_or_create(state / "secret"), allowed_hosts("127.0.0.1", PORT))
    app = build_app(
        Server(ctx, gate, Hub()),
        watch=False,
        extra_routes=hookdoor.routes(hook_secret),
        hook_door=hookdoor.HookDoor(hook_secret),
    )  # as `taskgate serve` wires it

    def cwd(repo: Repo) -> Path:
        return repo.worktree(TASK) if where == "worktree" else repo.path

    commanded = [
        _normal(_command(cwd(by_command), e, b), by_command.path)
        for e, b in _bodies(cwd(by_command), cwd(by_command), session)
    ]
    with TestClient(app, base_url=BASE) as client:
        served = []
        for event, body in _bodies(cwd(by_http), cwd(by_http), session):
            answer = client.post(
                f"/hooks/{event}", content=body, headers={hookdoor.HEADER: hook_secret}
            )
            assert answer.status_code == 200, (event, answer.text)
            served.append(_normal(answer.text, by_http.path))
    for name, left, right in zip(ORDER, commanded, served, strict=True):
        assert left == right, (name, where, session, left, right)
    return [json.dumps(a) for a in commanded]


def test_every_fixture_gets_the_same_answer_from_both_faces(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    to_implementation(repo, TASK)
    owner = repo.ok("status", TASK, "--json").json()["lock"]["session_id"]
    answers = []
    for session, where in ((owner, "worktree"), ("someone-else", "worktree"), (owner, "main")):
        answers += _faces(repo, tmp_path / f"{where}-{session[:8]}", session, where)
    assert sum('"deny"' in a for a in answers) >= 3, answers  # the inputs exercise denials
