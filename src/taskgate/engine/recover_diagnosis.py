"""`taskgate recover`'s diagnosis: the RULES §16 decision tree over one task; reads only.

The first matching procedure wins (R-REC-01): a deliberate stop of `run`, P1 (an interrupted
journaled step or a dead owner), P2 (agents not all complete, D-AST-1), P3 (a build failure
in VALIDATION, D-VAL-1); P4's six R-REC-08 checks run in any case, the views compared with
the store as `taskgate audit` compares them (engine/audit_views.py). What cannot be repaired
safely carries the D-REC-3 escalation message. engine/recover.py repairs what this finds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from taskgate.engine.agentops import partial_report
from taskgate.engine.audit import audit_input
from taskgate.engine.audit_views import view_problems
from taskgate.engine.core import Engine, owner_alive
from taskgate.engine.status import recovery_hint
from taskgate.git import repo as gitrepo
from taskgate.protocol import audit_checks as ac
from taskgate.protocol.buildfail import FailureType, classify_failure
from taskgate.protocol.escalation import escalation_message
from taskgate.protocol.states import BUILD_RECOVERY_MAX_ITER, State
from taskgate.store.records import TaskSnapshot

# The command that resumes each journaled step (DESIGN.md: re-running it is idempotent).
RESUME_COMMANDS = {
    "create_task_worktree": "taskgate start {task}",
    "create_agent_worktrees": "taskgate classify {task}",
    "recover_worktrees": "taskgate recover {task} --repair",
    "merge": "taskgate merge {task}",
    "complete": "taskgate complete {task}",
    "cleanup": "taskgate cleanup {task}",
}
# The ones recover resumes itself with --repair; the others it points at.
_RESUMED_HERE = ("create_task_worktree", "create_agent_worktrees", "recover_worktrees")
_AGENT_PHASES = (State.REQUIREMENTS.value, State.IMPLEMENTATION.value, State.REVIEW.value)
_DONE = (State.COMPLETE.value, State.CLEANUP.value)


@dataclass(frozen=True)
class Check:
    """One R-REC-08 detection check."""

    number: int
    name: str
    passed: bool
    detail: str = ""
    repairable: bool = False


@dataclass
class Diagnosis:
    """What the decision tree found for one task (R-REC-01: first matching procedure wins)."""

    task: str
    state: str
    procedure: str = "none"  # "P1" | "P2" | "P3" | "P4" | "none"
    summary: str = "no recovery needed"
    actions: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    escalation: str | None = None
    foreign: bool = False
    repairable: bool = False
    repaired: list[str] = field(default_factory=list)
    attempts: list[str] = field(default_factory=list)
    retry: list[str] = field(default_factory=list)  # P2: agents to re-invoke
    corrupt: bool = False  # some R-REC-08 check failed

    def to_json(self) -> dict[str, Any]:
        """Stable JSON shape."""
        return {
            "task": self.task,
            "state": self.state,
            "procedure": self.procedure,
            "summary": self.summary,
            "actions": self.actions,
            "checks": [c.__dict__ for c in self.checks],
            "repairable": self.repairable,
            "repaired": self.repaired,
            "foreign": self.foreign,
            "corrupt": self.corrupt,
            "escalation": self.escalation,
        }


def store_escalation(task: str, error: str) -> str:
    """R-REC-12: an unreadable store (the lock record) is never repaired automatically."""
    return escalation_message(
        task or "(all tasks)",
        issue=f"the task record cannot be read: {error}",
        state="unknown (the store does not parse)",
        attempts="none: a corrupt lock record is never repaired automatically (R-REC-12)",
        impact="the task's state, lock, approvals and audit trail; branches and worktrees are "
        "untouched in git",
        option1="Delete the task record and restart from scratch (move .taskgate/state.db "
        "aside; pros: clean start; cons: the audit trail and approvals are lost)",
        option2="Reconstruct the record from git history and the views: taskgate recover "
        "--rebuild, each audit chain proven against the head anchored in git (pros: keeps "
        "the record and approvals git proves, the damaged store is kept aside; cons: steps "
        "after the last checkpoint stay unproven in audit)",
    )


# -- detection -----------------------------------------------------------------------------------


def diagnose(engine: Engine, snap: TaskSnapshot, attempts: tuple[str, ...] = ()) -> Diagnosis:
    """Apply the decision tree in order (R-REC-01) to one task; reads only."""
    t = snap.task
    d = Diagnosis(t.name, t.state, attempts=list(attempts))
    d.checks = corruption_checks(engine, snap)
    if t.released and (t.pending or {}).get("op") == "cleanup":
        d.procedure, d.repairable = "P1", True
        d.summary = "cleanup interrupted after entering CLEANUP: branches or worktrees remain"
        d.actions = [f"finish it: taskgate cleanup {t.name} (idempotent; also run/next resume it)"]
        return d
    if t.released:
        # Nothing to repair without an owner: a released task is claimed again first.
        d.summary = (
            "task finished"
            if t.state == State.CLEANUP.value
            else f"the lock was released at {t.lock_released_at} (state kept)"
        )
        d.actions = (
            []
            if t.state == State.CLEANUP.value
            else [f"claim it again with 'taskgate start {t.name}', then recover"]
        )
        d.actions += [f"check {c.number} {c.name}: {c.detail}" for c in d.checks if not c.passed]
        return d
    session_check = next(c for c in d.checks if c.number == 3)
    dead = owner_alive(t, engine.host) is False  # a dead `run` owner is taken over, not foreign
    if not session_check.passed and engine.session_id and not dead:
        # R-REC-10, C-44: another session's task is foreign, never "repaired".
        d.procedure, d.foreign = "P4", True
        d.summary = f"'{t.name}' is owned by {t.session_id}: foreign, select an alternative task"
        d.actions = ["select another task: taskgate next (R-LCK-04, R-REC-10)"]
        return d
    # R-REC-01: the first matching procedure is the one applied. P4's six checks run in any
    # case: P1-P3 act on the record, so a record that is itself corrupt must surface too.
    _ = (
        _stopped(snap, d)
        or _interrupted(engine, snap, d)
        or _partial(engine, snap, d)
        or _build_failure(snap, d)
    )
    _dead_invocations(engine, snap, d)
    _corruption(snap, d)
    return d


def _dead_invocations(engine: Engine, snap: TaskSnapshot, d: Diagnosis) -> None:
    """Issue 16: invocations whose process is provably gone (engine/invocations.py)."""
    from taskgate.engine.invocations import dead_invocations

    dead = dead_invocations(snap, engine.host)
    if not dead:
        return
    names = ", ".join(sorted(dead))
    d.actions.append(
        f"interrupted agent invocation(s) of {names}: the process that ran them "
        "is gone; the next command on the task records them as interrupted"
    )
    if d.procedure == "none":
        d.procedure, d.repairable = "P2", True
        d.summary = f"interrupted agent invocation(s) of {names}"


def _stopped(snap: TaskSnapshot, d: Diagnosis) -> bool:
    """A deliberate stop of `run` (issue 17, engine/stops.py): its cause, not an interruption."""
    from taskgate.engine.stops import explain

    found = None if (snap.task.pending or {}).get("op") else explain(snap)
    if found is None:
        return False
    d.procedure = "stop"
    d.summary, d.actions = found
    if str(snap.task.extra["last_stop"]["cause"]) not in ("post-merge-build", "agent-escaped"):
        # Issue 16: the person dealt with the cause; --repair starts its exhausted counters again.
        d.repairable = True
        d.actions.append(f"once the cause is fixed, 'taskgate recover {snap.task.name} --repair' "
                         "resets the retry and round counters it used up")  # fmt: skip
    return True


def _interrupted(engine: Engine, snap: TaskSnapshot, d: Diagnosis) -> bool:
    """P1: a journaled step in flight, or a long-lived owner that died (R-REC-02..07)."""
    t = snap.task
    op = (t.pending or {}).get("op")
    dead = owner_alive(t, engine.host) is False and not t.released
    if not op and not dead:
        return False
    d.procedure = "P1"
    if op:
        command = RESUME_COMMANDS.get(str(op), f"taskgate {str(op).split('_')[0]} {{task}}")
        d.summary = f"session interrupted during the journaled step {op!r}"
        d.actions = [f"resume it: {command.format(task=t.name)} (idempotent)"]
        d.repairable = op in _RESUMED_HERE
    else:
        d.summary = f"session interrupted: the owner process {t.owner_pid} is gone"
        d.actions = [f"take over with 'taskgate start {t.name}' from a new session"]
    d.actions.append(f"then: {recovery_hint(snap)} (D-REC-1)")
    return True


def _partial(engine: Engine, snap: TaskSnapshot, d: Diagnosis) -> bool:
    """P2 (D-AST-1): agents not all COMPLETE in an agent phase; escalate at 3 retries."""
    t = snap.task
    if t.state not in _AGENT_PHASES or t.released:
        return False
    if t.state == State.REVIEW.value:
        return False  # reviewers answer with verdicts, not status (R-REC-03 via P1's table)
    report = partial_report(engine, snap)
    cfg = engine.ws.config.protocol
    if report.all_complete:
        return False
    d.procedure = "P2"
    d.summary = f"agent partial completion in {t.state}: {report.summary}"
    d.actions = [line.text for line in report.lines] + [report.recommendation]
    exhausted = [line for line in report.lines if line.action == "escalate"]
    if exhausted:  # R-AST-07, R-REC-15 case 1
        names = ", ".join(line.agent for line in exhausted)
        d.escalation = escalation_message(
            t.name,
            issue=f"{names} still failing after {cfg.max_agent_retries} retries (R-AST-07)",
            state=f"{t.state}, owned by {t.session_id}",
            attempts="; ".join(f"{line.agent}: {line.text}" for line in exhausted),
            impact=f"the {t.state.lower()} work of {names}; completed agents keep their work",
            option1=f"Re-invoke {names} once more with more guidance (pros: keeps the plan; "
            "cons: may fail again)",
            option2=f"Return to CLASSIFIED to re-select agents (taskgate transition {t.name} "
            "CLASSIFIED --reason ...; pros: fixes a wrong selection; cons: redoes requirements)",
        )
    d.retry = [line.agent for line in report.lines if line.action == "re-invoke"]
    d.repairable = bool(d.retry)
    return True


def _build_failure(snap: TaskSnapshot, d: Diagnosis) -> bool:
    """P3 (D-VAL-1): the latest build in VALIDATION failed; classify and route it."""
    t = snap.task
    if t.state != State.VALIDATION.value or not snap.validations or snap.validations[-1].success:
        return False
    latest = snap.validations[-1]
    failure = classify_failure(latest.output_tail)
    entered = max((r.index for r in snap.transitions if r.target == t.state), default=-1)
    entered_at = snap.transitions[entered].at if entered >= 0 else ""
    failures = sum(1 for v in snap.validations if not v.success and v.at >= entered_at)
    d.procedure = "P3"
    d.summary = (
        f"build failure in VALIDATION ({failure.type}: {failure.detail}); "
        f"responsible: {failure.responsible}"
    )
    if failure.responsible == "main":
        d.actions = [
            f"the main agent fixes it in the task worktree, then: taskgate validate {t.name}"
        ]
    elif failure.type is not FailureType.UNKNOWN:
        d.actions = [
            f"re-delegate to {failure.responsible}: taskgate transition {t.name} "
            f"IMPLEMENTATION --reason 'build failure: {failure.type}' (C-49)"
        ]
    if failure.type is FailureType.UNKNOWN or failures >= BUILD_RECOVERY_MAX_ITER:
        why = (
            "an unknown build failure (R-VAL-08)"
            if failure.type is FailureType.UNKNOWN
            else f"{failures} failed builds in a row (C-65)"
        )
        d.escalation = escalation_message(
            t.name,
            issue=f"{why}: '{latest.command}' exited {latest.exit_code}",
            state=f"VALIDATION, owned by {t.session_id}, HEAD {latest.head_sha[:12]}",
            attempts=f"{failures} validation run(s) since entering VALIDATION",
            impact="the task branch's implementation; nothing is lost, the build does not pass",
            option1="Investigate the build log together (taskgate status --json shows the tail)",
            option2=f"Re-delegate to an agent (taskgate transition {t.name} IMPLEMENTATION "
            "--reason 'build failure')",
        )
    return True


def corruption_checks(engine: Engine, snap: TaskSnapshot) -> list[Check]:
    """R-REC-08's six checks, with the store as the lock and the views as its rendering."""
    ws, t = engine.ws, snap.task
    views_wrong = view_problems(ws, snap)
    active = not t.released and t.state not in _DONE
    pending = (t.pending or {}).get("op")
    # Worktrees that a journaled step in flight is still creating are P1's, not corruption.
    task_missing = [t.name] if active and pending != "create_task_worktree" and not worktree_usable(
        ws.task_worktree(t.name)) else []  # fmt: skip
    agents_due = active and t.state != State.INIT.value and pending != "create_agent_worktrees"
    agents_missing = [a for a in t.required_agents
                      if agents_due and not worktree_usable(
                          ws.agent_worktree(t.name, a))]  # fmt: skip
    log = ac.check_transitions(audit_input(ws, snap))
    empty = not snap.transitions and t.state != State.INIT.value  # R-REC-09, C-70
    released = f", released at {t.lock_released_at}" if t.released else ""
    return [
        Check(1, "lock exists", True, f"store row at seq {t.seq}{released}"),
        Check(2, "lock record and views are valid", not views_wrong, "; ".join(views_wrong),
              repairable=bool(views_wrong)),
        # A dead long-lived owner is taken over by `start`, so it is not a mismatch.
        Check(3, "session matches", not engine.session_id or t.session_id == engine.session_id
              or owner_alive(t, engine.host) is False,
              f"lock={t.session_id}, current={engine.session_id or '(none)'}"),
        Check(4, "task worktree exists", not task_missing,
              f"{ws.task_worktree(t.name)} missing or half-created" if task_missing else "",
              repairable=_branches_exist(ws.repo, task_missing)),
        Check(5, "agent worktrees exist", not agents_missing,
              f"missing or half-created for {', '.join(agents_missing)}" if agents_missing else "",
              repairable=_branches_exist(ws.repo, [f"{t.name}-{a}" for a in agents_missing])),
        Check(6, "transition_log consistent", not empty and log.passed,
              "transition_log is empty" if empty else "; ".join(f.evidence for f in log.findings)),
    ]  # fmt: skip


def worktree_usable(path: Path) -> bool:
    """A worktree that exists and whose checkout finished (a killed `worktree add` has no index)."""
    return gitrepo.is_worktree(path) and gitrepo.is_populated(path)


def _branches_exist(repo: Path, branches: list[str]) -> bool:
    return bool(branches) and all(gitrepo.branch_exists(repo, b) for b in branches)


def _corruption(snap: TaskSnapshot, d: Diagnosis) -> None:
    """P4: report failed checks; what cannot be repaired safely escalates (R-REC-11/12)."""
    failed = [c for c in d.checks if not c.passed]
    if not failed:
        if d.procedure == "none":
            d.actions = [f"{recovery_hint(snap)} (D-REC-1)"]
        return
    t = snap.task
    d.corrupt = True
    names = "; ".join(f"check {c.number} ({c.name})" for c in failed)
    if d.procedure == "none":
        d.procedure = "P4"
        d.summary = f"state corruption: {names}"
        d.actions = [f"then: {recovery_hint(snap)} (D-REC-1, R-REC-07)"]
    else:
        d.actions.append(f"also P4 state corruption: {names}")
    stuck = [c for c in failed if not c.repairable]
    d.repairable = d.repairable or not stuck
    if stuck:
        d.repairable = False
        d.escalation = escalation_message(
            t.name,
            issue="; ".join(f"{c.name}: {c.detail}" for c in stuck),
            state=f"{t.state}, owned by {t.session_id}"
            + (f", released at {t.lock_released_at}" if t.released else ""),
            attempts="; ".join(d.attempts)
            or "diagnosis only; these cannot be repaired "
            "automatically (a branch is never fabricated, R-REC-11; an inconsistent "
            "transition_log is never rewritten)",
            impact="the task's record or worktrees; committed work on existing branches is safe",
            option1=f"Restore the missing branch or record from git reflog / a backup, then "
            f"run 'taskgate recover {t.name} --repair' again",
            option2=f"A human releases the task (taskgate release {t.name} --force) and it "
            "restarts from INIT",
        )
