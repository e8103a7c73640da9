"""The one door for subprocesses: argument lists only, never a shell (STYLE.md 2)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Result:
    """A finished command: its argument list, exit code and decoded output."""

    cmd: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        """True when the command exited 0."""
        return self.returncode == 0


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
) -> Result:
    """Run `cmd` and capture its output; never raises for a non-zero exit."""
    try:
        proc = subprocess.run(
            list(cmd),
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
        return Result(tuple(cmd), 124, out, f"timed out after {timeout} s")
    return Result(
        tuple(cmd),
        proc.returncode,
        proc.stdout.decode("utf-8", "replace"),
        proc.stderr.decode("utf-8", "replace"),
    )
