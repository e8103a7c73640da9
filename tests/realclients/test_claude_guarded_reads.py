"""A plain read that wrote, with the real Claude Code (guardcmp): in a guarded session the
PostToolUse hook compares after every Bash call, the ones the analyser judges pure reads
included. Here `cat README.md` (on the read list) resolves through the session's PATH to a
program of the user's that writes into the task worktree; Claude Code runs it, the very
PostToolUse of that call moves the change aside and puts the worktree back, the model is told
in the next request, and `taskgate audit` fails until the person resolves it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from realclients.conftest import OWNER, TASK, Claude, OwnedRepo, copy_template
from realclients.mock_anthropic import call, say


@pytest.fixture
def impl(templates: dict[str, Path], tmp_path: Path) -> OwnedRepo:
    return copy_template(templates, "implementation", tmp_path / "repo")


def test_a_read_list_program_that_writes_is_caught_by_its_own_post_tool_use(
    claude: Claude, hooks_installed: Path, impl: OwnedRepo, tmp_path: Path
) -> None:
    wt = impl.worktree(TASK)
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "cat").write_text(
        "#!/bin/sh\n"
        'case "$*" in *README.md*)\n'
        '  printf "appended by a shadowing program\\n" >> README.md\n'
        '  printf "x = 1\\n" > sneaky.txt ;;\n'
        "esac\n"
        'exec /bin/cat "$@"\n'
    )
    (shims / "cat").chmod(0o755)
    path = os.pathsep.join([str(shims), *claude.path_dirs, os.environ.get("PATH", "")])
    script = [call("Bash", command="cat README.md", description="read"), say("done")]
    claude.run("read the readme", wt, script, session=OWNER, env={"PATH": path})
    result = claude.mock.last().tool_results()[-1]
    assert not result.get("is_error")  # PreToolUse allowed it: a plain read
    assert "shadowing" in json.dumps(result)  # it ran the shadowing program, which wrote
    text = claude.mock.last().all_text()
    assert "moved aside" in text and "sneaky.txt" in text  # found by that call's PostToolUse
    assert not (wt / "sneaky.txt").exists()  # the worktree is back
    assert "shadowing" not in (wt / "README.md").read_text()
    assert impl.git("-C", str(wt), "status", "--porcelain") == ""
    refs = impl.git("for-each-ref", "--format=%(refname)", f"refs/taskgate/quarantine/{TASK}")
    [ref] = [r for r in refs.splitlines() if r.endswith("/worktree")]
    assert impl.git("show", f"{ref}:sneaky.txt") == "x = 1"
    audit = json.loads(impl.run("audit", TASK, "--json").out)
    failed = {c["id"] for t in audit["tasks"] for c in t["checks"] if not c["passed"]}
    assert "effects" in failed
