"""The hook endpoint's lean path (server/hookdoor.HookDoor, ahead of Starlette) answers every
request exactly as the Starlette route (hookdoor.routes) does: status, headers and body bytes,
and the same store record for an engine step. Both apps are built the way `taskgate serve`
builds them, one with the lean path and one without, and fed the same requests."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from conftest import Repo, make_repo
from flow import copy_repo, to_implementation
from server_helpers import BASE, PORT
from taskgate.errors import StoreLost, UsageError
from taskgate.server import hookdoor, secret
from taskgate.server.app import build_app
from taskgate.server.context import Server, ServerContext
from taskgate.server.security import Gate, allowed_hosts
from taskgate.server.watch import Hub

TASK = "add-login"
SECRET = "s" * 43


@contextmanager
def client(repo: Path, state: Path, lean: bool) -> Iterator[TestClient]:
    ctx = ServerContext.open(repo, state)
    gate = Gate(secret.load_or_create(state / "secret"), allowed_hosts("127.0.0.1", PORT))
    app = build_app(Server(ctx, gate, Hub()), watch=False,
                    extra_routes=hookdoor.routes(SECRET),
                    hook_door=hookdoor.HookDoor(SECRET) if lean else None)  # fmt: skip
    with TestClient(app, base_url=BASE, raise_server_exceptions=False) as c:
        yield c


def answer(c: TestClient, method: str, path: str, body: bytes, headers: dict[str, Any]) -> Any:
    r = c.request(method, path, content=body, headers=headers)
    return r.status_code, r.headers.raw, r.content


def pre_tool_use(repo: Repo, session: str, **tool_input: str) -> bytes:
    data = {"session_id": session, "transcript_path": "", "cwd": str(repo.path),
            "permission_mode": "default", "hook_event_name": "PreToolUse",
            "tool_name": "Write" if "content" in tool_input else "Bash",
            "tool_input": tool_input}  # fmt: skip
    return json.dumps(data).encode()


@pytest.fixture(scope="module")
def impl(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    repo = make_repo(tmp_path_factory.mktemp("fast") / "repo")
    to_implementation(repo, TASK)
    return repo


def owner(repo: Repo) -> str:
    return str(repo.ok("status", TASK, "--json").json()["lock"]["session_id"])


def test_every_kind_of_request_gets_the_same_bytes(impl: Repo, tmp_path: Path) -> None:
    me = owner(impl)
    auth = {hookdoor.HEADER: SECRET}
    requests: list[tuple[str, str, bytes, dict[str, Any]]] = [
        # decisions: allowed, denied (the store), denied (another session's task worktree)
        ("POST", "/hooks/PreToolUse", pre_tool_use(impl, me, command="git status"), auth),
        (
            "POST",
            "/hooks/PreToolUse",
            pre_tool_use(impl, me, file_path=str(impl.path / ".taskgate" / "state.db"), content=""),
            auth,
        ),
        (
            "POST",
            "/hooks/pre-tool-use",
            pre_tool_use(
                impl,
                "someone-else",
                file_path=str(impl.worktree(TASK) / "src" / "x.py"),
                content="x",
            ),
            auth,
        ),
        ("POST", "/hooks/PreToolUse", b"this is not json", auth),
        ("POST", "/hooks/PreToolUse", b"", auth),
        # the door's own checks, in order
        ("POST", "/hooks/PreToolUse", b"{}", {}),
        ("POST", "/hooks/PreToolUse", b"{}", {hookdoor.HEADER: SECRET + "x"}),
        ("POST", "/hooks/PreToolUse", b"{}", {hookdoor.HEADER: b"\xe9" + SECRET.encode()}),
        ("POST", "/hooks/UserPromptSubmit", b"{}", auth),
        ("POST", "/hooks/user_prompt_submit", b"{}", {}),
        ("POST", "/hooks/NoSuchEvent", b"{}", auth),
        ("POST", "/hooks/PreToolUse", b"x" * (hookdoor.MAX_BODY + 1), auth),
        # not the lean path's: Starlette answers both
        ("GET", "/hooks/PreToolUse", b"", auth),
        ("POST", "/hooks/", b"{}", auth),
        ("POST", "/hooks/Pre/ToolUse", b"{}", auth),
        ("POST", "/hooks/PreToolUse/", b"{}", auth),
        ("POST", "/hooks/PreToolUse", b"{}", {**auth, "host": "rebind.example"}),
    ]
    with ExitStack() as stack:
        route = stack.enter_context(client(impl.path, tmp_path / "a", lean=False))
        lean = stack.enter_context(client(impl.path, tmp_path / "b", lean=True))
        seen = {}
        for method, path, body, headers in requests:
            expected = answer(route, method, path, body, headers)
            got = answer(lean, method, path, body, headers)
            assert got == expected, (method, path, headers, body[:80])
            seen.setdefault(expected[0], expected)
    assert set(seen) >= {200, 400, 401, 403, 404, 405, 413, 421}, set(seen)
    assert (b"content-security-policy", hookdoor.SECURITY_HEADERS[0][1]) in seen[200][1]


@pytest.mark.parametrize("raised", [StoreLost("the store is gone", hint="run recover"),
                                    UsageError("bad"), RuntimeError("a bug")])  # fmt: skip
def test_a_failing_decision_is_answered_the_same(
    impl: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, raised: Exception
) -> None:
    def fail(event: str, body: str) -> tuple[int, str]:
        raise raised

    monkeypatch.setattr(hookdoor, "_run", fail)
    body = pre_tool_use(impl, owner(impl), command="git status")
    auth = {hookdoor.HEADER: SECRET}
    with ExitStack() as stack:
        route = stack.enter_context(client(impl.path, tmp_path / "a", lean=False))
        lean = stack.enter_context(client(impl.path, tmp_path / "b", lean=True))
        expected = answer(route, "POST", "/hooks/PreToolUse", body, auth)
        assert answer(lean, "POST", "/hooks/PreToolUse", body, auth) == expected
    assert expected[0] == {StoreLost: 503, UsageError: 404, RuntimeError: 500}[type(raised)]


def events(repo: Path) -> list[tuple[str, str, str]]:
    conn = sqlite3.connect(f"file:{repo / '.taskgate' / 'state.db'}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT task, kind, payload FROM events ORDER BY seq").fetchall()
    finally:
        conn.close()
    return [(str(t), str(k), json.dumps(_timeless(json.loads(p)))) for t, k, p in rows]


def _timeless(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if k not in ("at", "ts", "time")}
    return value


def test_an_engine_step_records_the_same_through_both(impl: Repo, tmp_path: Path) -> None:
    """PostToolUse after an Edit records the tool use: on two copies of one repository, one
    through each path, the same answer and the same new events."""
    sides = {lean: copy_repo(impl.path, tmp_path / f"repo-{lean}") for lean in (False, True)}
    answers, added = {}, {}
    for lean, repo in sides.items():
        before = events(repo.path)
        worktree = repo.worktree(TASK)
        data = {"session_id": owner(repo), "transcript_path": "", "cwd": str(worktree),
                "permission_mode": "default", "hook_event_name": "PostToolUse",
                "tool_name": "Edit", "tool_response": {}, "tool_use_id": "t1",
                "tool_input": {"file_path": str(worktree / "src" / "x.py"),
                               "old_string": "a", "new_string": "b"}}  # fmt: skip
        body = json.dumps(data).encode()
        with client(repo.path, tmp_path / f"st-{lean}", lean) as c:
            status, _, content = answer(c, "POST", "/hooks/PostToolUse", body,
                                        {hookdoor.HEADER: SECRET})  # fmt: skip
        answers[lean] = (status, content.replace(str(repo.path).encode(), b"REPO"))
        added[lean] = [e for e in events(repo.path) if e not in before]
        added[lean] = [(t, k, p.replace(str(repo.path), "REPO")) for t, k, p in added[lean]]
    assert answers[True] == answers[False]
    assert added[True] == added[False]
    assert added[True], "the PostToolUse recorded nothing: the test lost its point"


def test_the_server_imports_the_decision_before_the_first_call() -> None:
    import subprocess
    import sys

    code = ("import sys; from taskgate.server import hookdoor; hookdoor.warm(); "
            "print(sorted(m for m in sys.modules if m.startswith('taskgate.hooks.')))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    for name in hookdoor.WARM:
        assert f"'taskgate.hooks.{name}'" in out, (name, out)
