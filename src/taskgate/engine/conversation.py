"""A person's message judged in context: approvals, change requests, interruptions (RULES §9-§10).

`record_human_message` is the one door for what the user says about a task: `taskgate say`
calls it with the provenance the CLI can prove, and the Claude Code hook (UserPromptSubmit)
calls it with HUMAN_PROMPT. Only an approval or a change request may move the state (C-68);
every other message is logged as an interruption and the state is verified unchanged (R-INT-02).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from taskgate.engine import anchor
from taskgate.engine.checkpoints import (
    PROVENANCES,
    check_speaker,
    current_presentation,
    feedback_entries,
    message_hash,
    pending_checkpoint,
    record_approval,
    recovery_hint,
)
from taskgate.engine.clock import iso, parse_time
from taskgate.engine.complete import refuse_while_completing
from taskgate.engine.core import Engine, current_state
from taskgate.engine.facts import gather, task_path
from taskgate.engine.flow import TransitionResult, apply_transition, refuse_if
from taskgate.errors import Refused, UsageError
from taskgate.protocol import transitions
from taskgate.protocol.facts import TaskFacts
from taskgate.protocol.messages import (
    AT_WORK,
    WAITS_FOR,
    Checkpoint,
    MessageClass,
    MessageKind,
    judge,
    unpresented_note,
)
from taskgate.protocol.states import State
from taskgate.protocol.violations import Violation
from taskgate.store.base import Tx
from taskgate.store.records import ApprovalRow, TaskSnapshot

MAX_MESSAGE_CHARS = 100_000
_KIND_OF = {Checkpoint.PLAN: "plan", Checkpoint.CHANGES: "changes"}
_REASON_CHARS = 200  # the transition reason quotes the start of the request


@dataclass(frozen=True)
class SayResult:
    """What one message did: its class, the reply for the person, and any state change."""

    task: str
    kind: MessageKind
    checkpoint: Checkpoint
    state_before: str
    state_after: str
    reason: str
    matched: tuple[str, ...]
    response: str
    provenance: str
    message_hash: str
    approval: ApprovalRow | None = None
    transition: TransitionResult | None = None
    feedback: str = ""
    interruptions: int = 0
    note: str = ""

    @property
    def needs_human(self) -> bool:
        """The person has to answer before anything happens (exit 4)."""
        return self.kind in (MessageKind.AMBIGUOUS, MessageKind.UNRELATED_WORK)

    def to_json(self) -> dict[str, Any]:
        """The `say --json` shape (docs/cli.md)."""
        return {
            "task": self.task,
            "kind": self.kind.value,
            "checkpoint": self.checkpoint.value,
            "state_before": self.state_before,
            "state_after": self.state_after,
            "reason": self.reason,
            "matched": list(self.matched),
            "response": self.response,
            "provenance": self.provenance,
            "message_hash": self.message_hash,
            "needs_human": self.needs_human,
            "approval": None
            if self.approval is None
            else {"kind": self.approval.kind, "bound_to": self.approval.bound_to,
                  "approved_at": self.approval.approved_at},
            "transition": None if self.transition is None else self.transition.__dict__,
            "feedback": self.feedback,
            "interruptions": self.interruptions,
            "note": self.note,
        }  # fmt: skip


def record_human_message(
    engine: Engine,
    task: str,
    text: str,
    provenance: str,
    *,
    sent_at: str | None = None,
    change_request: bool = False,
) -> SayResult:
    """Judge one user message about `task` in context and act on it (R-CKP-17, R-INT-03).

    `sent_at` is when the person sent it, if earlier than now: a message sent before the
    current presentation never counts as a reply to it (R-CKP-04). `change_request=True`
    (`taskgate request-changes`) takes the text as a change request without judging its words.
    """
    if not text.strip():
        raise UsageError(
            "the message is empty", hint="pass the user's words: taskgate say T 'LGTM'"
        )
    if len(text) > MAX_MESSAGE_CHARS:
        raise UsageError(f"the message is longer than {MAX_MESSAGE_CHARS} characters")
    if provenance not in PROVENANCES:
        raise UsageError(f"unknown provenance {provenance!r}", hint=f"one of {PROVENANCES}")
    if sent_at is not None:
        try:
            sent_at = iso(parse_time(sent_at))  # the store's format, so strings compare in order
        except ValueError as exc:
            raise UsageError(f"sent_at: {exc}", hint="use ISO-8601 with a time zone") from None

    def body(tx: Tx, snap: TaskSnapshot) -> SayResult:
        check_speaker(engine, snap.task)
        state = current_state(snap.task)
        checkpoint = pending_checkpoint(snap)
        note = ""
        if checkpoint is not Checkpoint.NONE and sent_at is not None:
            shown = current_presentation(snap, _KIND_OF[checkpoint])
            if shown is not None and sent_at < shown.at:
                checkpoint = Checkpoint.NONE
                note = "sent before the presentation, so it is no reply to it (R-CKP-04)"
        waiting = WAITS_FOR.get(state)
        if change_request:
            verdict = _explicit_request(text)
            checkpoint = waiting or Checkpoint.NONE
        else:
            verdict, checkpoint, unpresented = judge(text, state=state, checkpoint=checkpoint)
            if unpresented and not note and waiting is not None:
                note = unpresented_note(_KIND_OF[waiting], task)
        said = _Said(engine, tx, snap, verdict, checkpoint, provenance, text, note)
        if verdict.kind is MessageKind.APPROVAL:
            return said.approval()
        if verdict.kind is MessageKind.CHANGE_REQUEST and state is State.AWAITING_USER_APPROVAL:
            return said.change_request()
        if verdict.kind is MessageKind.CHANGE_REQUEST and state is State.SYNTHESIS:
            return said.plan_change_request()
        if verdict.kind is MessageKind.CHANGE_REQUEST and state in _ACCEPTS_REQUESTS:
            return said.work_change_request()
        if verdict.kind is MessageKind.CHANGE_REQUEST:
            raise Refused(
                f"'{task}' is in {state}: there is no work left that a change request can reach",
                [Violation("R-INT-11", "change requests go to the agents before completion")],
                hint="start a new task for the change (add it to todo.md)",
            )
        return said.interruption()

    result = engine.step(task, body, owner=False)
    anchor.anchor(engine, task)  # a person's message is a checkpoint too (issue 14)
    return result


@dataclass
class _Said:
    """One message being handled inside its step."""

    engine: Engine
    tx: Tx
    snap: TaskSnapshot
    verdict: MessageClass
    checkpoint: Checkpoint
    provenance: str
    text: str
    note: str

    @property
    def name(self) -> str:
        return self.snap.task.name

    def _result(self, response: str, **extra: Any) -> SayResult:
        after = self.tx.snapshot(self.name) or self.snap
        return SayResult(
            task=self.name,
            kind=self.verdict.kind,
            checkpoint=self.checkpoint,
            state_before=self.snap.task.state,
            state_after=after.task.state,
            reason=self.verdict.reason,
            matched=self.verdict.matched,
            response=response,
            provenance=self.provenance,
            message_hash=message_hash(self.text),
            interruptions=sum(1 for e in after.events if e.kind == "interruption"),
            note=self.note,
            **extra,
        )

    def _owner_facts(self, snap: TaskSnapshot) -> TaskFacts:
        # The person answers for the task; the move is judged as the owner's (R-TRN-23).
        facts = gather(self.engine, snap)
        return replace(facts, session_id=facts.session_id or snap.task.session_id)

    def approval(self) -> SayResult:
        kind = _KIND_OF[self.checkpoint]
        row = record_approval(
            self.engine, self.tx, self.snap, kind, provenance=self.provenance, message=self.text
        )
        response = self.verdict.response
        moved = None
        snap = self.tx.snapshot(self.name) or self.snap
        following = transitions.next_on_path(task_path(snap), State.SYNTHESIS)
        if kind == "plan" and following is State.IMPLEMENTATION:
            # R-CKP-17 / R-CKP-19: an approved plan goes straight to IMPLEMENTATION.
            blocked = transitions.check(self._owner_facts(snap), State.IMPLEMENTATION)
            if blocked:
                response += "\nThe move to IMPLEMENTATION is still blocked:\n" + "\n".join(
                    f"  {v.render()}" for v in blocked
                )
            else:
                moved = apply_transition(
                    self.engine, self.tx, snap, State.IMPLEMENTATION,
                    reason="user approved the plan (R-CKP-17)",
                )  # fmt: skip
                response += "\nState: SYNTHESIS -> IMPLEMENTATION; invoke the agents in parallel."
        elif kind == "plan":  # skip path (C-08): make the change, then AWAITING_USER_APPROVAL
            response += "\nNext: commit the change on the task branch, then move to " + str(
                following or "the next state"
            )
        else:
            response += f"\nNext: taskgate complete {self.name} (R-CMP-09)"
        return self._result(response, approval=row, transition=moved)

    def _feedback(self, kind: str, target: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The feedback entry for the agents and the task's new `extra` holding it."""
        entry = {
            "at": self.engine.now(),
            "kind": kind,
            "text": self.verdict.feedback,
            "from_state": self.snap.task.state,
            "to_state": target,
            "provenance": self.provenance,
            "message_hash": message_hash(self.text),
        }
        extra = {**self.snap.task.extra, "feedback": [*feedback_entries(self.snap), entry]}
        self.engine.event(self.tx, self.name, "change_request", entry)
        return entry, extra

    def change_request(self) -> SayResult:
        """R-TRN-23 / R-INT-11: straight back to work, no 'would you like me to' (C-45).

        Not while `complete` is journaled: the task branch holds taskgate's archival commit,
        and the squash may already be on main (R-CMP-09; issue 16).
        """
        refuse_while_completing(self.snap, "request changes on")
        target = (
            State.IMPLEMENTATION
            if State.IMPLEMENTATION in task_path(self.snap)
            else State.SYNTHESIS
        )
        first_line = self.verdict.feedback.splitlines()[0] if self.verdict.feedback else ""
        reason = f"User requested changes: {first_line[:_REASON_CHARS]}"
        refuse_if(
            transitions.check(self._owner_facts(self.snap), target, reason),
            f"{self.snap.task.state} -> {target}",
        )
        _, extra = self._feedback("changes", target.value)
        moved = apply_transition(
            self.engine, self.tx, self.snap, target, reason=reason, extra=extra
        )
        response = (
            f"{self.verdict.response}\nState: AWAITING_USER_APPROVAL -> {target}; the change "
            "approval and checkpoint were reset (C-45). The feedback is recorded for the agents."
        )
        return self._result(response, transition=moved, feedback=self.verdict.feedback)

    def plan_change_request(self) -> SayResult:
        """R-CKP-15: record the feedback, drop any plan approval, stay in SYNTHESIS."""
        now = self.engine.now()
        self.tx.revoke_approvals(self.name, "plan", now, "the user asked for plan changes")
        _, extra = self._feedback("plan", State.SYNTHESIS.value)
        self.engine.touch(self.tx, self.snap, extra=extra)
        self._verify_state_kept()
        response = (
            f"{self.verdict.response}\nNext: revise the plan in task.md and present it again "
            f"(taskgate present {self.name}); the state stays SYNTHESIS."
        )
        return self._result(response, feedback=self.verdict.feedback)

    def work_change_request(self) -> SayResult:
        """A change request while the agents work (R-INT-11): it lands in their next prompts.

        VALIDATION goes back to IMPLEMENTATION (row 18) and REVIEW counts it like a rejection
        (row 11), so every agent gets another round; in IMPLEMENTATION every agent that had
        finished gets one more round; before IMPLEMENTATION it is feedback for the plan.
        """
        state = current_state(self.snap.task)
        target = State.IMPLEMENTATION if state in (State.VALIDATION, State.REVIEW) else state
        _, extra = self._feedback("changes", target.value)
        if target is not state:
            first_line = self.verdict.feedback.splitlines()[0] if self.verdict.feedback else ""
            reason = f"User requested changes: {first_line[:_REASON_CHARS]}"
            snap = replace(self.snap, task=replace(self.snap.task, extra=extra))
            refuse_if(transitions.check(self._owner_facts(snap), target, reason),
                      f"{state} -> {target}")  # fmt: skip
            moved = apply_transition(self.engine, self.tx, self.snap, target, reason=reason,
                                     extra=extra)  # fmt: skip
            response = (
                f"{self.verdict.response}\nState: {state} -> {target}; every agent gets "
                "another round with your words."
            )
            return self._result(response, transition=moved, feedback=self.verdict.feedback)
        if state is State.IMPLEMENTATION:
            for name in self.snap.task.required_agents:
                row = self.snap.agent(name)
                if row is not None and row.phase == state.value and row.status == "COMPLETE":
                    self.tx.put_agent(replace(row, work_remaining=True))
        self.engine.touch(self.tx, self.snap, extra=extra)
        self._verify_state_kept()
        response = (
            f"Change request recorded: the agents get it in their next prompts ({state} stays)."
            f"\nFeedback: {self.verdict.feedback}"
        )
        return self._result(response, feedback=self.verdict.feedback)

    def interruption(self) -> SayResult:
        """R-INT-06..10: log it, do no task work, and prove the state did not move."""
        kind = self.verdict.kind
        digest = message_hash(self.text)
        if kind is MessageKind.RESUMPTION:
            since = _interruptions_since_resumption(self.snap)
            self.engine.event(
                self.tx, self.name, "resumption",
                {"state": self.snap.task.state, "after_interruptions": since,
                 "provenance": self.provenance, "message_hash": digest},
            )  # fmt: skip
            response = (
                f"=== RESUMING TASK: {self.name} ===\nResuming from state: {self.snap.task.state}"
                + (f" (after {since} interruptions, R-INT-08)" if since else "")
                + f"\n{recovery_hint(self.snap)}"
            )
        else:
            self.engine.event(
                self.tx, self.name, "interruption",
                {"type": kind.value, "checkpoint": self.checkpoint.value,
                 "reason": self.verdict.reason, "provenance": self.provenance,
                 "message_hash": digest},
            )  # fmt: skip
            response = self.verdict.response
        self.engine.touch(self.tx, self.snap)
        self._verify_state_kept()
        if self.note:
            response += f"\nNote: {self.note}"
        return self._result(response)

    def _verify_state_kept(self) -> None:
        after = self.tx.snapshot(self.name)
        if after is None or after.task.state != self.snap.task.state:  # R-INT-02
            raise Refused(
                "CRITICAL ERROR: State changed during interruption handling",
                [Violation("R-INT-02", "a non-resuming message must leave the state as it was")],
                hint="nothing was recorded; run 'taskgate audit' and report it",
            )


_ACCEPTS_REQUESTS = (State.CLASSIFIED, State.REQUIREMENTS, *AT_WORK)


def _explicit_request(text: str) -> MessageClass:
    """`taskgate request-changes`: the person said it is a change request; no keyword needed."""
    feedback = text.strip()
    return MessageClass(
        MessageKind.CHANGE_REQUEST,
        "explicit change request (taskgate request-changes)",
        (),
        f"Change requested: the task goes back for rework (R-INT-11).\nFeedback: {feedback}",
        feedback,
    )


def _interruptions_since_resumption(snap: TaskSnapshot) -> int:
    count = 0
    for event in reversed(snap.events):
        if event.kind in ("resumption", "transition"):
            break
        if event.kind == "interruption":
            count += 1
    return count
