"""How a task's agents ran, from its audit trail (DESIGN.md Trust): pure, no I/O.

`taskgate run` records one `agent_sandbox` event per agent process it starts (agents/
confinement.py) with mode "confined" (inside bubblewrap: the store is read-only to everything
the agent runs) or "unconfined" (and why). A task *ran confined* when it started agent
processes and every one of them was confined; then only a person's channel can have written
an approval, and `audit` holds the approvals to it. Otherwise approvals cannot be proven human.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

EVENT = "agent_sandbox"
CONFINED = "confined"
UNCONFINED = "unconfined"
NO_AGENTS = "no agent processes"  # built-in agents only, or agents run by the person's client

# Channels only a person can drive (engine/checkpoints.py): their terminal outside every
# sandbox, their own prompt handed to the UserPromptSubmit hook by the client, the dashboard.
HUMAN_ONLY = ("terminal", "human-prompt", "dashboard")

UNPROVEN = (
    "approvals cannot be proven human: agents were not confined, so what they ran could "
    "write the store (docs/security.md)"
)


def task_mode(events: Iterable[tuple[str, Mapping[str, Any]]]) -> str:
    """CONFINED, UNCONFINED or NO_AGENTS for a task's (kind, payload) events."""
    modes = {str(p.get("mode")) for kind, p in events if kind == EVENT}
    if not modes:
        return NO_AGENTS
    return CONFINED if modes == {CONFINED} else UNCONFINED


def approval_problem(mode: str, channel: str) -> str | None:
    """Why an approval through `channel` does not hold for a task that ran in `mode`."""
    if mode == CONFINED and channel not in HUMAN_ONLY:
        return (
            f"came through '{channel}', which is not a channel only a person can drive; the "
            "task's agents ran confined, so approve in your own terminal (a TTY) or in the "
            "chat (R-CKP-02)"
        )
    return None
