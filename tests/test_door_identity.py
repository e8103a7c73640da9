"""The agent door takes identity from the connection, never from the request (issue 14).

Real `taskgate serve`, real bubblewrap: an agent in a sandbox registered as session s2 (the
way the SessionStart hook registers a client, or `taskgate run` an agent) claims to be s1, the
task's lease holder, in every spelling; claims a free task as s1; forges a registration; asks
without any registration. Each is refused with R-LCK-09 and recorded in the audit trail (of
the task, else of the repository), and everything else in the store is unchanged.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import SRC, Repo, make_repo
from flow import to_classified
from server_helpers import Running, start_server
from taskgate.agents import sandbox
from taskgate.engine.guard_trail import DOOR_REFUSED, REPOSITORY
from taskgate.hooks.client_sandbox import protected_paths
from taskgate.hooks.policy import Layout
from taskgate.server import peers
from test_agent_door import confined, door_events

pytestmark = pytest.mark.skipif(not sandbox.probe()[0], reason="bubblewrap does not work here")

TASK = "add-login"
FREE = "fix-typo"


def state_fingerprint(db: Path) -> str:
    """SHA-256 of the store's SQL dump without the door's refusal records: every other row
    (tasks, leases, transitions, approvals, events) counts."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        lines = [line for line in conn.iterdump() if f"'{DOOR_REFUSED}'" not in line]
    finally:
        conn.close()
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def refusals(repo: Repo, trail: str | None = None) -> list[dict[str, object]]:
    """The door's refusal records (of one trail, or all), with the trail they are on."""
    conn = sqlite3.connect(f"file:{repo.path / '.taskgate' / 'state.db'}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT task, payload FROM events WHERE kind = ? ORDER BY seq", (DOOR_REFUSED,)
        ).fetchall()
    finally:
        conn.close()
    found = [{"trail": t, **json.loads(p)} for t, p in rows]
    return [r for r in found if trail is None or r["trail"] == trail]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Repo, Running]]:
    """s1 holds TASK (CLASSIFIED); FREE is free; `taskgate serve` runs."""
    repo = make_repo(tmp_path / "r")
    to_classified(repo, TASK)
    server = start_server(repo.path, tmp_path / "st")
    try:
        yield repo, server
    finally:
        server.stop()


def db_of(repo: Repo) -> Path:
    return repo.path / ".taskgate" / "state.db"


# What s2's agent tries on s1's task, claiming to be s1 (each spelling of the claim).
CLAIMS_ON_THE_TASK = [
    (("transition", TASK, "REQUIREMENTS"), {"session": "s1"}),
    (("--session", "s1", "transition", TASK, "REQUIREMENTS"), {"session": "s2"}),
    (("--sess", "s1", "transition", TASK, "REQUIREMENTS"), {"session": "s2"}),
    (("--session=s1", "transition", TASK, "REQUIREMENTS"), {"session": "s2"}),
    (("--sess=s1", "transition", TASK, "REQUIREMENTS"), {"session": ""}),
]


def test_an_agent_claiming_another_sessions_id_is_refused_and_recorded(
    served: tuple[Repo, Running],
) -> None:
    repo, _ = served
    before = state_fingerprint(db_of(repo))
    for args, claim in CLAIMS_ON_THE_TASK:
        result = confined(repo, *args, session=claim["session"], proven="s2")
        assert result.code != 0, (args, result.out)
        assert "R-LCK-09" in result.err and "claims session 's1'" in result.err, result.err
        assert "session 's2'" in result.err and "recorded" in result.err, result.err
    assert state_fingerprint(db_of(repo)) == before
    status = repo.ok("status", TASK, "--json").json()
    assert status["state"] == "CLASSIFIED" and status["session_id"] == "s1"
    found = refusals(repo)
    assert len(found) == len(CLAIMS_ON_THE_TASK)
    assert all(r["trail"] == TASK and r["rule"] == "R-LCK-09" for r in found)
    assert all(r["proven"]["session"] == "s2" for r in found)  # type: ignore[index]
    assert [r["argv"] for r in found] == [list(a) for a, _ in CLAIMS_ON_THE_TASK]
    assert door_events(repo) == []  # nothing ran
    # `taskgate audit` shows each refusal (a note: nothing changed), the chain intact.
    audit = repo.run("audit", TASK, "--json").json()
    guards = next(c for c in audit["tasks"][0]["checks"] if c["id"] == "guards")
    assert len(guards["notes"]) == len(CLAIMS_ON_THE_TASK) and guards["passed"]
    assert "claims session 's1'" in guards["notes"][0]
    chain = next(c for c in audit["tasks"][0]["checks"] if c["id"] == "hash-chain")
    assert chain["passed"]


def test_claiming_a_free_task_as_another_session_is_refused(
    served: tuple[Repo, Running],
) -> None:
    repo, _ = served
    before = state_fingerprint(db_of(repo))
    # s3 is a session that holds nothing yet: the agent (proven s2) claims FREE in its name.
    for args, claim in [(("start", FREE), "s3"), (("--session", "s3", "start", FREE), "s2"),
                        (("next",), "s3")]:  # fmt: skip
        result = confined(repo, *args, session=claim, cwd=repo.path, proven="s2")
        assert result.code != 0 and "R-LCK-09" in result.err, (args, result.err)
    assert state_fingerprint(db_of(repo)) == before
    assert repo.run("status", FREE, "--json").code != 0  # never started
    assert not repo.worktree(FREE).exists()
    found = refusals(repo)
    assert [r["trail"] for r in found] == [REPOSITORY] * 3  # no such task: the repository's
    audit = repo.run("audit", "--json").json()
    repository = next(t for t in audit["tasks"] if t["task"] == REPOSITORY)
    assert all(c["passed"] for c in repository["checks"]) and len(repository["checks"]) == 2
    # Claiming its own session, the same agent starts the task as the session it proved.
    result = confined(repo, "start", FREE, session="s2", cwd=repo.path, proven="s2")
    assert result.code == 0, result.err
    assert repo.ok("status", FREE, "--json").json()["session_id"] == "s2"
    [record] = door_events(repo)
    assert record["argv"] == ["start", FREE] and record["session"] == "s2"


def test_nobody_registered_may_only_read(served: tuple[Repo, Running]) -> None:
    repo, _ = served
    before = state_fingerprint(db_of(repo))
    result = confined(repo, "transition", TASK, "REQUIREMENTS", session="s1", proven=None)
    assert result.code == 1 and "R-LCK-09" in result.err
    assert "cannot tell which session asks" in result.err
    assert state_fingerprint(db_of(repo)) == before
    [record] = refusals(repo, TASK)
    assert record["proven"] is None and record["claimed"] == "s1"
    status = confined(repo, "status", TASK, "--json", session="s1", proven=None)
    assert status.code == 0 and json.loads(status.out)["state"] == "CLASSIFIED"


RAW = """
import json, socket, sys
from taskgate.server import door
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(sys.argv[1])
door.send_frame(sock, json.loads(sys.argv[2]))
print(json.dumps(door.recv_frame(sock, door.MAX_REPLY)))
"""


def raw_from_sandbox(repo: Repo, request: dict[str, object], proven: str | None,
                     kind: str) -> dict[str, object]:  # fmt: skip
    """A hand-made request (any session, even none) from inside a registered sandbox."""
    from test_agent_door import launch

    bwrap = sandbox.probe()[0]
    sock = str(repo.path / ".git" / "taskgate" / "door.sock")
    proc = launch(
        [bwrap, "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
         sys.executable, "-P", "-c", RAW, sock, json.dumps(request)],
        {**os.environ, "PYTHONPATH": str(SRC)}, proven, kind=kind,
        state_dir=repo.path / ".taskgate",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    reply: dict[str, object] = json.loads(proc.stdout)
    return reply


def test_an_agent_of_run_acts_only_on_its_own_task(served: tuple[Repo, Running]) -> None:
    repo, _ = served
    before = state_fingerprint(db_of(repo))
    for argv in [["start", FREE], ["next"], ["agent", "set", FREE, "architect", "COMPLETE"]]:
        request = {"argv": argv, "cwd": str(repo.path), "session": ""}
        reply = raw_from_sandbox(repo, request, "", peers.RUN)
        assert reply["exit"] != 0 and "R-LCK-09" in str(reply["stderr"]), (argv, reply)
        assert "acts only on its own task" in str(reply["stderr"])
    # Claiming a session (the run's, the lease holder's, any) is refused: an agent of run has
    # none; and the same claim without any registration proves nothing either.
    result = confined(repo, "transition", TASK, "REQUIREMENTS", session="s1", proven="",
                      kind=peers.RUN)  # fmt: skip
    assert result.code != 0 and "claims session 's1'" in result.err
    assert state_fingerprint(db_of(repo)) == before
    assert [r["trail"] for r in refusals(repo)] == [REPOSITORY] * 3 + [TASK]  # FREE: no task
    # What the door proves, not what the request says, is what counts: the same raw request
    # (session s1, the lease holder's) from an unregistered sandbox writes nothing.
    request = {"argv": ["transition", TASK, "REQUIREMENTS"], "cwd": str(repo.worktree(TASK)),
               "session": "s1"}  # fmt: skip
    reply = raw_from_sandbox(repo, request, None, peers.CLIENT)
    assert reply["exit"] == 1 and "cannot tell which session asks" in str(reply["stderr"])
    assert state_fingerprint(db_of(repo)) == before


FORGE = r"""
import json, os, sys
peers = os.path.join(sys.argv[1], ".taskgate", "peers")
made = []
for pid in [p for p in os.listdir("/proc") if p.isdigit()] + [str(os.getppid()), "1"]:
    stat = open(f"/proc/{pid}/stat").read() if os.path.exists(f"/proc/{pid}/stat") else ""
    start = stat[stat.rfind(")") + 2:].split()[19] if stat else "1"
    body = {"kind": "client", "pid": int(pid), "started": start, "session": "s1",
            "task": "", "agent": ""}
    for name in (f"{pid}-{start}.json", "0-0.json"):
        try:
            os.makedirs(peers, exist_ok=True)
            with open(os.path.join(peers, name), "w") as f:
                json.dump(body, f)
            made.append(name)
        except OSError as exc:
            print(f"refused: {exc.strerror}", file=sys.stderr)
print(json.dumps(made))
"""


def test_a_registration_forged_inside_the_sandbox_is_never_written(
    served: tuple[Repo, Running],
) -> None:
    repo, _ = served
    registry = Path(peers.registry(repo.path / ".taskgate"))
    listing = sorted(os.listdir(registry)) if registry.exists() else []
    bwrap = sandbox.probe()[0]
    script = (
        f"{sys.executable} -c '{FORGE}' {repo.path} && "
        f"{sys.executable} -P -m taskgate transition {TASK} REQUIREMENTS"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC), "TASKGATE_SESSION": "s1"}
    before = state_fingerprint(db_of(repo))
    proc = subprocess.run(
        [bwrap, "--die-with-parent", "--unshare-pid", "--ro-bind", "/", "/", "--dev", "/dev",
         "--proc", "/proc", "--chdir", str(repo.worktree(TASK)), "sh", "-c", script],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "Read-only file system" in proc.stderr, proc.stderr
    assert json.loads(proc.stdout.splitlines()[0]) == []  # not one file written
    assert proc.returncode == 1 and "R-LCK-09" in proc.stderr
    assert (sorted(os.listdir(registry)) if registry.exists() else []) == listing
    assert state_fingerprint(db_of(repo)) == before
    [record] = refusals(repo, TASK)
    assert record["proven"] is None


def test_a_registration_naming_another_process_is_not_trusted(tmp_path: Path) -> None:
    """The file's name and content must agree, and the process must be the one that started
    then: a stale file of a dead process, or one copied under another pid, proves nothing."""
    me, started = os.getpid(), peers.start_time(os.getpid())
    assert started is not None
    state = tmp_path / "state"
    path = peers.register(state, peers.Identity(peers.CLIENT, me, started, session="s1"))
    assert peers.prove(state, me) is not None
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert peers.prove(state, child.pid).session == "s1"  # type: ignore[union-attr]
        child_start = peers.start_time(child.pid)
        forged = Path(peers.registry(state)) / f"{child.pid}-{child_start}.json"
        forged.write_text(Path(path).read_text())  # content names the parent, not the child
        assert peers.lookup(state, child.pid, str(child_start)) is None
        Path(path).write_text(Path(path).read_text().replace(started, "1"))  # another start
        assert peers.lookup(state, me, started) is None
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    stale = peers.Peer(child.pid, os.getuid(), None)
    assert not stale.alive()


def test_a_peer_that_exited_is_not_alive_even_if_its_pid_comes_back() -> None:
    """With a pidfd (what SO_PEERPIDFD gives the door) the peer is the process, not the pid."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    peer = peers.Peer(child.pid, os.getuid(), os.pidfd_open(child.pid))
    try:
        assert peer.alive()
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert not peer.alive()
    finally:
        peer.close()
    assert peer.pidfd is None


def test_the_clients_sandbox_denies_writing_the_registrations() -> None:
    layout = Layout("/r", "/r/.git", "/r/.taskgate", "/r/.taskgate/tasks")
    assert "/r/.taskgate/peers" in protected_paths(layout, home="/h")


def test_the_door_record_is_written_with_the_command_even_when_killed_after_commit(
    tmp_path: Path,
) -> None:
    """Part of the command's own transaction: a door child killed right after the commit
    leaves the state change with its `agent-door` record; killed before, neither."""
    for point, moved in (("step:after-commit", True), ("step:before-commit", False)):
        repo = make_repo(tmp_path / point.replace(":", "-"))
        to_classified(repo, TASK)
        server = start_server(repo.path, tmp_path / f"st-{moved}",
                              env={"TASKGATE_FAILPOINT": point})  # fmt: skip
        try:
            result = confined(repo, "transition", TASK, "REQUIREMENTS")
        finally:
            server.stop()
        assert result.code != 0  # the door's child was killed
        state = repo.ok("status", TASK, "--json").json()["state"]
        assert state == ("REQUIREMENTS" if moved else "CLASSIFIED")
        records = door_events(repo)
        assert [r["argv"] for r in records] == ([["transition", TASK, "REQUIREMENTS"]] if moved
                                                else [])  # fmt: skip


def test_taskgate_run_registers_its_agents_for_the_door(tmp_path: Path) -> None:
    """The production path: `invoke` (as `taskgate run` calls it) starts a command agent in
    bubblewrap and registers it; from inside, the agent claims session s2 to move s2's task.
    The door names it (agent of run on its own task), refuses, records; the registration is
    gone once the agent has exited."""
    from taskgate.agents.invoke import invoke
    from test_sandbox import OTHER, make_arena

    arena = make_arena(tmp_path / "a")
    db = arena.ws.db_path
    server = start_server(arena.repo.path, tmp_path / "st")
    try:
        before = state_fingerprint(db)
        attack = f'$PY -P -m taskgate --session s2 transition {OTHER} CLASSIFIED --reason "mine"'
        invoke(arena.request(attack))
    finally:
        server.stop()
    code, out = arena.log()
    assert code == 1 and "R-LCK-09" in out and "claims session 's2'" in out, out
    assert f"agent '{arena.agent}' of taskgate run on '{TASK}'" in out
    assert state_fingerprint(db) == before
    [record] = refusals(arena.repo, OTHER)
    proven = record["proven"]
    assert isinstance(proven, dict)
    assert (proven["kind"], proven["task"], proven["agent"]) == ("run", TASK, arena.agent)
    assert os.listdir(peers.registry(arena.ws.state_dir)) == []


def test_a_session_start_hook_an_agent_runs_in_its_sandbox_registers_nothing(
    served: tuple[Repo, Running], tmp_path: Path
) -> None:
    """The agent pipes forged SessionStart JSON (session s1, the lease holder's) into the hook
    entry point from a process named `claude` inside its sandbox: the hook cannot write the
    registry, so the door still proves nothing for it and the write is refused."""
    repo, _ = served
    fake = tmp_path / "bin" / "claude"
    fake.parent.mkdir()
    fake.symlink_to("/bin/sh")
    forged = json.dumps({"session_id": "s1", "cwd": str(repo.path), "source": "startup",
                         "hook_event_name": "SessionStart", "transcript_path": ""})  # fmt: skip
    script = (
        f"echo '{forged}' | {sys.executable} -P -m taskgate hook SessionStart >/dev/null; "
        f"{sys.executable} -P -m taskgate transition {TASK} REQUIREMENTS"
    )
    bwrap = sandbox.probe()[0]
    env = {**os.environ, "PYTHONPATH": str(SRC), "TASKGATE_SESSION": "s1"}
    before = state_fingerprint(db_of(repo))
    proc = subprocess.run(
        [bwrap, "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
         "--chdir", str(repo.worktree(TASK)), str(fake), "-c", script],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1 and "cannot tell which session asks" in proc.stderr, proc.stderr
    registry = Path(peers.registry(repo.path / ".taskgate"))
    assert not registry.exists() or os.listdir(registry) == []
    assert state_fingerprint(db_of(repo)) == before
