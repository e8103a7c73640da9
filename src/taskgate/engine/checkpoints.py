"""The two human checkpoints: presentations and approvals bound to what was shown (RULES §9)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from taskgate.engine.core import Engine, current_state
from taskgate.errors import Refused, UsageError
from taskgate.fsutil import read_text
from taskgate.git import repo as gitrepo
from taskgate.git.cmd import git
from taskgate.protocol import guards
from taskgate.protocol.states import State
from taskgate.protocol.violations import Violation
from taskgate.store.base import Tx
from taskgate.store.records import ApprovalRow, PresentationRow, TaskSnapshot

KINDS = ("plan", "changes")


@dataclass(frozen=True)
class Presentation:
    """What `present` showed: the kind, the bound hash/SHA and the text for the person."""

    task: str
    kind: str
    bound_to: str
    at: str
    text: str
    details: dict[str, Any] = field(default_factory=dict)


def _kind_for(state: State) -> str:
    if state is State.SYNTHESIS:
        return "plan"
    if state is State.AWAITING_USER_APPROVAL:
        return "changes"
    raise Refused(
        f"nothing to present in {state}",
        [Violation("R-CKP-01", "checkpoints exist only at SYNTHESIS and AWAITING_USER_APPROVAL")],
    )


def present(engine: Engine, task: str) -> Presentation:
    """`taskgate present T`: show the plan or the change and record what was shown, and when."""

    def body(tx: Tx, snap: TaskSnapshot) -> Presentation:
        state = current_state(snap.task)
        kind = _kind_for(state)
        now = engine.now()
        if kind == "plan":
            text = read_text(engine.ws.task_md(task))
            section = guards.plan_section(text) if text else None
            bound = guards.plan_hash(text)
            if text is None or section is None or bound is None:
                raise Refused(
                    "no implementation plan to present",
                    [Violation("R-DOC-10", "task.md has no '## Implementation Plan' section")],
                    hint=f"write the plan into {engine.ws.task_md(task)}",
                )
            missing = guards.missing_plan_components(text)
            if missing:
                raise Refused(
                    "the plan is incomplete",
                    [Violation("R-DOC-11", f"plan lacks: {', '.join(missing)}")],
                    hint="add the missing plan components to task.md, then present again",
                )
            body_text = section.strip() + (
                f"\n\nFull plan: {engine.ws.task_md(task)}\n"
                "Reply 'approved' / 'proceed' to approve, or say what to change."
            )
            details: dict[str, Any] = {"plan_hash": bound}
        else:
            head = gitrepo.head_sha(engine.ws.task_worktree(task)) or ""
            checkpoint = dict(snap.task.checkpoint or {})
            if checkpoint.get("commit_sha") != head:  # R-CKP-13: present the new SHA
                tx.revoke_approvals(task, "changes", now, "task branch moved before approval")
                checkpoint.update({"commit_sha": head, "approved": False})
            checkpoint["presented_at"] = now
            engine.touch(tx, snap, checkpoint=checkpoint)
            snap = tx.snapshot(task) or snap
            bound = head
            details = _change_details(engine, snap, head)
            body_text = _change_text(task, details)
        tx.add_presentation(PresentationRow(task, kind, bound, now))
        engine.event(tx, task, "presentation", {"kind": kind, "bound_to": bound})
        if kind == "plan":
            engine.touch(tx, snap)
        return Presentation(task, kind, bound, now, body_text, details)

    return engine.step(task, body)


def _change_details(engine: Engine, snap: TaskSnapshot, head: str) -> dict[str, Any]:
    t = snap.task
    worktree = engine.ws.task_worktree(t.name)
    stat = git("diff", "--stat", f"{t.base_sha}..{head}", cwd=worktree, check=False).stdout
    latest = snap.validations[-1] if snap.validations else None
    verdicts = {v.agent: v.decision for v in snap.verdicts if v.head_sha == head}
    return {
        "commit_sha": head,
        "branch": t.name,
        "base": t.base_branch,
        "diff_stat": stat.rstrip(),
        "validation": None
        if latest is None
        else {"success": latest.success, "command": latest.command, "head_sha": latest.head_sha},
        "verdicts": verdicts,
    }


def _change_text(task: str, d: dict[str, Any]) -> str:
    lines = [
        f"Change review for '{task}'",
        f"  commit:  {d['commit_sha']}",
        f"  branch:  {d['branch']} (into {d['base']})",
    ]
    v = d["validation"]
    if v:
        lines.append(f"  build:   {'PASSED' if v['success'] else 'FAILED'} ({v['command']})")
    for agent, decision in sorted(d["verdicts"].items()):
        lines.append(f"  review:  {agent}: {decision}")
    if d["diff_stat"]:
        lines += ["", d["diff_stat"]]
    lines += ["", "Reply 'approved' to merge, or say what to change."]
    return "\n".join(lines)


def approve(
    engine: Engine, task: str, kind: str, *, provenance: str, message: str = ""
) -> ApprovalRow:
    """`taskgate approve T plan|changes`: a human approval bound to the presented artifact."""
    if kind not in KINDS:
        raise UsageError(f"unknown approval kind {kind!r}", hint="use 'plan' or 'changes'")

    def body(tx: Tx, snap: TaskSnapshot) -> ApprovalRow:
        state = current_state(snap.task)
        expected = _kind_for(state)
        if expected != kind:
            raise Refused(
                f"the task waits for {expected} approval, not {kind}",
                [Violation("R-CKP-01", f"state {state}")],
                hint=f"taskgate approve {task} {expected}",
            )
        shown = snap.latest_presentation(kind)
        if shown is None:  # R-CKP-03 / R-CKP-04: nothing presented, nothing to approve
            raise Refused(
                f"the {kind} has not been presented",
                [Violation("R-CKP-03", "approval needs a recorded presentation first")],
                hint=f"run 'taskgate present {task}' and show it to the user",
            )
        if kind == "plan":
            current = guards.plan_hash(read_text(engine.ws.task_md(task)))
            rule = "R-CKP-15"
        else:
            current = gitrepo.head_sha(engine.ws.task_worktree(task))
            rule = "R-CKP-13"
            if (snap.task.checkpoint or {}).get("commit_sha") != current:
                shown = None
        if shown is None or current != shown.bound_to:
            raise Refused(
                f"the {kind} changed after it was presented",
                [Violation(rule, "approval must be for exactly what the user saw")],
                hint=f"run 'taskgate present {task}' again and ask the user",
            )
        now = engine.now()
        digest = hashlib.sha256(message.encode()).hexdigest() if message else ""
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

    return engine.step(task, body)
