"""A small real library with a real pytest suite, and `command` agents that edit it (issue 17).

`make_project` writes `strutil` (split/join/case helpers, 8 passing tests) into a git
repository, `taskgate init`s it with the suite as `[validation]`, and installs one agent
executable (AGENT, run with this Python) for every agent. What each agent does per task is a
scenario table in `.scenario.json` beside the repository; the prompts taskgate wrote for
every invocation (`agents/A/*.prompt.md`) tell tests who was told what.
Used by tests/test_realproject.py and bench/realproject.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

LIB = {
    "strutil/__init__.py": '"""String helpers."""\n\nfrom strutil.split import join, split\n'
    '\n__all__ = ["join", "split"]\n',
    "strutil/split.py": '''"""Splitting and joining words."""


def split(text: str, sep: str = " ") -> list[str]:
    """The non-empty pieces of `text` between `sep`."""
    return [piece for piece in text.split(sep) if piece]


def join(words: list[str], sep: str = " ") -> str:
    """`words` joined by `sep`."""
    return sep.join(words)
''',
    "strutil/case.py": '''"""Letter case."""


def title(text: str) -> str:
    """Every word capitalised."""
    return " ".join(word.capitalize() for word in text.split())
''',
    "tests/test_split.py": """from strutil.split import join, split


def test_split_spaces():
    assert split("a b  c") == ["a", "b", "c"]


def test_split_custom_separator():
    assert split("a,b,,c", ",") == ["a", "b", "c"]


def test_split_signature_keeps_default():
    assert split("x y") == split("x y", " ")


def test_join():
    assert join(["a", "b"], "-") == "a-b"


def test_round_trip():
    assert join(split("a b c")) == "a b c"
""",
    "tests/test_case.py": """from strutil.case import title


def test_title():
    assert title("hello world") == "Hello World"


def test_title_empty():
    assert title("") == ""


def test_title_single():
    assert title("x") == "X"
""",
    "README.md": "# strutil\n\nSmall string helpers: split, join, title.\n",
    "LICENSE": "MIT License\n\nCopyright (c) 2026 the strutil authors\n",
    ".gitignore": "__pycache__/\n*.pyc\n.pytest_cache/\n",
}

AGENT = r"""
import json, os, subprocess, sys
from pathlib import Path

here = Path(__file__).resolve().parent
scenario = json.loads((here / ".scenario.json").read_text())
task, agent = os.environ["TASKGATE_TASK"], os.environ["TASKGATE_AGENT"]
mode = os.environ["TASKGATE_MODE"]
prompt = sys.stdin.read()
feedback = prompt.split("Feedback from earlier rounds, failures and the user:", 1)[-1]
feedback = feedback.split("\nMode:", 1)[0].strip()
plan = scenario.get(task, {})
mine = plan.get("agents", {}).get(agent, {})


def answer(**fields):
    print(json.dumps({"status": "COMPLETE", "work_remaining": False, "message": "done",
                      **fields}))
    sys.exit(0)


def git(*args):
    subprocess.run(["git", "-c", "user.name=agent", "-c", "user.email=agent@example.com",
                    "-c", "commit.gpgsign=false", *args], check=True, capture_output=True)


def apply(edits, why):
    changed = []
    for path, text in edits.items():
        target = Path(path)
        if target.exists() and target.read_text() == text:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        changed.append(path)
    if changed:
        git("add", "--", *changed)
        git("commit", "-q", "-m", f"[agent:{agent}] {why}: {', '.join(changed)}")
    return changed


if mine.get("hang") == mode:  # an agent that never answers (kill -9 tests)
    import time
    time.sleep(600)
if mode == "requirements":
    Path(os.environ["TASKGATE_REPORT_PATH"]).write_text(
        f"# {agent} requirements for {task}\n\n" + "Keep the public API stable and tested. " * 5)
    answer()
if mode == "synthesis":
    owners = {p: a for a, spec in plan.get("agents", {}).items() for p in spec.get("edits", {})}
    rows = "\n".join(f"| `{p}` | {plan.get('title', task)} | {a} |" for p, a in owners.items())
    phases = "\n".join(f"{i}. `{p}` (Agent: {a})" for i, (p, a) in enumerate(owners.items(), 1))
    section = (
        "## Implementation Plan\n\n### Purpose\n\n" + plan.get("title", task) +
        "\n\n### Approach\n\nSmall focused edits.\n\n### Benefits\n\nA better library.\n\n"
        "### Files to Modify\n\n| File Path | Changes | Owner |\n|---|---|---|\n" + rows +
        "\n\n### API Design\n\nNo signature changes.\n\n### Behavior Specifications\n\n"
        "As described.\n\n### Test Cases\n\n- the existing suite\n\n"
        "### Implementation Sequence\n\n" + (phases or "1. nothing (Agent: architect)") +
        "\n\n### Decision Log\n\n- keep it small\n\n### Risks and Mitigations\n\n- none\n\n"
        "### Success Criteria\n\n- tests pass\n")
    md = Path(os.environ["TASKGATE_TASK_MD"])
    text = md.read_text()
    if "## Implementation Plan" in text:
        text = text.split("## Implementation Plan", 1)[0]
    md.write_text(text.rstrip() + "\n\n" + section)
    answer()
if mode == "review":
    answer(verdict="APPROVED", reason="")
# implementation
done = []
for rule in mine.get("on_feedback", []):
    if rule["contains"] in feedback:
        done += apply(rule["edits"], "address feedback")
if not done:
    done += apply(mine.get("edits", {}), "implement")
if not done and not mine:
    answer(no_change=f"nothing in the {agent} domain for {task}")
answer(message="wrote " + (", ".join(done) or "nothing new"))
"""


def make_project(root: Path, scenario: dict[str, Any], todo: str, *, validation: str = "") -> Path:
    """The library as a git repository under `root`/repo, initialised for taskgate."""
    repo = root / "repo"
    repo.mkdir(parents=True)
    for path, text in LIB.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    (repo / "todo.md").write_text(todo)
    (root / "agent.py").write_text(AGENT)
    (root / ".scenario.json").write_text(json.dumps(scenario))
    run_git(repo, "init", "-q", "-b", "main")
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-q", "-m", "strutil 1.0")
    subprocess.run([sys.executable, "-m", "taskgate", "init"], cwd=repo, check=True,
                   capture_output=True)  # fmt: skip
    commands = validation or (
        f'commands = [["{sys.executable}", "-m", "pytest", "-q", "-p", "no:cacheprovider"]]'
    )
    config = repo / "taskgate.toml"
    config.write_text(
        f"[validation]\n{commands}\n\n[protocol]\nallow_auto_approve = true\n\n"
        f'[agents]\nbackend = "command"\nsandbox_readable = ["{root}"]\n\n[agents.command]\n'
        f'command = ["{sys.executable}", "{root / "agent.py"}"]\n'
    )
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-q", "-m", "taskgate")
    return repo


def run_git(cwd: Path, *args: str) -> str:
    """git with a fixed identity (tests have a hermetic HOME)."""
    return subprocess.run(
        ["git", "-c", "user.name=person", "-c", "user.email=person@example.com", *args],
        cwd=cwd, check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip


def invocations(repo: Path, task: str | None = None) -> list[dict[str, Any]]:
    """Every prompt taskgate gave an agent (agents/A/MODE-rR-aA.prompt.md), with its
    feedback section, ordered by round and attempt per agent."""
    rows = []
    for prompt in (repo / ".taskgate" / "tasks").glob("*/agents/*/*.prompt.md"):
        match = re.fullmatch(r"(\w+)-r(\d+)-a(\d+)(?:-(\d+))?\.prompt\.md", prompt.name)
        assert match, prompt
        mode, rnd, attempt, again = match.groups()
        text = prompt.read_text()
        told = text.split("Feedback from earlier rounds, failures and the user:", 1)[-1]
        rows.append({
            "task": prompt.parents[2].name, "agent": prompt.parent.name, "mode": mode,
            "round": int(rnd), "attempt": int(attempt), "again": int(again or 1),
            "feedback": told.split("\nMode:", 1)[0].strip(),
        })  # fmt: skip
    rows.sort(key=lambda r: (r["task"], r["agent"], r["mode"], r["round"], r["attempt"],
                             r["again"]))  # fmt: skip
    return [r for r in rows if task is None or r["task"] == task]


def task_entry(name: str, title: str, files: str, risk: str = "MEDIUM") -> str:
    """A todo.md task."""
    return (
        f"## {name}: {title}\n- Purpose: {title}\n- Scope: strutil\n- Components: strutil\n"
        f"- Files: {files}\n- Risk: {risk}\n\n"
    )
