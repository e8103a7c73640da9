"""The change checkpoint's push (R-CKP-10 step 1, R-WTB-07): publish T before presenting it."""

from __future__ import annotations

import tomllib
from typing import Any

from taskgate.engine.core import Engine
from taskgate.errors import Refused
from taskgate.git import ops
from taskgate.git.cmd import git
from taskgate.protocol.violations import Violation

# A push that hangs (an unreachable remote, a credential prompt) is refused, not waited on.
PUSH_TIMEOUT_S = 300.0


def _explicit_remote(engine: Engine) -> bool:
    """True when taskgate.toml names the remote itself (then a missing remote is an error)."""
    try:
        data = tomllib.loads(engine.ws.config.text or "")
    except tomllib.TOMLDecodeError:
        return False
    workspace = data.get("workspace", {})
    return isinstance(workspace, dict) and "remote" in workspace


def push_task_branch(engine: Engine, task: str) -> dict[str, Any]:
    """Push branch T to the configured remote; skip cleanly when none is configured.

    Returns what the checkpoint records: `pushed_to` ("origin/T") and `pushed_sha`, or
    `push_skipped` (why). Runs outside any store transaction (flow.transition), so a slow
    remote never holds the store's write lock.
    The push uses --force-with-lease on the remote-tracking ref: a task branch rebased after a
    non-fast-forward refusal (R-CMP-06) replaces its own earlier push, never someone else's.
    """
    name = engine.ws.config.workspace.remote
    if not name:
        return {"push_skipped": 'pushing disabled ([workspace] remote = "")'}
    repo = engine.ws.repo
    if name not in ops.remotes(repo):
        if _explicit_remote(engine):
            raise Refused(
                f"the remote '{name}' named in taskgate.toml does not exist",
                [Violation("R-WTB-07", "the task branch is pushed before the change review")],
                hint=f'git remote add {name} URL, or set remote = "" in [workspace] to skip '
                "pushing",
            )
        return {"push_skipped": f"no remote '{name}' configured"}
    ref = f"refs/heads/{task}"
    sha = git("rev-parse", "--verify", "--quiet", ref, cwd=repo, check=False).stdout.strip()
    result = git(
        "push", "--porcelain", f"--force-with-lease={ref}", name, f"{ref}:{ref}",
        cwd=repo, check=False, timeout=PUSH_TIMEOUT_S,
    )  # fmt: skip
    if not result.ok:
        detail = (result.stderr.strip() or result.stdout.strip()).splitlines()
        raise Refused(
            f"pushing '{task}' to '{name}' failed: {detail[-1] if detail else 'no output'}",
            [Violation("R-WTB-07", "the task branch is pushed before the change review")],
            hint=f"fix the remote (try: git push {name} {task}), then repeat the transition",
        )
    return {"pushed_to": f"{name}/{task}", "pushed_sha": sha}
