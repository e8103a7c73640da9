"""The orchestrator's small parts: the terminal approver and the progress views."""

from __future__ import annotations

import io
import json

import pytest

from taskgate.errors import NeedsHuman
from taskgate.orchestrator.approver import AutoApprove, StopAtCheckpoint, TerminalApprover
from taskgate.orchestrator.progress import Progress


def ask(answers: str) -> tuple[str, str, str]:
    out = io.StringIO()
    approver = TerminalApprover(io.StringIO(answers), out, details=lambda task: f"details {task}")
    decision = approver.decide("t", "plan", "THE PLAN")
    return decision.action, decision.text, out.getvalue()


def test_terminal_approver_approve_changes_details_stop() -> None:
    assert ask("a\n")[:1] == ("approve",)
    action, text, _ = ask("c\nrename the helper\n")
    assert (action, text) == ("changes", "rename the helper")
    action, _, shown = ask("d\nwhat?\ns\n")
    assert action == "stop" and "details t" in shown and "Please answer" in shown
    assert ask("")[0] == "stop"  # end of input never approves
    assert "THE PLAN" in ask("s\n")[2]


def test_stop_at_checkpoint_says_how_to_approve_and_resume() -> None:
    with pytest.raises(NeedsHuman) as info:
        StopAtCheckpoint().decide("t", "changes", "THE CHANGE")
    assert "THE CHANGE" in info.value.message
    assert "taskgate approve t changes" in info.value.hint
    assert "taskgate run t" in info.value.hint


def test_auto_approve_is_recorded_as_automated() -> None:
    assert AutoApprove().decide("t", "plan", "").provenance == "automated --yes"


def test_live_view_redraws_a_status_line() -> None:
    out = io.StringIO()
    progress = Progress(out=out, live=True)
    progress.emit("state", "t", "state IMPLEMENTATION", state="IMPLEMENTATION")
    progress.emit("round", "t", "implementation round 2", round=2)
    progress.emit("agent", "t", "quality: implementation", agent="quality", mode="implementation")
    text = out.getvalue()
    assert "\r\033[K" in text and "running: quality (implementation)" in text
    assert "round 2" in text
    progress.emit("agent-result", "t", "quality: COMPLETE", agent="quality", status="COMPLETE")
    assert out.getvalue().rstrip().endswith("round 2")  # nobody is running any more
    progress.finish()
    assert out.getvalue().endswith("\r\033[K")


def test_plain_and_json_streams() -> None:
    plain = io.StringIO()
    Progress(out=plain, live=False).emit("state", "t", "state INIT", state="INIT")
    assert plain.getvalue() == "[t] state INIT\n"
    stream = io.StringIO()
    progress = Progress(out=stream, as_json=True)
    progress.emit("agent", "t", "x", agent="quality", mode="review")
    assert json.loads(stream.getvalue()) == {
        "event": "agent", "task": "t", "message": "x", "agent": "quality", "mode": "review"
    }  # fmt: skip
    summary = progress.timeline.to_json()
    assert summary["invocations"] == 0 and "states" in summary
