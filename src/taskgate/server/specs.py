"""Spec workflows in the dashboard: pending clarification questions answered in the browser.

The page lists the questions a workflow waits for (loop status `clarifying`, R-SPC-08); the
answer form carries the iteration and the question ids it showed. Under the workflow's lock
the state is read again, and the answers are recorded only if the same questions are still
pending (`spec.loop.record_answers`, as `taskgate spec answer` does); the loop then goes on
from the person's terminal with `taskgate spec resume ID` (it runs agents: not in the server).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from taskgate.errors import Refused, UsageError
from taskgate.protocol.violations import Violation


def listing(repo: Path) -> list[dict[str, Any]]:
    """Every spec workflow under specs/, newest activity first."""
    from taskgate.spec.detect import scan, specs_root
    from taskgate.spec.texts import list_row

    rows = []
    for candidate in scan(specs_root(repo)):
        row = dict(list_row(candidate))
        state = candidate.state
        row["pending_questions"] = len(state.pending_questions) if state else 0
        row["waiting_for_answers"] = bool(state and _waiting(state))
        rows.append(row)
    return rows


def _waiting(state: Any) -> bool:
    return bool(
        state.loop_status == "clarifying" and state.pending_questions and not state.user_answers
    )


def view(repo: Path, feature: str) -> dict[str, Any]:
    """One workflow: its status (as `spec status --json`) and the questions it waits for."""
    from taskgate.spec.detect import find, specs_root
    from taskgate.spec.loop import describe
    from taskgate.spec.state import validate_state

    candidate = find(specs_root(repo), feature)
    state = candidate.state
    if state is None:
        return {"feature_id": candidate.feature_id, "problem": candidate.problem or "no state",
                "questions": [], "answerable": False}  # fmt: skip
    problems = validate_state(state)
    return describe(state) | {
        "feature_id": candidate.feature_id,
        "integrity": problems,
        "questions": [
            {"id": q.id, "summary": q.summary, "text": q.text, "gaps": list(q.gaps)}
            for q in state.pending_questions
        ],
        "answerable": _waiting(state) and not problems,
        "spec_path": str(candidate.paths.spec),
    }


def answer(repo: Path, common_dir: Path, feature: str, *, iteration: str, shown: list[str],
           answers: dict[str, str]) -> dict[str, Any]:  # fmt: skip
    """Record the person's answers, bound to the iteration and questions the page showed."""
    from taskgate.spec.detect import find, specs_root
    from taskgate.spec.index import render_index
    from taskgate.spec.loop import record_answers
    from taskgate.spec.recovery import workflow_lock
    from taskgate.spec.state import copy_state, save_state, validate_state

    fid = find(specs_root(repo), feature).feature_id
    with workflow_lock(common_dir, fid):  # exit 3 when a `spec` command is running it
        candidate = find(specs_root(repo), fid)  # read again under the lock
        state = candidate.state
        if state is None or validate_state(state):
            raise Refused(
                f"spec workflow {fid} cannot take answers now (no state or a failed check)",
                [Violation("R-SPC-16", "never build on a state that fails the check")],
                hint=f"taskgate spec resume {fid} --repair",
            )
        pending = sorted(q.id for q in state.pending_questions)
        if (
            not _waiting(state)
            or str(state.current_iteration) != iteration
            or sorted(shown) != pending
        ):
            raise Refused(
                f"the questions of {fid} changed since this page showed them: nothing was recorded",
                [Violation("R-SPC-08", "answers count only for the questions that are pending")],
                hint="read the updated page and answer again",
            )
        texts = {qid: answers.get(qid, "") for qid in pending}
        empty = [qid for qid, text in texts.items() if not text.strip()]
        if empty:
            raise UsageError(f"answer every question ({', '.join(empty)} empty)",
                             hint="type an answer for each question")  # fmt: skip
        updated = copy_state(state)
        record_answers(updated, texts)
        save_state(candidate.paths, updated, render=render_index)
    return {
        "ok": True,
        "feature_id": fid,
        "answered": pending,
        "message": f"Answers recorded. Go on in your terminal: taskgate spec resume {fid}",
    }
