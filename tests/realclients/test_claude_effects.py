"""The effect check with the real Claude Code (issue 15): a test run the PreToolUse hook allows
(it is a test runner) writes into the task worktree; Claude Code runs it, PostToolUse finds the
change, moves it aside into a quarantine ref and puts the worktree back, the model is told what
happened in the next request, and `taskgate audit` fails until the person resolves it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from realclients.conftest import OWNER, TASK, Claude, OwnedRepo, copy_template
from realclients.mock_anthropic import call, say


@pytest.fixture
def impl(templates: dict[str, Path], tmp_path: Path) -> OwnedRepo:
    return copy_template(templates, "implementation", tmp_path / "repo")


def test_a_test_run_that_writes_is_caught_after_the_call(
    claude: Claude, hooks_installed: Path, impl: OwnedRepo, tmp_path: Path
) -> None:
    wt = impl.worktree(TASK)
    probe = tmp_path / "test_sneaky.py"
    probe.write_text(
        "from pathlib import Path\n"
        f"def test_x():\n    Path({str(wt / 'sneaky.py')!r}).write_text('x = 1\\n')\n"
    )
    command = f"{sys.executable} -m pytest -q -p no:cacheprovider {probe}"
    script = [
        call("Bash", command="git status", description="look"),
        call("Bash", command=command, description="run the tests"),
        say("done"),
    ]
    claude.run("run the tests", wt, script, session=OWNER)
    assert not claude.mock.last().tool_results()[-1].get("is_error")  # the run was allowed
    assert "moved aside" in claude.mock.last().all_text()  # the model was told
    assert "taskgate violations" in claude.mock.last().all_text()
    assert not (wt / "sneaky.py").exists()  # the worktree is back
    assert impl.git("-C", str(wt), "status", "--porcelain") == ""
    refs = impl.git("for-each-ref", "--format=%(refname)", f"refs/taskgate/quarantine/{TASK}")
    [ref] = [r for r in refs.splitlines() if r.endswith("/worktree")]
    assert impl.git("show", f"{ref}:sneaky.py") == "x = 1"
    audit = json.loads(impl.run("audit", TASK, "--json").out)
    failed = {c["id"] for t in audit["tasks"] for c in t["checks"] if not c["passed"]}
    assert "effects" in failed
