"""Guarded transitions and classification: the heart of the protocol's enforcement."""

from __future__ import annotations

from collections.abc import Sequence

from taskgate import failpoints
from taskgate.dataclass_lite import dataclass
from taskgate.engine.core import Engine, current_state
from taskgate.engine.facts import gather, task_path
from taskgate.errors import Refused, UsageError
from taskgate.fsutil import atomic_write
from taskgate.git import repo as gitrepo
from taskgate.protocol import transitions
from taskgate.protocol.states import RiskLevel, State
from taskgate.protocol.violations import Violation
from taskgate.store.base import Tx
from taskgate.store.records import AgentRow, TaskSnapshot, TransitionRow

TYPE_CHECKING = False  # typing stays unimported on the command path (issue 18)
if TYPE_CHECKING:
    from typing import Any

_PHASES = (State.REQUIREMENTS, State.IMPLEMENTATION, State.REVIEW)  # R-AST-19


@dataclass(frozen=True)
class TransitionResult:
    """A committed transition."""

    task: str
    source: str
    target: str
    at: str


def apply_transition(
    engine: Engine,
    tx: Tx,
    snap: TaskSnapshot,
    target: State,
    *,
    reason: str = "",
    evidence: dict[str, Any] | None = None,
    pushed: dict[str, Any] | None = None,
    **changes: Any,
) -> TransitionResult:
    """Write one transition and its side effects in the caller's transaction (R-TRN-04).

    `pushed` is push_task_branch's record when the caller already pushed T for the change
    checkpoint outside the transaction (as `transition` does).
    """
    t = snap.task
    now = engine.now()
    source = current_state(t)
    tx.add_transition(
        TransitionRow(t.name, len(snap.transitions), source.value, target.value, now, reason,
                      evidence or {})
    )  # fmt: skip
    if target in _PHASES:  # R-AST-19, C-69: a COMPLETE from an earlier phase never counts
        for name in t.required_agents:
            row = snap.agent(name) or AgentRow(t.name, name)
            tx.put_agent(
                AgentRow(
                    **{
                        **row.__dict__,
                        "status": None,
                        "phase": target.value,
                        "work_remaining": False,
                        "message": "",
                        "updated_at": now,
                        "retry_count": 0,
                        "invoked_at": None,
                    }
                )
            )
    if target is State.SYNTHESIS:  # R-TRN-24, C-46: re-entering SYNTHESIS needs re-approval
        tx.revoke_approvals(t.name, "plan", now, f"re-entered SYNTHESIS from {source}")
    if source is State.AWAITING_USER_APPROVAL and target is not State.COMPLETE:  # R-TRN-25
        tx.revoke_approvals(t.name, "changes", now, f"left AWAITING_USER_APPROVAL: {reason}")
        changes.setdefault("checkpoint", None)
    if target is State.AWAITING_USER_APPROVAL:  # R-CKP-10 (D-CKP-3)
        if pushed is None:  # step 1 (R-WTB-07); transition() pushes before its transaction
            from taskgate.engine.checkpoint_push import push_task_branch

            pushed = push_task_branch(engine, t.name)
        head = gitrepo.head_sha(engine.ws.task_worktree(t.name)) or ""
        if pushed.get("pushed_sha", head) != head:
            raise Refused(
                f"'{t.name}' moved while it was being pushed ({pushed['pushed_sha'][:12]} "
                f"pushed, HEAD is now {head[:12]})",
                [Violation("R-WTB-07", "the task branch is pushed before the change review")],
                hint=f"repeat 'taskgate transition {t.name} AWAITING_USER_APPROVAL'",
            )
        changes.setdefault(
            "checkpoint",
            {
                "type": "USER_APPROVAL_POST_REVIEW",
                "commit_sha": head,
                "presented_at": None,
                "approved": False,
                **pushed,
            },
        )
    if target is State.CLEANUP:  # R-CLN-02, R-LCK-23, C-31
        changes.setdefault("cleanup_timestamp", now)
        changes.setdefault("lock_released_at", now)
    engine.touch(tx, snap, state=target.value, **changes)
    engine.event(
        tx,
        t.name,
        "transition",
        {"from": source.value, "to": target.value, "reason": reason}
        | ({"evidence": evidence} if evidence else {}),
    )
    return TransitionResult(t.name, source.value, target.value, now)


def refuse_if(violations: Sequence[Violation], what: str) -> None:
    """Raise Refused (exit 1) listing the violations, when there are any (R-TRN-08)."""
    if violations:
        first = violations[0]
        raise Refused(f"{what} refused", violations, hint=first.hint)


def refuse_while_pending(snap: TaskSnapshot) -> None:
    """A journaled git step still in flight is finished before the state moves (issue 8).

    Otherwise a half-made worktree passes the worktree gates, and classify would overwrite the
    interrupted step's journal entry (found by tests/test_torture.py).
    """
    op = (snap.task.pending or {}).get("op")
    if op:
        name = snap.task.name
        raise Refused(
            f"the journaled step {op!r} of '{name}' was interrupted and is not finished",
            [Violation("R-REC-02", "an interrupted session resumes its step first (D-REC-1)")],
            hint=f"run 'taskgate recover {name} --repair' (or re-run the interrupted command)",
        )


def transition(
    engine: Engine, task: str, target_text: str, *, reason: str = "", feedback: bool = True
) -> TransitionResult:
    """`taskgate transition T STATE`: the guarded move; nothing changes when refused.

    A backward move's reason is feedback for the agents' next prompts (issue 17), unless the
    caller (`run`) already recorded richer feedback for the same move (`feedback=False`).
    """
    try:
        target = State.parse(target_text)
    except ValueError as exc:
        raise UsageError(str(exc), hint="see 'taskgate transition --help'") from None

    def checked(snap: TaskSnapshot) -> None:
        refuse_while_pending(snap)
        facts = gather(engine, snap)
        refuse_if(transitions.check(facts, target, reason), f"{facts.state} -> {target}")

    pushed = None
    if target is State.AWAITING_USER_APPROVAL:
        # R-CKP-10 step 1 before the write transaction: a slow or hanging remote must not hold
        # the store's write lock, which every other taskgate process and hook waits on. The
        # guards run first, so a refused move pushes nothing; the transaction checks again.
        snap = engine.require_snapshot(task)
        engine.require_owner(snap.task)
        checked(snap)
        from taskgate.engine.checkpoint_push import push_task_branch  # only for this move

        pushed = push_task_branch(engine, task)

    def body(tx: Tx, snap: TaskSnapshot) -> TransitionResult:
        checked(snap)
        changes: dict[str, Any] = {}
        row = transitions.lookup(current_state(snap.task), target)
        if feedback and row is not None and row.backward and reason.strip():
            entry = {
                "at": engine.now(),
                "kind": "transition",
                "text": reason.strip(),
                "agents": [],
                "from_state": snap.task.state,
                "to_state": target.value,
            }
            changes["extra"] = {
                **snap.task.extra,
                "feedback": [*(snap.task.extra.get("feedback") or []), entry],
            }
        evidence = None
        if target is State.VALIDATION:  # commits after this one are a person's fixes (VALIDATION)
            evidence = {"head": gitrepo.head_sha(engine.ws.task_worktree(task)) or ""}
        return apply_transition(
            engine, tx, snap, target, reason=reason, pushed=pushed, evidence=evidence, **changes
        )  # fmt: skip

    return engine.step(task, body)


def _skeleton(task: str, title: str, purpose: str, scope: str, agents: Sequence[str]) -> str:
    """The first task.md (R-DOC-01, R-DOC-02): the 3 headings and one placeholder per agent."""
    lines = [
        f"# {task}: {title}",
        "",
        "## Task Objective",
        "",
        purpose or "(to be written)",
        "",
        "## Scope Definition",
        "",
        scope or "(to be written)",
        "",
        "## Stakeholder Agent Reports",
        "",
    ]
    for agent in agents:
        lines += [f"### {agent}", "", f"_pending: {task}-{agent}-requirements.md_", ""]
    return "\n".join(lines)


def classify_task(
    engine: Engine,
    task: str,
    *,
    files: Sequence[str] | None = None,
    risk_level: str | None = None,
    force_full: bool = False,
) -> dict[str, Any]:
    """`taskgate classify T`: risk, agents, variant → CLASSIFIED, then agent worktrees + task.md."""
    from taskgate.protocol.risk import RiskConfigError, classify
    from taskgate.protocol.risk_config import parse_risk_config

    override = None
    if risk_level:
        try:
            override = RiskLevel.parse(risk_level)
        except ValueError as exc:
            raise UsageError(str(exc)) from None  # R-RSK-11: no classification on bad input
    try:
        risk_config = parse_risk_config(engine.ws.config.risk, engine.ws.config.text)
    except RiskConfigError as exc:
        raise UsageError(str(exc), hint="fix the [risk] table in taskgate.toml") from None
    entry = engine.todo().get(task)
    paths = list(files) if files else list(entry.files if entry else ())
    text = entry.text() if entry else ""
    if override is None and not force_full and entry is not None and entry.risk is not None:
        override = entry.risk  # the todo.md `Risk:` field is a human's explicit override
    result = classify(
        paths, text, config=risk_config, risk_override=override, force_full_protocol=force_full
    )
    record = result.to_json()
    record["explanation"] = result.explain()
    current = engine.require_snapshot(task)
    if (current.task.pending or {}).get("op") == "create_agent_worktrees":
        finish_classification(engine, task)  # resume an interrupted classification
        return dict(current.task.classification)
    # Occupied paths and foreign branches refuse before the state moves (nothing changes);
    # read under the lock that serialises worktree registrations, as ensure_worktrees does.
    with gitrepo.repo_lock(engine.ws.common_dir):
        gitrepo.plan_worktrees(
            engine.ws.repo,
            [
                gitrepo.WorktreeSpec(engine.ws.agent_worktree(task, a), f"{task}-{a}", task)
                for a in result.agents
            ],
        )

    def body(tx: Tx, snap: TaskSnapshot) -> None:
        refuse_while_pending(snap)
        facts = gather(engine, snap)
        refuse_if(transitions.check(facts, State.CLASSIFIED), "classify")
        agents = list(result.agents)
        for name in agents:
            tx.put_agent(AgentRow(task, name, initial=True, updated_at=engine.now()))
        engine.event(tx, task, "classification", record)  # R-RSK-13
        apply_transition(
            engine,
            tx,
            snap,
            State.CLASSIFIED,
            evidence={"classification_reasoning": record},  # R-RSK-14
            risk_level=result.risk_level.value,
            change_type=result.change_type.value,
            required_agents=tuple(agents),
            classification=record,
            pending={"op": "create_agent_worktrees"},
        )

    engine.step(task, body)
    failpoints.hit("classify:after-transition")
    finish_classification(engine, task)
    return record


def finish_classification(engine: Engine, task: str) -> None:
    """The journaled CLASSIFIED work (R-WTB-03, R-DOC-01): idempotent, resumable after a crash."""
    snap = engine.require_snapshot(task)
    t = snap.task
    if not t.pending or t.pending.get("op") != "create_agent_worktrees":
        return
    specs = [
        gitrepo.WorktreeSpec(engine.ws.agent_worktree(task, agent), f"{task}-{agent}", task)
        for agent in t.required_agents
    ]  # registered under the repo lock, checked out in parallel
    gitrepo.ensure_worktrees(engine.ws.repo, engine.ws.common_dir, specs)
    failpoints.hit("classify:after-worktrees")
    from taskgate.engine.worktree_setup import prepare  # issue 21: .env, links, setup, ports

    prepare(engine, task, t.required_agents, task_worktree=True,
            retry=f"taskgate classify {task}")  # fmt: skip
    task_md = engine.ws.task_md(task)
    if not task_md.exists():
        entry = engine.todo().get(task)
        atomic_write(
            task_md,
            _skeleton(
                task,
                entry.title if entry else task,
                entry.purpose if entry else "",
                "\n".join(
                    line
                    for line in (
                        entry.scope if entry else "",
                        f"Components: {entry.components}" if entry and entry.components else "",
                        f"Files: {', '.join(entry.files)}" if entry and entry.files else "",
                    )
                    if line
                ),
                t.required_agents,
            ),
        )

    def done(tx: Tx, snap: TaskSnapshot) -> None:
        engine.touch(tx, snap, pending=None)
        engine.event(tx, task, "agent_worktrees_created", {"agents": list(t.required_agents)})

    engine.step(task, done)


def allowed_next(engine: Engine, snap: TaskSnapshot) -> list[dict[str, Any]]:
    """For `status`: each possible transition with whether its guard passes now."""
    return [
        {
            "to": row.target.value,
            "row": row.row,
            "backward": row.backward,
            "ready": not blocked,
            "blocked_by": [v.to_json() for v in blocked],
        }
        for row, blocked in transitions.possible(gather(engine, snap))
    ]


__all__ = [
    "TransitionResult",
    "allowed_next",
    "apply_transition",
    "classify_task",
    "finish_classification",
    "refuse_if",
    "task_path",
    "transition",
]
