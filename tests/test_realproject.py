"""Issue 17 end to end: a real library (tests/realproject.py) with its real pytest suite as
[validation], and `command` agents making real edits through `taskgate run`.

Each test asserts the effect on main, in the store (events) and in `taskgate audit`, and
what the agents were told (the feedback section of their prompts, logged by the agent).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from realproject import LIB, invocations, make_project, run_git, task_entry

SNAKE_CASE = (
    LIB["strutil/case.py"]
    + '''

def snake(text: str) -> str:
    """lower_snake_case."""
    return "_".join(text.lower().split())
'''
)
TEST_SNAKE = (
    "from strutil.case import snake\n\n\n"
    "def test_snake():\n    assert snake('Hello World') == 'hello_world'\n"
)
SPLIT = LIB["strutil/split.py"]
# Drops the empty-piece filter for custom separators: test_split_custom_separator breaks.
SPLIT_BROKEN = SPLIT.replace(
    "    return [piece for piece in text.split(sep) if piece]",
    '    if sep != " ":\n        return text.split(sep)\n'
    "    return [p for p in text.split(sep) if p]",
)
SPLIT_STRICT = SPLIT.replace(
    '    """The non-empty pieces of `text` between `sep`."""\n',
    '    """The non-empty pieces of `text` between `sep`."""\n'
    '    if sep == "":\n        raise ValueError("empty separator")\n',
)
SPLIT_NEW_SIGNATURE = SPLIT.replace('sep: str = " ")', 'sep: str = " ", *, strict: bool = False)')


def taskgate(
    repo: Path, *args: str, session: str | None = None
) -> subprocess.CompletedProcess[str]:
    """The real CLI, as a person runs it (no session unless given)."""
    env = {k: v for k, v in os.environ.items() if k != "TASKGATE_SESSION"}
    if session:
        env["TASKGATE_SESSION"] = session
    return subprocess.run([sys.executable, "-m", "taskgate", *args], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip


def events(repo: Path, task: str, kind: str) -> list[dict[str, Any]]:
    """The task's audit events of one kind, oldest first (read-only)."""
    db = sqlite3.connect(f"file:{repo / '.taskgate' / 'state.db'}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT payload FROM events WHERE task = ? AND kind = ? ORDER BY seq", (task, kind)
        ).fetchall()
    finally:
        db.close()
    return [json.loads(r[0]) for r in rows]


def state(repo: Path, task: str) -> str:
    return str(json.loads(taskgate(repo, "status", task, "--json").stdout)["state"])


def main_file(repo: Path, path: str) -> str:
    return subprocess.run(["git", "show", f"main:{path}"], cwd=repo, check=True,
                          capture_output=True, text=True).stdout  # fmt: skip


def main_tests_pass(repo: Path, tmp: Path) -> bool:
    export = tmp / "export"
    run_git(repo, "worktree", "add", "-q", "--detach", str(export), "main")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                          cwd=export, capture_output=True, text=True)  # fmt: skip
    run_git(repo, "worktree", "remove", "--force", str(export))
    return proc.returncode == 0


def implementations(repo: Path, task: str, agent: str) -> list[dict[str, Any]]:
    return [r for r in invocations(repo, task) if r["agent"] == agent
            and r["mode"] == "implementation"]  # fmt: skip


def test_clean_task(tmp_path: Path) -> None:
    scenario = {"add-snake": {"title": "snake case", "agents": {
        "quality": {"edits": {"strutil/case.py": SNAKE_CASE}},
        "test": {"edits": {"tests/test_snake.py": TEST_SNAKE}},
    }}}  # fmt: skip
    todo = task_entry("add-snake", "Add snake case", "strutil/case.py, tests/test_snake.py")
    repo = make_project(tmp_path, scenario, "# Tasks\n\n" + todo)
    proc = taskgate(repo, "run", "add-snake", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert state(repo, "add-snake") == "CLEANUP"
    assert "def snake" in main_file(repo, "strutil/case.py")
    assert main_tests_pass(repo, tmp_path)
    runs = events(repo, "add-snake", "validation")
    task_runs = [v for v in runs if not v.get("on_main")]
    assert [v["result"] for v in task_runs] == ["SUCCESS"]
    assert task_runs[0]["tests"]["tests_run"] == 9  # R-AUD-04: counts from the JUnit XML
    # Agents with nothing to change said so, and that is on the record (R-TRN-14).
    assert {e["agent"] for e in events(repo, "add-snake", "no_change")} >= {"architect", "build"}
    assert taskgate(repo, "audit", "add-snake").returncode == 0


def test_a_broken_test_goes_to_the_agent_whose_code_broke_it(tmp_path: Path) -> None:
    scenario = {"fast-split": {"title": "faster split", "agents": {
        "quality": {
            "edits": {"strutil/split.py": SPLIT_BROKEN},
            "on_feedback": [{"contains": "test_split_custom_separator",
                             "edits": {"strutil/split.py": SPLIT}}],
        },
        "test": {"edits": {"tests/test_more.py": "from strutil import split\n\n\n"
                           "def test_tabs():\n    assert split('a\\tb', '\\t') == ['a', 'b']\n"}},
    }}}  # fmt: skip
    todo = task_entry("fast-split", "Faster split", "strutil/split.py, tests/test_more.py")
    repo = make_project(tmp_path, scenario, "# Tasks\n\n" + todo)
    proc = taskgate(repo, "run", "fast-split", "--yes")
    assert proc.returncode == 0, proc.stderr
    runs = [v for v in events(repo, "fast-split", "validation") if not v.get("on_main")]
    assert [v["result"] for v in runs] == ["FAILURE", "SUCCESS"]
    assert runs[0]["failure_class"] == "test"  # not "unknown": pytest's report was read
    failing = [f["name"] for f in runs[0]["tests"]["failures"]]
    assert failing == ["tests.test_split.test_split_custom_separator"]
    quality = implementations(repo, "fast-split", "quality")
    assert len(quality) == 2
    told = quality[1]["feedback"]
    assert "test_split_custom_separator" in told and "strutil/split.py" in told
    assert "assert" in told  # the output excerpt, not only the name
    # The test agent's tests did not break anything: it is not sent back.
    assert len(implementations(repo, "fast-split", "test")) == 1
    assert main_file(repo, "strutil/split.py") == SPLIT
    assert main_tests_pass(repo, tmp_path)
    assert taskgate(repo, "audit", "fast-split").returncode == 0


def test_a_low_task_touching_code_is_raised_and_validated(tmp_path: Path) -> None:
    init = (
        LIB["strutil/__init__.py"]
        .replace(
            "from strutil.split import join, split\n",
            "from strutil.case import title\nfrom strutil.split import join, split\n",
        )
        .replace('["join", "split"]', '["join", "split", "title"]')
    )
    scenario = {"doc-api": {"title": "document the API", "agents": {
        "architect": {"edits": {"README.md": LIB["README.md"] + "\n`from strutil import title`\n",
                                "strutil/__init__.py": init}},
    }}}  # fmt: skip
    todo = task_entry("doc-api", "Document the API", "README.md", risk="LOW")
    repo = make_project(tmp_path, scenario, "# Tasks\n\n" + todo)
    proc = taskgate(repo, "run", "doc-api", "--yes")
    assert proc.returncode == 0, proc.stderr
    (raised,) = events(repo, "doc-api", "risk_raised")
    assert (raised["from"], raised["to"]) == ("LOW", "MEDIUM")
    assert raised["files"] == ["strutil/__init__.py"] and raised["agents_added"]
    transitions = [(t["from"], t["to"]) for t in events(repo, "doc-api", "transition")]
    assert ("SYNTHESIS", "AWAITING_USER_APPROVAL") not in transitions  # never the skip path
    assert ("IMPLEMENTATION", "VALIDATION") in transitions
    merged = run_git(repo, "rev-parse", "main")
    runs = [v for v in events(repo, "doc-api", "validation") if not v.get("on_main")]
    assert runs and runs[-1]["result"] == "SUCCESS"
    assert "title" in main_file(repo, "strutil/__init__.py")
    assert merged and main_tests_pass(repo, tmp_path)
    assert taskgate(repo, "audit", "doc-api").returncode == 0


def test_an_empty_change_is_refused(tmp_path: Path) -> None:
    todo = task_entry("noop-task", "Nothing really", "strutil/case.py")
    repo = make_project(tmp_path, {"noop-task": {"agents": {}}}, "# Tasks\n\n" + todo)
    main_before = run_git(repo, "rev-parse", "main")
    proc = taskgate(repo, "run", "noop-task", "--yes")
    assert proc.returncode == 1
    assert "R-CKP-10" in proc.stderr and "changes nothing" in proc.stderr
    assert state(repo, "noop-task") == "REVIEW"
    assert run_git(repo, "rev-parse", "main") == main_before
    assert all(e["kind"] != "changes" for e in events(repo, "noop-task", "approval"))
    # Only the person can say that nothing needs to change; then the task may complete.
    said = taskgate(repo, "approve", "noop-task", "noop", "--message", "already the case")
    assert said.returncode == 0, said.stderr
    proc = taskgate(repo, "run", "noop-task", "--yes")
    assert proc.returncode == 0, proc.stderr
    changed = run_git(repo, "diff", "--name-only", main_before, "main").split()
    assert changed == ["changelog.md", "todo.md"]  # the archival edit only


def test_a_change_request_in_plain_words_reaches_the_agent(tmp_path: Path) -> None:
    scenario = {"sep-guard": {"title": "guard the separator", "agents": {
        "quality": {"edits": {"strutil/split.py": SPLIT_NEW_SIGNATURE},
                    "on_feedback": [{"contains": "empty separator",
                                     "edits": {"strutil/split.py": SPLIT_STRICT}}]},
    }}}  # fmt: skip
    todo = task_entry("sep-guard", "Guard the separator", "strutil/split.py")
    repo = make_project(tmp_path, scenario, "# Tasks\n\n" + todo)
    assert taskgate(repo, "run", "sep-guard").returncode == 4  # waits for the plan
    assert taskgate(repo, "approve", "sep-guard", "plan").returncode == 0
    assert taskgate(repo, "run", "sep-guard").returncode == 4  # waits at the change review
    words = ("the first attempt failed the API signature test; keep the signature of split "
             "unchanged and only raise ValueError for an empty separator")  # fmt: skip
    said = taskgate(repo, "say", "sep-guard", words, "--json")
    assert said.returncode == 0, said.stderr
    assert json.loads(said.stdout)["kind"] == "CHANGE_REQUEST"
    assert state(repo, "sep-guard") == "IMPLEMENTATION"
    assert taskgate(repo, "run", "sep-guard").returncode == 4
    latest = implementations(repo, "sep-guard", "quality")[-1]
    assert "empty separator" in latest["feedback"]
    assert latest["round"] == 2  # one change request, one more round
    assert taskgate(repo, "approve", "sep-guard", "changes").returncode == 0
    assert taskgate(repo, "run", "sep-guard").returncode == 0
    assert main_file(repo, "strutil/split.py") == SPLIT_STRICT
    assert main_tests_pass(repo, tmp_path)


def test_a_build_escalation_is_diagnosed_and_resumed(tmp_path: Path) -> None:
    scenario = {"pin-opts": {"title": "pytest options", "agents": {
        "quality": {"edits": {"pytest.ini": "[pytest]\naddopts = --no-such-flag\n"}},
    }}}  # fmt: skip
    todo = task_entry("pin-opts", "Pytest options", "pytest.ini, strutil/split.py")
    repo = make_project(tmp_path, scenario, "# Tasks\n\n" + todo)
    proc = taskgate(repo, "run", "pin-opts", "--yes")
    assert proc.returncode == 4 and "the build fails (unknown)" in proc.stderr
    (stop,) = events(repo, "pin-opts", "run_stopped")
    assert stop["cause"] == "build-escalation" and stop["state"] == "VALIDATION"
    recover = taskgate(repo, "recover", "pin-opts")
    assert "run stopped deliberately (build-escalation)" in recover.stdout
    assert "taskgate run pin-opts" in recover.stdout and "take over" not in recover.stdout
    # The escalation's option 1: the person fixes the build on the task branch.
    worktree = repo / ".taskgate" / "tasks" / "pin-opts" / "code"
    (worktree / "pytest.ini").write_text("[pytest]\naddopts = -ra\n")
    run_git(worktree, "commit", "-q", "-am", "pytest options that exist")
    proc = taskgate(repo, "run", "pin-opts", "--yes")
    assert proc.returncode == 0, proc.stderr
    (human,) = events(repo, "pin-opts", "intervention")
    assert human["provenance"] == "human" and len(human["shas"]) == 1
    assert events(repo, "pin-opts", "run_resumed")[0]["cause"] == "build-escalation"
    assert "-ra" in main_file(repo, "pytest.ini")
    audit = taskgate(repo, "audit", "pin-opts")
    assert audit.returncode == 0, audit.stdout  # the person's fix is no check 1.2 failure


@pytest.mark.parametrize("broken", ["executable", "script"])
def test_a_missing_agent_executable_stops_at_once(tmp_path: Path, broken: str) -> None:
    """A missing executable (exit 127), or every agent failing identically (a wrong path in
    the command): a configuration error, so no retries (issue 17: it was 4 x 5 attempts)."""
    scenario = {"add-snake": {"agents": {"quality": {"edits": {"strutil/case.py": SNAKE_CASE}}}}}
    repo = make_project(tmp_path, scenario, "# Tasks\n\n" + task_entry(
        "add-snake", "Add snake case", "strutil/case.py"))  # fmt: skip
    config = repo / "taskgate.toml"
    good = config.read_text()
    if broken == "executable":
        bad = good.replace(f'command = ["{sys.executable}"', 'command = ["/nonexistent/agent"')
    else:
        bad = good.replace(str(tmp_path / "agent.py"), "/nonexistent/agent.py")
    assert bad != good
    config.write_text(bad)
    proc = taskgate(repo, "run", "add-snake", "--yes")
    assert proc.returncode == 4 and "not runnable" in proc.stderr
    assert "attempt 2" not in proc.stdout  # no retries of a missing executable
    assert "run stopped deliberately (misconfiguration)" in taskgate(
        repo, "recover", "add-snake").stdout  # fmt: skip
    config.write_text(good)  # the person fixes taskgate.toml; nothing else
    proc = taskgate(repo, "run", "add-snake", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert "def snake" in main_file(repo, "strutil/case.py")


def _agent_processes(token: str) -> list[int]:
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            status = (proc / "status").read_text()
        except OSError:
            continue
        if token in cmdline and "State:\tZ" not in status:
            found.append(int(proc.name))
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc (Linux)")
@pytest.mark.parametrize("sandbox", ["auto", "none"])
def test_kill_9_of_run_ends_its_agents(tmp_path: Path, sandbox: str) -> None:
    """No orphans: agents of a `run` killed with SIGKILL end with it (confined: bwrap
    --die-with-parent; unconfined: PR_SET_PDEATHSIG), so a new run never works beside them."""
    scenario = {"add-snake": {"agents": {"quality": {"hang": "requirements"}}}}
    repo = make_project(tmp_path, scenario, "# Tasks\n\n" + task_entry(
        "add-snake", "Add snake case", "strutil/case.py"))  # fmt: skip
    config = repo / "taskgate.toml"
    config.write_text(config.read_text().replace(
        "[agents]\n", f'[agents]\nsandbox = "{sandbox}"\n'))  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "TASKGATE_SESSION"}
    run = subprocess.Popen([sys.executable, "-m", "taskgate", "run", "add-snake", "--yes"],
                           cwd=repo, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)  # fmt: skip
    token = str(tmp_path / "agent.py")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        reports = list((repo / ".taskgate" / "tasks" / "add-snake").glob("*-requirements.md"))
        if _agent_processes(token) and len(reports) >= 3:
            break
        time.sleep(0.2)
    assert _agent_processes(token), "the hanging agent never started"
    run.send_signal(signal.SIGKILL)
    run.wait()
    deadline = time.monotonic() + 15
    while _agent_processes(token) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _agent_processes(token) == []
