"""Every git call goes through `git()`: argument lists, LC_ALL=C, no prompts, no GIT_* leaks."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import NoReturn

from taskgate.errors import GitBusy, GitError
from taskgate.process import Result, clean_env, run


def git(
    *args: str,
    cwd: Path | str,
    check: bool = True,
    stdin: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Result:
    """Run `git args...` in `cwd`; raise GitError with command and output when check fails.

    `timeout` is for commands that reach the network (push): local git needs none.
    """
    cmd = ("git", *args)
    # `env` adds variables set on purpose (a temporary GIT_INDEX_FILE, fixed commit dates).
    result = run(cmd, cwd=cwd, env=_environment(env), stdin=stdin, timeout=timeout,
                 executable=_program())  # fmt: skip
    if check and not result.ok:
        raise_for(cmd, result, cwd)
    return result


def _program() -> str | None:
    """The git to run: the first on PATH that no agent can have planted (taskgate.spawn,
    docs/security.md "The git the hooks run"), so that the engine's git commands in the hook
    processes are not the agent's; None (git found on PATH, as a shell would) when there is
    none: the effect check reports that on its own, and PreToolUse denies guarded calls."""
    from taskgate.spawn import UntrustedGit, git_program

    try:
        return git_program()
    except UntrustedGit:
        return None


def raise_for(cmd: Sequence[str], result: Result, cwd: Path | str) -> NoReturn:
    """The error `git(..., check=True)` raises for a failed `result` of `cmd`."""
    raise_if_busy(cmd, result, cwd)
    raise GitError(cmd, result.returncode, result.stdout, result.stderr)


def again_while(
    result: Result,
    transient: Callable[[Result], bool],
    again: Callable[[], Result],
    pauses: Sequence[float],
    failpoint: str,
) -> Result:
    """`result`, or while it failed in a way `transient` recognises (git met another process's
    half-written file), the result of `again()` after each of `pauses` (seconds) in turn; the
    last one is returned whatever it says. `failpoint`: where tests hold the retry
    (failpoints.wait) until the other process has finished."""
    for pause in pauses:
        if result.ok or not transient(result):
            break
        import time

        from taskgate import failpoints

        failpoints.wait(failpoint)
        time.sleep(pause)
        result = again()
    return result


_CLEAN: tuple[dict[bytes, bytes], dict[str, str]] | None = None  # (os.environ, clean_env())


def _environment(extra: Mapping[str, str] | None) -> dict[str, str]:
    """`clean_env(extra)`, its base kept while os.environ is the same (compared exactly, in C):
    the demo starts ~550 git processes, and filtering os.environ in Python each time was a
    few percent of taskgate's own time (issue 18)."""
    global _CLEAN
    raw = getattr(os.environ, "_data", None)
    if not isinstance(raw, dict):  # not CPython's os._Environ
        return clean_env(extra)
    cached = _CLEAN
    if cached is None or cached[0] != raw:
        cached = _CLEAN = (dict(raw), clean_env())
    env = dict(cached[1])
    if extra:
        env.update(extra)
    return env


_LOCK = r"Unable to create '([^']+\.lock)': File exists"  # compiled on first use (issue 18)
_IN_PROGRESS = (
    ("You have not concluded your merge", "merge"),
    ("rebase-merge directory", "rebase"),
    ("rebase-apply directory", "rebase"),
    ("cherry-pick is already in progress", "cherry-pick"),
    ("revert is already in progress", "revert"),
)


def raise_if_busy(cmd: Sequence[str], result: Result, cwd: Path | str) -> None:
    """git's own lock file or an unfinished operation: GitBusy (exit 6) with what to do."""
    text = result.stderr + result.stdout
    lock = re.search(_LOCK, text)
    if lock:
        path = lock.group(1)
        raise GitBusy(
            cmd, result.returncode, result.stdout, result.stderr,
            what=f"git's lock file {path} exists",
            hint="another git command is running in this repository, or a killed one left the "
            f"file behind: if no git process runs, remove it (rm '{path}') and run the same "
            "command again",
        )  # fmt: skip
    for needle, op in _IN_PROGRESS:
        if needle in text:
            raise GitBusy(
                cmd, result.returncode, result.stdout, result.stderr,
                what=f"an unfinished git {op} blocks this step",
                hint=f"finish it (git {op} --continue) or abort it (git {op} --abort) in "
                f"{cwd}, then run the same command again",
            )  # fmt: skip


def git_out(*args: str, cwd: Path | str) -> str:
    """stdout of a successful git command, stripped of the trailing newline."""
    return git(*args, cwd=cwd).stdout.rstrip("\n")


def ok(*args: str, cwd: Path | str) -> bool:
    """True when the git command exits 0 (queries such as `rev-parse --verify`)."""
    return git(*args, cwd=cwd, check=False).ok


def split_z(text: str) -> list[str]:
    """Split NUL-separated `-z` output."""
    return [part for part in text.split("\0") if part]


def quote_cmd(cmd: Sequence[str]) -> str:
    """A command for display in hints."""
    return " ".join(cmd)
