"""A short program run without `subprocess`, for the hook processes (issue 18).

Importing `subprocess` (with locale, threading, selectors and signal) costs a hook process more
than the one or two git commands it runs, so the hook side starts git with `os.posix_spawnp`
here: stdout captured, stderr discarded, stdin from a small byte string or /dev/null. The
callers give the environment (taskgate.process's hygiene: no inherited GIT_*, LC_ALL=C, no
prompts); everything else goes through taskgate.process, the one door for subprocesses.
"""

from __future__ import annotations

import os


def output(argv: list[str], env: dict[str, str], stdin: bytes | None = None) -> tuple[int, bytes]:
    """(exit code, stdout) of `argv` (its program found on PATH) run with `env`; raises
    OSError, with every descriptor closed, when it cannot be started."""
    out_r, out_w = os.pipe()
    in_r, in_w = os.pipe() if stdin is not None else (-1, -1)
    actions: list[tuple[object, ...]] = [
        (os.POSIX_SPAWN_DUP2, out_w, 1),
        (os.POSIX_SPAWN_CLOSE, out_r),
        (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
    ]
    if stdin is not None:
        actions += [(os.POSIX_SPAWN_DUP2, in_r, 0), (os.POSIX_SPAWN_CLOSE, in_w)]
    else:
        actions.append((os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0))
    try:
        pid = os.posix_spawnp(argv[0], argv, env, file_actions=actions)
    except OSError:
        for fd in (out_r, out_w, in_r, in_w):
            if fd >= 0:
                os.close(fd)
        raise
    os.close(out_w)
    if stdin is not None:
        os.close(in_r)
        try:
            os.write(in_w, stdin)  # small: a list of paths, a commit message
        finally:
            os.close(in_w)
    chunks = []
    while chunk := os.read(out_r, 1 << 16):
        chunks.append(chunk)
    os.close(out_r)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), b"".join(chunks)
