"""Agent invocations and full validation runs per task in the issue 17 end-to-end scenario.

Runs the scenarios of tests/test_realproject.py (a real library, its real pytest suite as
[validation], `command` agents making real edits, `taskgate run`) in scratch directories and
counts, per task, from the record taskgate keeps:

- agent invocations: the prompts taskgate wrote (agents/A/MODE-rR-aA[-N].prompt.md, one per
  invocation, requirements to review);
- validation runs: `validation` events on the task branch, and on main after the merge
  (R-CMP-08); each is a full run of the test suite, which costs the person real time. An
  on-main record with result UNCHANGED (main is the validated tree apart from todo.md and
  changelog.md) ran nothing and is counted apart ("reused").

Run: python bench/realproject.py [scenario-substring]
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "src")]

import test_realproject as scenarios  # noqa: E402
from realproject import invocations  # noqa: E402

SCENARIOS = [
    ("clean task", scenarios.test_clean_task, "add-snake"),
    (
        "broken test, fixed by its author",
        scenarios.test_a_broken_test_goes_to_the_agent_whose_code_broke_it,
        "fast-split",
    ),
    (
        "LOW task touching code (raised)",
        scenarios.test_a_low_task_touching_code_is_raised_and_validated,
        "doc-api",
    ),
    ("empty change (refused)", scenarios.test_an_empty_change_is_refused, "noop-task"),
    (
        "plain-words change request",
        scenarios.test_a_change_request_in_plain_words_reaches_the_agent,
        "sep-guard",
    ),
    (
        "build escalation, person's fix",
        scenarios.test_a_build_escalation_is_diagnosed_and_resumed,
        "pin-opts",
    ),
    (
        "missing agent executable",
        functools.partial(
            scenarios.test_a_missing_agent_executable_stops_at_once, broken="executable"
        ),
        "add-snake",
    ),
]


def hermetic_home(base: Path) -> None:
    """A HOME with a git identity, so nothing of the developer's configuration is used."""
    home = base / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Bench\n\temail = bench@example.com\n[init]\n\tdefaultBranch = main\n"
    )
    os.environ.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
                      GIT_CONFIG_NOSYSTEM="1", PYTHONPATH=str(ROOT / "src"))  # fmt: skip
    for var in ("TASKGATE_SESSION", "CLAUDECODE", "TASKGATE_AGENT"):
        os.environ.pop(var, None)


def main() -> int:
    wanted = sys.argv[1] if len(sys.argv) > 1 else ""
    base = Path(tempfile.mkdtemp(prefix="taskgate-bench-realproject-"))
    hermetic_home(base)
    rows = []
    for index, (label, scenario, task) in enumerate(SCENARIOS):
        if wanted and wanted not in label:
            continue
        tmp = base / f"s{index}"
        tmp.mkdir()
        start = time.perf_counter()
        scenario(tmp)  # asserts its own outcome
        seconds = time.perf_counter() - start
        repo = tmp / "repo"
        calls = invocations(repo, task)
        events = scenarios.events(repo, task, "validation")
        # an on-main record "UNCHANGED" stands for the validated run: no suite ran (issue 17)
        reused = sum(1 for r in events if r.get("on_main") and r.get("result") == "UNCHANGED")
        on_main = sum(1 for r in events if r.get("on_main")) - reused
        on_t = len(events) - on_main - reused
        rows.append((label, task, len(calls), on_t, on_main, reused, seconds))
    print(f"{'scenario':<36} {'task':<11} {'agent inv.':>10} {'val. T':>7} {'val. main':>9} "
          f"{'reused':>6} {'seconds':>8}")  # fmt: skip
    for label, task, calls, on_t, on_main, reused, seconds in rows:
        print(f"{label:<36} {task:<11} {calls:>10} {on_t:>7} {on_main:>9} {reused:>6} "
              f"{seconds:>8.1f}")  # fmt: skip
    total = [sum(r[i] for r in rows) for i in (2, 3, 4, 5)]
    print(f"{'total':<48} {total[0]:>10} {total[1]:>7} {total[2]:>9} {total[3]:>6}")
    print(
        "val. T / val. main: full suite runs on the task branch / on main after the merge; "
        "reused: cleanups that found main exactly the validated tree (no run)"
    )
    print("realproject bench: agent invocations and validation runs per task")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
