"""Who is on the other end of the agent door: identity from the connection, never the request
(issue 14, DESIGN.md "Trust").

A request names a session, and a request is what the agent writes. So the door takes identity
from the kernel instead: `SO_PEERCRED` gives the connecting process's pid (translated into the
server's pid namespace, whatever sandbox the peer runs in), and the door walks that process's
ancestors in /proc until it meets a *registered* process:

- `taskgate run` registers each agent process it starts (the sandbox's outermost process:
  bubblewrap, or the agent itself when unconfined) with the run's task and agent and no
  session, right after starting it and before the agent's program runs (bubblewrap takes
  milliseconds to build the sandbox); the registration is removed when the process ends;
- the SessionStart hook, which Claude Code and Codex spawn themselves outside the session's
  sandbox, registers the client process (its nearest `claude`/`codex` ancestor) with the
  session id the client handed to the hook.

A registration is a file `<state dir>/peers/<pid>-<start time>.json`. What makes it
trustworthy is where it lives: a confined agent cannot write the state dir (a read-only mount
in taskgate's sandbox, `denyWrite` in Claude Code's: hooks/client_sandbox.py), and the start
time in its name ties it to one process, never to a later one that reuses the pid.

Kept light (the SessionStart hook imports it): os and the C JSON codec only.
"""

from __future__ import annotations

import os

from taskgate.hooks.jsonio import dumps, loads

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from typing import Any

DIR = "peers"
RUN = "run"
CLIENT = "client"
KINDS = (RUN, CLIENT)
CLIENTS = frozenset({"claude", "claude.exe", "codex"})  # process names (comm) of the clients
_MAX_DEPTH = 64  # ancestors walked: a cycle or a deep tree never hangs the door
_SO_PEERPIDFD = 77  # Linux >= 6.5 (socket.SO_PEERPIDFD from Python 3.13)


class Identity:
    """A registered process and who it speaks for: the session (a client's; '' for an agent of
    `taskgate run`), and for `run` agents their task and agent."""

    __slots__ = ("agent", "kind", "pid", "session", "started", "task")

    def __init__(
        self, kind: str, pid: int, started: str, session: str = "", task: str = "", agent: str = ""
    ) -> None:
        self.kind = kind
        self.pid = pid
        self.started = started
        self.session = session
        self.task = task
        self.agent = agent

    def to_json(self) -> dict[str, Any]:
        """The registration file's content and the door's record of who asked."""
        return {
            "kind": self.kind,
            "pid": self.pid,
            "started": self.started,
            "session": self.session,
            "task": self.task,
            "agent": self.agent,
        }

    @classmethod
    def from_json(cls, data: Any) -> Identity | None:
        """The identity in a registration file; None when it is not one."""
        if not isinstance(data, dict) or data.get("kind") not in KINDS:
            return None
        pid, started = data.get("pid"), data.get("started")
        texts = [data.get(k, "") for k in ("session", "task", "agent")]
        if not isinstance(pid, int) or not isinstance(started, str) or not started:
            return None
        if not all(isinstance(t, str) and len(t) <= 256 for t in texts):
            return None
        return cls(str(data["kind"]), pid, started, *(str(t) for t in texts))

    def describe(self) -> str:
        """How the door names who asked, in messages and records."""
        if self.kind == RUN:
            return f"agent '{self.agent}' of taskgate run on '{self.task}' (pid {self.pid})"
        return f"session '{self.session}' (client pid {self.pid})"


def registry(state_dir: str | os.PathLike[str]) -> str:
    """The directory of registrations for the repository with this state dir."""
    return os.path.join(os.fspath(state_dir), DIR)


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name; None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def start_time(pid: int) -> str | None:
    """The process's start time (clock ticks since boot): with the pid, one process ever."""
    fields = _stat(pid)
    return fields[19] if fields is not None and len(fields) > 19 else None


def ancestors(pid: int) -> list[tuple[int, str]]:
    """(pid, start time) of the process and its ancestors, nearest first (Linux /proc)."""
    found: list[tuple[int, str]] = []
    while pid > 1 and len(found) < _MAX_DEPTH:
        fields = _stat(pid)
        if fields is None or len(fields) <= 19:
            break
        found.append((pid, fields[19]))
        pid = int(fields[1])
    return found


def _file(state_dir: str | os.PathLike[str], pid: int, started: str) -> str:
    return os.path.join(registry(state_dir), f"{pid}-{started}.json")


def register(state_dir: str | os.PathLike[str], identity: Identity) -> str:
    """Write the registration (atomically; the directory is created 0700); its path.
    Registrations of processes that are gone are removed on the way (a run that was killed)."""
    directory = registry(state_dir)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    _reap(directory)
    path = _file(state_dir, identity.pid, identity.started)
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, dumps(identity.to_json()).encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return path


def unregister(path: str) -> None:
    """Remove a registration (its process ended)."""
    try:  # noqa: SIM105  (contextlib would cost the hook its collections/functools imports)
        os.unlink(path)
    except OSError:
        pass  # gone already


def _reap(directory: str) -> None:
    for name in os.listdir(directory):
        pid, _, rest = name.partition("-")
        started = rest.removesuffix(".json")
        if pid.isdigit() and rest.endswith(".json") and start_time(int(pid)) != started:
            unregister(os.path.join(directory, name))


def lookup(state_dir: str | os.PathLike[str], pid: int, started: str) -> Identity | None:
    """The registration of exactly this process, None when it has none."""
    path = _file(state_dir, pid, started)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        raw = os.read(fd, 1 << 16)
    finally:
        os.close(fd)
    try:
        identity = Identity.from_json(loads(raw.decode("utf-8", "replace")))
    except ValueError:
        return None
    if identity is None or identity.pid != pid or identity.started != started:
        return None  # a file whose content names another process: never trusted
    return identity


def prove(state_dir: str | os.PathLike[str], pid: int) -> Identity | None:
    """The identity of process `pid`: the registration of its nearest registered ancestor (or
    of itself), None when it has none."""
    for ancestor, started in ancestors(pid):
        identity = lookup(state_dir, ancestor, started)
        if identity is not None:
            return identity
    return None


class Peer:
    """The process at the other end of a Unix socket, as the kernel saw it at connect()."""

    __slots__ = ("pid", "pidfd", "uid")

    def __init__(self, pid: int, uid: int, pidfd: int | None) -> None:
        self.pid = pid
        self.uid = uid
        self.pidfd = pidfd

    def alive(self) -> bool:
        """Is the process that connected still the one at `pid`? With a pidfd (Linux >= 6.5)
        a pid reused after the peer exited is told apart; without one, the pid must exist."""
        if self.pidfd is None:
            return os.path.exists(f"/proc/{self.pid}")
        try:
            with open(f"/proc/self/fdinfo/{self.pidfd}", encoding="utf-8") as handle:
                for line in handle:
                    if line.startswith("Pid:"):
                        return int(line.split()[1]) == self.pid
        except (OSError, ValueError):
            return False
        return False

    def close(self) -> None:
        """Release the pidfd."""
        if self.pidfd is not None:
            fd, self.pidfd = self.pidfd, None
            try:  # noqa: SIM105  (as in unregister)
                os.close(fd)
            except OSError:
                pass


def peer(conn: socket.socket) -> Peer:
    """SO_PEERCRED (and SO_PEERPIDFD where the kernel has it) of a connected Unix socket."""
    import socket
    import struct

    if not hasattr(socket, "SO_PEERCRED"):  # macOS: no /proc either, so nobody is proven
        return Peer(0, os.getuid(), None)  # the socket is 0600: this user's processes only
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    pidfd: int | None
    try:
        pidfd = conn.getsockopt(socket.SOL_SOCKET, _SO_PEERPIDFD)
    except OSError:
        pidfd = None  # an older kernel: the start time in the registration still binds it
    return Peer(pid, uid, pidfd)


def client_process(pid: int | None = None) -> int | None:
    """The nearest ancestor of `pid` (default: this process's parent) that is a coding client
    (`claude`, `codex`): the process a SessionStart hook registers. The name is the one in
    /proc/PID/stat, the same as /proc/PID/comm (one read per ancestor, issue 18)."""
    pid = os.getppid() if pid is None else pid
    for _ in range(_MAX_DEPTH):
        if pid <= 1:
            break
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except OSError:
            break
        fields = text[text.rfind(")") + 2 :].split()
        if len(fields) <= 19:
            break
        if text[text.find("(") + 1 : text.rfind(")")].strip() in CLIENTS:
            return pid
        pid = int(fields[1])
    return None


def register_client(state_dir: str | os.PathLike[str], session: str) -> str | None:
    """From the SessionStart hook: register the client that spawned it under `session`. None
    when there is no client among the ancestors or the registry cannot be written (inside a
    sandbox: a copy of the hook an agent started proves nothing)."""
    client = client_process()
    started = start_time(client) if client is not None else None
    if client is None or started is None or not session or len(session) > 256:
        return None
    try:
        return register(state_dir, Identity(CLIENT, client, started, session=session))
    except OSError:
        return None


__all__ = [
    "CLIENT",
    "RUN",
    "Identity",
    "Peer",
    "ancestors",
    "client_process",
    "lookup",
    "peer",
    "prove",
    "register",
    "register_client",
    "registry",
    "start_time",
    "unregister",
]
