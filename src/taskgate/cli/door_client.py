"""The client side of the agent door (issue 14): a confined CLI forwards its command.

When a command fails because the store cannot be written and this process is confined (inside
taskgate's sandbox, `TASKGATE_SANDBOX`, or the store sits on a read-only mount, as in a Claude
Code sandbox), and the repository's door socket answers, the command is sent there as
{argv, cwd, session} and the door's stdout, stderr and exit code become this command's. The
server runs it as an agent request (`server/door.py`), as the session it proves from the
connection (`server/peers.py`): the session sent here is only a claim, refused when it is not
that one. With no door, the original error stands (its hint says to start `taskgate serve`).
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

from taskgate.errors import EXIT_ENVIRONMENT, PermissionDenied, ReadOnly, TaskgateError


def _start(argv: Sequence[str]) -> Path:
    """Where the command looks for its repository: --repo, else the cwd."""
    tokens = list(argv)
    for i, token in enumerate(tokens):
        if token == "--repo" and i + 1 < len(tokens):
            return Path(tokens[i + 1])
        if token.startswith("--repo="):
            return Path(token.split("=", 1)[1])
        if not token.startswith("-"):
            break
    return Path.cwd()


def confined(state_dir: Path) -> bool:
    """Is this process inside a sandbox that makes the store read-only?"""
    if os.environ.get("TASKGATE_SANDBOX"):
        return True
    try:
        return bool(os.statvfs(state_dir).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def forward_if_confined(exc: TaskgateError, argv: Sequence[str]) -> int | None:
    """The door's exit code when `exc` is a confined store write and a door answers; None:
    report `exc` as usual."""
    from taskgate.server.door import CHANNEL

    if not isinstance(exc, (PermissionDenied, ReadOnly)) or not argv or argv[0] == "hook":
        return None
    if os.environ.get("TASKGATE_AGENT") == CHANNEL:
        return None  # already the door's child: never loop
    try:
        from taskgate.engine.workspace import find_workspace
        from taskgate.server.door import door_path

        ws = find_workspace(_start(argv))
    except (TaskgateError, OSError):
        return None
    if not confined(ws.state_dir):
        return None
    return forward(door_path(ws.common_dir), argv, ws.common_dir)


def forward(path: Path, argv: Sequence[str], common_dir: Path | None = None) -> int | None:
    """Send the command through the door at `path`, else through the TCP door of the
    repository with `common_dir` (server/door_tcp.py: a sandbox without Unix sockets);
    None when neither answers."""
    from taskgate.engine.core import session_from_env
    from taskgate.server.door import MAX_REPLY, recv_frame, send_frame

    sock, extra = _connect(path), dict[str, str]()
    if sock is None and common_dir is not None:
        sock, extra = _connect_tcp(common_dir)
    if sock is None:
        return None
    try:
        session = _session(argv) or session_from_env()
        request = {"argv": list(argv), "cwd": os.getcwd(), "session": session, **extra}
        send_frame(sock, request)
        reply = recv_frame(sock, MAX_REPLY)
    except (OSError, ValueError) as exc:
        print(f"taskgate: the agent door at {path} failed: {exc}", file=sys.stderr)
        print("hint: check that 'taskgate serve' still runs, then rerun the command",
              file=sys.stderr)  # fmt: skip
        return EXIT_ENVIRONMENT
    finally:
        sock.close()
    sys.stdout.write(str(reply.get("stdout", "")))
    sys.stdout.flush()
    sys.stderr.write(str(reply.get("stderr", "")))
    code = reply.get("exit")
    return code if isinstance(code, int) else EXIT_ENVIRONMENT


def _connect(path: Path) -> socket.socket | None:
    """A connection to the door's Unix socket; None if there is none or it cannot be reached
    (a seccomp filter refuses Unix sockets in Claude Code's sandbox on Linux)."""
    if not path.exists():
        return None
    sock: socket.socket | None = None
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(path))
        return sock
    except OSError:
        pass  # nobody listens, or no Unix sockets here: the TCP door is tried next
    if sock is not None:
        sock.close()
    return None


def _connect_tcp(common_dir: Path) -> tuple[socket.socket | None, dict[str, str]]:
    """A connection to the TCP door and the token its requests carry; (None, {}) after saying
    why when there is one but it cannot be reached (the original error then stands)."""
    from taskgate.server import door_tcp

    endpoint = door_tcp.load(common_dir)
    if endpoint is None:
        return None, {}
    try:
        return door_tcp.connect(endpoint), {"token": endpoint.token}
    except door_tcp.Unreachable as exc:
        print(f"taskgate: the agent door cannot be reached from here: {exc} "
              "(docs/security.md, 'Interactive sessions')", file=sys.stderr)  # fmt: skip
        return None, {}


def _session(argv: Sequence[str]) -> str:
    """An explicit --session before the command (the door passes argv on as it is, too)."""
    tokens = list(argv)
    for i, token in enumerate(tokens):
        if token == "--session" and i + 1 < len(tokens):
            return tokens[i + 1]
        if token.startswith("--session="):
            return token.split("=", 1)[1]
        if not token.startswith("-"):
            break
    return ""
