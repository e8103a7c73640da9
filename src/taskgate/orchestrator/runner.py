"""`taskgate run`: plays the protocol's coordinating "main agent" for one task.

Each loop iteration reads the task's state from the store and performs the work of that state
(R-TRN-20: the state names the phase in progress), so a run stopped anywhere — checkpoint,
crash, Ctrl-C — continues from where it stopped when it is started again. Every move goes
through the engine's guarded services; the orchestrator has no shortcut past a gate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from taskgate import failpoints
from taskgate.agents.base import Mode, TaskBrief
from taskgate.agents.config import AgentsConfig
from taskgate.agents.invoke import brief_from_todo
from taskgate.engine import agentops, checkpoints, flow
from taskgate.engine.core import Engine
from taskgate.errors import NeedsHuman, Refused
from taskgate.orchestrator import notes, planning
from taskgate.orchestrator.approver import Approver, resume_hint
from taskgate.orchestrator.pool import AgentPool
from taskgate.orchestrator.progress import Progress
from taskgate.protocol.escalation import escalation_message
from taskgate.protocol.states import Decision, State
from taskgate.store.records import TaskSnapshot

MAX_MERGE_CONFLICT_ROUNDS = 3
MAX_IMPLEMENTATION_ROUNDS = 10


@dataclass
class Runner:
    """Drives one task from wherever it is to CLEANUP, stopping only where a human decides."""

    engine: Engine
    task: str
    approver: Approver
    progress: Progress
    agents: AgentsConfig
    parallel: int = 4
    _brief: TaskBrief | None = field(default=None, init=False)

    # -- the loop --------------------------------------------------------------------------------

    def run(self) -> str:
        """Run to CLEANUP and return the final state; NeedsHuman at checkpoints and escalations.

        The views of its steps are rendered when it returns or stops, and before an agent
        starts, an anchor is written or the person is asked (Engine.views_deferred; issue 18:
        rendering them after every step was a third of taskgate's own time in the demo)."""
        with self.engine.views_deferred():
            return self._run()

    def _run(self) -> str:
        stop = notes.take_stop(self.engine, self.task)  # resets the budgets its cause used
        if stop is not None:  # the person dealt with the cause: resume with fresh budgets
            self.progress.emit("resume", self.task, f"resuming after {stop.get('cause')}",
                               cause=stop.get("cause"))  # fmt: skip
        for _ in range(200):  # a bound, so a bug can never spin forever
            snap = self.engine.require_snapshot(self.task)
            state = State(snap.task.state)
            self.progress.emit("state", self.task, f"state {state}", state=state.value)
            if state is State.CLEANUP:
                return state.value
            failpoints.hit(f"run:{state.value}")
            handler = getattr(self, f"_on_{state.value.lower()}")
            handler(snap)
        raise NeedsHuman(f"'{self.task}' made no progress in 200 steps", hint="taskgate status")

    # -- helpers ---------------------------------------------------------------------------------

    @property
    def brief(self) -> TaskBrief:
        if self._brief is None:
            entry = self.engine.todo().get(self.task)
            snap = self.engine.require_snapshot(self.task)
            self._brief = (
                brief_from_todo(entry, snap.task.risk_level or "")
                if entry
                else (TaskBrief(name=self.task, risk=snap.task.risk_level or ""))
            )
        return self._brief

    @property
    def pool(self) -> AgentPool:
        """The parallel invoker of this task's agents."""
        return AgentPool(
            self.engine, self.task, self.brief, self.progress, self.agents, self.parallel
        )

    def _move(self, target: State, reason: str = "", *, feedback: bool = True) -> None:
        result = flow.transition(
            self.engine, self.task, target.value, reason=reason, feedback=feedback
        )
        self.progress.emit(
            "transition",
            self.task,
            f"{result.source} -> {result.target}",
            source=result.source,
            target=result.target,
        )

    # -- states ----------------------------------------------------------------------------------

    def _on_init(self, snap: TaskSnapshot) -> None:
        record = flow.classify_task(self.engine, self.task)
        self.progress.emit(
            "classified",
            self.task,
            f"risk {record['risk_level']} ({record['method']}), agents "
            f"{', '.join(record['agents'])}",
            classification=record,
        )

    def _on_classified(self, snap: TaskSnapshot) -> None:
        flow.finish_classification(self.engine, self.task)
        self._move(State.REQUIREMENTS)

    def _on_requirements(self, snap: TaskSnapshot) -> None:
        self.pool.run_phase(Mode.REQUIREMENTS)
        self._move(State.SYNTHESIS)

    def _on_synthesis(self, snap: TaskSnapshot) -> None:
        from taskgate.protocol import taskmd

        if snap.active_approval("plan") is not None:
            self._after_plan_approval(snap)
            return
        planning.missing_reports(self, snap)
        task_md = self.engine.ws.task_md(self.task)
        text = task_md.read_text(encoding="utf-8") if task_md.exists() else ""
        plan_feedback = [
            e
            for e in snap.task.extra.get("feedback") or []
            if e.get("kind") == "plan"
            and e.get("at", "") > snap.task.extra.get("plan_written_at", "")
        ]
        written = None
        if taskmd.plan_section(text) is None or plan_feedback:
            written = self._write_plan(snap)
        shown = checkpoints.present(self.engine, self.task, facts=written)  # one step (issue 18)
        self.engine.flush_views()  # the person may look at them while deciding
        self.progress.finish()  # the prompt gets a clean line
        decision = self.approver.decide(self.task, "plan", shown.text)
        self._apply_decision("plan", decision)

    def _write_plan(self, snap: TaskSnapshot) -> tuple[str, dict[str, Any]]:
        """Have the architect write the plan; the fact to record with its presentation."""
        architect = (
            "architect"
            if "architect" in snap.task.required_agents
            else (snap.task.required_agents[0])
        )
        for attempt in range(self.engine.ws.config.protocol.max_agent_retries + 1):
            result = self.pool.invoke_one(snap, architect, Mode.SYNTHESIS, attempt=attempt + 1)
            if result.ok:
                return "plan_written", {"plan_written_at": self.engine.now()}
            self.progress.emit("agent-result", self.task, f"{architect}: {result.reason}")
        raise self._escalation(
            cause="plan",
            issue=f"the plan could not be written: {result.reason}",
            state="SYNTHESIS",
            attempts="synthesis re-invoked up to the retry limit",
            impact="no plan to approve",
            option1="Write the plan section in task.md yourself, then taskgate run",
            option2="Clarify the task in todo.md",
        )

    def _escalation(self, *, cause: str, hint: str = "", **fields: str) -> NeedsHuman:
        """The D-REC-3 message for the person (R-REC-16), with the cause recorded for
        `taskgate recover`; resuming is `taskgate run T`."""
        message = escalation_message(self.task, **fields)
        notes.record_stop(self.engine, self.task, cause, fields.get("issue", ""),
                          f"taskgate run {self.task}")  # fmt: skip
        return NeedsHuman(message, hint=hint or f"taskgate run {self.task}")

    def _apply_decision(self, kind: str, decision: Any) -> None:
        if decision.action == "stop":
            raise NeedsHuman(
                f"stopped at the {kind} checkpoint of '{self.task}'",
                hint=resume_hint(self.task, kind),
            )
        if decision.action == "approve":
            checkpoints.approve(
                self.engine, self.task, kind, provenance=decision.provenance, message=decision.text
            )
            self.progress.emit("approved", self.task, f"{kind} approved ({decision.provenance})")
            return
        if kind == "plan":  # R-CKP-15: revise, present again, stay in SYNTHESIS
            notes.add_feedback(self.engine, self.task, "plan", decision.text)
            return
        snap = self.engine.require_snapshot(self.task)
        full = State.IMPLEMENTATION.value in [s.value for s in flow.task_path(snap)]
        notes.add_feedback(self.engine, self.task, "changes", decision.text)
        target = State.IMPLEMENTATION if full else State.SYNTHESIS  # R-TRN-23, C-08
        self._move(target, reason=f"User requested changes: {decision.text}", feedback=False)
        notes.reset_round_budget(self.engine, self.task, "the person requested changes")
        if full:
            self._reopen_agents()

    def _reopen_agents(self) -> None:
        """After a backward move into IMPLEMENTATION every agent gets another round."""
        # The round counter already points at the next round (set when a round ends), so a
        # change request starts exactly one new round (issue 17: it used to consume two).
        notes.set_extra(self.engine, self.task, "round_started", feedback_since="")

    def _after_plan_approval(self, snap: TaskSnapshot) -> None:
        path = flow.task_path(snap)
        if State.IMPLEMENTATION in path:
            notes.reset_round_budget(self.engine, self.task, "a new plan was approved")
            self._move(State.IMPLEMENTATION)
            return
        # C-08 skip path: the change is made after plan approval and committed on T; the
        # architect makes it in its worktree and it is merged like an implementation round.
        if not snap.task.extra.get("skip_path_done"):
            # SYNTHESIS is no agent phase (R-AST-19): the invocation is recorded as an audit
            # event only, and its commit reaches T through the normal merge.
            result = self.pool.invoke_one(
                snap, "architect", Mode.IMPLEMENTATION, label="documentation change"
            )
            notes.set_extra(
                self.engine, self.task, "skip_path_invocation", skip_path_result=result.to_json()
            )
            if not result.ok:
                raise self._escalation(
                    cause="misconfiguration" if result.exit_code == 127 else "agent-retries",
                    issue=f"the documentation change failed: {result.reason}",
                    state="SYNTHESIS",
                    attempts="one invocation",
                    impact="nothing changed on the task branch",
                    option1="Fix the agent configuration and resume",
                    option2="Make the change yourself on the task branch",
                )
            self._merge(["architect"])
            notes.set_extra(self.engine, self.task, "skip_path_change", skip_path_done=True)
        if planning.raise_if_code(self):
            return
        self._move(State.AWAITING_USER_APPROVAL)

    def _merge(self, agents: Sequence[str]) -> list[str]:
        """Merge agent branches into T (R-WTB-06); returns the agents whose merge conflicted."""
        from taskgate.engine import merge

        outcome = merge.merge_agents(self.engine, self.task, list(agents))
        merged = [str(m.get("agent")) for m in outcome.merged]
        if merged:
            self.progress.emit("merge", self.task, f"merged {', '.join(merged)} into {self.task}")
        if outcome.conflict is None:
            return []
        files = ", ".join(sorted(outcome.conflict.files))
        self.progress.emit("conflict", self.task, f"{outcome.conflict.agent}: conflict in {files}")
        return [outcome.conflict.agent]

    def _on_implementation(self, snap: TaskSnapshot) -> None:
        report = agentops.partial_report(self.engine, snap)  # `snap` was read just now
        pending = [line.agent for line in report.lines if line.condition != "COMPLETE"]
        remaining = [
            a
            for a in snap.task.required_agents
            if (row := snap.agent(a))
            and row.phase == "IMPLEMENTATION"
            and row.status == "COMPLETE"
            and row.work_remaining
        ]
        if not pending and not remaining:
            conflicts = self._merge(snap.task.required_agents)  # nothing left unmerged
            if not conflicts:
                self._move(State.VALIDATION)
                return
            self._conflicted(conflicts)
            return
        self.pool.stop_if_exhausted(report)  # R-AST-07 holds in IMPLEMENTATION too (issue 16)
        round_no = int(snap.task.extra.get("impl_round", 1))  # nothing was written since
        used = notes.rounds_used(snap)
        if used > MAX_IMPLEMENTATION_ROUNDS:
            raise self._escalation(
                cause="no-progress",
                issue=f"{used - 1} implementation rounds without finishing",
                state="IMPLEMENTATION",
                attempts="every round re-invoked the agents with work left",
                impact="the task does not converge",
                option1="Narrow the scope in todo.md",
                option2="Review the agents' feedback",
            )
        self.progress.timeline.rounds += 1
        self.progress.emit("round", self.task, f"implementation round {round_no}", round=round_no)
        agents = pending + remaining
        retry = [a for a in pending if (row := snap.agent(a)) is not None and row.status]
        results = self.pool.invoke_all(snap, agents, Mode.IMPLEMENTATION, retry=retry)
        ok = [a for a, r in results.items() if r.ok]
        conflicts = self._merge(ok) if ok else []
        self.pool.record_all([(a, r) for a, r in results.items() if a not in conflicts])
        if conflicts:
            self._conflicted(conflicts)
        self.pool.stop_if_misconfigured(results)  # recorded first: no invocation left open
        notes.set_extra(self.engine, self.task, "round_done", impl_round=round_no + 1)

    def _conflicted(self, conflicts: list[str]) -> None:
        """Send the conflicting agents back with feedback; escalate when it keeps happening."""
        if conflicts:  # one step for every conflicting agent (issue 16)
            agentops.assign_round(self.engine, self.task, dict.fromkeys(
                conflicts, ("merge conflict: rebase and resolve", True)))  # fmt: skip
            count = int(self.engine.require_snapshot(self.task).task.extra.get("conflicts", 0)) + 1
            notes.add_feedback(
                self.engine,
                self.task,
                "conflict",
                f"your changes conflicted with {self.task}; rebase onto it and "
                "redo them without overlapping edits",
                agents=tuple(conflicts),
                conflicts=count,
            )
            if count >= MAX_MERGE_CONFLICT_ROUNDS:
                raise self._escalation(
                    cause="merge-conflicts",
                    issue=f"merge conflicts in {count} rounds: {', '.join(conflicts)}",
                    state="IMPLEMENTATION",
                    attempts="agents were rebased and re-invoked",
                    impact="agent work not merged",
                    option1="Resolve the conflict on the agent branches by hand",
                    option2="Re-plan the split of work between agents",
                )

    def _on_validation(self, snap: TaskSnapshot) -> None:
        from taskgate.orchestrator.building import on_validation

        on_validation(self, snap)

    def _on_review(self, snap: TaskSnapshot) -> None:
        head_verdicts = {v.agent for v in snap.verdicts if v.round == self._review_round(snap)}
        todo = [a for a in snap.task.required_agents if a not in head_verdicts]  # R-REV-07
        results = self.pool.invoke_all(snap, todo, Mode.REVIEW) if todo else {}
        self.pool.record_all(list(results.items()), review=True)  # verdicts + completions
        snap = self.engine.require_snapshot(self.task)
        verdicts = {v.agent: v for v in snap.verdicts if v.round == self._review_round(snap)}
        missing = [a for a in snap.task.required_agents if a not in verdicts]
        if missing:
            raise self._escalation(
                cause="review",
                issue=f"no review decision from {', '.join(missing)}",
                state="REVIEW",
                attempts="one review invocation each",
                impact="the change cannot be presented",
                option1="Fix the reviewers' configuration and resume",
                option2="Review by hand: taskgate agent verdict",
            )
        rejected = {a: v for a, v in verdicts.items() if v.decision == Decision.REJECTED}
        if not rejected:
            self._move(State.AWAITING_USER_APPROVAL)
            return
        if self._scope_negotiation(snap, rejected):
            return
        notes.add_feedback(
            self.engine,
            self.task,
            "rejection",
            "\n".join(f"{a}: {v.reason}" for a, v in rejected.items()),
        )
        self._move(
            State.IMPLEMENTATION,
            reason="review rejected by " + ", ".join(sorted(rejected)),
            feedback=False,  # the reviewers' reasons were recorded above
        )
        self._reopen_agents()

    @staticmethod
    def _review_round(snap: TaskSnapshot) -> int:
        return sum(1 for r in snap.transitions if r.target == State.REVIEW.value)

    def _scope_negotiation(self, snap: TaskSnapshot, rejected: dict[str, Any]) -> bool:
        """R-REV-04: effort > 2x scope and a majority of reviewers agreeing → SCOPE_NEGOTIATION."""
        concerns: dict[str, dict[str, Any]] = {}
        for agent in rejected:
            concern = snap.task.extra.get(f"scope_{agent}")
            if isinstance(concern, dict):
                concerns[agent] = concern
        exceeding = {
            a: c
            for a, c in concerns.items()
            if float(c["effort_estimate"]) > 2 * float(c["task_scope"])
        }
        # Consensus: at least half of the required agents see effort beyond 2x the scope.
        if not exceeding or 2 * len(exceeding) < len(snap.task.required_agents):
            return False
        first = next(iter(exceeding.values()))
        notes.set_extra(
            self.engine,
            self.task,
            "scope_negotiation_permitted",
            scope_negotiation={
                "effort_estimate": first["effort_estimate"],
                "task_scope": first["task_scope"],
                "agreeing": sorted(exceeding),
            },
            scope_deferred=[d for c in exceeding.values() for d in c["deferred"]],
        )
        self._move(State.SCOPE_NEGOTIATION, reason="scope concern: effort > 2x task scope")
        return True

    def _on_scope_negotiation(self, snap: TaskSnapshot) -> None:
        from taskgate.orchestrator.deferral import write_deferred_tasks

        deferred = list(snap.task.extra.get("scope_deferred") or [])
        created = write_deferred_tasks(self.engine, self.task, deferred)
        notes.add_feedback(
            self.engine,
            self.task,
            "scope",
            "deferred to new tasks: " + ", ".join(created),
            scope_deferral={"deferred": created, "rationale": "effort > 2x scope"},
        )
        self._move(State.SYNTHESIS, reason="deferral decision recorded (R-REV-05)")

    def _on_awaiting_user_approval(self, snap: TaskSnapshot) -> None:
        if (snap.task.checkpoint or {}).get("approved"):
            self._complete()
            return
        shown = checkpoints.present(self.engine, self.task)
        self.engine.flush_views()  # the person may look at them while deciding
        self.progress.finish()  # the prompt gets a clean line
        decision = self.approver.decide(self.task, "changes", shown.text)
        self._apply_decision("changes", decision)
        if decision.action == "approve":
            self._complete()

    def _complete(self) -> None:
        from taskgate.engine.complete import complete

        result = complete(self.engine, self.task)
        sha = getattr(result, "merged_sha", "") or ""
        if sha:
            self.progress.timeline.commits.append(sha)
        self.progress.emit("complete", self.task, f"merged into main ({sha[:12]})", sha=sha)

    def _on_complete(self, snap: TaskSnapshot) -> None:
        from taskgate.engine.cleanup import cleanup

        try:
            cleanup(self.engine, self.task)
        except (Refused, NeedsHuman) as exc:  # R-CMP-08: the build on main failed, or a loss
            notes.record_stop(self.engine, self.task, "post-merge-build", str(exc),
                              f"taskgate cleanup {self.task}")  # fmt: skip
            raise
        self.progress.emit("cleanup", self.task, "worktrees and branches removed")
