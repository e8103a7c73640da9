"""Recording how each agent process ran, in the task's audit trail (DESIGN.md Trust).

`AgentPool` calls `record` after each batch of invocations, from the thread that owns the
store; `notice` is the line `taskgate run` prints when its agents will not be confined.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from taskgate.agents import sandbox
from taskgate.agents.base import AgentResult, Mode
from taskgate.agents.config import AgentsConfig
from taskgate.errors import UsageError
from taskgate.protocol.confinement import EVENT

if TYPE_CHECKING:
    from taskgate.engine.core import Engine
    from taskgate.store.base import Tx
    from taskgate.store.records import TaskSnapshot

PROCESS_BACKENDS = ("command", "claude", "codex")


def record(
    engine: Engine, task: str, mode: Mode, results: Iterable[tuple[str, AgentResult]]
) -> None:
    """One `agent_sandbox` event per agent process in `results` (built-in agents have none)."""
    rows: list[dict[str, Any]] = []
    for agent, result in results:
        how = result.meta.get("sandbox")
        if isinstance(how, dict):
            rows.append({"agent": agent, "agent_mode": mode.value, **how})
    if not rows:
        return

    def body(tx: Tx, snap: TaskSnapshot) -> None:
        for row in rows:
            engine.event(tx, task, EVENT, row)

    engine.step(task, body)


def notice(agents: AgentsConfig) -> str:
    """The warning `run` prints when its agent processes will run unconfined ("" otherwise).

    Raises UsageError for `sandbox = "bwrap"` where bubblewrap cannot confine, before any
    agent starts.
    """
    backends = {agents.backend, *(str(t.get("backend")) for t in agents.agent_tables.values())}
    if not backends & set(PROCESS_BACKENDS):
        return ""
    try:
        choice = sandbox.choose(agents.sandbox)
    except sandbox.SandboxUnavailable as exc:
        raise UsageError(str(exc), hint="see docs/security.md, 'Modes'") from None
    return sandbox.warning(choice)
