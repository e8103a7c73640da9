"""The person's answers from the dashboard: Approve and Request changes, bound to the page.

The form carries the plan hash / commit SHA the page showed. Inside ONE store step the
binding is checked against the presentation in force and the artifact on disk, and then the
same engine code as `taskgate say` records the decision (provenance `dashboard`):
- an approved plan goes straight to IMPLEMENTATION when its guards allow (R-CKP-17);
- an approved change is recorded for `taskgate complete` (R-CMP-09);
- a change request is recorded as the agents' feedback, word for word (no keyword guessing):
  at the change review the task goes back to IMPLEMENTATION (R-TRN-23, R-INT-11); at the plan
  it stays in SYNTHESIS and the plan approval is dropped (R-CKP-15).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from taskgate.engine import conversation
from taskgate.engine.checkpoints import (
    CHECKPOINT_STATE,
    DASHBOARD,
    current_presentation,
    message_hash,
    task_head,
)
from taskgate.engine.core import Engine, current_state
from taskgate.errors import Refused, UsageError
from taskgate.fsutil import read_text
from taskgate.protocol import taskmd
from taskgate.protocol.messages import Checkpoint, MessageClass, MessageKind
from taskgate.protocol.violations import Violation
from taskgate.store.base import Tx
from taskgate.store.records import TaskSnapshot

MAX_TEXT = conversation.MAX_MESSAGE_CHARS
_CHECKPOINT = {"plan": Checkpoint.PLAN, "changes": Checkpoint.CHANGES}


@dataclass(frozen=True)
class Outcome:
    """What an answer did, for the page and the log."""

    task: str
    action: str
    kind: str
    bound_to: str
    state_before: str
    state_after: str
    message: str

    def to_json(self) -> dict[str, Any]:
        """JSON shape of an accepted answer."""
        return {"ok": True, **self.__dict__}


def _check_binding(engine: Engine, snap: TaskSnapshot, kind: str, bound_to: str) -> None:
    """Refuse unless the page showed exactly what is presented and on disk now."""
    name = snap.task.name
    waits = CHECKPOINT_STATE.get(kind)
    state = current_state(snap.task)
    if waits is None:
        raise UsageError(f"unknown checkpoint {kind!r}", hint="the form sends 'plan' or 'changes'")
    if state is not waits:
        raise Refused(
            f"'{name}' is in {state}, no longer waiting for {kind} approval",
            [
                Violation(
                    "R-CKP-01", "checkpoints exist only at SYNTHESIS and AWAITING_USER_APPROVAL"
                )
            ],
            hint="the page has been updated: look at it again",
        )
    shown = current_presentation(snap, kind)
    if kind == "plan":
        current = taskmd.plan_hash(read_text(engine.ws.task_md(name))) or ""
        rule = "R-CKP-15"
    else:
        current = task_head(engine, snap.task) or ""
        rule = "R-CKP-13"
        if (snap.task.checkpoint or {}).get("commit_sha") != current:
            current = ""
    if not bound_to or bound_to != current or shown is None or shown.bound_to != bound_to:
        what = "plan" if kind == "plan" else "change"
        raise Refused(
            f"the {what} changed since this page showed it ({bound_to[:12] or 'nothing'} shown, "
            f"{current[:12] or 'none'} now"
            + ("" if shown else ", and it has not been presented since")
            + "): nothing was recorded",
            [Violation(rule, "an answer counts only for exactly what the person saw")],
            hint="read the updated page and answer again",
        )


def _say(
    engine: Engine, tx: Tx, snap: TaskSnapshot, kind: str, verdict: MessageClass, text: str
) -> conversation.SayResult:
    """The engine's own checkpoint handling (as for `taskgate say`), with the class decided
    by the button the person pressed instead of by keywords."""
    said = conversation._Said(  # the same code path as `say`; see docs/architecture.md
        engine, tx, snap, verdict, _CHECKPOINT[kind], DASHBOARD, text, ""
    )
    if verdict.kind is MessageKind.APPROVAL:
        return said.approval()
    if kind == "changes":
        return said.change_request()
    return said.plan_change_request()


def approve(engine: Engine, task: str, kind: str, bound_to: str) -> Outcome:
    """Approve the plan / change the page showed (bound to `bound_to`)."""

    def body(tx: Tx, snap: TaskSnapshot) -> Outcome:
        _check_binding(engine, snap, kind, bound_to)
        verdict = MessageClass(
            MessageKind.APPROVAL,
            "Approve pressed in the dashboard",
            (),
            f"{'Plan' if kind == 'plan' else 'Change'} approved in the dashboard.",
        )
        result = _say(engine, tx, snap, kind, verdict, f"dashboard: approve {kind} {bound_to}")
        return Outcome(
            task,
            "approve",
            kind,
            bound_to,
            result.state_before,
            result.state_after,
            result.response,
        )

    return engine.step(engine.check_task_name(task), body, owner=False)


def request_changes(engine: Engine, task: str, kind: str, bound_to: str, text: str) -> Outcome:
    """The person's change request, delivered to the agents as feedback word for word."""
    text = text.strip()
    if not text:
        raise UsageError("say what should change", hint="type the change request, then send it")
    if len(text) > MAX_TEXT:
        raise UsageError(f"the request is longer than {MAX_TEXT} characters")

    def body(tx: Tx, snap: TaskSnapshot) -> Outcome:
        _check_binding(engine, snap, kind, bound_to)
        verdict = MessageClass(
            MessageKind.CHANGE_REQUEST,
            "Request changes pressed in the dashboard",
            (),
            "Change request recorded from the dashboard.",
            feedback=text,
        )
        result = _say(engine, tx, snap, kind, verdict, text)
        return Outcome(
            task,
            "request-changes",
            kind,
            bound_to,
            result.state_before,
            result.state_after,
            result.response,
        )

    return engine.step(engine.check_task_name(task), body, owner=False)


def log_entry(
    *,
    task: str,
    action: str,
    kind: str,
    bound_to: str,
    outcome: str,
    reason: str,
    remote: str,
    text: str = "",
) -> dict[str, Any]:
    """One line of the server's answer log (every request, accepted or refused)."""
    return {
        "channel": DASHBOARD,
        "task": task,
        "action": action,
        "kind": kind,
        "bound_to": bound_to,
        "outcome": outcome,
        "reason": reason,
        "remote": remote,
        "message_hash": message_hash(text),
    }
