"""The issue 18 rows of bench/hook_latency.py stay runnable (figures are printed, never
asserted: STYLE.md, docs/benchmarks.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("flags", "expect"),
    [
        (["--http-only"], "HTTP: Write to .taskgate/state.db (denied)"),
        (["--http-only", f"--against={ROOT}"], "before: HTTP: Edit in the task worktree"),
        (["--engine-only"], "UserPromptSubmit, session holding no task"),
        (["--scale", "200"], "PostToolUse after that Edit (recorded, no engine)"),
    ],
)
def test_hook_latency_issue_18_rows_run(flags: list[str], expect: str) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "hook_latency.py"), "2", *flags],
        cwd=ROOT / "bench",
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert expect in result.stdout, result.stdout
