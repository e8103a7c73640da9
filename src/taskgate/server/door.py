"""The agent door (issue 14, DESIGN.md "Trust": one writer): agents' taskgate commands, run
outside the sandbox by the server, as agent requests by construction.

A confined agent cannot write the store; its `taskgate transition/agent set/present ...`
reach the store through a Unix socket at `<git common dir>/taskgate/door.sock` (0600, owned by
the server; connectable from inside the sandboxes, where `.git` is a read-only bind). The CLI
forwards {argv, cwd, session} when it cannot write the store (`cli/door_client.py`).

Each request runs in a fresh `python -m taskgate.server.door` child (never a shell), outside
the sandbox, with `TASKGATE_AGENT=agent-door` set by the server: that child parses argv with
the CLI's real parser, refuses by command identity (human-only commands with a rule id, and
everything not on the agent allowlist), checks that the command targets this repository, runs
it, and records an `agent-door` event on the task. Framing: 4-byte big-endian length + JSON,
requests at most 64 KiB.

Who asks is never taken from the request: the server proves it from the connection
(`SO_PEERCRED` and the registrations of server/peers.py) and the child acts as that session;
a request that claims another session, or that no registration vouches for, is refused and
the refusal recorded (server/door_identity.py). The `agent-door` record is written inside the
command's own first write transaction (Engine.attest), so no kill can separate the two.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from taskgate.server.tether import lstat_identity, remove_if_same

if TYPE_CHECKING:
    import argparse

    from taskgate.engine.workspace import Workspace
    from taskgate.protocol.violations import Violation
    from taskgate.server.peers import Identity

CHANNEL = "agent-door"
MAX_REQUEST = 64 * 1024
MAX_REPLY = 32 * 1024 * 1024
MAX_RUNNING = 4  # requests run at once; more wait their turn
REQUEST_TIMEOUT = 4 * 3600.0  # a `validate` runs the build; the agent timeout is 60 min

# The allowlist (default deny): what an agent may ask of the store.
AGENT_COMMANDS = frozenset(
    {"start", "todo", "status", "classify", "transition", "present", "merge", "next", "audit",
     "recover"}
)  # fmt: skip
AGENT_ACTIONS = {"agent": frozenset({"set", "add", "verdict", "check"})}
# Reserved to the person, with the rule that says so (anything else off the list: R-CKP-02).
HUMAN_ONLY = {
    "approve": ("R-CKP-02", "approvals come only from the person"),
    "say": ("R-CKP-02", "the person's words (approvals, change requests) come only from them"),
    "request-changes": ("R-CKP-02", "change requests come only from the person"),
    "release": ("R-LCK-21", "releasing a lock is the person's decision"),
    "hooks": ("R-CKP-02", "the hooks that guard the agent are the person's to (un)install"),
    "init": ("R-CKP-02", "initialising the repository is the person's"),
    "serve": ("R-CKP-02", "the server is the person's"),
    "violations": ("R-CKP-02", "resolving violations is the person's"),
    "cleanup": ("R-CKP-02", "cleanup (and --accept-main) is the person's"),
    "abandon": ("R-CKP-02", "abandoning a task is the person's"),
    # The build runs code the agent wrote: through the door it would run outside the sandbox
    # with the person's rights (and could write the store). The person or `taskgate run` runs it.
    "validate": ("R-VAL-01", "the build runs the agent's code: only outside the agent's reach"),
}


def door_path(common_dir: Path) -> Path:
    """Where the door of the repository with this git common dir listens."""
    return common_dir / "taskgate" / "door.sock"


def send_frame(sock: socket.socket, data: dict[str, Any]) -> None:
    """One length-prefixed JSON message."""
    body = json.dumps(data).encode()
    sock.sendall(struct.pack(">I", len(body)) + body)


def recv_frame(sock: socket.socket, limit: int) -> dict[str, Any]:
    """One length-prefixed JSON object of at most `limit` bytes (ValueError otherwise)."""
    (size,) = struct.unpack(">I", _recv_exact(sock, 4))
    if size > limit:
        raise ValueError(f"message of {size} bytes exceeds the limit of {limit}")
    data = json.loads(_recv_exact(sock, size))
    if not isinstance(data, dict):
        raise ValueError("message is not a JSON object")
    return data


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks: list[bytes] = []
    while size:
        chunk = sock.recv(min(size, 1 << 16))
        if not chunk:
            raise ValueError("connection closed mid-message")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def decide(args: argparse.Namespace) -> Violation | None:
    """Why the door refuses this parsed command, None when an agent may run it."""
    from taskgate.protocol.violations import Violation

    command = str(getattr(args, "command", None) or "")
    if command in AGENT_ACTIONS:
        action = getattr(args, f"{command}_command", None)
        if action in AGENT_ACTIONS[command]:
            return None
        return Violation("R-CKP-02", f"'{command} {action}' is not an agent operation")
    if command == "recover" and getattr(args, "repair", False):
        return Violation("R-CKP-02", "repairs (recover --repair) are the person's")
    if command in AGENT_COMMANDS:
        return None
    rule, why = HUMAN_ONLY.get(
        command, ("R-CKP-02", f"'{command}' is not on the agent door's allowlist")
    )
    return Violation(rule, why)


def _inside(path: Path, roots: list[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def check_request(ws: Workspace, request: dict[str, Any]) -> tuple[list[str], Path, str]:
    """(argv, cwd, claimed session) of a well-formed request for this repository; ValueError
    if not. The session is only what the request claims: the door proves the real one."""
    argv, cwd, session = request.get("argv"), request.get("cwd"), request.get("session", "")
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv) or not argv:
        raise ValueError("argv must be a non-empty list of strings")
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        raise ValueError("cwd must be an absolute path")
    if not isinstance(session, str) or len(session) > 256 or "\0" in session:
        raise ValueError("session must be a string")
    if any("\0" in a for a in argv):
        raise ValueError("argv contains a NUL byte")
    real = Path(os.path.realpath(cwd))
    roots = [ws.repo.resolve(), ws.tasks_root.resolve()]
    if not real.is_dir() or not _inside(real, roots):
        raise ValueError(f"cwd {cwd} is not inside the repository {ws.repo}")
    return argv, real, session.strip()


def child_env(session: str) -> dict[str, str]:
    """The child's environment: the server's, with the door's marker and the proven session
    (the request's claim, the agent's own markers and session variables never pass)."""
    from taskgate.engine.core import SESSION_VARS

    env = {k: v for k, v in os.environ.items() if k not in SESSION_VARS}
    for name in ("CLAUDECODE", "TASKGATE_SANDBOX", "TASKGATE_DEBUG"):
        env.pop(name, None)
    env["TASKGATE_AGENT"] = CHANNEL
    env["TASKGATE_DOOR"] = "1"
    if session:
        env["TASKGATE_SESSION"] = session
    return env


def handle(
    ws: Workspace, request: dict[str, Any], identity: Identity | None = None, peer_pid: int = 0
) -> dict[str, Any]:
    """Run one request from the process `peer_pid`, whose registration is `identity` (None:
    nobody vouches for it); the reply {stdout, stderr, exit}."""
    from taskgate import process
    from taskgate.errors import EXIT_INTERNAL, EXIT_USAGE

    try:
        argv, cwd, claimed = check_request(ws, request)
    except ValueError as exc:
        return {"stdout": "", "stderr": f"taskgate: agent door: {exc}\n", "exit": EXIT_USAGE}
    job = json.dumps(
        {
            "argv": argv,
            "common_dir": str(ws.common_dir.resolve()),
            "claimed": claimed,
            "identity": identity.to_json() if identity is not None else None,
            "peer": peer_pid,
        }
    )
    session = identity.session if identity is not None else ""
    result = process.run(
        # -P: the cwd (the agent's worktree) never joins sys.path, so no file the agent wrote
        # there (json.py, taskgate/__init__.py) is imported outside the sandbox.
        [sys.executable, "-P", "-m", "taskgate.server.door"],
        cwd=cwd,
        env=child_env(session),
        stdin=job,
        timeout=REQUEST_TIMEOUT,
        kill_group=True,
    )
    code = result.returncode if result.returncode >= 0 else EXIT_INTERNAL
    return {"stdout": result.stdout, "stderr": result.stderr, "exit": code}


class Door:
    """The listening socket and its accept thread; `close()` stops it and removes the socket."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.path = door_path(ws.common_dir)
        self._stop = threading.Event()
        self._slots = threading.BoundedSemaphore(MAX_RUNNING)  # a flood waits, never forks
        self._sock = _bind(self.path)
        self._bound = lstat_identity(self.path)  # close() removes this file, no other
        self._thread = threading.Thread(target=self._serve, name="agent-door", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        accept_loop(self._sock, self._stop, self._one, 0.2)

    def _one(self, conn: socket.socket) -> None:
        from taskgate.server import peers

        with conn:
            peer = peers.peer(conn)  # as the kernel saw it at connect(): never the request
            try:
                if peer.uid != os.getuid():  # only this user's processes (the socket is 0600)
                    return
                conn.settimeout(30)
                request = recv_frame(conn, MAX_REQUEST)
                conn.settimeout(None)
            except (OSError, ValueError) as exc:
                _try_send(conn, {"stdout": "", "stderr": f"taskgate: agent door: {exc}\n",
                                 "exit": 2})  # fmt: skip
                peer.close()
                return
            try:
                identity = peers.prove(self.ws.state_dir, peer.pid)
                if not peer.alive():  # gone, and its pid maybe reused: prove nothing
                    identity = None
            finally:
                peer.close()
            with self._slots:
                reply = handle(self.ws, request, identity, peer.pid)
            _try_send(conn, reply)

    def close(self) -> None:
        """Stop accepting and remove the socket file (if it is still ours: the repository
        may be gone and another one's server listen at the same path, server/tether.py)."""
        self._stop.set()
        self._sock.close()
        self._thread.join(timeout=2)
        remove_if_same(self.path, self._bound)


def _try_send(conn: socket.socket, reply: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):  # the client went away; what ran is in the store
        send_frame(conn, reply)


def _bind(path: Path) -> socket.socket:
    from taskgate.errors import UsageError

    path.parent.mkdir(mode=0o700, exist_ok=True)
    if path.exists() or path.is_symlink():
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()  # left by a server that was killed
        else:
            raise UsageError(
                f"the agent door {path} is in use by another server",
                hint="one 'taskgate serve' per repository: use the running one",
            )
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o077)
    try:
        sock.bind(str(path))
    except OSError as exc:
        sock.close()
        raise UsageError(
            f"cannot open the agent door at {path}: {exc.strerror or exc}",
            hint="a Unix socket path is limited to 107 bytes: move the repository to a "
            "shorter path",
        ) from None
    finally:
        os.umask(old)
    sock.listen(64)
    return sock


def execute(job: dict[str, Any]) -> int:
    """In the child: parse with the real parser, decide by command identity and by who asks,
    run; the command's first write transaction carries the `agent-door` record."""
    from taskgate.cli import main as cli
    from taskgate.engine.core import DOOR_RECORD_VAR
    from taskgate.engine.workspace import find_workspace
    from taskgate.errors import Refused, TaskgateError
    from taskgate.server import door_identity
    from taskgate.server.peers import Identity

    argv = [str(a) for a in job["argv"]]
    identity = Identity.from_json(job.get("identity"))
    wants_json = "--json" in argv
    try:
        args = cli._parser().parse_args(argv)
        violation = decide(args)
        if violation is not None:
            raise Refused(
                f"refused at the agent door: '{args.command}' is not an agent operation",
                [violation],
                hint="ask the person to run it in their own terminal",
            )
        start = args.repo if args.repo else Path.cwd()
        ws = find_workspace(start)
        if ws.common_dir.resolve() != Path(job["common_dir"]):
            raise Refused(
                f"refused at the agent door: {start} is another repository",
                hint="the door serves only the repository of its server",
            )
        claimed = str(job.get("claimed") or "")
        door_identity.enforce(ws, args, argv, claimed, identity, int(job.get("peer") or 0))
        task = getattr(args, "task", None)
        if isinstance(task, str):
            _refuse_if_driven(ws, task)
    except TaskgateError as exc:
        cli._report(exc, wants_json)
        return exc.exit_code
    os.environ[DOOR_RECORD_VAR] = json.dumps(
        {"channel": CHANNEL, "argv": argv, "peer": job.get("peer"),
         "identity": identity.to_json() if identity is not None else None}
    )  # fmt: skip
    return cli.main(argv)


def _refuse_if_driven(ws: Workspace, task: str) -> None:
    """A task `taskgate run` drives is written by `run` alone: its agents report in their
    result object, never behind its back through the door (R-TRN-07)."""
    from taskgate.engine.core import Engine, owner_alive
    from taskgate.errors import Refused
    from taskgate.protocol.violations import Violation

    engine = Engine(ws)
    try:
        snap = engine.snapshot(task)
    finally:
        engine.close()
    if snap is None or snap.task.owner_pid is None or owner_alive(snap.task, engine.host) is False:
        return
    raise Refused(
        f"refused at the agent door: '{task}' is driven by taskgate run (pid "
        f"{snap.task.owner_pid} on {snap.task.host})",
        [Violation("R-TRN-07", "only the lease holder writes the task")],
        hint="end your reply with the result object your prompt describes: run records it",
    )


if __name__ == "__main__":  # the door's child: `python -m taskgate.server.door` (never a shell)
    if os.environ.get("TASKGATE_AGENT") != CHANNEL:
        print("taskgate.server.door runs only as the agent door's child", file=sys.stderr)
        sys.exit(2)
    sys.exit(execute(json.loads(sys.stdin.read())))


def accept_loop(sock: socket.socket, stop: threading.Event, handle: Any, poll_s: float) -> None:
    """Accept connections until `stop` (polled every `poll_s`) or the socket closes; each is
    handled on its own thread (the Unix door and the TCP door of server/door_tcp.py)."""
    sock.settimeout(poll_s)
    while not stop.is_set():
        try:
            conn, _ = sock.accept()
        except TimeoutError:
            continue
        except OSError:
            return
        conn.settimeout(None)
        threading.Thread(target=handle, args=(conn,), daemon=True).start()
