"""Find and stop the `taskgate serve` processes a test run left behind (conftest.py's session
teardown).

Servers start behind a test's back: a SessionStart hook starts the agent door's server
(server/autostart.py), `hooks status` self-tests SessionStart, a bench script run by
tests/test_bench*.py starts its own. A server belongs to this run when its repository
(`--repo`, else its working directory), its `--state-dir`, or a path in its environment (HOME,
XDG_CONFIG_HOME: conftest.py makes them hermetic there) lies under the run's base temp. Found
through /proc among this user's processes only, so other runs' and the person's servers are
never touched; stopped with SIGTERM through a pidfd (a pid reused meanwhile is not
signalled), SIGKILL after a grace period.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from pathlib import Path

GRACE_S = 5.0


def _argv(pid: int) -> list[str]:
    raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]


def is_serve(argv: list[str]) -> bool:
    """`python -m taskgate ... serve ...` or the console script `taskgate ... serve ...`."""
    for at, arg in enumerate(argv[:3]):
        if arg == "taskgate" or arg.endswith("/taskgate"):
            return "serve" in argv[at + 1 :]
    return False


def _option(argv: list[str], name: str) -> str | None:
    for at, arg in enumerate(argv):
        if arg == name and at + 1 < len(argv):
            return argv[at + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.decode("utf-8", "replace").partition("=") for item in raw.split(b"\0"))
    return {k: v for k, sep, v in pairs if sep}


def _under(path: str | None, base: Path, cwd: str) -> bool:
    if not path:
        return False
    full = Path(cwd, path) if not os.path.isabs(path) else Path(path)
    try:
        full = Path(os.path.realpath(full))
    except OSError:
        return False
    return full == base or base in full.parents


def belongs(pid: int, base: Path) -> bool:
    """True when process `pid` is a `taskgate serve` of this user tied to `base`."""
    try:
        if os.stat(f"/proc/{pid}").st_uid != os.getuid():
            return False
        argv = _argv(pid)
        if not is_serve(argv):
            return False
        cwd = os.readlink(f"/proc/{pid}/cwd").removesuffix(" (deleted)")
    except OSError:
        return False
    # Its environment too: a bench script gives its servers a HOME of its own, but what it
    # inherited from the test (XDG_CONFIG_HOME, ...) still points into the run's base temp.
    env = [v for v in _environ(pid).values() if v.startswith("/")]
    places = [_option(argv, "--repo") or cwd, _option(argv, "--state-dir"), *env]
    return any(_under(p, base, cwd) for p in places)


def servers_under(base: Path) -> list[int]:
    """The pids of this run's servers (see `belongs`)."""
    real = Path(os.path.realpath(base))
    found = []
    for entry in os.scandir("/proc"):
        pid = int(entry.name) if entry.name.isdigit() else 0
        if pid and pid != os.getpid() and belongs(pid, real):
            found.append(pid)
    return found


def _ended(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] in ("Z", "X")  # a zombie has ended


def stop_servers_under(base: Path, grace_s: float = GRACE_S) -> list[int]:
    """SIGTERM every server of this run, SIGKILL those still running after `grace_s`; the
    pids that were signalled."""
    real = Path(os.path.realpath(base))
    handles: dict[int, int] = {}
    for pid in servers_under(base):
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            continue  # ended meanwhile
        if not belongs(pid, real):  # the pid was reused between the scan and the open
            os.close(fd)
            continue
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(fd, signal.SIGTERM)
        handles[pid] = fd
    deadline = time.monotonic() + grace_s
    try:
        while handles and time.monotonic() < deadline:
            waiting = {pid: fd for pid, fd in handles.items() if not _ended(pid)}
            if not waiting:
                break
            poller = select.poll()
            for fd in waiting.values():
                poller.register(fd, select.POLLIN)
            poller.poll(100)
        for pid, fd in handles.items():
            if not _ended(pid):
                with contextlib.suppress(OSError):
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
    finally:
        for fd in handles.values():
            os.close(fd)
    return sorted(handles)
