"""Gather the TaskFacts a guard judges, from the store snapshot, the files and git."""

from __future__ import annotations

from pathlib import Path

from taskgate.engine.core import Engine, current_state
from taskgate.fsutil import file_size, read_text
from taskgate.git import repo as gitrepo
from taskgate.git.repo import git, ok  # git.cmd imported on first use (issue 18)
from taskgate.protocol import taskmd
from taskgate.protocol.facts import AgentFacts, Approval, LogEntry, TaskFacts, Validation
from taskgate.protocol.states import AgentStatus, ChangeType, Decision, RiskLevel, State
from taskgate.protocol.workflow import state_path
from taskgate.store.event_log import of_kinds
from taskgate.store.records import TaskSnapshot

# States whose guards look at the task branch HEAD (a git call is only made for these).
_NEEDS_HEAD = {
    State.SYNTHESIS,
    State.VALIDATION,
    State.REVIEW,
    State.AWAITING_USER_APPROVAL,
    State.COMPLETE,
}


def task_path(snap: TaskSnapshot) -> tuple[State, ...]:
    """The workflow path for the task's risk and change type (D-WFV-3)."""
    t = snap.task
    risk = RiskLevel(t.risk_level) if t.risk_level else None
    change = ChangeType(t.change_type) if t.change_type else None
    return state_path(risk, change)


def review_round(snap: TaskSnapshot) -> int:
    """How many times the task has entered REVIEW (decisions belong to one round)."""
    return sum(1 for r in snap.transitions if r.target == State.REVIEW.value)


def _inside(path: Path, root: Path) -> bool:
    try:
        return path.resolve().is_relative_to(root.resolve())
    except OSError:
        return False


def gather(engine: Engine, snap: TaskSnapshot, *, head: bool | None = None) -> TaskFacts:
    """Everything the guards of the task's current state need."""
    ws = engine.ws
    t = snap.task
    state = current_state(t)
    task_wt = ws.task_worktree(t.name)
    need_head = state in _NEEDS_HEAD if head is None else head
    head_sha = gitrepo.head_sha(task_wt) if need_head else None
    phase = state.value
    round_no = review_round(snap)
    agents: dict[str, AgentFacts] = {}
    commits = _agent_commits(engine, snap) if state is State.IMPLEMENTATION else {}
    no_change = t.extra.get("no_change") or {}
    for name in t.required_agents:
        row = snap.agent(name)
        status = None
        if row is not None and row.phase == phase and row.status:
            try:
                status = AgentStatus(row.status)
            except ValueError:
                status = None  # R-AST-02: unknown status counts as incomplete
        decision = None
        for v in snap.verdicts:
            if v.agent == name and v.round == round_no and v.head_sha == head_sha:
                decision = Decision(v.decision)
        agents[name] = AgentFacts(
            name=name,
            worktree_exists=gitrepo.is_worktree(ws.agent_worktree(t.name, name)),
            status=status,
            work_remaining=bool(row and row.phase == phase and row.work_remaining),
            report_bytes=file_size(ws.report_path(t.name, name)),
            decision=decision,
            added_at_state=State(row.added_at_state) if row and row.added_at_state else None,
            unmerged_commits=commits.get(name, (0, 0))[0],
            task_commits=commits.get(name, (0, 0))[1],
            no_change=bool(no_change.get(name)),
        )
    task_md = read_text(ws.task_md(t.name))
    plan = snap.active_approval("plan")
    change = snap.active_approval("changes")
    latest_validation = snap.validations[-1] if snap.validations else None
    entered: dict[State, str] = {}
    for r in snap.transitions:
        entered[State(r.target)] = r.at
    todo = engine.todo() if state is State.INIT else None
    checkpoint = t.checkpoint or {}
    merged = False
    if state is State.AWAITING_USER_APPROVAL and head_sha:
        merged = ok("merge-base", "--is-ancestor", head_sha, t.base_branch, cwd=ws.repo) and bool(
            t.extra.get("merged_sha")
        )
    elif state is State.COMPLETE and t.extra.get("merged_sha"):
        # R-CLN-01: main shows the commit complete merged. A commit made on T since is not a
        # reason to complete again (a circle, issue 16): cleanup names it and keeps it (R-CLN-03).
        recorded = str(t.extra["merged_sha"])
        merged = ok("merge-base", "--is-ancestor", recorded, t.base_branch, cwd=ws.repo)
    check_cwd = engine.ws.config.protocol.check_cwd
    presented = snap.latest_presentation("plan")
    if head_sha and head_sha == t.extra.get("squash_sha"):
        # R-CMP-01 steps 2-3 rewrite T after the approval; engine/complete.py recorded that
        # squash_sha's tree is approved_sha's tree plus only the archival edit (R-CMP-04), so
        # the approval bound to approved_sha (R-CKP-13) holds for it.
        head_sha = str(t.extra.get("approved_sha") or head_sha)
    diff = (
        changed_files(engine, snap, head_sha)
        if head_sha and state in (State.SYNTHESIS, State.REVIEW, State.AWAITING_USER_APPROVAL)
        else None
    )
    return TaskFacts(
        task=t.name,
        session_id=engine.session_id,
        owner=None if t.released else t.session_id,
        state=state,
        path=task_path(snap),
        log=tuple(
            LogEntry(State(r.source), State(r.target), r.at, r.reason) for r in snap.transitions
        ),
        risk_level=RiskLevel(t.risk_level) if t.risk_level else None,
        change_type=ChangeType(t.change_type) if t.change_type else None,
        required_agents=t.required_agents,
        agents=agents,
        in_todo=todo.get(t.name) is not None if todo is not None else True,
        task_worktree_exists=gitrepo.is_worktree(task_wt),
        task_worktree_branch=gitrepo.head_ref(task_wt),
        cwd_in_task_worktree=_inside(engine.cwd, task_wt) if check_cwd else None,
        task_md=task_md,
        plan_hash=taskmd.plan_hash(task_md),
        plan_presented_at=presented.at if presented else None,
        plan_approval=Approval(plan.bound_to, plan.presented_at, plan.approved_at)
        if plan
        else None,
        head_sha=head_sha,
        validation=Validation(
            latest_validation.head_sha,
            latest_validation.success,
            latest_validation.at,
            latest_validation.command,
        )
        if latest_validation
        else None,
        entered_at=entered,
        checkpoint_sha=checkpoint.get("commit_sha"),
        change_approval=Approval(change.bound_to, change.presented_at, change.approved_at)
        if change and checkpoint.get("approved")
        else None,
        archival_committed=bool(t.extra.get("archival_sha")),
        merged_to_main=merged,
        audit_complete_problems=audit_completeness(snap),
        scope_deferral_recorded=bool(t.extra.get("scope_deferral")),
        scope_negotiation_permitted=bool(t.extra.get("scope_negotiation")),
        diff_files=diff,
        noop_approved=bool(t.extra.get("noop_approved")),
        validated_heads=frozenset(v.head_sha for v in snap.validations if v.success),
        change_requests_at=tuple(
            str(e.get("at", ""))
            for e in t.extra.get("feedback") or []
            if isinstance(e, dict) and e.get("kind") == "changes"
        ),
    )


def changed_files(engine: Engine, snap: TaskSnapshot, head: str) -> tuple[str, ...]:
    """The paths the task branch at `head` changes against the commit the task started from."""
    t = snap.task
    base = t.base_sha or f"refs/heads/{t.base_branch}"
    out = git("diff", "--name-only", "-z", f"{base}...{head}", cwd=engine.ws.repo, check=False)
    return tuple(sorted(p for p in out.stdout.split("\0") if p)) if out.ok else ()


def _agent_commits(engine: Engine, snap: TaskSnapshot) -> dict[str, tuple[int, int]]:
    """Per agent: (commits on T-A not in T, commits tagged [agent:A] in T since the base)."""
    t = snap.task
    repo = engine.ws.repo
    base = t.base_sha or f"refs/heads/{t.base_branch}"
    on_t = git("log", "--no-merges", "--format=%s", f"{base}..refs/heads/{t.name}", cwd=repo,
               check=False).stdout.splitlines()  # fmt: skip
    # Commits recorded at merges count too: `complete` squashes T, a rebase may follow (R-CMP-06).
    on_t += [f"[agent:{e.payload.get('agent')}]" for e in of_kinds(snap.events, ("commit",))]
    result: dict[str, tuple[int, int]] = {}
    for name in t.required_agents:
        tag = f"[agent:{name}]"
        unmerged = git("rev-list", "--count", "--no-merges", f"refs/heads/{t.name}-{name}",
                       "--not", f"refs/heads/{t.name}", cwd=repo, check=False)  # fmt: skip
        count = int(unmerged.stdout.strip() or 0) if unmerged.ok else 0
        delivered = sum(1 for line in on_t if line.startswith(tag))
        if t.extra.get("squash_sha"):  # the approved history was squashed: all of it counted
            delivered = max(delivered, 1)
        result[name] = (count, delivered)
    return result


_COMPLETENESS = ("transition", "agent_invoked", "agent_completed", "commit")


def audit_completeness(snap: TaskSnapshot) -> tuple[str, ...]:
    """R-AUD-05: at least one transition, invocation and commit; no invocation still running."""
    events = of_kinds(snap.events, _COMPLETENESS)  # issue 18: not the tool_usage records
    kinds = {e.kind for e in events}
    problems = []
    if "transition" not in kinds:
        problems.append("no state_transitions recorded")
    if "agent_invoked" not in kinds:
        problems.append("no agent_invocations recorded")
    if "commit" not in kinds:
        problems.append("no commits recorded")
    running: set[str] = set()
    for e in events:
        if e.kind == "agent_invoked":
            running.add(str(e.payload.get("agent")))
        elif e.kind == "agent_completed":
            running.discard(str(e.payload.get("agent")))
    if running:
        problems.append(f"agent invocations still running: {', '.join(sorted(running))}")
    return tuple(problems)
