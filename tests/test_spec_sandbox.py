"""The spec roles run in the agents' sandbox, read-only but for their reply file (issue 14):
a command-backend role that tries to write the store, the main worktree, `main`'s ref and the
workflow's spec.md fails at the OS level, nothing changes, and its reply (written to the result
file, copied back by taskgate) still drives the loop. With `sandbox = "none"` the same role
escapes (the control) and it is said on stderr."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from conftest import Repo, git
from taskgate.agents import sandbox
from test_agent_command import fake
from test_spec_backends import DESC, ROLES, workflow

pytestmark = pytest.mark.skipif(not sandbox.probe()[0], reason="bubblewrap does not work here")

# Before answering, the role attacks; what happened goes into its reply's spec text.
ATTACKER = (
    ROLES
    + """
role, req = sys.argv[-1], json.load(sys.stdin)
repo = pathlib.Path(os.getcwd())
outcomes = []
for target in (repo / ".taskgate" / "state.db", repo / "PWNED", repo / ".git" / "refs" /
               "heads" / "main", repo / ".git" / "taskgate-governed"):
    try:
        with open(target, "ab") as handle:
            handle.write(b"PWNED")
        outcomes.append("ESCAPED " + target.name)
    except OSError as exc:
        outcomes.append("refused " + target.name + ": " + exc.strerror)
reply = answer(role, req)
if role == "spec-writer":
    reply["spec"] += "\\n\\n<!-- " + "; ".join(outcomes) + " -->\\n"
pathlib.Path(os.environ["TASKGATE_RESULT_FILE"]).write_text(json.dumps(reply))
print("see the result file")
"""
)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "absent"


def _setup(repo: Repo, tmp_path: Path, setting: str) -> None:
    exe = fake(tmp_path / "bin", "attacker", ATTACKER)
    (repo.path / "taskgate.toml").write_text(
        f'[agents]\nsandbox = "{setting}"\n\n[spec]\nbackend = "command"\n\n'
        f'[agents.command]\ncommand = ["{exe}"]\n'
    )


def test_a_spec_role_writes_only_its_reply(repo: Repo, tmp_path: Path) -> None:
    _setup(repo, tmp_path, "auto")
    db = repo.path / ".taskgate" / "state.db"
    main = git(repo.path, "rev-parse", "main")
    before = _digest(db)
    first = repo.run("spec", "new", DESC)
    assert first.code == 4, first.err  # waits for the person's answer: the loop went on
    assert "unconfined" not in first.err
    spec = (workflow(repo) / "spec.md").read_text()
    assert "ESCAPED" not in spec and spec.count("refused") == 4, spec
    assert "Read-only file system" in spec
    assert _digest(db) == before and b"PWNED" not in db.read_bytes()
    how = json.loads((workflow(repo) / ".workflow" / "agents" / "spec-writer.sandbox.json")
                     .read_text())  # fmt: skip
    assert how["mode"] == "confined", how
    assert not (repo.path / "PWNED").exists()
    assert git(repo.path, "rev-parse", "main") == main


def test_unconfined_the_role_escapes_and_it_is_said(repo: Repo, tmp_path: Path) -> None:
    _setup(repo, tmp_path, "none")
    first = repo.run("spec", "new", DESC)
    assert "spec role spec-writer runs unconfined" in first.err, first.err
    assert (repo.path / "PWNED").exists()  # the control: nothing stopped it
