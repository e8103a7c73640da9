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

from taskgate.protocol.audit_records import AuditInput, CheckResult, Finding

EVENT = "agent_sandbox"
CONFINED = "confined"
UNCONFINED = "unconfined"
NO_AGENTS = "no agent processes"  # built-in agents only, or agents run by the person's client

# Channels only a person can drive (engine/checkpoints.py): their terminal outside every
# sandbox, their own prompt handed to the UserPromptSubmit hook by the client, the dashboard.
HUMAN_ONLY = ("terminal", "human-prompt", "dashboard")

UNPROVEN = (
    "approvals cannot be proven human: the task's agents did not run confined, so the store "
    "was within their reach (docs/security.md)"
)


def task_mode(events: Iterable[tuple[str, Mapping[str, Any]]]) -> str:
    """CONFINED, UNCONFINED or NO_AGENTS for a task's (kind, payload) events."""
    modes = {str(p.get("mode")) for kind, p in events if kind == EVENT}
    if not modes:
        return NO_AGENTS
    return CONFINED if modes == {CONFINED} else UNCONFINED


def approval_problem(mode: str, channel: str, *, auto_allowed: bool = False) -> str | None:
    """Why an approval through `channel` does not hold for a task that ran in `mode`.

    `run --yes` approvals are the person's own choice where taskgate.toml allows them
    (allow_auto_approve; check_approvals judges them), so they are not held against it here.
    """
    if auto_allowed and channel.lower().startswith("automated"):
        return None
    if mode == CONFINED and channel not in HUMAN_ONLY:
        return (
            f"came through '{channel}', which is not a channel only a person can drive; the "
            "task's agents ran confined, so approve in your own terminal (a TTY) or in the "
            "chat (R-CKP-02)"
        )
    return None


def check_confinement(i: AuditInput) -> CheckResult:
    """How the task's agents ran; in a confined task only a person's channel approves, and an
    agent's attempt to reach past its sandbox (discarded, recorded) fails the audit."""
    mode = task_mode((e.kind, e.payload) for e in i.events)
    findings: list[Finding] = []
    for a in i.approvals:
        problem = approval_problem(mode, a.provenance.strip(), auto_allowed=i.auto_approve_allowed)
        if problem:
            findings.append(
                Finding(
                    f"{a.kind} approval of {a.bound_to[:12]} at {a.approved_at} {problem}",
                    f"present it again and have the user approve it (taskgate present {i.task})",
                    "an approval came through a channel a program can drive",
                )
            )
    for e in i.events:
        if e.kind != EVENT:
            continue
        for violation in e.payload.get("violations") or ():
            findings.append(
                Finding(
                    f"{e.payload.get('agent')} ({e.payload.get('agent_mode')}) at {e.at}: "
                    f"{violation}",
                    "look at what the agent tried (its *.output.txt) and fix its instructions",
                    "an agent tried to change something outside its worktree and branch",
                )
            )
    notes = [f"agents ran {mode}" if mode != NO_AGENTS else f"{NO_AGENTS} were started"]
    if mode != CONFINED:
        notes.append(UNPROVEN)
    return CheckResult(
        "trust",
        "how the agents ran; in a confined task, approvals only through a person's channel",
        ("R-CKP-02", "R-WTB-02"),
        tuple(findings),
        tuple(notes),
    )


def summary(events: Iterable[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """`status --json`'s "confinement": the mode, and whether approvals can be proven human."""
    mode = task_mode(events)
    return {
        "mode": mode,
        "approvals_provable": mode == CONFINED,
        "note": "" if mode == CONFINED else UNPROVEN,
    }
