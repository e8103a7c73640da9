"""Transition guards: pure functions from a TaskFacts snapshot to violations (RULES §1, §7, §9).

Each guard returns an empty list when the transition may proceed. Messages keep the seeds'
failure texts where RULES quotes them, and every violation carries a hint saying what to do.
"""

from __future__ import annotations

from collections.abc import Callable

from taskgate.protocol.facts import TaskFacts
from taskgate.protocol.states import (
    AgentStatus,
    Decision,
    State,
)
from taskgate.protocol.taskmd import missing_sections, report_problem
from taskgate.protocol.violations import Violation

TYPE_CHECKING = False
if TYPE_CHECKING:
    from taskgate.protocol.substance import (
        committed_work,
        doc_only_change,
        substantive_change,
        validated_change,
    )
else:  # protocol/substance.py (with filekinds, re and fnmatch) is loaded by the first guard
    # that looks at the diff: the guards of a move back or of an early phase never do, and
    # loading them was about 1 ms of such a transition (issue 18, fifth pass)

    def committed_work(f):
        from taskgate.protocol.substance import committed_work

        return committed_work(f)

    def doc_only_change(f):
        from taskgate.protocol.substance import doc_only_change

        return doc_only_change(f)

    def substantive_change(f):
        from taskgate.protocol.substance import substantive_change

        return substantive_change(f)

    def validated_change(f):
        from taskgate.protocol.substance import validated_change

        return validated_change(f)


Guard = Callable[[TaskFacts], list[Violation]]

# --- shared checks ---------------------------------------------------------------------------


def ownership(f: TaskFacts) -> list[Violation]:
    """R-LCK-22 / R-TRN-07: a session id is required and must own the task."""
    if not f.session_id:
        return [
            Violation(
                "R-LCK-22",
                "no session id: a task can only be changed by the session that owns it",
                "pass --session ID or set TASKGATE_SESSION",
            )
        ]
    if f.owner != f.session_id:
        return [
            Violation(
                "R-TRN-07",
                f"FATAL: Cannot update lock owned by {f.owner or '(nobody)'}",
                "select another task with 'taskgate next'; only a human may "
                "'taskgate release --force' a foreign lock",
            )
        ]
    return []


def cwd_violation(f: TaskFacts, rule: str, text: str) -> list[Violation]:
    if f.cwd_in_task_worktree is False:
        return [Violation(rule, text, f"cd into the task worktree of '{f.task}' and run it again")]
    return []


def _task_worktree(f: TaskFacts, rule: str) -> list[Violation]:
    if not f.task_worktree_exists:
        return [
            Violation(rule, f"task worktree for '{f.task}' is missing", "run 'taskgate recover'")
        ]
    if f.task_worktree_branch != f.task:
        return [
            Violation(
                "R-WTB-01",
                f"task worktree is on branch {f.task_worktree_branch or '(detached)'}, "
                f"expected {f.task}",
                f"git -C <task worktree> switch {f.task}",
            )
        ]
    return []


def missing_log_pairs(f: TaskFacts, *pairs: tuple[State, State]) -> list[tuple[State, State]]:
    """The (from, to) pairs missing from the log, checked in order (R-TRN-13)."""
    missing: list[tuple[State, State]] = []
    position = 0
    entries = [(e.source, e.target) for e in f.log]
    for pair in pairs:
        try:
            position = entries.index(pair, position) + 1
        except ValueError:
            missing.append(pair)
    return missing


def _plan_approval(f: TaskFacts) -> list[Violation]:
    """Plan approved by a human, after the presentation, for the plan as it is now."""
    approval = f.plan_approval
    if approval is None:
        return [
            Violation(
                "R-CKP-03",
                "ENTRY GUARD FAILED: User plan approval not obtained",
                "present the plan with 'taskgate present' and wait for the user to approve it",
            )
        ]
    problems: list[Violation] = []
    if approval.bound_to != f.plan_hash:
        problems.append(
            Violation(
                "R-CKP-15",
                "the plan changed after it was approved (approval bound to another plan hash)",
                "present the revised plan with 'taskgate present' and ask the user again",
            )
        )
    if approval.approved_at < approval.presented_at:
        problems.append(
            Violation(
                "R-CKP-04",
                "the approval predates the plan presentation",
                "present the plan and ask the user for approval",
            )
        )
    return problems


# --- per-transition guards (referenced from the table in transitions.py) ----------------------


def init_to_classified(f: TaskFacts) -> list[Violation]:
    """R-TRN-09 (C-24): session, ownership, todo.md entry, task worktree on branch T, cwd."""
    problems = ownership(f)
    if not f.in_todo:
        problems.append(
            Violation("R-TRN-09", f"task '{f.task}' is not in todo.md", "add it to todo.md")
        )
    problems += _task_worktree(f, "R-TRN-09")
    problems += cwd_violation(f, "R-TRN-09", "not in the task worktree")
    return problems


def classified_to_requirements(f: TaskFacts) -> list[Violation]:
    """R-TRN-10: risk level, agents, agent worktrees, task.md with its 3 sections, cwd."""
    problems = ownership(f)
    if f.risk_level is None:
        problems.append(
            Violation("R-TRN-10", "risk level not classified", "run 'taskgate classify'")
        )
    if not f.required_agents:
        problems.append(
            Violation("R-TRN-10", "required_agents is empty", "run 'taskgate classify'")
        )
    for name in f.required_agents:  # R-WTB-05: iterate required_agents, never a fixed list
        if not f.agent(name).worktree_exists:
            problems.append(
                Violation(
                    "R-WTB-03",
                    f"agent worktree missing: {name}",
                    "run 'taskgate recover --repair' to recreate it from its branch",
                )
            )
    if f.task_md is None:
        problems.append(
            Violation(
                "R-DOC-01",
                "CRITICAL ERROR: task.md not created by CLASSIFIED state",
                "run 'taskgate classify' again to write the skeleton",
            )
        )
    else:
        for section in missing_sections(f.task_md):
            problems.append(
                Violation(
                    "R-DOC-02",
                    f"task.md missing section: {section}",
                    f"add a '## {section}' heading to task.md",
                )
            )
    problems += cwd_violation(f, "R-TRN-10", "CRITICAL ERROR: Not in task worktree!")
    return problems


def _entry_guards(f: TaskFacts, *, need_plan_text: bool) -> list[Violation]:
    """D-DOC-3 guards 1-6 plus R-TRN-13 (no skipped states) and the plan-hash binding."""
    problems = ownership(f)
    if f.task_md is None:
        return [*problems, Violation("R-DOC-01", "ENTRY GUARD FAILED: task.md not found")]
    if "Stakeholder Agent Reports" in missing_sections(f.task_md):
        problems.append(
            Violation(
                "R-DOC-02",
                "ENTRY GUARD FAILED: task.md missing Stakeholder Agent Reports section",
                "restore the '## Stakeholder Agent Reports' heading",
            )
        )
    missing_reports = [
        a for a in f.required_agents if report_problem(f.agent(a).report_bytes) is not None
    ]
    if missing_reports or not f.required_agents:
        problems.append(
            Violation(
                "R-DOC-09",
                "ENTRY GUARD FAILED: No stakeholder requirements reports found"
                + (f" for: {', '.join(missing_reports)}" if missing_reports else ""),
                "every required agent needs a valid requirements report (C-19)",
            )
        )
    if need_plan_text and f.plan_hash is None:
        problems.append(
            Violation(
                "R-DOC-10",
                "ENTRY GUARD FAILED: task.md missing implementation plans",
                "write a '## Implementation Plan' section in task.md",
            )
        )
    problems += _plan_approval(f)
    missing = missing_log_pairs(
        f,
        (State.INIT, State.CLASSIFIED),
        (State.CLASSIFIED, State.REQUIREMENTS),
        (State.REQUIREMENTS, State.SYNTHESIS),
    )
    problems += [
        Violation("R-TRN-13", f"skipped state: log lacks {a} -> {b}", "run 'taskgate recover'")
        for a, b in missing
    ]
    return problems


def synthesis_to_implementation(f: TaskFacts) -> list[Violation]:
    """R-TRN-12: entry guards 1-6 of D-DOC-3, approval bound to the current plan."""
    return _entry_guards(f, need_plan_text=True)


def synthesis_to_awaiting(f: TaskFacts) -> list[Violation]:
    """C-08 skip path: approved plan, changes committed on T, checkpoint SHA recorded."""
    problems = _entry_guards(f, need_plan_text=True)
    problems += substantive_change(f) + doc_only_change(f)
    if f.head_sha is None:
        problems.append(
            Violation(
                "R-WFV-10",
                "task branch HEAD unknown: commit the changes on the task branch first",
                "git -C <task worktree> commit, then retry",
            )
        )
    return problems


def implementation_to_validation(f: TaskFacts) -> list[Violation]:
    """R-TRN-14 / R-AGT-20 / R-AST-20: every required agent COMPLETE with no work remaining."""
    problems = ownership(f)
    for name in f.required_agents:
        agent = f.agent(name)
        if agent.status is not AgentStatus.COMPLETE:
            problems.append(
                Violation(
                    "R-TRN-14",
                    f"agent {name} has not reported COMPLETE for IMPLEMENTATION "
                    f"(status: {agent.status or 'none'})",
                    f"run another implementation round, then 'taskgate agent set T {name} "
                    "COMPLETE --done'",
                )
            )
        elif agent.work_remaining:
            problems.append(
                Violation(
                    "R-AST-20",
                    f"agent {name} reports work remaining",
                    "run another implementation round",
                )
            )
    return problems + committed_work(f)


def validation_to_review(f: TaskFacts) -> list[Violation]:
    """R-TRN-15: a fresh SUCCESS build for the current HEAD, after entering VALIDATION."""
    problems = ownership(f)
    v = f.validation
    entered = f.entered_at.get(State.VALIDATION, "")
    if v is None or v.at < entered:
        problems.append(
            Violation(
                "R-TRN-15",
                "no build verification since entering VALIDATION (cached results do not count)",
                "run 'taskgate validate T'",
            )
        )
    elif not v.success:
        problems.append(
            Violation(
                "R-TRN-15",
                "the latest build verification failed",
                "fix it (VALIDATION -> IMPLEMENTATION with the failure), then validate again",
            )
        )
    elif v.head_sha != f.head_sha:
        problems.append(
            Violation(
                "R-TRN-15",
                f"the passing build was for {v.head_sha[:12]}, the task branch is now at "
                f"{(f.head_sha or '?')[:12]}",
                "run 'taskgate validate T' again",
            )
        )
    return problems


def review_to_awaiting(f: TaskFacts) -> list[Violation]:
    """R-TRN-16 / R-AGT-21: unanimous APPROVED over all required agents for the current HEAD."""
    problems = ownership(f)
    for name in f.required_agents:
        decision = f.agent(name).decision
        if decision is not Decision.APPROVED:
            problems.append(
                Violation(
                    "R-TRN-16",
                    f"agent {name} has "
                    + ("REJECTED" if decision else "not reviewed")
                    + " the current task branch HEAD",
                    "a rejection goes back to IMPLEMENTATION; otherwise wait for the review",
                )
            )
    return problems + substantive_change(f)


def _rejections(f: TaskFacts) -> list[str]:
    return [a for a in f.required_agents if f.agent(a).decision is Decision.REJECTED]


def review_to_implementation(f: TaskFacts) -> list[Violation]:
    """R-TRN-22: allowed only when at least one reviewer REJECTED, or the person asked for
    changes while the task was in REVIEW (R-INT-11: the person outranks the reviewers)."""
    problems = ownership(f)
    entered = f.entered_at.get(State.REVIEW, "")
    asked = any(at >= entered for at in f.change_requests_at) if entered else False
    if not _rejections(f) and not asked:
        problems.append(
            Violation(
                "R-TRN-22",
                "no reviewer rejected the current task branch",
                "wait for the remaining reviews, or move on when all approve",
            )
        )
    return problems


def to_scope_negotiation(f: TaskFacts) -> list[Violation]:
    """R-REV-04: a scope rejection with effort > 2x scope and agent consensus (recorded)."""
    problems = ownership(f)
    if not f.scope_negotiation_permitted:
        problems.append(
            Violation(
                "R-REV-04",
                "scope negotiation needs a recorded scope rejection with effort > 2x the "
                "task scope and agent consensus",
                "record the estimate and the agreeing agents first",
            )
        )
    return problems


def scope_to_synthesis(f: TaskFacts) -> list[Violation]:
    """R-REV-05: SCOPE_NEGOTIATION exits only with a recorded deferral decision."""
    problems = ownership(f)
    if not f.scope_deferral_recorded:
        problems.append(
            Violation(
                "R-REV-05",
                "no deferral decision recorded",
                "record the deferred items and the rationale",
            )
        )
    return problems


def awaiting_to_complete(f: TaskFacts) -> list[Violation]:
    """R-TRN-18 / R-CKP-12 / R-CKP-13: approval bound to the presented SHA, archived, merged."""
    problems = ownership(f)
    approval = f.change_approval
    if approval is None:
        problems.append(
            Violation(
                "R-CKP-12",
                "CHECKPOINT VIOLATION: User approval not obtained",
                "present the change with 'taskgate present T' and wait for the user",
            )
        )
    else:
        if approval.bound_to != f.checkpoint_sha or f.checkpoint_sha != f.head_sha:
            problems.append(
                Violation(
                    "R-CKP-13",
                    f"the task branch moved since the change was approved "
                    f"(approved {approval.bound_to[:12]}, HEAD {(f.head_sha or '?')[:12]})",
                    "present the new HEAD with 'taskgate present T' and ask again",
                )
            )
        if approval.approved_at < approval.presented_at:
            problems.append(
                Violation(
                    "R-CKP-04",
                    "the approval predates the presentation of the change",
                    "present the change and ask the user again",
                )
            )
    problems += substantive_change(f) + validated_change(f)
    if not f.archival_committed:
        problems.append(
            Violation(
                "R-CMP-02",
                "no archival commit on the task branch (orphaned archival)",
                "run 'taskgate complete T'",
            )
        )
    if not f.merged_to_main:
        problems.append(
            Violation(
                "R-CMP-06",
                "the task branch is not merged --ff-only into main",
                "run 'taskgate complete T'",
            )
        )
    return problems


def complete_to_cleanup(f: TaskFacts) -> list[Violation]:
    """R-TRN-19 / R-CLN-01 / R-CLN-08: merge verified and the audit trail complete."""
    problems = ownership(f)
    if not f.merged_to_main:
        problems.append(
            Violation(
                "R-CLN-01",
                "main does not contain the task commit",
                "run 'taskgate complete T'; if it says the task is complete, main lost the "
                "merged commit: restore main from its reflog (git reflog show main)",
            )
        )
    problems += [
        Violation("R-CLN-08", f"ERROR: {text}", "see 'taskgate audit T'")
        for text in f.audit_complete_problems
    ]
    return problems


def owner_only(f: TaskFacts) -> list[Violation]:
    """Backward moves need only ownership; the table demands the reason (R-TRN-06)."""
    return ownership(f)


def critical_agent_addition(f: TaskFacts) -> list[Violation]:
    """C-47: VALIDATION/REVIEW -> REQUIREMENTS only for a critical agent addition."""
    return ownership(f)
