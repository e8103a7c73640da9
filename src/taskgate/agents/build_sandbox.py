"""The project's own commands over agent-written code run in the agents' sandbox (issue 14):
the `[validation]` build (`taskgate validate`, `run`'s VALIDATION step, the build on main at
cleanup), the `[worktree] setup` commands wherever they are started, and the spec roles.

A test suite is code an agent wrote; run as the person it could write the store, move `main`,
or edit another task's worktree. Here it runs under the same bubblewrap confinement as a
`taskgate run` agent (agents/sandbox.py): its worktree writable, the directories it is given
(`writable`, e.g. the report directory) writable in place, a private /tmp and $HOME, and
everything else read-only: the store, the views, the main worktree, other worktrees and every
ref (commits are not kept: `keep_branch=False`; a moved ref is reported and discarded).

`[agents] sandbox` decides, as for agents: "auto" confines when bubblewrap works here and
otherwise runs unconfined and says so on every run; "bwrap" refuses to run unconfined
(UsageError, exit 2); "none" never confines and says so. Each run's mode is returned with its
result (`Outcome.to_json()`), for the caller's audit event.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from taskgate import process
from taskgate.agents import sandbox
from taskgate.agents.config import parse_agents_config
from taskgate.errors import UsageError

if TYPE_CHECKING:
    from taskgate.engine.workspace import Workspace


@dataclass(frozen=True)
class Confinement:
    """How the project's commands run in one repository."""

    choice: sandbox.Choice
    readable: tuple[Path, ...] = ()

    @property
    def confined(self) -> bool:
        return self.choice.confined

    @property
    def mode(self) -> str:
        return sandbox.CONFINED if self.confined else sandbox.UNCONFINED

    def notice(self, what: str) -> str:
        """The line to print when `what` runs unconfined ('' when confined)."""
        if self.confined:
            return ""
        return (
            f"warning: {what} runs unconfined ({self.choice.reason}): the agents' code it runs "
            "can write the store and move any branch. See docs/security.md, 'Modes'."
        )

    def run(
        self,
        cmd: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        timeout: float,
        writable: Sequence[Path] = (),
    ) -> tuple[process.Result, sandbox.Outcome]:
        """Run `cmd` in the worktree `cwd` (the one place it may write, with `writable`)."""
        if not self.confined or not self.choice.bwrap:  # unconfined, or inside taskgate's own
            result = process.run(cmd, cwd=cwd, env=dict(env), timeout=timeout, kill_group=True)
            return result, sandbox.Outcome(self.mode, self.choice.reason)
        branch = _branch(cwd)
        try:
            with sandbox.confine(
                self.choice.bwrap, cmd, env, worktree=cwd, branch=branch, outputs=(),
                readable=self.readable, writable_dirs=writable, keep_branch=False,
            ) as jail:  # fmt: skip
                proc = process.run(jail.argv, cwd=cwd, env=jail.env, timeout=timeout,
                                   kill_group=True)  # fmt: skip
                outcome = jail.finish()
        except sandbox.ShadowError as exc:
            failed = process.Result(tuple(cmd), 126, "", f"cannot confine {cmd[0]}: {exc}\n")
            return failed, sandbox.Outcome(sandbox.CONFINED, str(exc))
        code = proc.returncode
        if 128 < code <= 128 + 64 and not proc.timed_out:
            code = 128 - code  # bwrap reports a child killed by signal N as 128 + N
        refused = [*outcome.violations, *(f"discarded {p}" for p in outcome.discarded)]
        stderr = proc.stderr + "".join(f"\n[sandbox] {line}" for line in refused)
        return replace(proc, cmd=tuple(cmd), returncode=code, stderr=stderr), outcome


def _branch(worktree: Path) -> str:
    """The branch checked out in `worktree` ('' when detached), read from its git dir."""
    from taskgate.git import repo as gitrepo

    gitdir = gitrepo.git_dir(worktree)
    try:
        head = (gitdir / "HEAD").read_text(encoding="utf-8").strip() if gitdir else ""
    except OSError:
        return ""
    prefix = "ref: refs/heads/"
    return head[len(prefix) :] if head.startswith(prefix) else ""


def of(ws: Workspace) -> Confinement:
    """The confinement `[agents] sandbox` gives the project's commands here; UsageError for
    `sandbox = "bwrap"` where bubblewrap cannot confine (nothing runs unconfined then)."""
    if os.environ.get("TASKGATE_SANDBOX"):
        # Already inside taskgate's sandbox (a confined agent's own command): no nesting, and
        # the outer sandbox holds.
        return Confinement(sandbox.Choice(True, "inside taskgate's sandbox"), ())
    agents = parse_agents_config(ws.config.agents, ws.repo)
    try:
        choice = sandbox.choose(agents.sandbox)
    except sandbox.SandboxUnavailable as exc:
        raise UsageError(str(exc), hint="see docs/security.md, 'Modes'") from None
    return Confinement(choice, tuple(agents.sandbox_readable))
