"""The clarification loop (seed 003, RULES §18): phases A1..A5, loop B1..B5, finish C.

Every step starts from the saved state, does its work (agent call, file writes), and ends in
one atomic save (R-SPC-11/12), so a kill -9 anywhere resumes at the step that did not finish.
`recovery.next_step` picks the step from the saved state alone; the failpoints
`spec:<step>` sit after the step's work and before its save, the worst moment for a crash.

Termination (checked in B4 after every validation, in this order):
- no critical/important gap left → `success` (`stale_accepted` if a stale gap was accepted);
- iteration 10 validated with gaps left → `max_iterations`;
- a gap stale for 3 iterations → the person chooses retry, accept (known gap) or edit
  (`manual_edit`); at 2 iterations a warning is logged;
- an iteration that resolved nothing → retry, accept (`accepted`) or abort (`aborted`).
`success`, `max_iterations`, `stale_accepted` and `accepted` run phase C and end `completed`;
`manual_edit` and `aborted` end `terminated` at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from taskgate import failpoints
from taskgate.engine.clock import iso, system_clock
from taskgate.errors import UsageError
from taskgate.fsutil import atomic_write
from taskgate.spec.agents import SpecAgents
from taskgate.spec.index import render_index
from taskgate.spec.recovery import next_step
from taskgate.spec.report import quality_report
from taskgate.spec.state import (
    COMPLETING_REASONS,
    MAX_ITERATIONS,
    MAX_STALE,
    STALE_WARNING,
    Clarification,
    Decision,
    Gap,
    Question,
    SpecPaths,
    SpecState,
    copy_state,
    save_state,
)

A_REWRITES = 1  # A3 sends a spec with critical gaps back to A2 once, then asks the person


class Responder(Protocol):
    """Where answers and decisions come from: a person at a terminal, the CLI, a script."""

    def answers(self, state: SpecState) -> dict[str, str] | None:
        """Answers to every pending question, or None when nobody can answer now."""
        ...

    def decide(self, state: SpecState, decision: Decision) -> str | None:
        """One of `decision.options`, or None when nobody can decide now."""
        ...


@dataclass
class Outcome:
    """Where a run stopped: finished (waiting None) or waiting for "answers" / "decision"."""

    state: SpecState
    waiting: str | None = None
    events: list[str] = field(default_factory=list)


class Workflow:
    """One feature's workflow: its paths, its saved state and its agents."""

    def __init__(
        self,
        paths: SpecPaths,
        state: SpecState,
        agents: SpecAgents,
        *,
        clock: Callable[[], datetime] = system_clock,
        notify: Callable[[str], None] | None = None,
    ) -> None:
        self.paths = paths
        self.state = state
        self.agents = agents
        self.clock = clock
        self.events: list[str] = []
        self._notify = notify

    # --- driver -------------------------------------------------------------------------

    def run(self, responder: Responder) -> Outcome:
        """Run steps until the workflow finishes or needs a person who is not there."""
        steps: dict[str, Callable[[Responder], str | None]] = {
            "A1": self._a1,
            "A2": self._a2,
            "A3": self._a3,
            "A4": self._a4,
            "A5": self._a5,
            "B1": self._b1,
            "B2": self._b2,
            "B3": self._b3,
            "B4": self._b4,
            "C": self._c,
        }
        self._refresh_index()
        while True:
            step = next_step(self.state, spec_exists=self.paths.spec.exists())
            if step is None:
                return Outcome(self.state, None, self.events)
            waiting = steps[step](responder)
            if waiting:
                return Outcome(self.state, waiting, self.events)

    def _refresh_index(self) -> None:
        """index.md is a view of state.json, written right after it: a crash between the two
        leaves it behind the state (found by the crash property test), so render it again."""
        want = render_index(self.state)
        try:
            current = self.paths.index.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            current = None
        if current != want:
            atomic_write(self.paths.index, want)

    def _say(self, text: str) -> None:
        self.events.append(text)
        if self._notify:
            self._notify(text)

    def _save(self, state: SpecState) -> None:
        save_state(self.paths, state, clock=self.clock, render=render_index)
        self.state = state

    def _clarification_input(
        self, items: list[Clarification]
    ) -> list[tuple[Clarification, list[str]]]:
        keys = {g.id: g.key for g in self.state.gaps}
        return [(c, [keys[g] for g in c.gaps if g in keys]) for c in items]

    # --- phase A -------------------------------------------------------------------------

    def _a1(self, _: Responder) -> None:
        """Scaffold: the directories, the state and index.md (scaffolding -> spec_writing)."""
        s = copy_state(self.state)
        s.loop_status, s.phase = "scaffolding", "A1"
        self._save(s)  # an orphan directory gets its state here (C-58)
        self.paths.checklist.parent.mkdir(parents=True, exist_ok=True)
        failpoints.hit("spec:A1")
        s = copy_state(s)
        s.loop_status, s.phase = "spec_writing", "A2"
        self._save(s)
        self._say(f"A1 scaffolded {self.paths.root}")

    def _a2(self, _: Responder) -> None:
        """Write spec.md (idempotent: the same inputs give the same spec; R-SPC-05)."""
        s = copy_state(self.state)
        feedback = [g.summary for g in s.blocking_gaps() if g.severity == "critical"]
        spec = self.agents.write_spec(
            s.feature_id,
            s.description,
            self._clarification_input(s.clarifications),
            feedback if s.rewrites else [],
        )
        atomic_write(self.paths.spec, spec)
        failpoints.hit("spec:A2")
        s.loop_status, s.phase, s.validated_iteration = "validating", "A3", 0
        self._save(s)
        self._say(f"A2 wrote {self.paths.spec.name}")

    def _validate(self, s: SpecState) -> list[str]:
        """Run the validator and merge its findings into the gap queue; returns resolved ids."""
        spec = self.paths.spec.read_text(encoding="utf-8")
        findings = self.agents.validate(s.feature_id, s.description, spec, s.current_iteration)
        it, by_key, resolved = s.current_iteration, {g.key: g for g in s.gaps}, []
        for finding in findings:
            gap = by_key.get(finding.key)
            if gap is None:
                gap = Gap(
                    f"G-{len(s.gaps) + 1:03d}",
                    finding.key,
                    finding.severity,
                    finding.summary,
                    finding.section,
                    first_seen=it,
                    since=it,
                )
                s.gaps.append(gap)
                s.log(gap.id, "found", f"{finding.severity}: {finding.summary}")
            elif gap.status == "resolved":
                gap.status, gap.resolution, gap.since = "open", "", it
                s.log(gap.id, "reopened", finding.summary)
            else:
                gap.severity, gap.summary, gap.section = (
                    finding.severity,
                    finding.summary,
                    finding.section,
                )
        found = {f.key for f in findings}
        for gap in s.gaps:
            if gap.key in found or gap.status not in ("open", "clarifying"):
                continue
            applied = [c for c in s.clarifications if gap.id in c.gaps]
            gap.status = "resolved"
            if applied:
                gap.resolution = f"Applied in iteration {applied[-1].iteration}"
                s.log(gap.id, "resolved", f'Answer: "{applied[-1].answer}"')
            else:
                gap.resolution = f"Resolved in iteration {it}"
                s.log(gap.id, "resolved", "no longer reported by the validator")
            resolved.append(gap.id)
        s.stale_count = min(MAX_STALE, max((g.staleness(it) for g in s.blocking_gaps()), default=0))
        s.validated_iteration, s.resolved_last = it, resolved
        return resolved

    def _a3(self, _: Responder) -> None:
        """Initial validation; critical gaps send the spec back to A2 once."""
        s = copy_state(self.state)
        self._validate(s)
        failpoints.hit("spec:A3")
        critical = [g for g in s.blocking_gaps() if g.severity == "critical"]
        if critical and s.rewrites < A_REWRITES:
            s.rewrites += 1
            s.loop_status, s.phase, s.validated_iteration = "spec_writing", "A2", 0
            self._say(f"A3 found {len(critical)} critical gap(s); back to A2")
        else:
            s.phase = "A4"
            self._say(f"A3 found {len(s.gaps)} gap(s)")
        self._save(s)

    def _a4(self, _: Responder) -> None:
        """The requirements checklist."""
        s = copy_state(self.state)
        spec = self.paths.spec.read_text(encoding="utf-8")
        atomic_write(self.paths.checklist, self.agents.checklist(s.feature_id, spec))
        failpoints.hit("spec:A4")
        s.checklist_done, s.phase = True, "A5"
        self._save(s)
        self._say("A4 wrote checklists/requirements.md")

    def _a5(self, _: Responder) -> None:
        """Classify: questions for the blocking gaps, or phase C when only minor ones are left."""
        s = copy_state(self.state)
        if not s.blocking_gaps():
            self._finish_with(s, "success")
            return
        self._ask_round(s, "spec:A5")

    def _ask_round(self, s: SpecState, point: str) -> None:
        """Group blocking gaps into at most 3 questions C{iteration}.{n}; saved before asking."""
        blocking = s.blocking_gaps()
        drafts = self.agents.classify(
            [
                {
                    "id": g.id,
                    "key": g.key,
                    "severity": g.severity,
                    "summary": g.summary,
                    "section": g.section,
                }
                for g in blocking
            ]
        )
        failpoints.hit(point)
        for n, draft in enumerate(drafts, start=1):
            question = Question(
                f"C{s.current_iteration}.{n}", draft.summary, draft.text, list(draft.gaps)
            )
            s.pending_questions.append(question)
            for gap_id in draft.gaps:
                gap = s.gap(gap_id)
                assert gap is not None  # SpecAgents.classify checked the ids
                gap.status, gap.resolution = "clarifying", f"Pending {question.id}"
                s.log(gap_id, "asked", question.id)
        s.loop_status, s.phase = "clarifying", "B1"
        self._save(s)
        self._say(f"{len(drafts)} question(s) for iteration {s.current_iteration}")

    # --- loop B --------------------------------------------------------------------------

    def _b1(self, responder: Responder) -> str | None:
        """Ask the pending questions; the answers are saved before they are applied (C-54)."""
        answers = responder.answers(self.state)
        if answers is None:
            return "answers"
        s = copy_state(self.state)
        record_answers(s, answers)
        self._save(s)
        failpoints.hit("spec:B1")
        return None

    def _b2(self, _: Responder) -> None:
        """Apply the answers through the spec writer, then start the next iteration."""
        s = copy_state(self.state)
        gaps_by_id = {g.id: g for g in s.gaps}
        for question in s.pending_questions:
            answer = s.user_answers[question.id]
            s.clarifications.append(
                Clarification(
                    question.id, list(question.gaps), question.text, answer, s.current_iteration
                )
            )
            for gap_id in question.gaps:
                s.log(gap_id, "applied", f"{question.id} in iteration {s.current_iteration}")
                gaps_by_id[gap_id].status = "open"  # B3 decides whether it is resolved
                gaps_by_id[gap_id].resolution = ""
        spec = self.agents.write_spec(
            s.feature_id, s.description, self._clarification_input(s.clarifications)
        )
        atomic_write(self.paths.spec, spec)
        failpoints.hit("spec:B2")
        s.pending_questions, s.user_answers = [], {}
        # B4 stops at 10 before asking; the cap only matters for a state repaired at 10.
        s.current_iteration = min(s.current_iteration + 1, MAX_ITERATIONS)
        s.loop_status, s.phase, s.validated_iteration = "validating", "B3", 0
        self._save(s)
        self._say(f"B2 applied the answers; iteration {s.current_iteration}")

    def _b3(self, _: Responder) -> None:
        """Re-validate."""
        s = copy_state(self.state)
        resolved = self._validate(s)
        failpoints.hit("spec:B3")
        s.phase = "B4"
        self._save(s)
        self._say(
            f"B3 iteration {s.current_iteration}: {len(resolved)} gap(s) resolved, "
            f"{len(s.blocking_gaps())} open"
        )

    def _b4(self, responder: Responder) -> str | None:
        """Check termination, staleness and progress; then B5 saves the next questions."""
        s = copy_state(self.state)
        it = s.current_iteration
        if not s.blocking_gaps():
            accepted = any(g.status == "accepted" and g.severity != "minor" for g in s.gaps)
            self._finish_with(s, "stale_accepted" if accepted else "success")
            return None
        if it >= MAX_ITERATIONS:
            self._finish_with(s, "max_iterations")
            return None
        if s.pending_decision is None:
            stale = [g.id for g in s.blocking_gaps() if g.staleness(it) >= MAX_STALE]
            if stale:
                s.pending_decision = Decision(
                    "stale",
                    stale,
                    f"Gap(s) {', '.join(stale)} unresolved for {MAX_STALE} "
                    "iterations: retry, accept as known gap(s), or edit the spec manually?",
                )
                for gap_id in stale:
                    s.log(gap_id, "escalated", f"stale for {MAX_STALE} iterations")
            elif not s.resolved_last:
                s.pending_decision = Decision(
                    "no_progress",
                    [g.id for g in s.blocking_gaps()],
                    f"Iteration {it} resolved no gap: try again, accept the spec as it is, "
                    "or abort?",
                )
            if s.pending_decision is not None:
                s.phase = "B4"
                self._save(s)  # saved before the person is asked (R-SPC-11)
                failpoints.hit("spec:B4")
                s = copy_state(s)
        if s.pending_decision is not None:
            choice = responder.decide(s, s.pending_decision)
            if choice is None:
                return "decision"
            if not self._apply_decision(s, choice):
                return None
        for gap in s.blocking_gaps():
            if gap.staleness(it) == STALE_WARNING:
                s.log(gap.id, "stale_warning", f"unresolved for {STALE_WARNING} iterations")
        self._ask_round(s, "spec:B5")  # B5: save the new questions, then B1 asks them
        return None

    def _apply_decision(self, s: SpecState, choice: str) -> bool:
        """Apply the person's choice; True when the loop goes on to ask questions."""
        decision = s.pending_decision
        assert decision is not None
        if choice not in decision.options:
            raise UsageError(f"decision {choice!r} is not one of {', '.join(decision.options)}")
        s.pending_decision = None
        s.decisions.append(f"{decision.kind}:{choice}")
        for gap_id in decision.gaps:
            s.log(gap_id, f"decision:{choice}", decision.kind)
        it = s.current_iteration
        if choice == "retry":
            for gap_id in decision.gaps if decision.kind == "stale" else ():
                gap = s.gap(gap_id)
                assert gap is not None
                gap.since = it  # the staleness clock starts again
            s.stale_count = min(
                MAX_STALE, max((g.staleness(it) for g in s.blocking_gaps()), default=0)
            )
            return True
        if choice == "accept" and decision.kind == "stale":
            for gap_id in decision.gaps:
                gap = s.gap(gap_id)
                assert gap is not None
                gap.status, gap.resolution = "accepted", "Accepted as known gap"
            s.stale_count = min(
                MAX_STALE, max((g.staleness(it) for g in s.blocking_gaps()), default=0)
            )
            if s.blocking_gaps():
                return True
            self._finish_with(s, "stale_accepted")
            return False
        reason = {"accept": "accepted", "edit": "manual_edit", "abort": "aborted"}[choice]
        self._finish_with(s, reason)
        return False

    def _finish_with(self, s: SpecState, reason: str) -> None:
        """Record the termination reason; completing reasons go on to phase C."""
        s.termination_reason = reason
        s.pending_questions, s.user_answers = [], {}
        if reason in COMPLETING_REASONS:
            s.loop_status, s.phase = "validating", "C"
        else:
            s.loop_status, s.phase = "terminated", "done"
        self._save(s)
        self._say(f"termination: {reason}")

    # --- phase C -------------------------------------------------------------------------

    def _c(self, _: Responder) -> None:
        """Log deferred gaps, refresh the checklist, write the quality report -> completed."""
        s = copy_state(self.state)
        for gap in s.gaps:
            if gap.status not in ("open", "clarifying"):
                continue
            if gap.severity == "minor":
                gap.status, gap.resolution = "deferred", "Deferred (minor)"
                s.log(gap.id, "deferred", gap.summary)
            else:  # max_iterations / accepted: the spec ships with this gap known
                gap.status, gap.resolution = "accepted", "Known gap at termination"
                s.log(gap.id, "known_gap", s.termination_reason or "")
        spec = self.paths.spec.read_text(encoding="utf-8")
        checklist = self.agents.checklist(s.feature_id, spec)
        atomic_write(self.paths.checklist, checklist)
        atomic_write(self.paths.report, quality_report(s, spec, checklist, iso(self.clock())))
        failpoints.hit("spec:C")
        s.loop_status, s.phase, s.stale_count = "completed", "done", 0
        self._save(s)
        self._say(f"C completed: {self.paths.spec}")


def record_answers(s: SpecState, answers: dict[str, str]) -> None:
    """Store answers to every pending question (B1); UsageError names what is missing."""
    pending = {q.id for q in s.pending_questions}
    unknown = sorted(set(answers) - pending)
    missing = sorted(pending - set(answers))
    if unknown or missing:
        parts = ([f"not pending: {', '.join(unknown)}"] if unknown else []) + (
            [f"unanswered: {', '.join(missing)}"] if missing else []
        )
        raise UsageError(
            f"answers must cover exactly the pending questions ({'; '.join(parts)})",
            hint="answer every pending question: --answer ID=TEXT for each",
        )
    s.user_answers = {qid: answers[qid].strip() for qid in sorted(answers)}
    for question in s.pending_questions:
        question.status = "answered"
        for gap_id in question.gaps:
            s.log(gap_id, "answered", f'{question.id}: "{s.user_answers[question.id]}"')
    s.phase = "B2"


def describe(state: SpecState) -> dict[str, Any]:
    """The JSON shape of `spec status`."""
    return {
        "feature_id": state.feature_id,
        "description": state.description,
        "loop_status": state.loop_status,
        "current_iteration": state.current_iteration,
        "max_iterations": MAX_ITERATIONS,
        "stale_count": state.stale_count,
        "last_activity": state.last_activity,
        "phase": state.phase,
        "termination_reason": state.termination_reason,
        "pending_questions": [q.__dict__ for q in state.pending_questions],
        "pending_decision": (
            {
                "kind": state.pending_decision.kind,
                "gaps": state.pending_decision.gaps,
                "message": state.pending_decision.message,
                "options": list(state.pending_decision.options),
            }
            if state.pending_decision
            else None
        ),
        "gaps": [g.__dict__ for g in state.gaps],
        "decisions": state.decisions,
    }
