"""SessionStart command for HTTP hooks (issue 18): start `taskgate serve` if it is not running.

`taskgate hooks install --http` writes `PYTHON -S .../server/autostart.py --repo R --port P
--state-dir S` into SessionStart, before the HTTP entries are needed. It answers in about a
millisecond when something already listens on the port; otherwise it starts the server
detached (its own session, output in `autostart.log` of the state dir) and waits until the
port answers, so the session's first tool call finds it. It never fails the session: when
the server does not come up it says so in a `systemMessage`, and the HTTP entries then block
every guarded call (`onFailure: "block"`) until a server answers: closed, never open.

Standard library only and run by path with `-S` (like hooks/launch.py): no server import.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":  # run by path: the package's root, not this directory, on the path
    sys.path[0] = __file__.rsplit("/", 3)[0]

import json
import os
import socket
import time
from collections.abc import Sequence
from pathlib import Path

WAIT_S = 15.0
LOG = "autostart.log"


def listening(port: int, host: str = "127.0.0.1", timeout: float = 0.2) -> bool:
    """True when something accepts a TCP connection on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def serve_argv(repo: Path, port: int, state_dir: Path) -> list[str]:
    """The `taskgate serve` command this hook starts."""
    return [
        sys.executable,
        "-m",
        "taskgate",
        "--repo",
        str(repo),
        "serve",
        "--port",
        str(port),
        "--state-dir",
        str(state_dir),
    ]


def ours(repo: Path, port: int, state_dir: Path) -> bool:
    """True when a live `taskgate serve` for `repo` on `port` wrote its server.json under
    `state_dir` (the server that holds the secret the installed entries send)."""
    for info_file in state_dir.glob("serve/*/server.json"):
        try:
            info = json.loads(info_file.read_text(encoding="utf-8"))
            if not isinstance(info, dict) or not str(info.get("url", "")).endswith(f":{port}"):
                continue
            if Path(str(info.get("repo", ""))).resolve() != repo.resolve():
                continue
            os.kill(int(info["pid"]), 0)
        except (OSError, ValueError, KeyError, TypeError):
            continue
        return True
    return False


def _await_ours(repo: Path, port: int, state_dir: Path, wait_s: float) -> bool:
    """Its port listens a moment before server.json exists: wait that moment."""
    deadline = time.monotonic() + wait_s
    while not ours(repo, port, state_dir):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def _foreign(repo: Path, port: int) -> str:
    return (
        f"something other than taskgate serve for {repo} listens on 127.0.0.1:{port}: "
        "taskgate's HTTP hooks are refused there and block every guarded tool call; stop it, "
        "or run 'taskgate hooks install --http --port N' with a free port"
    )


def start(repo: Path, port: int, state_dir: Path, wait_s: float = WAIT_S) -> str:
    """Start the server unless one answers; '' when ours answers, else what went wrong."""
    if listening(port):
        return "" if _await_ours(repo, port, state_dir, 3.0) else _foreign(repo, port)
    from taskgate.process import start_detached

    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    log = state_dir / LOG
    package_root = str(Path(__file__).resolve().parent.parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    proc = start_detached(serve_argv(repo, port, state_dir), log=log, env=env, cwd=repo)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if listening(port):
            return "" if _await_ours(repo, port, state_dir, 3.0) else _foreign(repo, port)
        if proc.poll() is not None:  # e.g. a second session's server lost the race: the
            deadline = min(deadline, time.monotonic() + 2.0)  # first one may still be binding
        time.sleep(0.05)
    tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-3:]
    return (
        f"taskgate serve did not start on port {port} ({'; '.join(tail) or 'no output'}); "
        f"taskgate's HTTP hooks block every guarded tool call until it runs: start it with "
        f"'taskgate --repo {repo} serve --port {port}' (log: {log})"
    )


def start_door(repo: Path, common_dir: Path, wait_s: float = WAIT_S) -> str:
    """Issue 14: a sandboxed Claude Code session writes the store only through the agent door,
    which `taskgate serve` keeps: when `hooks install` chose a TCP door for this repository
    (`<common dir>/taskgate/door-tcp.json`) and nothing listens on it, start the server
    (dashboard on a free port) and wait until the door answers. '' when it answers (or the
    repository has no TCP door), else what went wrong and what to do."""
    try:
        data = json.loads((common_dir / "taskgate" / "door-tcp.json").read_text("utf-8"))
        port = int(data["port"])
    except (OSError, ValueError, KeyError, TypeError):
        return ""  # no door chosen (hooks install --no-sandbox): nothing to start
    if listening(port):
        return ""
    from taskgate.process import start_detached
    from taskgate.server.secret import server_dir, state_root

    log_dir = server_dir(state_root(None), common_dir)
    log_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    log = log_dir / LOG
    package_root = str(Path(__file__).resolve().parent.parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    argv = [sys.executable, "-m", "taskgate", "--repo", str(repo), "serve", "--port", "0"]
    proc = start_detached(argv, log=log, env=env, cwd=repo)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if listening(port):
            return ""
        if proc.poll() is not None:  # another session's server may be binding it right now
            deadline = min(deadline, time.monotonic() + 2.0)
        time.sleep(0.05)
    tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-3:]
    return (
        f"taskgate serve did not start, so the agent door on 127.0.0.1:{port} is closed "
        f"({'; '.join(tail) or 'no output'}): this session's taskgate commands cannot write "
        f"the store; ask the person to run 'taskgate --repo {repo} serve' (log: {log})"
    )


def main(argv: Sequence[str]) -> int:
    """Parse `--repo R --port P --state-dir S`; print a systemMessage on failure; exit 0."""
    values = dict(zip(argv[0::2], argv[1::2], strict=False))
    try:
        repo, port = Path(values["--repo"]), int(values["--port"])
        state_dir = Path(values["--state-dir"])
    except (KeyError, ValueError):
        print("usage: autostart.py --repo R --port P --state-dir S", file=sys.stderr)
        return 0
    sys.stdin.close()  # the hook input is not needed; never block on it
    problem = start(repo, port, state_dir)
    if problem:
        print(json.dumps({"systemMessage": problem}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
