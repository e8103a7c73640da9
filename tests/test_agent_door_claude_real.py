"""The agent door with the real Claude Code (2.1.332) in its own sandbox, with the settings
`taskgate hooks install` writes (issue 14).

On Linux the session's Bash runs in bubblewrap with a network namespace of its own and a
seccomp filter that refuses Unix sockets, so the door's socket cannot be reached; its way out
is the sandbox's HTTP proxy, which forwards a CONNECT to `127.0.0.1:PORT` because the settings
name that address in `sandbox.network.allowedDomains` (server/door_tcp.py). These tests run
`taskgate serve` in the same network namespace as the client (its loopback is the one the
proxy reaches) and prove, on disk and in the store:

- the session's `taskgate transition` reaches the store through the door (an agent request,
  recorded as `agent-door`), while the same command cannot write the store itself;
- its `taskgate approve` / `say ... approved` are refused at the door and the store is
  byte-for-byte unchanged;
- without the allowedDomains entry the proxy refuses, and nothing reaches the store.

Needs the pinned clients, bwrap and socat (skipped otherwise, as test_sandbox_client_real)."""

from __future__ import annotations

import json
import os
import shlex
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import SRC, Repo, make_repo
from flow import to_classified, to_synthesis
from server_helpers import fingerprint
from taskgate.hooks.install import sandbox_settings
from taskgate.server import door_tcp
from test_sandbox_client_real import _available

pytestmark = pytest.mark.skipif(not _available(), reason="the pinned Claude Code is not here")

TASK = "add-login"
SESSION = "0b7f6e0c-6a57-4c1e-9d2b-7a1f00000011"
TASKGATE = f"{shlex.quote(sys.executable)} -m taskgate"


def _settings(repo: Repo, *, door: bool = True) -> Path:
    settings: dict[str, Any] = sandbox_settings(repo.path)
    settings["sandbox"]["enableWeakerNestedSandbox"] = True  # see test_sandbox_client_real
    if not door:
        settings["sandbox"]["network"]["allowedDomains"] = []
    # default mode, every Bash call allowed: Claude Code then filters the network by
    # allowedDomains (bypassPermissions would let the proxy reach any address)
    settings["permissions"]["allow"] = ["Bash"]
    path = repo.path.parent / "sandbox-settings.json"
    path.write_text(json.dumps(settings))
    return path


REGISTER = (
    "import sys; from taskgate.server import peers; pid = int(sys.argv[1]); "
    "peers.register(sys.argv[2], peers.Identity(peers.CLIENT, pid, peers.start_time(pid), "
    "session=sys.argv[3]))"
)


def _server_first(repo: Repo, state: Path, session: str) -> str:
    """Shell that starts `taskgate serve` on the namespace's loopback, waits for its TCP door,
    and registers the process that becomes `claude` (`$$`, before its exec) for `session`, as
    the SessionStart hook registers its client (server/peers.py). The hooks themselves are not
    installed: their PreToolUse predictor would deny some of these commands before the door
    could show what it refuses."""
    endpoint = door_tcp.load(repo.path / ".git")
    assert endpoint is not None, "hooks install chose no TCP door"
    serve = (f"{TASKGATE} --repo {shlex.quote(str(repo.path))} serve --port 0 --state-dir "
             f"{shlex.quote(str(state))}")  # fmt: skip
    return (
        f"{serve} >{shlex.quote(str(state))}/serve.log 2>&1 &\n"
        f"for i in $(seq 500); do (: </dev/tcp/127.0.0.1/{endpoint.port}) 2>/dev/null && break; "
        "sleep 0.02; done\n"
        f"{shlex.quote(sys.executable)} -c {shlex.quote(REGISTER)} $$ "
        f"{shlex.quote(str(repo.path / '.taskgate'))} {shlex.quote(session)}"
    )


def _bash(
    repo: Repo,
    cwd: Path,
    commands: list[str],
    *,
    door: bool = True,
    session: str = SESSION,
    serve: bool = True,
) -> list[str]:
    """One sandboxed session running each command as a Bash call; their outputs."""
    from realclients.clients import run_claude
    from realclients.mock_anthropic import MockAnthropic, call, say

    home = Path(os.environ["HOME"])
    state = repo.path.parent / "serve-state"
    state.mkdir(exist_ok=True)
    settings = _settings(repo, door=door)
    script = [call("Bash", command=c, description="taskgate") for c in commands]
    with MockAnthropic() as mock:
        mock.script([*script, say("done")])
        run = run_claude(
            "go", cwd=cwd, home=home, port=mock.port, unix_socket=mock.unix_socket,
            args=["--settings", str(settings), "--session-id", SESSION],
            env={"PYTHONPATH": str(SRC), "TASKGATE_SESSION": session},
            permission_mode="default", before=_server_first(repo, state, session) if serve else "",
            timeout=180,
        )  # fmt: skip
        assert run.code == 0, run.err[-2000:]
        results = [str(r["text"]) for r in mock.main[-1].tool_results()]
    assert len(results) == len(commands), results
    return results


def _events(repo: Repo, kind: str) -> list[dict[str, Any]]:
    conn = sqlite3.connect(f"file:{repo.path / '.taskgate' / 'state.db'}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT payload FROM events WHERE kind = ?", (kind,)).fetchall()
    finally:
        conn.close()
    return [json.loads(r[0]) for r in rows]


def test_a_sandboxed_session_s_transition_goes_through_the_door(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    to_classified(repo, TASK, session=SESSION)
    repo.ok("hooks", "install", "--project", "--sandbox")
    db = repo.path / ".taskgate" / "state.db"
    out = _bash(
        repo, repo.worktree(TASK),
        [
            # the store itself is read-only in the sandbox, whatever writes it
            f"python3 -c \"open('{db}', 'ab').write(b'x')\"; echo direct=$?",
            f"{TASKGATE} transition {TASK} REQUIREMENTS; echo rc=$?",
        ],
    )  # fmt: skip
    assert "Read-only file system" in out[0] and "direct=1" in out[0], out[0]
    assert "rc=0" in out[1], out[1]
    assert repo.ok("status", TASK, "--json").json()["state"] == "REQUIREMENTS"
    [door] = [e for e in _events(repo, "agent-door") if "transition" in e.get("argv", [])]
    # who asked is proven from the connection: the process holding the proxy's socket is the
    # client registered for SESSION (the door never takes the session from the request)
    assert door["identity"]["session"] == SESSION and door["identity"]["kind"] == "client", door


# Without the agent markers the CLI's own check (R-CKP-02, agent-relayed) does not see an
# agent, as a determined agent would arrange: what refuses then is the door.
UNMARKED = "env -u CLAUDECODE -u TASKGATE_AGENT"


@pytest.mark.parametrize(
    ("command", "where"),
    [
        (f"{TASKGATE} approve {TASK} plan", "not run by an agent"),
        (f"{UNMARKED} {TASKGATE} approve {TASK} plan", "refused at the agent door"),
        (f"{UNMARKED} {TASKGATE} say {TASK} approved", "refused at the agent door"),
        (f"{UNMARKED} {TASKGATE} --rep . approve {TASK} plan", "refused at the agent door"),
    ],
    ids=["approve", "approve-unmarked", "say-unmarked", "prefixes-unmarked"],
)
def test_a_sandboxed_session_s_approval_is_refused_at_the_door(
    tmp_path: Path, command: str, where: str
) -> None:
    repo = make_repo(tmp_path / "r")
    to_synthesis(repo, TASK)
    repo.ok("present", TASK)
    repo.ok("hooks", "install", "--project", "--sandbox")
    before = fingerprint(repo.path)
    [out] = _bash(repo, repo.worktree(TASK), [f"{command}; echo rc=$?"], session="s1")
    assert where in out and "R-CKP-02" in out and "rc=0" not in out, out
    assert fingerprint(repo.path) == before
    assert not _events(repo, "approval") and not _events(repo, "human_message")
    assert repo.ok("status", TASK, "--json").json()["state"] == "SYNTHESIS"


def test_without_the_allowed_address_the_proxy_refuses_and_the_store_stays(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "r")
    to_classified(repo, TASK, session=SESSION)
    repo.ok("hooks", "install", "--project", "--sandbox")
    before = fingerprint(repo.path)
    [out] = _bash(
        repo, repo.worktree(TASK), [f"{TASKGATE} transition {TASK} REQUIREMENTS; echo rc=$?"],
        door=False,
    )  # fmt: skip
    assert "proxy refused" in out and "allowedDomains" in out and "rc=0" not in out, out
    assert "Traceback" not in out
    assert fingerprint(repo.path) == before


def test_without_a_server_the_session_is_told_to_start_one(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    to_classified(repo, TASK, session=SESSION)
    repo.ok("hooks", "install", "--project", "--sandbox")
    before = fingerprint(repo.path)
    [out] = _bash(
        repo, repo.worktree(TASK), [f"{TASKGATE} transition {TASK} REQUIREMENTS; echo rc=$?"],
        serve=False,
    )  # fmt: skip
    assert "taskgate serve" in out and "rc=0" not in out and "Traceback" not in out, out
    assert fingerprint(repo.path) == before
