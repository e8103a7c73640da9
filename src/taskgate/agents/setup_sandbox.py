"""`[worktree] setup` commands of agent worktrees under `taskgate run` run inside the agents'
sandbox (issue 21 with issue 14): they may write their own worktree, nothing else.

`taskgate run` hands `runner(agents)` to the engine (`Engine.setup_runner`); the engine's
worktree setup (engine/worktree_setup.py) calls it for agent worktrees instead of running the
command directly. Without bubblewrap, or with `[agents] sandbox = "none"`, there is no runner
and setup runs as the person, like the `[validation]` commands.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from taskgate import process
from taskgate.agents import sandbox
from taskgate.agents.config import AgentsConfig

SetupRunner = Callable[..., process.Result]


def runner(agents: AgentsConfig) -> SetupRunner | None:
    """A function running one setup command confined, or None when agents are not confined."""
    try:
        choice = sandbox.choose(agents.sandbox)
    except sandbox.SandboxUnavailable:
        return None  # `run` refuses to start before this matters (confinement.notice)
    if not choice.confined:
        return None
    readable = tuple(agents.sandbox_readable)

    def run_confined(
        cmd: Sequence[str], *, cwd: Path, branch: str, env: Mapping[str, str], timeout: float
    ) -> process.Result:
        try:
            with sandbox.confine(
                choice.bwrap, cmd, env, worktree=cwd, branch=branch, outputs=(), readable=readable
            ) as jail:
                proc = process.run(jail.argv, cwd=cwd, env=jail.env, timeout=timeout,
                                   kill_group=True)  # fmt: skip
                outcome = jail.finish()
        except sandbox.ShadowError as exc:
            return process.Result(tuple(cmd), 126, "", f"cannot confine the setup command: {exc}")
        code = proc.returncode
        if 128 < code <= 128 + 64 and not proc.timed_out:
            code = 128 - code  # bwrap reports a child killed by signal N as 128 + N
        refused = [*outcome.violations, *(f"discarded {p}" for p in outcome.discarded)]
        stderr = proc.stderr + "".join(f"\n[sandbox] {line}" for line in refused)
        return replace(proc, cmd=tuple(cmd), returncode=code, stderr=stderr)

    return run_confined
