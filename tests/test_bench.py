"""The bench scripts still run (tiny sizes): a figure in docs/benchmarks.md must stay
reproducible by its command. No timing is asserted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("script", "args", "expect"),
    [
        ("transition_latency.py", ["2"], "transition / python ratio"),
        # issue 18, third pass: both ways into the CLI and the import breakdown, against a tree
        ("transition_latency.py", ["1", f"--against={ROOT}"], "imports of a transition, this tree"),
        (
            "transition_latency.py",
            ["1", "--scale", "--events=20", "--tasks=20"],
            "transition at scale",
        ),
        (
            "transition_latency.py",
            ["1", "--scale", "--events=20", "--tasks=20", f"--against={ROOT}"],
            "the step in-process",  # and "before (" above it (issue 18, fourth pass)
        ),
        ("status_scale.py", ["200"], "status --json over 200 tasks"),
        ("status_scale.py", ["50", "1", "--chain"], "in one chain of Depends"),
        ("demo_time.py", ["1"], "taskgate demo --yes, 1 runs"),
        ("team.py", ["4", "50", "1"], "one transition"),  # issue 20: a real PostgreSQL server
        ("pg_hooks.py", ["200", "5"], "serve, warm"),  # issue 20: the snapshot clock
        ("session_start_check.py", ["2"], "ratio (check reading"),  # issue 14
        # issue 18, third pass: the hooks without the engine, against a tree (here itself)
        ("hook_latency.py", ["1", "--engine-only", "--against", str(ROOT)], "before: Session"),
        ("hook_latency.py", ["1", "--scale", "100", "--against", str(ROOT)], "before: PostTool"),
        # issue 18, sixth pass: the prompt hook's phases, and its log against a tree (itself)
        ("prompt_hook.py", ["1"], "the step, everything loaded"),
        ("prompt_hook.py", ["--log", "3", "--against", str(ROOT)], "prompts in a row"),
    ],
)
def test_bench_script_runs(script: str, args: list[str], expect: str) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        cwd=ROOT / "bench",
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert expect in result.stdout
