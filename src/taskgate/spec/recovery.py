"""Resume points (D-SPC-2 with C-53/C-54), integrity repair (R-SPC-16), fresh start
(R-SPC-17) and the per-workflow lock."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from taskgate.errors import Corrupted, ForeignTask
from taskgate.spec.state import (
    LOOP_STATUSES,
    MAX_ITERATIONS,
    MAX_STALE,
    SpecPaths,
    SpecState,
    copy_state,
    validate_state,
)


def resume_point(state: SpecState | None, *, spec_exists: bool) -> str | None:
    """Where a workflow resumes (D-SPC-2 refined by R-SPC-06/08); None when it is finished."""
    if state is None:
        return "A1"  # R-SPC-10, C-58: a directory without saved state crashed in the scaffold
    status = state.loop_status
    if status == "not_started":
        return "A1"  # R-SPC-05
    if status == "scaffolding":
        return "A2" if spec_exists else "A1"  # R-SPC-06, C-53
    if status == "spec_writing":
        return "A2"  # R-SPC-05: the spec writer is idempotent
    if status == "validating":
        return "A3" if state.current_iteration == 1 else "B3"  # R-SPC-07
    if status == "clarifying":
        return "B2" if state.user_answers else "B1"  # R-SPC-08, C-54
    return None  # R-SPC-09: completed / terminated only report


def next_step(state: SpecState | None, *, spec_exists: bool) -> str | None:
    """The exact step to run next: the resume point, advanced past steps whose result is
    already saved (R-SPC-11 saves after each agent returns, so it is not asked again)."""
    point = resume_point(state, spec_exists=spec_exists)
    if state is None or point not in ("A3", "B3"):
        return point
    if state.termination_reason:
        return "C"
    if state.validated_iteration != state.current_iteration:
        return point
    if point == "A3":
        return "A5" if state.checklist_done else "A4"
    return "B4"


def repair(state: SpecState) -> tuple[SpecState, list[str]]:
    """A copy that passes `validate_state`, and what was changed; Corrupted when the state
    cannot be repaired safely (R-SPC-16: then start fresh or intervene manually)."""
    if state.loop_status not in LOOP_STATUSES:
        raise Corrupted(
            f"spec workflow {state.feature_id}: loop_status {state.loop_status!r} cannot be "
            "repaired; the step it was in is unknown (R-SPC-16)",
            hint=f"edit .workflow/state.json by hand, or 'taskgate spec resume {state.feature_id}"
            " --fresh' (R-SPC-17)",
        )
    fixed = copy_state(state)
    actions: list[str] = []
    if not 1 <= fixed.current_iteration <= MAX_ITERATIONS:
        value = min(max(fixed.current_iteration, 1), MAX_ITERATIONS)
        actions.append(f"current_iteration {fixed.current_iteration} -> {value}")
        fixed.current_iteration = value
    if not 0 <= fixed.stale_count <= MAX_STALE:
        value = min(max(fixed.stale_count, 0), MAX_STALE)
        actions.append(f"stale_count {fixed.stale_count} -> {value}")
        fixed.stale_count = value
    gaps = {g.id: g for g in fixed.gaps}
    for question in fixed.pending_questions:
        kept = []
        for gap_id in question.gaps:
            gap = gaps.get(gap_id)
            if gap is not None and gap.status == "open" and gap.blocking:
                gap.status, gap.resolution = "clarifying", f"Pending {question.id}"
                actions.append(f"{gap_id} set to clarifying (asked in {question.id})")
            if gap is not None and gap.status == "clarifying":
                kept.append(gap_id)
            else:
                actions.append(f"{gap_id} removed from {question.id} (not an open gap)")
        question.gaps = kept
    for question in [q for q in fixed.pending_questions if not q.gaps]:
        fixed.pending_questions.remove(question)
        fixed.user_answers.pop(question.id, None)
        actions.append(f"question {question.id} dropped (it covers no open gap)")
    asked = {g for q in fixed.pending_questions for g in q.gaps}
    for gap in fixed.gaps:
        if gap.status == "clarifying" and gap.id not in asked:
            gap.status, gap.resolution = "open", ""
            actions.append(f"{gap.id} set to open (no pending question covers it)")
    pending = {q.id for q in fixed.pending_questions}
    for qid in sorted(set(fixed.user_answers) - pending):
        del fixed.user_answers[qid]
        actions.append(f"answer for {qid} dropped (not a pending question)")
    if fixed.loop_status == "clarifying" and not fixed.pending_questions:
        # R-SPC-18: nothing to ask and nothing to apply; classify the open gaps again.
        fixed.loop_status, fixed.user_answers = "validating", {}
        fixed.validated_iteration = fixed.current_iteration
        actions.append("clarifying without questions -> validating (questions are re-asked)")
    problems = validate_state(fixed)
    if problems:
        raise Corrupted(
            f"spec workflow {state.feature_id}: repair left problems: {'; '.join(problems)}",
            hint="edit .workflow/state.json by hand or start fresh (R-SPC-16)",
        )
    return fixed, actions


def remove_workflow(paths: SpecPaths, *, confirmed: bool) -> bool:
    """Start Fresh's deletion: only after the person confirmed "This will delete all
    progress. Continue?" (R-SPC-17); declined means nothing is deleted."""
    if not confirmed:
        return False
    shutil.rmtree(paths.root, ignore_errors=False)
    return True


@contextmanager
def workflow_lock(common_dir: Path, name: str, *, wait: bool = False) -> Iterator[None]:
    """Exclusive lock on one workflow; another process holding it means exit 3 unless `wait`
    (used for the short numbering lock of A1)."""
    lock_path = common_dir / f"taskgate-spec-{name}.lock"
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ForeignTask(
                f"another taskgate process is running spec workflow {name}",
                hint="wait for it to finish, or work on another spec",
            ) from None
        yield
    finally:
        os.close(fd)
