"""The two human checkpoints: presentations and approvals bound to what was shown (RULES §9)."""

from __future__ import annotations

import contextlib
import hashlib
from dataclasses import dataclass, field
from typing import Any

from taskgate.engine import anchor
from taskgate.engine.complete import refuse_while_completing
from taskgate.engine.core import Engine, current_state
from taskgate.errors import Refused, TaskgateError, UsageError
from taskgate.fsutil import read_text
from taskgate.git import repo as gitrepo
from taskgate.git.cmd import git
from taskgate.protocol import recovery, taskmd
from taskgate.protocol.states import Checkpoint, State
from taskgate.protocol.violations import Violation
from taskgate.store.base import Tx
from taskgate.store.records import ApprovalRow, PresentationRow, TaskRow, TaskSnapshot

TYPE_CHECKING = False
if TYPE_CHECKING:
    from taskgate.protocol.presentation import ChangeView

KINDS = ("plan", "changes")
CHECKPOINT_STATE = {kind: State(state) for kind, state in recovery.CHECKPOINT_STATE.items()}

# How a message or an approval reached taskgate (recorded with every approval).
TERMINAL = "terminal"  # typed by a person: stdin is a TTY
NON_INTERACTIVE = "non-interactive"  # a person's command from a script or a pipe
HUMAN_PROMPT = "human-prompt"  # the person's own prompt, captured by the Claude Code hook
AUTOMATED = "automated --yes"  # `taskgate run --yes`, only with allow_auto_approve
AGENT_RELAYED = "agent-relayed"  # an agent passed the text on: never an approval (R-CKP-02)
DASHBOARD = "dashboard"  # the person in `taskgate serve`'s page (a secret only their terminal saw)
PROVENANCES = (TERMINAL, NON_INTERACTIVE, HUMAN_PROMPT, AUTOMATED, AGENT_RELAYED, DASHBOARD)
APPROVING = (TERMINAL, NON_INTERACTIVE, HUMAN_PROMPT, AUTOMATED, DASHBOARD)

# How many earlier change requests the change review repeats.
_FEEDBACK_SHOWN = 5


@dataclass(frozen=True)
class Presentation:
    """What `present` showed: the kind, the bound hash/SHA and the text for the person."""

    task: str
    kind: str
    bound_to: str
    at: str
    text: str
    details: dict[str, Any] = field(default_factory=dict)


def message_hash(text: str) -> str:
    """SHA-256 of a person's message, recorded instead of the words themselves."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest() if text else ""


def _kind_for(state: State) -> str:
    for kind, waits_in in CHECKPOINT_STATE.items():
        if state is waits_in:
            return kind
    raise Refused(
        f"nothing to present in {state}",
        [Violation("R-CKP-01", "checkpoints exist only at SYNTHESIS and AWAITING_USER_APPROVAL")],
        hint="present the plan in SYNTHESIS or the change in AWAITING_USER_APPROVAL",
    )


def current_presentation(snap: TaskSnapshot, kind: str) -> PresentationRow | None:
    """The presentation of `kind` still in force: none voided it since (event order, not time)."""
    newest_first = ((event.kind, event.payload) for event in reversed(snap.events))
    return snap.latest_presentation(kind) if recovery.shown(kind, newest_first) else None


def pending_checkpoint(snap: TaskSnapshot) -> Checkpoint:
    """Which checkpoint a message is judged against: only one presented in this state."""
    state = snap.task.state
    if state == State.SYNTHESIS.value and current_presentation(snap, "plan"):
        return Checkpoint.PLAN
    if state == State.AWAITING_USER_APPROVAL.value and current_presentation(snap, "changes"):
        return Checkpoint.CHANGES
    return Checkpoint.NONE


def check_speaker(engine: Engine, row: TaskRow) -> None:
    """A person needs no lease to answer, but another agent session may not (R-TRN-07)."""
    if engine.session_id and not row.released and engine.session_id != row.session_id:
        engine.require_owner(row)


def task_head(engine: Engine, row: TaskRow) -> str | None:
    """The task-branch HEAD as the change checkpoint sees it.

    `complete` squashes T after the approval; it records that the squash is the approved tree
    plus only the archival edit, so that HEAD stands for the approved SHA (as in facts.gather).
    """
    head = gitrepo.head_sha(engine.ws.task_worktree(row.name))
    if head and head == row.extra.get("squash_sha") and row.extra.get("approved_sha"):
        return str(row.extra["approved_sha"])
    return head


def task_title(task_md: str | None, task: str) -> str:
    """The title from task.md's first heading (`# task: title`), else the task name."""
    first = (task_md or "").lstrip().splitlines()[:1]
    if first and first[0].startswith("# "):
        heading = first[0][2:].strip()
        return heading.split(":", 1)[1].strip() if ":" in heading else heading
    return task


def present(
    engine: Engine, task: str, *, facts: tuple[str, dict[str, Any]] | None = None
) -> Presentation:
    """`taskgate present T`: show the plan or the change and record what was shown, and when.

    `facts` = (event, updates): facts of the caller's (`run`: the plan was written) recorded
    in the same step, first, as a step of their own would record them (issue 18: a step
    fewer); when the presentation is refused they are recorded on their own, as before."""

    def record(tx: Tx, snap: TaskSnapshot) -> None:
        assert facts is not None
        engine.event(tx, task, facts[0], dict(facts[1]))
        engine.touch(tx, snap, extra={**snap.task.extra, **facts[1]})

    def body(tx: Tx, snap: TaskSnapshot) -> Presentation:
        if facts is not None:
            record(tx, snap)
            snap = tx.snapshot(task, since=snap) or snap
        refuse_while_completing(snap, "present")  # issue 16
        kind = _kind_for(current_state(snap.task))
        now = engine.now()
        changes: dict[str, Any] = {}
        if kind == "plan":
            bound, text, details = _plan(engine, snap)
        else:
            head = task_head(engine, snap.task) or ""
            checkpoint = dict(snap.task.checkpoint or {})
            if checkpoint.get("commit_sha") != head:  # R-CKP-13: present the new SHA
                tx.revoke_approvals(task, "changes", now, "task branch moved before approval")
                checkpoint.update({"commit_sha": head, "approved": False})
            checkpoint["presented_at"] = now  # D-CKP-3
            changes["checkpoint"] = checkpoint
            bound = head
            from taskgate.protocol.presentation import render_changes  # only when presenting

            view = _change_view(engine, snap, head)
            text = render_changes(view)
            details = {
                "commit_sha": head,
                "branch": view.branch,
                "base": view.base,
                "diff_stat": view.diff_stat,
                "commits": list(view.commits),
                "validation": view.validation,
                "verdicts": dict(view.verdicts),
                "pushed_to": view.pushed_to or None,
            }
        tx.add_presentation(PresentationRow(task, kind, bound, now))
        engine.event(
            tx,
            task,
            "presentation",
            {"kind": kind, "bound_to": bound, "text_sha256": message_hash(text)},
        )
        engine.touch(tx, snap, **changes)
        details["recovery"] = recovery_hint(tx.snapshot(task) or snap)
        return Presentation(task, kind, bound, now, text, details)

    try:
        shown = engine.step(task, body)
    except TaskgateError:
        if facts is not None:  # refused: the caller's facts stand on their own
            with contextlib.suppress(TaskgateError):
                engine.step(task, record)
        raise
    anchor.anchor(engine, task)  # the chain's head, in git (issue 14)
    from taskgate.engine import remote_sync  # issue 20: a team's machines see the checkpoint

    if remote_sync.team_remote(engine):
        agents = engine.require_snapshot(task).task.required_agents
        shown.details.update(remote_sync.share_quietly(engine, task, agents))
    return shown


def _plan(engine: Engine, snap: TaskSnapshot) -> tuple[str, str, dict[str, Any]]:
    t = snap.task
    path = engine.ws.task_md(t.name)
    text = read_text(path)
    bound = taskmd.plan_hash(text)
    if text is None or bound is None:
        raise Refused(
            "no implementation plan to present",
            [Violation("R-DOC-10", "task.md has no '## Implementation Plan' section")],
            hint=f"write the plan into {path}",
        )
    missing = taskmd.missing_plan_components(text)
    if missing:
        raise Refused(
            "the plan is incomplete",
            [Violation("R-DOC-11", f"plan lacks: {', '.join(missing)}")],
            hint="add the missing plan components to task.md, then present again",
        )
    from taskgate.protocol.presentation import parse_plan, render_plan, required_criteria

    required = required_criteria(engine.ws.config.validation.commands)
    view = parse_plan(text, t.required_agents, required)
    if view.problems:
        raise Refused("the plan cannot be presented", view.problems, hint=view.problems[0].hint)
    rendered = render_plan(
        view,
        task=t.name,
        title=task_title(text, t.name),
        risk_level=t.risk_level or "",
        agents=t.required_agents,
        task_md_path=str(path),
    )
    return bound, rendered, {"plan_hash": bound, "task_md": str(path), "plan": view.to_json()}


def feedback_entries(snap: TaskSnapshot, kind: str | None = None) -> list[dict[str, Any]]:
    """The change requests recorded for the agents (TaskRow.extra["feedback"])."""
    entries = snap.task.extra.get("feedback") or []
    return [e for e in entries if isinstance(e, dict) and kind in (None, e.get("kind"))]


def _change_view(engine: Engine, snap: TaskSnapshot, head: str) -> ChangeView:
    t = snap.task
    worktree = engine.ws.task_worktree(t.name)
    base = t.base_sha or t.base_branch
    stat = git("diff", "--stat", f"{base}..{head}", cwd=worktree, check=False).stdout
    log = git("log", "--format=%h %s", f"{base}..{head}", cwd=worktree, check=False).stdout
    latest = snap.validations[-1] if snap.validations else None
    verdicts = {v.agent: v.decision for v in snap.verdicts if v.head_sha == head}
    from taskgate.protocol.presentation import ChangeView

    return ChangeView(
        task=t.name,
        commit_sha=head,
        branch=t.name,
        base=t.base_branch,
        diff_stat=stat.rstrip(),
        commits=tuple(line for line in log.splitlines() if line.strip()),
        validation=None
        if latest is None
        else {"success": latest.success, "command": latest.command, "head_sha": latest.head_sha,
              "at": latest.at},
        verdicts=verdicts,
        feedback=tuple(str(e.get("text", "")) for e in feedback_entries(snap, "changes"))[
            -_FEEDBACK_SHOWN:
        ],
        pushed_to=str((t.checkpoint or {}).get("pushed_to") or ""),
    )  # fmt: skip


def approve(
    engine: Engine, task: str, kind: str, *, provenance: str, message: str = ""
) -> ApprovalRow:
    """`taskgate approve T plan|changes`: a human approval bound to the presented artifact."""
    if kind not in KINDS:
        raise UsageError(f"unknown approval kind {kind!r}", hint="use 'plan' or 'changes'")

    def body(tx: Tx, snap: TaskSnapshot) -> ApprovalRow:
        check_speaker(engine, snap.task)
        return record_approval(engine, tx, snap, kind, provenance=provenance, message=message)

    row = engine.step(task, body, owner=False)
    anchor.anchor(engine, task)  # the chain's head, in git (issue 14)
    return row


def approve_noop(engine: Engine, task: str, *, provenance: str, message: str) -> dict[str, Any]:
    """`taskgate approve T noop --message WHY`: the person accepts that the task changes nothing.

    Only then may an empty task branch reach the change review and complete (R-CKP-10); the
    record names who said so and why. An agent cannot make it (R-CKP-02).
    """
    if not message.strip():
        raise UsageError(
            "a no-op approval needs the reason", hint=f"taskgate approve {task} noop --message '…'"
        )

    def body(tx: Tx, snap: TaskSnapshot) -> dict[str, Any]:
        check_speaker(engine, snap.task)
        _check_provenance(engine, provenance)
        if current_state(snap.task) in (State.COMPLETE, State.CLEANUP):
            raise Refused(f"'{task}' is already {snap.task.state}", [])
        record = {"at": engine.now(), "provenance": provenance, "reason": message.strip()}
        engine.event(tx, task, "noop_approved", record)
        engine.touch(tx, snap, extra={**snap.task.extra, "noop_approved": record})
        return record

    return engine.step(task, body, owner=False)


def _check_provenance(engine: Engine, provenance: str) -> None:
    if provenance not in APPROVING:
        raise Refused(
            f"an approval cannot come from {provenance!r}",
            [Violation("R-CKP-02", "only the user approves; an agent cannot approve its work")],
            hint="ask the user to approve in their own terminal or reply in the chat",
        )
    if provenance == AUTOMATED and not engine.ws.config.protocol.allow_auto_approve:
        raise Refused(
            "automatic approval is not allowed in this repository",
            [Violation("R-CKP-02", "no bypass mode satisfies a checkpoint by default")],
            hint="set allow_auto_approve = true under [protocol] in taskgate.toml to allow it",
        )


def record_approval(
    engine: Engine, tx: Tx, snap: TaskSnapshot, kind: str, *, provenance: str, message: str = ""
) -> ApprovalRow:
    """Record an approval in the caller's step; refuses anything not bound to what was shown."""
    task = snap.task.name
    _check_provenance(engine, provenance)
    refuse_while_completing(snap, "approve")  # issue 16
    state = current_state(snap.task)
    expected = _kind_for(state)
    if expected != kind:
        raise Refused(
            f"the task waits for {expected} approval, not {kind}",
            [Violation("R-CKP-01", f"state {state}")],
            hint=f"taskgate approve {task} {expected}",
        )
    shown = current_presentation(snap, kind)
    if shown is None:  # R-CKP-03 / R-CKP-04 / R-AGT-19: approve only what is shown now
        raise Refused(
            f"the {kind} has not been presented since it last changed",
            [Violation("R-CKP-03", "approval needs a recorded presentation first (R-CKP-04)")],
            hint=f"run 'taskgate present {task}' and show it to the user",
        )
    if kind == "plan":
        current = taskmd.plan_hash(read_text(engine.ws.task_md(task)))
        rule = "R-CKP-15"
    else:
        current = task_head(engine, snap.task)
        rule = "R-CKP-13"
        if (snap.task.checkpoint or {}).get("commit_sha") != current:
            current = None
    if current != shown.bound_to:
        raise Refused(
            f"the {kind} changed after it was presented",
            [Violation(rule, "approval must be for exactly what the user saw")],
            hint=f"run 'taskgate present {task}' again and ask the user",
        )
    now = engine.now()
    digest = message_hash(message)
    row = ApprovalRow(task, kind, shown.bound_to, shown.at, now, provenance, digest)
    tx.add_approval(row)
    changes: dict[str, Any] = {}
    if kind == "changes":  # R-CKP-11: approved flag and change flag in one operation
        changes["checkpoint"] = {**(snap.task.checkpoint or {}), "approved": True}
    engine.event(
        tx,
        task,
        "approval",
        {"kind": kind, "bound_to": shown.bound_to, "provenance": provenance,
         "message_hash": digest},
    )  # fmt: skip
    engine.touch(tx, snap, **changes)
    return row


def recovery_hint(snap: TaskSnapshot) -> str:
    """R-CKP-18, D-REC-1 and D-INT-3: what a resuming session should do next, by state (the
    text is protocol/recovery.hint's, which the SessionStart hook also gives its rows)."""
    t = snap.task
    return recovery.hint(
        t.name,
        t.state,
        t.extra,
        t.checkpoint,
        plan_approved=lambda: snap.active_approval("plan") is not None,
        plan_shown=lambda: current_presentation(snap, "plan") is not None,
    )
