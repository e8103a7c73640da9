"""The agent door (issue 14, DESIGN.md "Trust": one writer): real `taskgate serve`, real bwrap.

Inside a read-only sandbox the agent's own `taskgate transition/agent set/classify` reach the
store through the door (recorded with channel `agent-door`); everything reserved to the person
is refused there with a rule id, whatever the spelling, and the store is unchanged. A client
that talks to the socket directly gets no more than the CLI does.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import SRC, Repo, Run, edit_store, make_repo
from flow import to_classified, to_synthesis
from server_helpers import Running, start_server
from taskgate.agents import sandbox
from taskgate.cli.main import _parser
from taskgate.engine.core import pid_start_time
from taskgate.server import door, peers

pytestmark = pytest.mark.skipif(not sandbox.probe()[0], reason="bubblewrap does not work here")

TASK = "add-login"


def fingerprint(db: Path) -> str:
    """SHA-256 of the store's SQL dump: any row written changes it."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return hashlib.sha256("\n".join(conn.iterdump()).encode()).hexdigest()
    finally:
        conn.close()


def door_events(repo: Repo) -> list[dict[str, object]]:
    conn = sqlite3.connect(f"file:{repo.path / '.taskgate' / 'state.db'}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT payload FROM events WHERE kind = 'agent-door'").fetchall()
    finally:
        conn.close()
    return [json.loads(r[0]) for r in rows]


def launch(
    argv: list[str],
    env: dict[str, str],
    proven: str | None,
    *,
    kind: str = peers.CLIENT,
    state_dir: Path,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run `argv` (a sandbox); unless `proven` is None, register its outermost process for the
    door the way the SessionStart hook (a client's session `proven`) or `taskgate run` (an
    agent of TASK) does, right after it starts."""
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    path = None
    if proven is not None:
        started = peers.start_time(proc.pid)
        assert started is not None
        identity = peers.Identity(kind, proc.pid, started, session=proven,
                                  task=TASK if kind == peers.RUN else "",
                                  agent="architect" if kind == peers.RUN else "")  # fmt: skip
        path = peers.register(state_dir, identity)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if path is not None:
            peers.unregister(path)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def confined(
    repo: Repo,
    *args: str,
    cwd: Path | None = None,
    marker: bool = True,
    session: str = "s1",
    proven: str | None = "s1",
    kind: str = peers.CLIENT,
) -> Run:
    """`python -m taskgate ARGS` in a bwrap sandbox where the whole file system is read-only;
    `session` is what the command claims, `proven` the session registered for its sandbox
    (None: nobody registered it)."""
    bwrap = sandbox.probe()[0]
    env = {**os.environ, "PYTHONPATH": str(SRC), "TASKGATE_SESSION": session}
    sandbox_env = ["--setenv", "TASKGATE_SANDBOX", "bwrap"] if marker else []
    proc = launch(
        [bwrap, "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
         *sandbox_env, "--chdir", str(cwd or repo.worktree(TASK)),
         sys.executable, "-P", "-m", "taskgate", *args],
        env, proven, kind=kind, state_dir=repo.path / ".taskgate",
    )  # fmt: skip
    return Run(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Repo, Running]]:
    """A repository with a started task and `taskgate serve` running for it."""
    repo = make_repo(tmp_path / "r")
    server = start_server(repo.path, tmp_path / "st")
    try:
        assert door.door_path(repo.path / ".git").exists()
        yield repo, server
    finally:
        server.stop()
    assert not door.door_path(repo.path / ".git").exists(), "the server removes its door"


def test_agent_commands_change_the_store_through_the_door(
    served: tuple[Repo, Running],
) -> None:
    repo, _ = served
    to_classified(repo, TASK)
    # Without the door's help the sandbox cannot write: the store is on a read-only mount.
    result = confined(repo, "transition", TASK, "REQUIREMENTS")
    assert result.code == 0, result.err
    assert repo.ok("status", TASK, "--json").json()["state"] == "REQUIREMENTS"
    # No TASKGATE_SANDBOX marker: the read-only mount alone tells the CLI it is confined.
    result = confined(repo, "agent", "set", TASK, "architect", "IN_PROGRESS", marker=False)
    assert result.code == 0, result.err
    agents = repo.ok("status", TASK, "--json").json()["agents"]
    assert "IN_PROGRESS" in json.dumps(agents)
    events = door_events(repo)
    assert [e["argv"] for e in events] == [
        ["transition", TASK, "REQUIREMENTS"],
        ["agent", "set", TASK, "architect", "IN_PROGRESS"],
    ]
    assert all(e["channel"] == "agent-door" and e["session"] == "s1" for e in events)
    assert all(e["identity"]["kind"] == "client" and e["peer"] > 1 for e in events)
    audit = repo.run("audit", TASK)
    assert audit.code == 0 and "FAIL" not in audit.out, audit.out
    # Another session, proven as itself, is foreign to this task (R-TRN-07).
    before = fingerprint(repo.path / ".taskgate" / "state.db")
    foreign = confined(repo, "transition", TASK, "CLASSIFIED", "--reason", "x", session="s2",
                       proven="s2")  # fmt: skip
    assert foreign.code == 3 and "R-TRN-07" in foreign.err
    assert fingerprint(repo.path / ".taskgate" / "state.db") == before


HUMAN_ONLY = [
    (("approve", TASK, "plan"), "R-CKP-02"),
    (("say", TASK, "approved"), "R-CKP-02"),
    (("say", TASK, "looks good, approved"), "R-CKP-02"),
    (("request-changes", TASK, "use bcrypt"), "R-CKP-02"),
    (("--session", "s1", "approve", TASK, "plan"), "R-CKP-02"),
    (("release", TASK, "--force"), "R-LCK-21"),
    (("release", TASK, "--forc"), "R-LCK-21"),
    (("release", TASK, "--fo", "--reason", "stuck"), "R-LCK-21"),
    (("abandon", TASK, "--reason", "x"), "R-CKP-02"),
]
# Refused locally or a no-op here (nothing to repair, resolve or clean): never a store write.
NO_WRITE = [
    ("recover", "--rep"),
    ("violations", TASK, "--resolve", "all", "--reason", "x"),
    ("cleanup", TASK, "--accept-main", "--reason", "x"),
    ("hooks", "uninst", "--project"),
    ("appr", TASK, "plan"),
    ("init",),
]


def test_human_only_commands_are_refused_at_the_door(served: tuple[Repo, Running]) -> None:
    repo, _ = served
    to_synthesis(repo, TASK)
    repo.ok("present", TASK)  # the plan is presented: an approval would be valid now
    settings = repo.path / ".claude" / "settings.json"
    repo.ok("hooks", "install", "--project")
    hooks_before = settings.read_bytes()
    db = repo.path / ".taskgate" / "state.db"
    before = fingerprint(db)
    for args, rule in HUMAN_ONLY:
        result = confined(repo, *args)
        assert result.code != 0, (args, result.out, result.err)
        assert rule in result.err and "refused at the agent door" in result.err, (args, result.err)
    for args in NO_WRITE:
        confined(repo, *args, cwd=repo.path)
    removal = confined(repo, "hooks", "uninstall", "--project", cwd=repo.path)
    assert removal.code == 1 and "refused at the agent door" in removal.err, removal.err
    assert fingerprint(db) == before
    assert settings.read_bytes() == hooks_before
    status = repo.ok("status", TASK, "--json").json()
    assert status["state"] == "SYNTHESIS" and not status.get("approvals")
    assert door_events(repo) == []


def test_a_task_that_taskgate_run_drives_is_not_written_through_the_door(
    served: tuple[Repo, Running],
) -> None:
    repo, _ = served
    to_classified(repo, TASK)
    repo.ok("transition", TASK, "REQUIREMENTS", cwd=repo.worktree(TASK))
    me = os.getpid()  # a live process stands in for `taskgate run`, the task's long-lived owner
    edit_store(repo, "UPDATE tasks SET owner_pid = ?, owner_started = ? WHERE name = ?", me,
               pid_start_time(me), TASK)  # fmt: skip
    db = repo.path / ".taskgate" / "state.db"
    before = fingerprint(db)
    for args in (
        ("transition", TASK, "CLASSIFIED", "--reason", "redo"),
        ("agent", "set", TASK, "architect", "IN_PROGRESS"),
    ):
        result = confined(repo, *args)
        assert result.code == 1 and "taskgate run" in result.err and "R-TRN-07" in result.err
    assert fingerprint(db) == before and door_events(repo) == []


def _ask(repo: Repo, request: bytes) -> dict[str, object]:
    """Talk to the door socket directly, as an agent could."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(door.door_path(repo.path / ".git")))
        sock.sendall(request)
        return door.recv_frame(sock, door.MAX_REPLY)
    finally:
        sock.close()


def _frame(data: object) -> bytes:
    body = json.dumps(data).encode()
    return struct.pack(">I", len(body)) + body


def test_a_raw_client_gets_no_more_than_the_cli(
    served: tuple[Repo, Running], tmp_path: Path
) -> None:
    repo, _ = served
    to_synthesis(repo, TASK)
    repo.ok("present", TASK)
    db = repo.path / ".taskgate" / "state.db"
    before = fingerprint(db)
    wt = str(repo.worktree(TASK))
    other = make_repo(tmp_path / "other")
    attempts = [
        {"argv": ["approve", TASK, "plan"], "cwd": wt, "session": "s1"},
        {"argv": ["hook", "UserPromptSubmit"], "cwd": wt, "session": "s1"},
        {"argv": ["status"], "cwd": "/tmp", "session": "s1"},  # cwd outside the repository
        {"argv": ["status"], "cwd": "relative", "session": "s1"},
        {"argv": ["--repo", str(other.path), "status"], "cwd": wt, "session": "s1"},
        {"argv": "approve add-login plan", "cwd": wt, "session": "s1"},
        {"argv": ["approve; touch /tmp/pwned"], "cwd": wt, "session": "s1"},
    ]
    for attempt in attempts:
        reply = _ask(repo, _frame(attempt))
        assert reply["exit"] != 0, (attempt, reply)
    reply = _ask(repo, struct.pack(">I", door.MAX_REQUEST + 1) + b"{}")
    assert reply["exit"] == 2 and "exceeds" in str(reply["stderr"])
    assert not Path("/tmp/pwned").exists()
    assert fingerprint(db) == before
    ok = _ask(repo, _frame({"argv": ["status", TASK, "--json"], "cwd": wt, "session": "s1"}))
    assert ok["exit"] == 0 and json.loads(str(ok["stdout"]))["state"] == "SYNTHESIS"


def test_files_the_agent_wrote_in_its_cwd_are_never_imported_by_the_door(
    served: tuple[Repo, Running], tmp_path: Path
) -> None:
    repo, _ = served
    to_classified(repo, TASK)
    wt = repo.worktree(TASK)
    pwned = tmp_path / "pwned"
    payload = f"open({str(pwned)!r}, 'w').write('ran outside the sandbox')\n"
    for name in ("json.py", "struct.py", "taskgate/__init__.py", "taskgate/server/__init__.py"):
        (wt / name).parent.mkdir(parents=True, exist_ok=True)
        (wt / name).write_text(payload)
    (wt / "taskgate" / "server" / "door.py").write_text(payload)
    result = confined(repo, "transition", TASK, "REQUIREMENTS")
    assert result.code == 0, result.err
    assert not pwned.exists()
    assert repo.ok("status", TASK, "--json").json()["state"] == "REQUIREMENTS"


def test_without_a_server_the_confined_cli_says_to_start_one(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    to_classified(repo, TASK)
    before = fingerprint(repo.path / ".taskgate" / "state.db")
    result = confined(repo, "transition", TASK, "REQUIREMENTS")
    assert result.code == 6, result.err
    assert "start `taskgate serve`" in result.err and "agent door" in result.err
    assert fingerprint(repo.path / ".taskgate" / "state.db") == before


@pytest.mark.parametrize(
    "argv",
    [["approve", "T", "plan"], ["say", "T", "ok"], ["request-changes", "T", "x"],
     ["release", "T"], ["release", "T", "--forc"],
     ["hooks", "uninstall"], ["hooks", "install"], ["hooks", "status"], ["init"], ["serve"],
     ["violations", "T", "--resolve", "all"], ["cleanup", "T", "--accept-main"], ["abandon", "T"],
     ["recover", "--rep"], ["recover", "--repair"], ["complete", "T"], ["run"], ["demo"],
     ["hook", "PreToolUse"], ["spec", "new", "x"], ["validate", "T"]],
)  # fmt: skip
def test_decide_refuses_by_command_identity(argv: list[str]) -> None:
    try:
        args = _parser().parse_args(argv)
    except Exception:
        return  # the real parser refuses it first: it never runs
    assert door.decide(args) is not None


@pytest.mark.parametrize(
    "argv",
    [["start", "T"], ["todo"], ["status"], ["classify", "T"], ["transition", "T", "SYNTHESIS"],
     ["agent", "set", "T", "a", "COMPLETE"], ["agent", "add", "T", "a", "--why", "w"],
     ["agent", "verdict", "T", "a", "APPROVED"], ["agent", "check", "T"], ["present", "T"],
     ["merge", "T"], ["next"], ["audit"], ["recover"]],
)  # fmt: skip
def test_decide_allows_the_agent_operations(argv: list[str]) -> None:
    assert door.decide(_parser().parse_args(argv)) is None


def test_the_door_is_reachable_from_the_sandbox_run_uses(served: tuple[Repo, Running]) -> None:
    """agents/sandbox.py's own confinement (private /tmp, git shadow): the agent's CLI finds
    the door; once `run` drives the task (a live owner_pid) the same request is refused."""
    repo, _ = served
    to_classified(repo, TASK)
    repo.ok("transition", TASK, "REQUIREMENTS", cwd=repo.worktree(TASK))
    agent_wt = repo.task_dir(TASK) / "agents" / "architect" / "code"
    env = {**os.environ, "PYTHONPATH": str(SRC), "TASKGATE_SESSION": "s1"}

    def agent_set(status: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-P", "-m", "taskgate", "agent", "set", TASK, "architect", status]
        bwrap = sandbox.probe()[0]
        with sandbox.confine(bwrap, cmd, env, worktree=agent_wt, branch=f"{TASK}-architect",
                             outputs=[]) as jail:  # fmt: skip
            proc = launch(jail.argv, jail.env, "s1", state_dir=repo.path / ".taskgate")
            jail.finish()
        return proc

    done = agent_set("IN_PROGRESS")
    assert done.returncode == 0, done.stderr
    assert [e["argv"][:3] for e in door_events(repo)] == [["agent", "set", TASK]]
    me = os.getpid()
    edit_store(repo, "UPDATE tasks SET owner_pid = ?, owner_started = ? WHERE name = ?", me,
               pid_start_time(me), TASK)  # fmt: skip
    before = fingerprint(repo.path / ".taskgate" / "state.db")
    refused = agent_set("WORKING")
    assert refused.returncode == 1 and "R-TRN-07" in refused.stderr
    assert fingerprint(repo.path / ".taskgate" / "state.db") == before


def test_the_agent_presents_through_the_door_and_the_person_approves_in_the_terminal(
    served: tuple[Repo, Running],
) -> None:
    repo, _ = served
    to_synthesis(repo, TASK)
    presented = confined(repo, "present", TASK)
    assert presented.code == 0, presented.err
    assert [e["argv"] for e in door_events(repo)] == [["present", TASK]]
    forged = confined(repo, "approve", TASK, "plan")
    assert forged.code == 1 and "R-CKP-02" in forged.err
    assert not repo.ok("status", TASK, "--json").json().get("approvals")
    repo.ok("approve", TASK, "plan")  # the person's own terminal writes the store directly
    approvals = repo.ok("status", TASK, "--json").json()["approvals"]
    assert len(approvals) == 1 and approvals[0]["provenance"] != "agent-relayed"
