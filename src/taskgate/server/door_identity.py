"""Who may do what through the agent door (issue 14): the session is the one the connection
proves (server/peers.py), never the one the request claims.

- Nobody vouches for the process (no registered ancestor): only reading (`status`, `todo`,
  `audit`), with no session.
- A request (its `session` field, or `--session` in argv) that names another session than the
  proven one: refused, R-LCK-09, whatever the command.
- An agent of `taskgate run` acts only on its own task (it has no session; `run` writes that
  task itself, R-TRN-07): any other task, or a command that picks one (`next`), is refused.

Every refusal here is recorded (engine/guard_trail.py): on the task the command named when it
exists, else on the repository's trail, with what was claimed and what was proven.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from taskgate.engine.guard_trail import REPOSITORY
from taskgate.errors import Refused
from taskgate.protocol.violations import Violation
from taskgate.server.peers import RUN, Identity

if TYPE_CHECKING:
    import argparse

    from taskgate.engine.workspace import Workspace

RULE = "R-LCK-09"  # no operation may write a lock whose session is not the caller's
# Read-only commands: anyone who can reach the socket may run them, as nobody.
ANONYMOUS = frozenset({"status", "todo", "audit"})
HINT = (
    "the door acts for the session it can prove: run the command from the session's own "
    "shell (its SessionStart hook registers the client) or let `taskgate run` drive the task"
)


def judge(args: argparse.Namespace, claimed: str, identity: Identity | None) -> Violation | None:
    """Why the door refuses this command from `identity` (None when it may run it)."""
    command = str(getattr(args, "command", None) or "")
    if command in ANONYMOUS:
        return None  # reads only; the child runs with the proven session or none
    if identity is None:
        return Violation(
            RULE,
            "the door cannot tell which session asks (no registered session or `taskgate run` "
            f"agent among the requesting process's ancestors); '{command}' needs one",
        )
    flagged = getattr(args, "session", None)
    for claim in (claimed, flagged if isinstance(flagged, str) else ""):
        claim = claim.strip()
        if claim and claim != identity.session:
            proven = "" if identity.session else ", which has no session"
            return Violation(
                RULE,
                f"the request claims session '{claim}' but comes from "
                f"{identity.describe()}{proven}",
            )
    task = getattr(args, "task", None)
    if identity.kind == RUN and task != identity.task:
        target = f"task '{task}'" if isinstance(task, str) else f"'{command}' without a task"
        return Violation(
            RULE,
            f"{identity.describe()} acts only on its own task, not on {target}",
        )
    return None


def enforce(
    ws: Workspace,
    args: argparse.Namespace,
    argv: list[str],
    claimed: str,
    identity: Identity | None,
    peer: int,
) -> None:
    """Raise Refused (after recording the refusal) when `judge` refuses."""
    violation = judge(args, claimed, identity)
    if violation is None:
        return
    task = getattr(args, "task", None)
    payload: dict[str, Any] = {
        "channel": "agent-door",
        "rule": violation.rule,
        "reason": violation.message,
        "argv": argv,
        "claimed": claimed,
        "proven": identity.to_json() if identity is not None else None,
        "peer": peer,
    }
    trail = _record(ws, task if isinstance(task, str) else None, payload, identity)
    where = "the repository's trail" if trail == REPOSITORY else f"the audit trail of '{trail}'"
    raise Refused(
        f"refused at the agent door: {violation.message} (recorded in {where})",
        [violation],
        hint=HINT,
    )


def _record(ws: Workspace, task: str | None, payload: dict[str, Any],
            identity: Identity | None) -> str:  # fmt: skip
    from taskgate.engine import guard_trail
    from taskgate.engine.core import Engine

    engine = Engine(ws, session_id=identity.session if identity is not None else "")
    engine.door = None  # a refusal is not the door's record of a command that ran
    try:
        written = guard_trail.record(engine, [task] if task else [], guard_trail.DOOR_REFUSED,
                                     payload)  # fmt: skip
    finally:
        engine.close()
    return written[0]
