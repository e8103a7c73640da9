"""Agent status, verdicts, dynamic additions and the partial-completion check (RULES §4, §8)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from taskgate import failpoints
from taskgate.engine.clock import parse_time
from taskgate.engine.core import Engine, current_state
from taskgate.engine.facts import review_round
from taskgate.engine.flow import refuse_if
from taskgate.errors import Refused, UsageError
from taskgate.fsutil import atomic_write, file_size, read_text
from taskgate.git import repo as gitrepo
from taskgate.protocol import taskmd
from taskgate.protocol.agents import UnknownAgentError, canonical_agent, check_agent_addition
from taskgate.protocol.partial import AgentState, PartialReport, detect
from taskgate.protocol.states import AgentStatus, Decision, State
from taskgate.protocol.substance import is_cache_path
from taskgate.protocol.violations import Violation
from taskgate.store.base import Tx
from taskgate.store.records import AgentRow, TaskSnapshot, VerdictRow

_PHASES = {State.REQUIREMENTS, State.IMPLEMENTATION, State.REVIEW}


def _agent_name(name: str) -> str:
    try:
        return canonical_agent(name)  # R-AGT-01, R-AGT-02
    except UnknownAgentError as exc:
        raise UsageError(str(exc), hint=exc.hint) from None


def _required(snap: TaskSnapshot, agent: str) -> AgentRow:
    row = snap.agent(agent)
    if row is None or agent not in snap.task.required_agents:
        raise Refused(
            f"agent '{agent}' is not required for '{snap.task.name}'",
            [Violation("R-WTB-05", f"required agents: {', '.join(snap.task.required_agents)}")],
            hint=f"add it with 'taskgate agent add {snap.task.name} {agent} --why ...'",
        )
    return row


def _status(text: str) -> AgentStatus:
    try:
        return AgentStatus(text.strip().upper())
    except ValueError:
        raise UsageError(
            f"unknown agent status {text!r} (R-AST-02)",
            hint="use WORKING, IN_PROGRESS, COMPLETE, ERROR or BLOCKED",
        ) from None


def _decision(text: str, reason: str) -> Decision:
    try:
        decision = Decision(text.strip().upper())
    except ValueError:
        raise UsageError(
            f"unknown review decision {text!r}", hint="use APPROVED or REJECTED"
        ) from None
    if decision is Decision.REJECTED and not reason.strip():
        raise UsageError("a rejection needs --reason (it is the feedback for the next round)")
    return decision


def set_status(
    engine: Engine,
    task: str,
    agent_text: str,
    status_text: str,
    *,
    message: str = "",
    work_remaining: bool | None = None,
    retry: bool = False,
    no_change: str = "",
) -> AgentRow:
    """`taskgate agent set T A STATUS`: record an agent's status for the current phase.

    `retry=True` marks a re-invocation: retry_count is saved +1 first (R-AST-07, R-AST-08).
    `no_change` (COMPLETE in IMPLEMENTATION) records the agent's explicit "no change needed"
    and why, which the IMPLEMENTATION -> VALIDATION gate accepts instead of a commit (R-TRN-14).
    """
    agent = _agent_name(agent_text)
    status = _status(status_text)

    def body(tx: Tx, snap: TaskSnapshot) -> AgentRow:
        row, extra = _record_status(engine, tx, snap, agent, status, message=message,
                                    work_remaining=work_remaining, retry=retry,
                                    no_change=no_change)  # fmt: skip
        engine.touch(tx, snap, extra=extra)
        return row

    return engine.step(task, body)


def set_working(engine: Engine, task: str, retries: dict[str, bool]) -> list[AgentRow]:
    """`set_status(A, "WORKING", retry=...)` for each agent of a batch (agent -> retry) in ONE
    step, each written as `set_status` writes it (issue 18: a step each was a commit each).
    When the step is refused it wrote nothing, and they are recorded one step each, as before."""

    def body_for(work: dict[str, bool]) -> Callable[[Tx, TaskSnapshot], list[AgentRow]]:
        def body(tx: Tx, snap: TaskSnapshot) -> list[AgentRow]:
            rows, extra = [], dict(snap.task.extra)
            for agent, retry in work.items():
                current = replace(snap, task=replace(snap.task, extra=extra))
                row, extra = _record_status(engine, tx, current, _agent_name(agent),
                                            AgentStatus.WORKING, retry=retry)  # fmt: skip
                rows.append(row)
            engine.touch(tx, snap, extra=extra)
            return rows

        return body

    if len(retries) > 1:
        try:
            return engine.step(task, body_for(retries))
        except (Refused, UsageError):
            pass
    return [engine.step(task, body_for({a: r}))[0] for a, r in retries.items()]


def _record_status(
    engine: Engine,
    tx: Tx,
    snap: TaskSnapshot,
    agent: str,
    status: AgentStatus,
    *,
    message: str = "",
    work_remaining: bool | None = None,
    retry: bool = False,
    no_change: str = "",
    commits: tuple[str, ...] = (),
    uncount: bool = False,
) -> tuple[AgentRow, dict[str, Any]]:
    """The writes of one status record in `tx` (no touch): the new row and the task's extra."""
    task = snap.task.name
    state = current_state(snap.task)
    row = _required(snap, agent)
    if state not in _PHASES:
        raise Refused(
            f"agent status is recorded per phase; {state} is not an agent phase",
            [Violation("R-AST-19", "agents report in REQUIREMENTS, IMPLEMENTATION or REVIEW")],
            hint="move the task to the phase first",
        )
    report = engine.ws.report_path(task, agent)
    if state is State.IMPLEMENTATION and status is AgentStatus.COMPLETE:
        _refuse_left_behind(engine, task, agent)
    if state is State.REQUIREMENTS and status is AgentStatus.COMPLETE:
        problem = taskmd.report_problem(file_size(report))
        if problem:  # R-DOC-05: an empty or missing report is a failure, never "none"
            raise Refused(
                f"{agent} cannot be COMPLETE in REQUIREMENTS: {problem}",
                [Violation("R-DOC-04", f"{report.name}: {problem}")],
                hint=f"write the report to {report} first",
            )
    now = engine.now()
    phase = state.value
    was_running = row.phase == phase and row.status in ("WORKING", "IN_PROGRESS")
    if not was_running:
        from taskgate.engine.invocations import process_record

        engine.event(
            tx,
            task,
            "agent_invoked",
            {
                "agent": agent,
                "mode": phase.lower(),
                "working_dir": str(engine.ws.agent_worktree(task, agent)),
                # `run`'s own invocations name their process: once it is provably gone the
                # next command closes the invocation as interrupted (engine/invocations.py).
                **process_record(engine),
            },
        )
    if status in (AgentStatus.COMPLETE, AgentStatus.ERROR, AgentStatus.BLOCKED):
        engine.event(
            tx,
            task,
            "agent_completed",
            {
                "agent": agent,
                "mode": phase.lower(),
                "status": status.value,
                "report": str(report) if state is State.REQUIREMENTS else None,
                "message": message,
                **({"commits": list(commits)} if commits else {}),
                **({"not_started": True} if uncount else {}),
            },
        )
    remaining = work_remaining if work_remaining is not None else False
    count = row.retry_count + 1 if retry and row.phase == phase else row.retry_count
    new = replace(
        row,
        retry_count=max(0, count - 1) if uncount else count,
        status=status.value,
        phase=phase,
        updated_at=now,
        message=message,
        work_remaining=remaining,
        invoked_at=row.invoked_at if was_running else now,
    )
    tx.put_agent(new)
    extra = dict(snap.task.extra)
    if no_change.strip() and status is AgentStatus.COMPLETE:
        if state is not State.IMPLEMENTATION:
            raise UsageError("--no-change is recorded only for IMPLEMENTATION")
        extra["no_change"] = {**(extra.get("no_change") or {}), agent: no_change.strip()}
        engine.event(tx, task, "no_change", {"agent": agent, "reason": no_change.strip()})
    return new, extra


def _refuse_left_behind(engine: Engine, task: str, agent: str) -> None:
    """R-TRN-14: work left uncommitted or untracked in the agent's worktree never reaches T,
    so an agent with such files is not COMPLETE (tool caches such as __pycache__ aside)."""
    worktree = engine.ws.agent_worktree(task, agent)
    if not gitrepo.is_worktree(worktree):
        return
    left = [p for p in gitrepo.dirty_files(worktree) if not is_cache_path(p)]
    if left:
        raise Refused(
            f"{agent} cannot be COMPLETE: {len(left)} uncommitted or untracked file(s) in its "
            f"worktree: {', '.join(sorted(left)[:5])}",
            [Violation("R-TRN-14", "an agent's work reaches the task branch only as commits")],
            hint=f"commit them in {worktree} with '[agent:{agent}] …', or remove them",
        )


def verdict(
    engine: Engine, task: str, agent_text: str, decision_text: str, *, reason: str = ""
) -> VerdictRow:
    """`taskgate agent verdict T A APPROVED|REJECTED`: bound to the current HEAD and round."""
    agent = _agent_name(agent_text)
    decision = _decision(decision_text, reason)

    def body(tx: Tx, snap: TaskSnapshot) -> VerdictRow:
        row = _record_verdict(engine, tx, snap, agent, decision, reason)
        engine.touch(tx, snap)
        return row

    return engine.step(task, body)


def _record_verdict(
    engine: Engine, tx: Tx, snap: TaskSnapshot, agent: str, decision: Decision, reason: str
) -> VerdictRow:
    """The writes of one review decision in `tx` (no touch)."""
    task = snap.task.name
    if current_state(snap.task) is not State.REVIEW:
        raise Refused(
            "review decisions are recorded only in REVIEW",
            [Violation("R-REV-01", f"task is in {snap.task.state}")],
        )
    _required(snap, agent)
    head = gitrepo.head_sha(engine.ws.task_worktree(task))
    if head is None:
        raise Refused("the task worktree has no HEAD", [], hint="run 'taskgate recover'")
    row = VerdictRow(task, agent, review_round(snap), head, decision.value, reason, engine.now())
    tx.put_verdict(row)  # R-WTB-08: the decision is for the whole task branch at HEAD
    engine.event(
        tx, task, "verdict", {"agent": agent, "decision": decision.value, "head": head,
                              "round": row.round, "reason": reason}
    )  # fmt: skip
    return row


@dataclass(frozen=True)
class Outcome:
    """One invocation's outcome as `finish` records it (see there)."""

    agent: str
    status: str
    message: str = ""
    work_remaining: bool | None = None
    no_change: str = ""
    commits: tuple[str, ...] = ()
    decision: tuple[str, str] | None = None
    extra: dict[str, Any] | None = None
    uncount: bool = False


def finish(
    engine: Engine,
    task: str,
    agent: str,
    status_text: str,
    *,
    message: str = "",
    work_remaining: bool | None = None,
    no_change: str = "",
    commits: tuple[str, ...] = (),
    decision: tuple[str, str] | None = None,
    extra: dict[str, Any] | None = None,
    uncount: bool = False,
) -> AgentRow:
    """An invocation's outcome as ONE step (issue 16): the review decision (`decision` =
    (APPROVED|REJECTED, reason)), the facts it brings (`extra`, audited as `agent_facts`), the
    commits it made and the completion record commit together, so no state has a verdict
    without its invocation finished, or a finished reviewer without its verdict. `uncount`
    takes back the retry saved for an invocation whose program never started."""
    outcome = Outcome(agent, status_text, message, work_remaining, no_change, commits,
                      decision, extra, uncount)  # fmt: skip
    return engine.step(task, _finish_body(engine, task, [outcome]))[0]


def finish_many(engine: Engine, task: str, outcomes: Sequence[Outcome]) -> list[AgentRow]:
    """The outcomes of one batch of invocations (distinct agents) in ONE step, each written as
    `finish` writes it (issue 18: a step each was a commit, an fsync and a render each). When
    the step is refused (an agent left files behind, a report is missing, ...) it wrote
    nothing, and they are recorded one step each, as `finish` does: the others stand and the
    refused one raises exactly as it did alone."""
    if len({o.agent for o in outcomes}) != len(outcomes):
        raise UsageError("one outcome per agent in a batch")
    if len(outcomes) > 1:
        try:
            return engine.step(task, _finish_body(engine, task, outcomes))
        except (Refused, UsageError):
            pass
    return [engine.step(task, _finish_body(engine, task, [o]))[0] for o in outcomes]


def _finish_body(
    engine: Engine, task: str, outcomes: Sequence[Outcome]
) -> Callable[[Tx, TaskSnapshot], list[AgentRow]]:
    parsed = [
        (o, _status(o.status), _decision(*o.decision) if o.decision is not None else None)
        for o in outcomes
    ]

    def body(tx: Tx, snap: TaskSnapshot) -> list[AgentRow]:
        rows = []
        facts = dict(snap.task.extra)
        for o, status, verdict_of in parsed:
            # Each outcome sees the facts the ones before it recorded, as separate steps did.
            current = replace(snap, task=replace(snap.task, extra=facts))
            if verdict_of is not None and o.decision is not None:
                _record_verdict(engine, tx, current, o.agent, verdict_of, o.decision[1])
                failpoints.hit("agent:after-verdict")  # the boundary of two steps before issue 16
            row, facts = _record_status(engine, tx, current, o.agent, status, message=o.message,
                                        work_remaining=o.work_remaining, no_change=o.no_change,
                                        commits=o.commits, uncount=o.uncount)  # fmt: skip
            if o.extra:
                engine.event(tx, task, "agent_facts", {"agent": o.agent, **o.extra})
                facts.update(o.extra)
            rows.append(row)
        engine.touch(tx, snap, extra=facts)
        return rows

    return body


def assign_round(engine: Engine, task: str, work: dict[str, tuple[str, bool]]) -> None:
    """Every agent's status for the next implementation round in ONE step (agent -> (message,
    work_remaining)): a kill never leaves half the team re-delegated (issue 16)."""

    def body(tx: Tx, snap: TaskSnapshot) -> None:
        extra = dict(snap.task.extra)
        for agent, (message, remaining) in work.items():
            _, extra = _record_status(engine, tx, replace(snap, task=replace(snap.task,
                                      extra=extra)), agent, AgentStatus.COMPLETE,
                                      message=message, work_remaining=remaining)  # fmt: skip
        engine.touch(tx, snap, extra=extra)

    engine.step(task, body)


def add_agent(engine: Engine, task: str, agent_text: str, *, why: str) -> AgentRow:
    """`taskgate agent add T A --why ...`: dynamic addition (R-AGT-14..21)."""
    agent = _agent_name(agent_text)
    snap = engine.require_snapshot(task)
    engine.require_owner(snap.task)
    state = current_state(snap.task)
    refuse_if(
        check_agent_addition(
            state=state,
            agent=agent,
            required_agents=snap.task.required_agents,
            justification=why,
        ),
        f"adding {agent}",
    )
    # R-AGT-16: the worktree comes first; if it fails, nothing is recorded.
    with gitrepo.repo_lock(engine.ws.common_dir):
        gitrepo.ensure_worktree(
            engine.ws.repo, engine.ws.agent_worktree(task, agent), f"{task}-{agent}", task
        )
    from taskgate.engine.worktree_setup import prepare  # issue 21: .env, links, setup, ports

    prepare(engine, task, [agent], retry=f"taskgate agent add {task} {agent} --why ...")

    def body(tx: Tx, current: TaskSnapshot) -> AgentRow:
        if current.task.seq != snap.task.seq:
            raise Refused("the task changed while the worktree was created", [],
                          hint="run the command again")  # fmt: skip
        now = engine.now()
        phase = state.value if state in _PHASES else None
        row = AgentRow(
            task,
            agent,
            phase=phase,
            updated_at=now,
            initial=False,
            added_at_state=state.value,
            added_at=now,
            justification=why,
        )
        tx.put_agent(row)
        changes: dict[str, Any] = {"required_agents": (*current.task.required_agents, agent)}
        if state is State.SYNTHESIS:  # R-AGT-19: the plan must be approved again
            tx.revoke_approvals(task, "plan", now, f"agent {agent} added in SYNTHESIS")
        engine.event(
            tx, task, "agent_added", {"agent": agent, "state": state.value, "justification": why}
        )
        engine.touch(tx, current, **changes)
        return row

    added = engine.step(task, body)
    task_md = engine.ws.task_md(task)
    text = read_text(task_md)
    if text is not None:
        atomic_write(task_md, taskmd.add_stakeholder(text, task, agent))
    return added


def check(engine: Engine, task: str) -> PartialReport:
    """`taskgate agent check T`: D-AST-1 detection and the recommended action (R-AST-05)."""
    return partial_report(engine, engine.require_snapshot(task))


def partial_report(engine: Engine, snap: TaskSnapshot) -> PartialReport:
    """D-AST-1 over the required agents' statuses for the current phase (R-AST-19)."""
    phase = snap.task.state
    states = []
    for name in snap.task.required_agents:
        row = snap.agent(name)
        current = row if row is not None and row.phase == phase else None
        updated = None
        if current is not None and current.updated_at:
            try:
                updated = parse_time(current.updated_at)
            except ValueError:
                updated = None  # C-82: an unparseable updated_at is a timeout
        states.append(
            AgentState(
                name,
                current.status if current else None,
                updated,
                current.message if current else "",
                current.retry_count if current else 0,
            )
        )
    cfg = engine.ws.config.protocol
    return detect(
        states,
        engine.clock(),
        timeout_min=cfg.agent_timeout_minutes,
        max_retries=cfg.max_agent_retries,
    )


def reset_retries(engine: Engine, task: str, *, why: str) -> list[str]:
    """A person fixed what made agents fail (configuration, environment): their retry counts
    start again (R-AST-07 counts attempts at one cause). Audited as `retries_reset`."""

    def body(tx: Tx, snap: TaskSnapshot) -> list[str]:
        reset = reset_retry_rows(engine, tx, snap, why=why)
        if reset:
            engine.touch(tx, snap)
        return reset

    return engine.step(task, body)


def reset_retry_rows(engine: Engine, tx: Tx, snap: TaskSnapshot, *, why: str) -> list[str]:
    """The writes of `reset_retries` in `tx` (no touch): the agents whose count restarted."""
    reset = []
    for name in snap.task.required_agents:
        row = snap.agent(name)
        if row is not None and (row.retry_count or row.status in ("ERROR", "BLOCKED")):
            tx.put_agent(replace(row, retry_count=0, status=None, updated_at=engine.now()))
            reset.append(name)
    if reset:
        engine.event(tx, snap.task.name, "retries_reset", {"agents": reset, "why": why})
    return reset
