"""What a transition through the CLI imports (issue 18): run for real, its command path must
not load the modules the third pass took off it. Each was milliseconds of every command."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import SRC, Repo

# dataclasses (and what it imports): taskgate.dataclass_lite builds the records; argparse,
# gettext, locale: cli/main.simple_args reads a plain transition; tomllib: a taskgate.toml of
# comments only (engine/config.comments_only).
NOT_IMPORTED = (
    "dataclasses", "inspect", "ast", "dis", "tokenize", "argparse", "gettext", "locale",
    "tomllib",
)  # fmt: skip


def test_a_transition_through_the_cli_imports_none_of_them(repo: Repo) -> None:
    repo.ok("start", "add-login")
    wt = repo.worktree("add-login")
    repo.ok("classify", "add-login", cwd=wt)
    code = (
        "import sys\n"
        "from taskgate.cli.main import main\n"
        "code = main(['transition', 'add-login', 'REQUIREMENTS'])\n"
        f"print(code, sorted(m for m in {NOT_IMPORTED!r} if m in sys.modules))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC), "TASKGATE_SESSION": "s1"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=wt, env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.splitlines()[-1] == "0 []", out.stdout + out.stderr
    assert "REQUIREMENTS" in repo.ok("status", "add-login", cwd=wt).out
