"""Retry counters count attempts that ran, and a resolved cause resets them (issue 16).

The red team's case: `taskgate run` killed inside an agent's commit step left a staged file in
the agent's worktree; the agent was then re-invoked 10 times (ignoring max_agent_retries) and
the exhausted round counter refused every later run even after a person committed the file.
Now a worktree a killed git command left mid-way is diagnosed before any agent starts (no
attempt is used), the retry limit holds in IMPLEMENTATION, and resuming after the person dealt
with the cause starts the exhausted counters again, audited with why. On both stores (SQLite
and a real PostgreSQL server, tests/store_kinds.py; issue 20).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
from pathlib import Path

from conftest import Repo, git
from store_kinds import kind_fixture, query  # noqa: F401
from test_faults_resume import SLUG, _finished
from test_run import sample, state

ROOT = Path(__file__).resolve().parent.parent


def _events(repo: Repo, kind: str) -> list[dict[str, object]]:
    sql = "SELECT payload FROM events WHERE task = ? AND kind = ? ORDER BY seq"
    return [json.loads(r["payload"]) for r in query(repo.path, sql, SLUG, kind)]


def _agents(repo: Repo) -> dict[str, dict[str, object]]:
    status = repo.ok("status", SLUG, "--json", session="run").json()
    return {str(a["agent"]): a for a in status["agents"]}


def _said(repo: Repo, mode: str) -> list[tuple[str, str]]:
    """(status, message) of each recorded completion of the style agent in `mode`: what the
    agent's own script answered, so the test knows the agent ran and did its work."""
    return [
        (str(e["status"]), str(e["message"]))
        for e in _events(repo, "agent_completed")
        if e.get("agent") == "style" and e.get("mode") == mode
    ]


NOT_INSTALLED = ("ERROR", "the style checker is not installed")  # FLAKY's implementation


def _prompts(repo: Repo, agent: str, mode: str) -> list[str]:
    agent_dir = repo.task_dir(SLUG) / "agents" / agent
    return sorted(p.name for p in agent_dir.glob(f"{mode}-*.prompt.md"))


def test_a_kill_inside_a_commit_step_is_diagnosed_not_retried_and_resumes(
    tmp_path: Path, store_kind: str
) -> None:
    repo = sample(tmp_path)
    killed = repo.run("run", SLUG, "--yes", session="run",
                      env={"TASKGATE_FAILPOINT": "scripted:staged"})  # fmt: skip
    assert killed.code == -signal.SIGKILL
    staged = {
        a: wt
        for a in _agents(repo)
        if (wt := repo.task_dir(SLUG) / "agents" / a / "code").exists()
        and git(wt, "diff", "--cached", "--name-only")
    }
    assert staged  # parallel agents: one or more reached the kill with a staged commit
    worktree = next(iter(staged.values()))
    invoked = len(_events(repo, "agent_invoked"))
    before = {a: row["retry_count"] for a, row in _agents(repo).items()}
    for _ in range(2):  # however often the person runs it before fixing the worktree
        stopped = repo.run("run", SLUG, "--yes", session="run")
        assert stopped.code == 4, stopped.out + stopped.err
        assert "staged, uncommitted changes" in stopped.err and str(worktree) in stopped.err
        assert f"git -C {worktree} commit" in stopped.err
        # Not an attempt: no invocation was opened, no retry counted.
        assert len(_events(repo, "agent_invoked")) == invoked
        assert {a: row["retry_count"] for a, row in _agents(repo).items()} == before
    assert [e["cause"] for e in _events(repo, "run_stopped")] == ["agent-worktree"] * 2
    diag = repo.run("recover", SLUG, "--json", session="run")
    assert "agent-worktree" in diag.out
    # The person keeps the agents' half-committed work, then resumes.
    for name, wt in staged.items():
        git(wt, "-c", "user.name=p", "-c", "user.email=p@x", "commit", "-qm",
            f"[agent:{name}] finish the interrupted commit")  # fmt: skip
    repo.ok("run", SLUG, "--yes", session="run")
    _finished(repo, SLUG, commits=2)
    assert [e["cause"] for e in _events(repo, "run_resumed")][-1] == "agent-worktree"


FLAKY = """
import json, os, pathlib, sys
sys.stdin.read()
mode = os.environ["TASKGATE_MODE"]
if mode == "requirements":
    pathlib.Path(os.environ["TASKGATE_REPORT_PATH"]).write_text("requirement. " * 20)
    print(json.dumps({"status": "COMPLETE"}))
elif mode == "implementation":
    if pathlib.Path(MARKER).exists():
        print(json.dumps({"status": "COMPLETE", "no_change": "style needs no change"}))
    else:
        print(json.dumps({"status": "ERROR", "reason": "the style checker is not installed"}))
else:
    print(json.dumps({"status": "COMPLETE", "verdict": "APPROVED", "message": "fine"}))
"""


def _flaky_style(tmp_path: Path, retries: int) -> tuple[Repo, Path]:
    marker = tmp_path / "style-checker-installed"
    script = tmp_path / "style_agent.py"
    script.write_text(textwrap.dedent(FLAKY).replace("MARKER", repr(str(marker))))
    # The interpreter by its real path, not a `python3` found on PATH: that may be a shim the
    # sandbox cannot run (pyenv's, when HOME hides ~/.pyenv), and the agent never runs at all.
    command = json.dumps([os.path.realpath(sys.executable), str(script)])
    extra = f'\n[agents.style]\nbackend = "command"\ncommand = {command}\n'
    repo = sample(tmp_path, extra=extra)
    toml = repo.path / "taskgate.toml"
    text = toml.read_text()
    assert "[protocol]" in text
    text = text.replace("[protocol]\n", f"[protocol]\nmax_agent_retries = {retries}\n", 1)
    # The confined agent may read its script, the marker and its interpreter (docs/security.md).
    readable = json.dumps([str(tmp_path), sys.base_prefix])
    toml.write_text(text.replace("[agents]\n", f"[agents]\nsandbox_readable = {readable}\n", 1))
    git(repo.path, "commit", "-qam", "retry limit")
    return repo, marker


def test_the_retry_limit_holds_in_implementation_and_a_fix_resets_it(
    tmp_path: Path, store_kind: str
) -> None:
    repo, marker = _flaky_style(tmp_path, retries=2)
    stopped = repo.run("run", SLUG, "--yes", session="run")
    assert stopped.code == 4, stopped.out + stopped.err
    assert "Max retries exceeded (2)" in stopped.err
    # The first attempt and 2 retries: 3 implementation invocations, not 10 rounds; each one
    # ran the agent, which answered ERROR itself (not a command that could not start).
    assert len(_prompts(repo, "style", "implementation")) == 3
    assert _said(repo, "implementation") == [NOT_INSTALLED] * 3
    report = repo.task_dir(SLUG) / f"{SLUG}-style-requirements.md"
    assert report.read_text() == "requirement. " * 20  # its requirements phase did its work
    assert _agents(repo)["style"]["retry_count"] == 2
    assert [e["cause"] for e in _events(repo, "run_stopped")] == ["agent-retries"]
    again = repo.run("run", SLUG, "--yes", session="run")  # nothing fixed: it stops again
    assert again.code == 4
    marker.write_text("installed\n")  # the person fixes the cause
    repo.ok("run", SLUG, "--yes", session="run")
    _finished(repo, SLUG, commits=4)  # + the sample's configuration commits
    assert _said(repo, "implementation")[-1] == ("COMPLETE", "")  # the fixed agent's answer
    assert _said(repo, "review") == [("COMPLETE", "fine")]
    resets = _events(repo, "retries_reset")
    assert resets and all("style" in e["agents"] for e in resets)  # type: ignore[operator]
    assert "agent-retries" in str(resets[-1]["why"])
    budgets = _events(repo, "round_budget_reset")
    assert budgets and "agent-retries" in str(budgets[-1]["why"])


def test_an_exhausted_round_counter_starts_again_when_the_person_resumes(
    tmp_path: Path, store_kind: str
) -> None:
    """The rounds themselves (MAX_IMPLEMENTATION_ROUNDS) are a budget the resume renews."""
    repo, marker = _flaky_style(tmp_path, retries=50)
    stopped = repo.run("run", SLUG, "--yes", session="run")
    assert stopped.code == 4, stopped.out + stopped.err
    assert "implementation rounds without finishing" in stopped.err
    assert [e["cause"] for e in _events(repo, "run_stopped")] == ["no-progress"]
    said = _said(repo, "implementation")  # one invocation a round, each the agent's own ERROR
    assert len(said) == 10 and set(said) == {NOT_INSTALLED}
    marker.write_text("installed\n")
    repo.ok("run", SLUG, "--yes", session="run")
    _finished(repo, SLUG, commits=4)
    assert _said(repo, "implementation")[-1] == ("COMPLETE", "")
    budget = _events(repo, "round_budget_reset")[-1]
    assert "no-progress" in str(budget["why"]) and budget["rounds_used"] == 10


VANISHING = """#!PYTHON
import json, os, pathlib, sys
sys.stdin.read()
mode = os.environ["TASKGATE_MODE"]
if mode == "requirements":
    pathlib.Path(os.environ["TASKGATE_REPORT_PATH"]).write_text("requirement. " * 20)
    print(json.dumps({"status": "COMPLETE"}))
elif mode == "implementation":
    pathlib.Path(sys.argv[0]).rename(sys.argv[0] + ".away")  # uninstalled under the run
    print(json.dumps({"status": "ERROR", "reason": "the style checker crashed"}))
else:
    print(json.dumps({"status": "COMPLETE", "verdict": "APPROVED", "message": "fine"}))
"""


def test_an_agent_that_cannot_start_uses_no_retry(tmp_path: Path) -> None:
    """The retry saved before re-invoking an agent is taken back when its program cannot be
    started at all (exit 127): that was no attempt (R-AST-07 counts attempts)."""
    script = tmp_path / "style_agent"
    script.write_text(VANISHING.replace("PYTHON", sys.executable))
    script.chmod(0o755)
    extra = f'\n[agents.style]\nbackend = "command"\ncommand = ["{script}"]\n'
    repo = sample(tmp_path, extra=extra)
    toml = repo.path / "taskgate.toml"
    # Unconfined, so the agent can uninstall itself under the run (docs/security.md).
    toml.write_text(toml.read_text().replace("[agents]\n", '[agents]\nsandbox = "none"\n', 1))
    git(repo.path, "commit", "-qam", "unconfined")
    stopped = repo.run("run", SLUG, "--yes", session="run")
    assert stopped.code == 4, stopped.out + stopped.err
    assert [e["cause"] for e in _events(repo, "run_stopped")] == ["misconfiguration"]
    assert _agents(repo)["style"]["retry_count"] == 0  # the retry of attempt 2 taken back
    completed = [e for e in _events(repo, "agent_completed") if e.get("agent") == "style"]
    assert completed[-1].get("not_started") is True
    # Attempt 1 ran the agent (it answered, then uninstalled itself); attempt 2 could not start.
    assert _said(repo, "implementation")[0] == ("ERROR", "the style checker crashed")


def test_recover_repair_resets_what_a_stop_exhausted(tmp_path: Path) -> None:
    """`recover T --repair` is the person's "the cause is dealt with": the stop is resolved,
    its exhausted counters start again (audited), and the next run proceeds."""
    repo, marker = _flaky_style(tmp_path, retries=1)
    stopped = repo.run("run", SLUG, "--yes", session="run")
    assert stopped.code == 4, stopped.out + stopped.err
    assert _agents(repo)["style"]["retry_count"] == 1
    assert _said(repo, "implementation") == [NOT_INSTALLED] * 2
    diag = repo.run("recover", SLUG, session="run")
    assert "--repair' resets the retry and round counters" in diag.out, diag.out
    marker.write_text("installed\n")
    repaired = repo.run("recover", SLUG, "--repair", session="run")
    assert repaired.code == 0, repaired.out + repaired.err
    assert [e["cause"] for e in _events(repo, "stop_resolved")] == ["agent-retries"]
    resets = _events(repo, "retries_reset")
    assert resets and "recover --repair" in str(resets[-1]["why"])
    assert "style" in resets[-1]["agents"]  # type: ignore[operator]
    assert _agents(repo)["style"]["retry_count"] == 0
    repo.ok("run", SLUG, "--yes", session="run")
    _finished(repo, SLUG, commits=4)
    assert not _events(repo, "run_resumed")  # the stop was already resolved
    assert _said(repo, "implementation")[-1] == ("COMPLETE", "")


def test_a_program_the_sandbox_hides_stops_the_run_naming_the_fix(tmp_path: Path) -> None:
    """An agent command that runs outside but not confined (a version manager's shim: its
    manager lives under $HOME, which the sandbox hides) stops the run at once with the fix,
    and the fix it names works."""
    manager = Path(os.environ["HOME"]) / ".toolmgr"  # like ~/.pyenv (HOME: the test's own)
    tool = manager / "libexec" / "agent"
    tool.parent.mkdir(parents=True)
    python = os.path.realpath(sys.executable)
    tool.write_text(f'#!/bin/sh\nexec {python} {ROOT / "bench" / "scripted_agent.py"} "$@"\n')
    shim = tmp_path / "shims" / "style-agent"  # its directory is mounted back, not the manager
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec {tool} "$@"\n')
    for program in (tool, shim):
        program.chmod(0o755)
    repo = sample(tmp_path, extra=f'\n[agents.style]\nbackend = "command"\ncommand = ["{shim}"]\n')
    stopped = repo.run("run", SLUG, "--yes", session="run")
    assert stopped.code == 4, stopped.out + stopped.err
    assert "agent command not runnable: style" in stopped.err
    assert "needs its directory in [agents] sandbox_readable" in stopped.err
    assert [e["cause"] for e in _events(repo, "run_stopped")] == ["misconfiguration"]
    toml = repo.path / "taskgate.toml"
    # (the project's checkout too: the agent runs bench/scripted_agent.py, which imports
    # taskgate, and a clone under /tmp, as CI's, is hidden like any other directory)
    readable = json.dumps([str(manager), str(ROOT)])
    toml.write_text(
        toml.read_text().replace("[agents]\n", f"[agents]\nsandbox_readable = {readable}\n", 1)
    )
    # The fix the stop named (left uncommitted: a commit on main would move it past the
    # task): the agent runs now; without --yes the run goes on to the plan checkpoint.
    again = repo.run("run", SLUG, session="run")
    assert again.code == 4 and f"taskgate approve {SLUG} plan" in again.err, again.err
    assert _said(repo, "requirements")[-1][0] == "COMPLETE"
    assert state(repo, SLUG) == "SYNTHESIS"
