"""The one door for subprocesses: argument lists only, never a shell (STYLE.md 2)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from taskgate.dataclass_lite import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from concurrent.futures import Future
    from typing import Any

# `subprocess` (with threading and selectors) is imported by the functions that start a
# process: many commands start none (issue 18: `taskgate transition` runs no git).


def _die_with_parent() -> Callable[[], None] | None:
    """Linux: the child gets SIGKILL when taskgate dies, even by `kill -9` (PR_SET_PDEATHSIG),
    so an unconfined agent never outlives `taskgate run` (issue 17). Confined agents have
    bwrap's --die-with-parent; on macOS there is no equivalent, and `taskgate run` ends the
    agents' process groups on every exit it survives (Ctrl-C, errors, timeouts)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes
        import signal

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()
    kill = signal.SIGKILL

    def arm() -> None:  # runs between fork and exec: no allocation-heavy work here
        prctl(1, kill, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(1)

    return arm


@dataclass(frozen=True)
class Result:
    """A finished command: its argument list, exit code and decoded output."""

    cmd: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        """True when the command exited 0."""
        return self.returncode == 0


def hostname() -> str:
    """This machine's name, as leases record it (socket.gethostname without importing socket,
    about 3 ms); TASKGATE_HOST overrides it (several simulated machines on one, issue 20)."""
    return os.environ.get("TASKGATE_HOST", "").strip() or os.uname().nodename


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment without inherited GIT_* variables (pre-commit's no_git_env)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"})
    if extra:
        env.update(extra)
    return env


def run(
    cmd: Sequence[str],
    *,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
    timeout: float | None = None,
    kill_group: bool = False,
    started: Callable[[int], None] | None = None,
    executable: str | None = None,
) -> Result:
    """Run `cmd` and capture its output; never raises for a non-zero exit.

    `executable`: the file to run (an absolute path) instead of `cmd[0]` found on PATH, which
    stays the program's name in its argv and in messages (taskgate.git.cmd: the git no agent
    can have planted, taskgate.spawn.git_program).

    With `kill_group` the command runs in its own session and its whole process group is
    ended on timeout, on an exception (Ctrl-C) and when it returns (agents, issue 6);
    `started` (with `kill_group` only) is called with the child's pid as soon as it exists
    (the agent door's registration, server/peers.py).
    """
    if kill_group:
        return _run_group(cmd, cwd=cwd, env=env, stdin=stdin, timeout=timeout, started=started)
    import subprocess

    try:
        proc = subprocess.run(
            list(cmd),
            executable=executable,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            input=stdin.encode() if stdin is not None else None,
            stdin=subprocess.DEVNULL if stdin is None else None,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        return Result(tuple(cmd), 127, "", f"{cmd[0]}: command not found")
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode("utf-8", "replace") if isinstance(exc.stdout, bytes) else ""
        return Result(tuple(cmd), 124, out, f"timed out after {timeout} s", timed_out=True)
    return Result(
        tuple(cmd),
        proc.returncode,
        proc.stdout.decode("utf-8", "replace"),
        proc.stderr.decode("utf-8", "replace"),
    )


_GRACE_S = 2.0  # SIGTERM first so an agent can flush its output, then SIGKILL


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone
        os.killpg(pgid, sig)


def _run_group(
    cmd: Sequence[str],
    *,
    cwd: Path | str | None,
    env: Mapping[str, str] | None,
    stdin: str | None,
    timeout: float | None,
    started: Callable[[int], None] | None = None,
) -> Result:
    """`run` in a new session; the process group never outlives the call."""
    import signal
    import subprocess

    try:
        proc = subprocess.Popen(
            list(cmd),
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_die_with_parent(),
        )
    except (FileNotFoundError, PermissionError) as exc:
        return Result(tuple(cmd), 127, "", f"{cmd[0]}: {exc.strerror or 'cannot execute'}")
    data = stdin.encode() if stdin is not None else None
    timed_out = False
    try:
        if started is not None:
            started(proc.pid)
        out, err = proc.communicate(data, timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=_GRACE_S)
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, signal.SIGKILL)
            # A grandchild that left the group may still hold the pipes: stop reading.
            try:
                out, err = proc.communicate(timeout=_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = b"", b""
    except BaseException:
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    finally:
        # Background children the command left behind are ended with it.
        _signal_group(proc.pid, signal.SIGKILL)
    if timed_out:
        note = f"timed out after {timeout} s; process group killed"
        err_text = err.decode("utf-8", "replace")
        stderr = (err_text + "\n" + note).lstrip("\n")
        return Result(tuple(cmd), 124, out.decode("utf-8", "replace"), stderr, timed_out=True)
    return Result(
        tuple(cmd),
        proc.returncode,
        out.decode("utf-8", "replace"),
        err.decode("utf-8", "replace"),
    )


def end_child_sessions(sig: int | None = None) -> list[int]:
    """Signal the process groups of this process's children that lead their own session.

    Agents run with `kill_group=True` in worker threads; a Ctrl-C reaches only the main thread,
    so the orchestrator calls this to end the agents instead of waiting for their timeout.
    Linux only (it reads /proc); elsewhere it does nothing and returns []. `sig`: SIGKILL
    unless given.
    """
    import signal

    sig = signal.SIGKILL if sig is None else sig
    me = os.getpid()
    ended: list[int] = []
    try:
        names = [n for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return ended
    for name in names:
        # Each entry on its own: a process that exits meanwhile is skipped (with Path.glob,
        # one ProcessLookupError ended the whole scan, and the clean-up with it).
        try:
            with open(f"/proc/{name}/stat", encoding="utf-8", errors="replace") as handle:
                fields = handle.read().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        pid = int(name)
        # fields: state ppid pgrp session ...; a session leader has pgrp == session == pid
        if len(fields) > 3 and int(fields[1]) == me and int(fields[2]) == pid:
            _signal_group(pid, sig)
            ended.append(pid)
    return ended


def end_sessions_until_done(futures: Sequence[Future[Any]]) -> None:
    """After Ctrl-C in the thread that waits for `futures` (workers that start children with
    `kill_group`): cancel the queued ones and end this process's child sessions until every
    running one is done, so the caller does not wait for a child's timeout. Until then, not
    once: a worker still starting its child (the request, the sandbox) starts it after any
    single pass, and the next pass ends it. A second Ctrl-C does not cut this short."""
    from concurrent.futures import wait

    from taskgate import failpoints

    for future in futures:
        future.cancel()  # a queued job never starts
    end_child_sessions()
    failpoints.wait("sessions:first-pass")  # tests: a child starts after the first pass
    pending = [f for f in futures if not f.done()]
    while pending:
        try:
            pending = list(wait(pending, timeout=0.05).not_done)
            end_child_sessions()
        except KeyboardInterrupt:
            continue


def start_detached(
    cmd: Sequence[str], *, log: Path, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start a long-lived `cmd` in a session of its own (it outlives the caller and its
    process group), output appended to `log`; the caller may poll it (issue 18's server
    autostart)."""
    import subprocess

    with open(log, "ab") as out:
        return subprocess.Popen(
            list(cmd),
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
