"""The spec workflow state: typed model, integrity check (R-SPC-14/15/18) and atomic save.

`specs/NNN-name/.workflow/state.json` is the truth; `index.md` next to it is rendered from it
after every save and never read back (DESIGN.md State).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from taskgate.engine.clock import iso, system_clock
from taskgate.errors import Corrupted
from taskgate.fsutil import atomic_write

# D-SPC-4, verbatim order.
LOOP_STATUSES = (
    "not_started",
    "scaffolding",
    "spec_writing",
    "validating",
    "clarifying",
    "completed",
    "terminated",
)
FINAL_STATUSES = frozenset({"completed", "terminated"})
MAX_ITERATIONS = 10  # R-SPC-14: 1 <= current_iteration <= 10
MAX_STALE = 3  # R-SPC-14: 0 <= stale_count <= 3; escalation at 3
STALE_WARNING = 2  # a gap seen for 2 iterations without being resolved is flagged
MAX_QUESTIONS = 3  # A5: at most 3 clarification questions per iteration
SEVERITIES = ("critical", "important", "minor")
BLOCKING = frozenset({"critical", "important"})  # these keep loop B running
GAP_STATUSES = ("open", "clarifying", "resolved", "deferred", "accepted")
TERMINATION_REASONS = (
    "success",
    "max_iterations",
    "stale_accepted",
    "manual_edit",
    "accepted",
    "aborted",
)
# Reasons after which phase C writes the report and the spec is usable (status completed);
# the others end the workflow as terminated without phase C.
COMPLETING_REASONS = frozenset({"success", "max_iterations", "stale_accepted", "accepted"})
DECISIONS = {
    "stale": ("retry", "accept", "edit"),  # escalation of a gap stale for 3 iterations
    "no_progress": ("retry", "accept", "abort"),  # an iteration that resolved nothing
}

WORKFLOW_DIR = ".workflow"
STATE_NAME = "state.json"
INDEX_NAME = "index.md"
SPEC_NAME = "spec.md"
CHECKLIST_PATH = "checklists/requirements.md"
REPORT_NAME = "quality-report.md"
FEATURE_ID_RE = re.compile(r"(\d{3})-([a-z0-9][a-z0-9-]{0,59})")
STATE_VERSION = 1


@dataclass
class Gap:
    """A gap the validator found, with its place in the priority queue."""

    id: str  # G-001
    key: str  # the validator's stable identity for the gap (matches it across iterations)
    severity: str
    summary: str
    section: str = ""
    status: str = "open"
    first_seen: int = 1
    since: int = 1  # iteration the staleness clock started (reset by "retry")
    resolution: str = ""

    @property
    def blocking(self) -> bool:
        """Critical or important, and neither resolved nor set aside."""
        return self.severity in BLOCKING and self.status in ("open", "clarifying")

    def staleness(self, iteration: int) -> int:
        """Iterations this gap has survived since its staleness clock started."""
        return max(0, iteration - self.since)


@dataclass
class Question:
    """A clarification question (id C{iteration}.{n}) covering one or more gaps."""

    id: str
    summary: str
    text: str
    gaps: list[str]
    status: str = "awaiting_answer"


@dataclass
class HistoryEntry:
    """One row of the Gap Resolution History."""

    gap: str
    iteration: int
    action: str
    details: str = ""


@dataclass
class Clarification:
    """An applied answer: the spec writer's input, so that rewriting is idempotent."""

    question: str
    gaps: list[str]
    text: str
    answer: str
    iteration: int


@dataclass
class Decision:
    """A choice the person has to make before the loop goes on (staleness, no progress)."""

    kind: str
    gaps: list[str]
    message: str

    @property
    def options(self) -> tuple[str, ...]:
        """The accepted answers."""
        return DECISIONS[self.kind]


@dataclass
class SpecState:
    """Everything the workflow needs to resume from the exact step (R-SPC-11)."""

    feature_id: str
    description: str
    loop_status: str = "not_started"
    current_iteration: int = 1  # C-57: starts at 1
    last_activity: str = ""
    stale_count: int = 0
    phase: str = "A1"  # the step being run or next to run (informational)
    created: str = ""
    validated_iteration: int = 0  # iteration whose validator result is recorded
    rewrites: int = 0  # A3 -> A2 passes for critical gaps
    checklist_done: bool = False
    resolved_last: list[str] = field(default_factory=list)  # resolved by the last validation
    pending_questions: list[Question] = field(default_factory=list)
    user_answers: dict[str, str] = field(default_factory=dict)
    gaps: list[Gap] = field(default_factory=list)
    history: list[HistoryEntry] = field(default_factory=list)
    clarifications: list[Clarification] = field(default_factory=list)
    pending_decision: Decision | None = None
    termination_reason: str | None = None
    decisions: list[str] = field(default_factory=list)  # the person's choices, in order
    agents: dict[str, Any] = field(default_factory=dict)  # backend name + scenario
    scripted_answers: bool = False  # --demo: answers come from the scenario
    version: int = STATE_VERSION

    def gap(self, gap_id: str) -> Gap | None:
        """The gap with this id, or None."""
        return next((g for g in self.gaps if g.id == gap_id), None)

    def blocking_gaps(self) -> list[Gap]:
        """Open or clarifying critical/important gaps, critical first."""
        return sorted(
            (g for g in self.gaps if g.blocking),
            key=lambda g: (SEVERITIES.index(g.severity), g.first_seen, g.id),
        )

    def log(self, gap: str, action: str, details: str = "") -> None:
        """Append a Gap Resolution History row for the current iteration."""
        self.history.append(HistoryEntry(gap, self.current_iteration, action, details))

    def to_json(self) -> dict[str, Any]:
        """The JSON document stored in state.json."""
        return asdict(self)

    @property
    def slug(self) -> str:
        """The short name after NNN-."""
        return self.feature_id[4:]


def state_from_json(data: Any) -> SpecState:
    """Parse state.json into typed values (validate once, at the edge); ValueError if malformed."""
    if not isinstance(data, dict):
        raise ValueError("state is not a JSON object")
    raw = dict(data)
    try:
        raw["pending_questions"] = [Question(**q) for q in raw.get("pending_questions", [])]
        raw["gaps"] = [Gap(**g) for g in raw.get("gaps", [])]
        raw["history"] = [HistoryEntry(**h) for h in raw.get("history", [])]
        raw["clarifications"] = [Clarification(**c) for c in raw.get("clarifications", [])]
        decision = raw.get("pending_decision")
        raw["pending_decision"] = Decision(**decision) if decision else None
        state = SpecState(**raw)
    except TypeError as exc:  # unknown or missing fields
        raise ValueError(f"state has unexpected fields: {exc}") from None
    _check_types(state)
    return state


def _check_types(state: SpecState) -> None:
    ints = ("current_iteration", "stale_count", "validated_iteration", "rewrites", "version")
    for name in ints:
        value = getattr(state, name)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{name} is not an integer: {value!r}")
    for name in ("feature_id", "description", "loop_status", "last_activity", "phase"):
        if not isinstance(getattr(state, name), str):
            raise ValueError(f"{name} is not a string")
    if not isinstance(state.user_answers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in state.user_answers.items()
    ):
        raise ValueError("user_answers must map question ids to answer strings")
    for gap in state.gaps:
        if gap.severity not in SEVERITIES or gap.status not in GAP_STATUSES:
            raise ValueError(f"gap {gap.id}: bad severity or status")
    if state.pending_decision and state.pending_decision.kind not in DECISIONS:
        raise ValueError(f"unknown pending decision {state.pending_decision.kind!r}")


def validate_state(state: SpecState) -> list[str]:
    """Integrity problems (empty when the state may be resumed): R-SPC-14, R-SPC-15, R-SPC-18."""
    problems: list[str] = []
    if state.loop_status not in LOOP_STATUSES:
        problems.append(f"[R-SPC-14] loop_status {state.loop_status!r} is not one of D-SPC-4")
    if not 1 <= state.current_iteration <= MAX_ITERATIONS:
        problems.append(
            f"[R-SPC-14] current_iteration {state.current_iteration} is outside 1..{MAX_ITERATIONS}"
        )
    if not 0 <= state.stale_count <= MAX_STALE:
        problems.append(f"[R-SPC-14] stale_count {state.stale_count} is outside 0..{MAX_STALE}")
    # C-56: one question may cover several gaps, so compare the sets of gap ids both ways.
    asked = {gap for q in state.pending_questions for gap in q.gaps}
    clarifying = {g.id for g in state.gaps if g.status == "clarifying"}
    if asked - clarifying:
        problems.append(
            "[R-SPC-14] pending questions cover gaps that are not clarifying: "
            + ", ".join(sorted(asked - clarifying))
        )
    if clarifying - asked:
        problems.append(
            "[R-SPC-14] clarifying gaps without a pending question: "
            + ", ".join(sorted(clarifying - asked))
        )
    if state.loop_status == "clarifying" and not (state.pending_questions or state.user_answers):
        problems.append("[R-SPC-18] clarifying with no pending questions and no answers")
    if any(not q.gaps for q in state.pending_questions):
        problems.append("[R-SPC-14] a pending question covers no gap")
    unknown = set(state.user_answers) - {q.id for q in state.pending_questions}
    if unknown:
        problems.append("answers for questions that are not pending: " + ", ".join(sorted(unknown)))
    return problems


@dataclass(frozen=True)
class SpecPaths:
    """Where one feature's files live."""

    root: Path  # specs/NNN-name

    @property
    def workflow(self) -> Path:
        """`.workflow/` (state and its rendered index)."""
        return self.root / WORKFLOW_DIR

    @property
    def state(self) -> Path:
        """The truth: `.workflow/state.json`."""
        return self.workflow / STATE_NAME

    @property
    def index(self) -> Path:
        """The view: `.workflow/index.md` (D-SPC-3)."""
        return self.workflow / INDEX_NAME

    @property
    def spec(self) -> Path:
        """`spec.md`, written by the spec writer."""
        return self.root / SPEC_NAME

    @property
    def checklist(self) -> Path:
        """`checklists/requirements.md` (A4)."""
        return self.root / CHECKLIST_PATH

    @property
    def report(self) -> Path:
        """`quality-report.md` (phase C)."""
        return self.root / REPORT_NAME


def load_state(paths: SpecPaths) -> SpecState | None:
    """The saved state, None when there is none; Corrupted when it does not parse."""
    try:
        text = paths.state.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise _corrupt(paths, str(exc)) from None
    try:
        return state_from_json(json.loads(text))
    except ValueError as exc:
        raise _corrupt(paths, str(exc)) from None


def _corrupt(paths: SpecPaths, why: str) -> Corrupted:
    feature = paths.root.name
    return Corrupted(
        f"spec workflow {feature}: {paths.state} is unreadable ({why}) (R-SPC-16)",
        hint=f"restore it, or start fresh with 'taskgate spec resume {feature} --fresh' "
        "(deletes all progress, R-SPC-17)",
    )


def save_state(
    paths: SpecPaths,
    state: SpecState,
    *,
    clock: Callable[[], datetime] = system_clock,
    render: Callable[[SpecState], str] | None = None,
) -> SpecState:
    """Write state.json atomically with last_activity set before the write (C-55, R-SPC-12),
    then re-render index.md from it."""
    state.last_activity = iso(clock())
    atomic_write(paths.state, json.dumps(state.to_json(), indent=2, sort_keys=True) + "\n")
    if render is not None:
        atomic_write(paths.index, render(state))
    return state


def copy_state(state: SpecState) -> SpecState:
    """A deep copy (round-trips through JSON, the stored shape)."""
    return state_from_json(json.loads(json.dumps(state.to_json())))
