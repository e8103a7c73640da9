"""Invoking a task's agents in parallel and recording what they did (RULES §8)."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from taskgate import failpoints
from taskgate.agents import confinement
from taskgate.agents.base import AgentRequest, AgentResult, Mode, ResultStatus, TaskBrief
from taskgate.agents.config import AgentsConfig
from taskgate.agents.invoke import build_request, invoke, not_started
from taskgate.engine import agentops
from taskgate.engine.core import Engine
from taskgate.errors import NeedsHuman
from taskgate.orchestrator import notes
from taskgate.orchestrator.progress import Progress
from taskgate.process import end_sessions_until_done
from taskgate.protocol.escalation import escalation_message
from taskgate.protocol.partial import PartialReport
from taskgate.protocol.states import State
from taskgate.store.records import TaskSnapshot


@dataclass
class AgentPool:
    """Bounded parallel invocation; the store is written from the calling thread only."""

    engine: Engine
    task: str
    brief: TaskBrief
    progress: Progress
    agents: AgentsConfig
    parallel: int = 4

    def invoke_all(
        self, snap: TaskSnapshot, agents: Sequence[str], mode: Mode, *, retry: Sequence[str] = ()
    ) -> dict[str, AgentResult]:
        """Invoke `agents` in parallel (bounded), recording WORKING first and the result after."""
        round_no = (
            int(snap.task.extra.get("impl_round", 1))
            if mode is Mode.IMPLEMENTATION
            else (sum(1 for r in snap.transitions if r.target == State.REVIEW.value) or 1)
        )
        requests = []
        for agent in agents:
            row = snap.agent(agent)
            attempt = (row.retry_count if row else 0) + 1 + (1 if agent in retry else 0)
            since = snap.task.extra.get("feedback_since", "")
            requests.append(
                build_request(
                    self.engine.ws,
                    self.agents,
                    self.brief,
                    agent,
                    mode,
                    team=snap.task.required_agents,
                    round=round_no,
                    attempt=attempt,
                    feedback=notes.feedback_for(snap, agent, since=since),
                    base_ref=snap.task.base_branch,
                )
            )
        self.stop_if_not_startable(requests)  # before anything is recorded: no attempt used
        # WORKING for the whole batch in one step (issue 18; a step each before)
        agentops.set_working(self.engine, self.task, {r.agent: r.agent in retry for r in requests})
        for request in requests:
            agent, attempt = request.agent, request.attempt
            self.progress.timeline.invocations += 1
            self.progress.timeline.retries += 1 if agent in retry else 0
            self.progress.emit(
                "agent",
                self.task,
                f"{agent}: {mode} (attempt {attempt})",
                agent=agent,
                mode=mode.value,
                attempt=attempt,
            )
        self.engine.flush_views()  # the agents (and their hooks) read current views
        with ThreadPoolExecutor(max_workers=max(1, self.parallel)) as pool:
            futures = [pool.submit(_start, request) for request in requests]
            try:
                results = [future.result() for future in futures]
            except KeyboardInterrupt:
                # Ctrl-C reaches this thread only: end the agents now, not at their timeout,
                # including one a worker was still starting. Their rows stay WORKING;
                # `taskgate run` re-invokes them.
                end_sessions_until_done(futures)
                raise
        failpoints.hit("run:after-invoke")  # agents' work done, nothing recorded yet
        pairs = [
            (r.agent, replace(res, meta={**res.meta, "retry_counted": True}) if r.agent in retry
             else res)
            for r, res in zip(requests, results, strict=True)
        ]  # fmt: skip
        confinement.record(self.engine, self.task, mode, pairs)  # how they ran (issue 14)
        return dict(pairs)

    def invoke_one(
        self, snap: TaskSnapshot, agent: str, mode: Mode, *, attempt: int = 1, label: str = ""
    ) -> AgentResult:
        """One invocation outside an agent phase (the plan, a skip-path change): no status."""
        request = build_request(
            self.engine.ws,
            self.agents,
            self.brief,
            agent,
            mode,
            team=snap.task.required_agents,
            attempt=attempt,
            feedback=notes.feedback_for(snap, agent),
            base_ref=snap.task.base_branch,
        )
        if mode is Mode.IMPLEMENTATION:
            self.stop_if_not_startable([request])
        self.progress.timeline.invocations += 1
        self.progress.emit(
            "agent",
            self.task,
            f"{agent}: {label or mode}",
            agent=agent,
            mode=mode.value,
            attempt=attempt,
        )
        self.engine.flush_views()  # the agent (and its hooks) read current views
        result = invoke(request)
        confinement.record(self.engine, self.task, mode, [(agent, result)])  # issue 14
        return result

    def record(self, agent: str, result: AgentResult, *, review: bool = False) -> None:
        """Record one agent's outcome through the engine in ONE step (see `record_all`)."""
        self.record_all([(agent, result)], review=review)

    def record_all(
        self, results: Sequence[tuple[str, AgentResult]], *, review: bool = False
    ) -> None:
        """Record a batch of agents' outcomes through the engine in ONE step (issue 16; one
        step for the batch since issue 18, agentops.finish_many): in REVIEW (`review`) each
        decision and scope concern commits with its completion.

        An agent that wrote outside its worktree is recorded as ERROR and the run stops: the
        stray changes are someone's work, and taskgate never guesses with it (R-WTB-02). The
        agents after it in the batch are not recorded, as when each had its own step.
        """
        batch: list[tuple[str, AgentResult]] = []
        for agent, result in results:
            batch.append((agent, result))
            if _escaped(result):
                break
        if batch:
            agentops.finish_many(
                self.engine, self.task, [_outcome(a, r, review=review) for a, r in batch]
            )
        for agent, result in batch:
            escaped = _escaped(result)
            if escaped:
                why = f"{agent} changed {escaped}"
                notes.record_stop(self.engine, self.task, "agent-escaped", why,
                                  f"git -C {escaped} status")  # fmt: skip
                raise NeedsHuman(
                    escalation_message(
                        self.task,
                        issue=f"{agent} changed {escaped}, outside its own worktree (R-WTB-02)",
                        state=self.engine.require_snapshot(self.task).task.state,
                        attempts="none: the change is left exactly as the agent made it",
                        impact=f"uncommitted changes in {escaped} that no protocol step made",
                        option1=f"Inspect them (git -C {escaped} status), keep or discard "
                        f"them, then taskgate run {self.task}",
                        option2="Fix the agent's configuration so it works only in its worktree",
                    ),
                    hint=f"git -C {escaped} status",
                )
            self.progress.emit(
                "agent-result",
                self.task,
                f"{agent}: {result.status}" + (f" - {result.reason}" if result.reason else ""),
                agent=agent,
                status=result.status.value,
            )

    def run_phase(self, mode: Mode) -> None:
        """Partial-completion handling (RULES §8): re-invoke missing/ERROR/TIMEOUT agents,
        escalate at the retry limit, until every agent is COMPLETE for this phase."""
        while True:
            snap = self.engine.require_snapshot(self.task)  # one read for the check and the batch
            report = agentops.partial_report(self.engine, snap)
            if report.all_complete:
                return
            self.stop_if_exhausted(report)  # writes only when it stops the run
            # `run` owns every invocation it starts; a WORKING agent of an earlier, dead run is
            # not running any more, so it is re-invoked rather than waited for (R-AST-06 note).
            todo = [line.agent for line in report.lines if line.condition != "COMPLETE"]
            retry = [a for a in todo if (row := snap.agent(a)) is not None and row.status]
            results = self.invoke_all(snap, todo, mode, retry=retry)
            self.record_all(list(results.items()))
            self.stop_if_misconfigured(results)

    def stop_if_exhausted(self, report: PartialReport) -> None:
        """R-AST-07 / R-AST-12: an agent at its retry limit, or blocked, stops the run."""
        escalate = [line for line in report.lines if line.action == "escalate"]
        blocked = [line for line in report.lines if line.action == "ask-user"]
        if not escalate and not blocked:
            return
        max_retries = self.engine.ws.config.protocol.max_agent_retries
        snap = self.engine.require_snapshot(self.task)
        names = [line.agent for line in escalate + blocked]
        notes.record_stop(
            self.engine, self.task, "agent-retries" if escalate else "agent-blocked",
            report.recommendation, f"taskgate run {self.task}",
        )  # fmt: skip
        raise NeedsHuman(
            escalation_message(
                self.task,
                issue=report.recommendation
                + ": "
                + "; ".join(line.text for line in escalate + blocked),
                state=snap.task.state,
                attempts=f"{max_retries} re-invocations per agent (R-AST-07)"
                if escalate
                else "none: the agent reported a blocker (R-AST-12)",
                impact=f"{snap.task.state} cannot finish without {', '.join(names)}",
                option1="Clarify the requirements and resume (taskgate run)",
                option2="Return to CLASSIFIED to re-plan the agent set",
            ),
            hint=f"after fixing it: taskgate run {self.task}",
        )

    def stop_if_not_startable(self, requests: Sequence[AgentRequest]) -> None:
        """A worktree a killed git command left mid-way (issue 16) is the person's to resolve:
        the agents are not started, no attempt is recorded, and the run stops saying how."""
        blocked = {r.agent: (r, why) for r in requests if (why := not_started(r))}
        if not blocked:
            return
        issue = "; ".join(f"{a}: {why}" for a, (_, why) in blocked.items())
        notes.record_stop(self.engine, self.task, "agent-worktree", issue,
                          f"taskgate run {self.task}")  # fmt: skip
        first = next(iter(blocked.values()))[0]
        wt, tag = first.worktree, first.commit_tag
        raise NeedsHuman(
            escalation_message(
                self.task,
                issue=f"cannot start {', '.join(blocked)}: {issue}",
                state=self.engine.require_snapshot(self.task).task.state,
                attempts="none: the agents were not started and no retry was used",
                impact=f"{', '.join(blocked)} cannot work until the worktree is usable",
                option1=f"Keep the work: git -C {wt} status, then git -C {wt} commit -m "
                f"'{tag} …' (or finish / abort the merge or rebase), then taskgate run "
                f"{self.task}",
                option2=f"Discard it: git -C {wt} reset --hard (a stale index.lock: check "
                f"that no git runs there, then remove it), then taskgate run {self.task}",
            ),
            hint=f"git -C {wt} status; after fixing it: taskgate run {self.task}",
        )

    def stop_if_misconfigured(self, results: dict[str, AgentResult]) -> None:
        """An agent that cannot even be started is a configuration error: retrying it changes
        nothing, so the person hears of it at the first attempt (issue 17)."""
        broken = {a: r for a, r in results.items() if not r.ok and r.exit_code == 127}
        failed = [r for r in results.values() if not r.ok and r.exit_code not in (None, 0)]
        same = len({r.reason for r in failed}) == 1
        if not broken and len(failed) >= 2 and len(failed) == len(results) and same:
            broken = dict(results)  # every agent crashed the same way: the command, not the work
        if not broken:
            return
        snap = self.engine.require_snapshot(self.task)
        issue = "; ".join(f"{a}: {r.reason}" for a, r in broken.items())
        notes.record_stop(self.engine, self.task, "misconfiguration", issue,
                          f"taskgate run {self.task}")  # fmt: skip
        fix = "Fix [agents] in taskgate.toml (command, PATH)"
        if any(_confined(r) for r in broken.values()):  # found outside, hidden inside
            fix += (
                "; the agents run confined, where /tmp and $HOME are hidden: a program there "
                "(or a version manager's shim, pyenv's ~/.pyenv) needs its directory in "
                "[agents] sandbox_readable (docs/security.md)"
            )
        raise NeedsHuman(
            escalation_message(
                self.task,
                issue=f"agent command not runnable: {issue}",
                state=snap.task.state,
                attempts="one: a missing executable is not retried",
                impact=f"{', '.join(broken)} cannot work on the task",
                option1=f"{fix}, then taskgate run {self.task}",
                option2="Choose another backend for these agents",
            ),
            hint=f"after fixing taskgate.toml: taskgate run {self.task}",
        )


def _start(request: AgentRequest) -> AgentResult:
    """One worker's invocation (a thread of the pool)."""
    failpoints.wait(f"pool:start:{request.mode.value}:{request.agent}")  # tests: still starting
    return invoke(request)


def _confined(result: AgentResult) -> bool:
    """The agent ran in the sandbox (agents/sandbox.py), as its result records."""
    record = result.meta.get("sandbox")
    return isinstance(record, dict) and record.get("mode") == "confined"


def _escaped(result: AgentResult) -> str:
    """The path an agent that failed changed outside its worktree ('' when none)."""
    return "" if result.ok else str(result.meta.get("escaped") or "")


def _outcome(agent: str, result: AgentResult, *, review: bool) -> agentops.Outcome:
    """What `finish` records of one invocation's result."""
    if not result.ok:
        status = "BLOCKED" if result.status is ResultStatus.BLOCKED else "ERROR"
        # An agent whose program could not even be started made no attempt (R-AST-07
        # counts attempts): the retry saved before it is taken back (issue 16).
        uncount = never_ran(result) and bool(result.meta.get("retry_counted"))
        message = (result.reason or result.message)[:500]
        return agentops.Outcome(agent, status, message=message, uncount=uncount)
    decision = extra = None
    if review and result.verdict is not None:
        why = result.reason or result.message or f"{agent} gave no reason"
        decision = (result.verdict.value, why)
        if result.scope is not None:
            extra = {f"scope_{agent}": result.scope.to_json()}
    return agentops.Outcome(
        agent,
        "COMPLETE",
        message=result.message[:500],
        work_remaining=result.work_remaining,
        no_change=result.no_change if not result.commits else "",
        commits=tuple(c.sha for c in result.commits),
        decision=decision,
        extra=extra,
    )


def never_ran(result: AgentResult) -> bool:
    """The agent's program could not be started at all (not found, not executable)."""
    return not result.ok and result.exit_code in (126, 127)
