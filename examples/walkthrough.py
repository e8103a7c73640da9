"""A walk through the whole protocol with the real `taskgate` CLI on a throwaway repository.

Run: python examples/walkthrough.py [--keep]
Every step is a real CLI call; refusals are shown on purpose, to see the gates at work.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TODO = """# Tasks

## add-greeting: Greet the user by name
- Purpose: the CLI prints a generic greeting
- Scope: greet() in src/app/greet.py and its test
- Components: greet function, unit test
- Files: src/app/greet.py, tests/test_greet.py
"""

PLAN = """
## Implementation Plan

### Files to Create
- src/app/greet.py, tests/test_greet.py

### API Design
`def greet(name: str) -> str`

### Behavior Specifications
greet("Ada") returns "Hello, Ada!"; an empty name raises ValueError.

### Test Cases
test_greet_name, test_greet_empty

### Implementation Sequence
1. quality writes greet(); 2. test writes the tests.

### Decision Log
- Plain f-string; no i18n yet.
"""


def env(session: str = "walkthrough") -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    e["TASKGATE_SESSION"] = session
    e.pop("CLAUDECODE", None)
    return e


def sh(args: list[str], cwd: Path, *, expect: int = 0, session: str = "walkthrough") -> str:
    shown = " ".join(args if args[0] != sys.executable else ["taskgate", *args[3:]])
    print(f"\n$ {shown}")
    proc = subprocess.run(args, cwd=cwd, env=env(session), capture_output=True, text=True)
    text = (proc.stdout + proc.stderr).rstrip()
    if text:
        print("  " + text.replace("\n", "\n  "))
    if proc.returncode != expect:
        print(f"unexpected exit code {proc.returncode} (expected {expect})", file=sys.stderr)
        sys.exit(1)
    if expect:
        print(f"  (exit {proc.returncode}, as the protocol requires)")
    return proc.stdout


def tg(*args: str, cwd: Path, expect: int = 0, session: str = "walkthrough") -> str:
    return sh([sys.executable, "-m", "taskgate", *args], cwd, expect=expect, session=session)


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=env(), check=True, capture_output=True)


def main() -> int:
    root = Path(tempfile.mkdtemp(prefix="taskgate-walkthrough-"))
    repo = root / "repo"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    git("config", "user.email", "walkthrough@example.com", cwd=repo)
    git("config", "user.name", "Walkthrough", cwd=repo)
    (repo / "todo.md").write_text(TODO)
    (repo / ".gitignore").write_text("__pycache__/\n")  # build output is not work to keep
    (repo / "taskgate.toml").write_text(
        '[validation]\ncommands = ["python3 -m compileall -q src"]\n'
    )
    git("add", ".", cwd=repo)
    git("commit", "-q", "-m", "initial", cwd=repo)
    print(f"A sample repository at {repo}")
    tg("init", cwd=repo)
    tg("todo", cwd=repo)
    tg("start", "add-greeting", cwd=repo)
    tg("start", "add-greeting", cwd=repo, session="another-agent", expect=3)
    wt = repo / ".taskgate" / "tasks" / "add-greeting" / "code"
    task_dir = wt.parent
    tg("classify", "add-greeting", "--explain", cwd=wt)
    tg("transition", "add-greeting", "REQUIREMENTS", cwd=wt)
    tg("transition", "add-greeting", "SYNTHESIS", cwd=wt, expect=1)
    agents = [
        line.split()[1].rstrip(":")
        for line in tg("status", "add-greeting", cwd=wt).splitlines()
        if line.strip().startswith("agent ")
    ]
    for agent in agents:
        (task_dir / f"add-greeting-{agent}-requirements.md").write_text(
            f"# {agent} requirements\n" + "greet() must be pure, typed and tested. " * 4
        )
        tg("agent", "set", "add-greeting", agent, "COMPLETE", cwd=wt)
    tg("transition", "add-greeting", "SYNTHESIS", cwd=wt)
    (task_dir / "task.md").write_text((task_dir / "task.md").read_text() + PLAN)
    tg("transition", "add-greeting", "IMPLEMENTATION", cwd=wt, expect=1)
    tg("present", "add-greeting", cwd=wt)
    tg("approve", "add-greeting", "plan", "--message", "approved", cwd=wt)
    tg("transition", "add-greeting", "IMPLEMENTATION", cwd=wt)
    # The quality agent implements in its own worktree (branch add-greeting-quality) and commits
    # with its tag; the other agents have nothing to change in their domains and say so.
    qwt = task_dir / "agents" / "quality" / "code"
    (qwt / "src" / "app").mkdir(parents=True)
    (qwt / "src" / "app" / "greet.py").write_text(
        'def greet(name: str) -> str:\n    if not name:\n        raise ValueError("name")\n'
        '    return f"Hello, {name}!"\n'
    )
    git("add", ".", cwd=qwt)
    git("commit", "-q", "-m", "[agent:quality] greet()", cwd=qwt)
    for agent in agents:
        why = [] if agent == "quality" else ["--no-change", f"nothing in the {agent} domain"]
        tg("agent", "set", "add-greeting", agent, "COMPLETE", "--done", *why, cwd=wt)
    # R-TRN-14: the quality agent's commit is not on the task branch yet.
    tg("transition", "add-greeting", "VALIDATION", cwd=wt, expect=1)
    tg("merge", "add-greeting", cwd=wt)
    tg("transition", "add-greeting", "VALIDATION", cwd=wt)
    tg("transition", "add-greeting", "REVIEW", cwd=wt, expect=1)
    tg("validate", "add-greeting", cwd=wt)
    tg("transition", "add-greeting", "REVIEW", cwd=wt)
    for agent in agents:
        tg("agent", "verdict", "add-greeting", agent, "APPROVED", cwd=wt)
    tg("transition", "add-greeting", "AWAITING_USER_APPROVAL", cwd=wt)
    tg("present", "add-greeting", cwd=wt)
    tg("approve", "add-greeting", "changes", cwd=wt)
    tg("complete", "add-greeting", cwd=repo)
    tg("cleanup", "add-greeting", cwd=repo)
    tg("audit", "add-greeting", cwd=repo)
    sh(["git", "log", "--oneline", "main"], repo)
    print(f"\nDone: one squashed commit on main; the record stays in {task_dir}")
    if "--keep" not in sys.argv:
        shutil.rmtree(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
