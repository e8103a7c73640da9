"""The client side of the agent door (issue 14): a confined CLI forwards its command.

When a command fails because the store cannot be written and this process is confined (inside
taskgate's sandbox, `TASKGATE_SANDBOX`, or the store sits on a read-only mount, as in a Claude
Code sandbox), and the repository's door socket answers, the command is sent there as
{argv, cwd, session} and the door's stdout, stderr and exit code become this command's. The
server runs it as an agent request (`server/door.py`). With no door, the original error stands
(its hint says to start `taskgate serve`).
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
    return forward(door_path(ws.common_dir), argv)


def forward(path: Path, argv: Sequence[str]) -> int | None:
    """Send the command through the door at `path`; None when no server listens there."""
    from taskgate.engine.core import session_from_env
    from taskgate.server.door import MAX_REPLY, recv_frame, send_frame

    sock = _connect(path)
    if sock is None:
        return None
    try:
        session = _session(argv) or session_from_env()
        send_frame(sock, {"argv": list(argv), "cwd": os.getcwd(), "session": session})
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
    """A connection to the door; None (after saying why, when it is not plain) if none."""
    if not path.exists():
        return None
    sock: socket.socket | None = None
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(path))
        return sock
    except PermissionError as exc:  # e.g. a seccomp filter: Claude Code's sandbox on Linux
        print(
            f"taskgate: this sandbox does not allow Unix sockets, so the agent door at {path} "
            f"cannot be reached from here ({exc.strerror}; docs/security.md, Agent door)",
            file=sys.stderr,
        )
    except OSError:
        pass  # nobody listens: the original error and its hint stand
    if sock is not None:
        sock.close()
    return None


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
