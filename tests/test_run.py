"""`taskgate run` and `taskgate demo` end to end with the scripted backend (issue 6)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import SRC, Repo, git
from taskgate.orchestrator.demo import create_sample


def sample(
    tmp_path: Path,
    *,
    auto: bool = True,
    extra: str = "",
    todo: str = "",
    build: list[str] | None = None,
) -> Repo:
    """The demo's sample repository with taskgate initialised; `extra` appended to the config."""
    path = create_sample(tmp_path / "sample", auto_approve=auto, build=build)
    if todo:
        (path / "todo.md").write_text(todo)
    if extra:
        config = path / "taskgate.toml"
        config.write_text(config.read_text() + extra)
    if todo or extra:
        git(path, "commit", "-qam", "configure the sample")
    repo = Repo(path)
    repo.ok("init")
    return repo


def main_commits(repo: Repo) -> list[str]:
    return repo.git("log", "--format=%s", "main").splitlines()


def state(repo: Repo, task: str, session: str = "run") -> str:
    return str(repo.ok("status", task, "--json", session=session).json()["state"])


def test_demo_runs_both_tasks_to_cleanup(tmp_path: Path) -> None:
    target = tmp_path / "demo"
    result = Repo(tmp_path).ok("demo", "--dir", str(target), "--yes", session=None)
    assert "Timeline:" in result.out
    log = git(target, "log", "--format=%s", "main").splitlines()
    assert len(log) == 3  # the initial commit + one squashed commit per task (R-CMP-04)
    for sha in git(target, "rev-list", "main", "--max-count=2").split():
        files = git(target, "show", "--name-only", "--format=", sha).split()
        assert "todo.md" in files and "changelog.md" in files  # one atomic commit (R-CMP-04)
    todo = (target / "todo.md").read_text()
    assert "## add-slugify" not in todo and "## polish-guide" not in todo  # R-CMP-03
    changelog = (target / "changelog.md").read_text()
    assert "add-slugify" in changelog and "polish-guide" in changelog
    assert git(target, "worktree", "list").count("\n") == 0  # only the main worktree
    assert git(target, "branch", "--format=%(refname:short)").split() == ["main"]
    assert (target / "src" / "textkit" / "slugify.py").exists()


def test_run_stops_at_checkpoints_without_a_terminal(tmp_path: Path) -> None:
    repo = sample(tmp_path, auto=False)
    stopped = repo.run("run", "add-slugify", session="run")
    assert stopped.code == 4, stopped.err
    assert "taskgate approve add-slugify plan" in stopped.err
    assert state(repo, "add-slugify") == "SYNTHESIS"
    assert (repo.task_dir("add-slugify") / "task.md").read_text().count("Implementation Plan")
    repo.ok("approve", "add-slugify", "plan", session="run")
    at_review = repo.run("run", "add-slugify", session="run")
    assert at_review.code == 4 and "taskgate approve add-slugify changes" in at_review.err
    assert state(repo, "add-slugify") == "AWAITING_USER_APPROVAL"
    repo.ok("approve", "add-slugify", "changes", session="run")
    repo.ok("run", "add-slugify", session="run")
    assert state(repo, "add-slugify") == "CLEANUP"
    assert len(main_commits(repo)) == 2


def test_yes_is_refused_unless_the_repository_allows_it(tmp_path: Path) -> None:
    repo = sample(tmp_path, auto=False)
    result = repo.run("run", "add-slugify", "--yes", session="run")
    assert result.code == 1 and "R-CKP-02" in result.err and "allow_auto_approve" in result.err
    assert repo.run("status", "add-slugify", session="run").code == 2  # nothing was started


def test_change_request_at_the_terminal_goes_back_to_implementation(tmp_path: Path) -> None:
    repo = sample(tmp_path, auto=False)
    repo.run("run", "add-slugify", session="run")
    repo.ok("approve", "add-slugify", "plan", session="run")
    repo.run("run", "add-slugify", session="run")
    said = repo.run("say", "add-slugify", "please rename the helper to make_slug", session="run")
    assert said.code == 0, said.err
    assert state(repo, "add-slugify") == "IMPLEMENTATION"  # R-TRN-23, no question asked
    again = repo.run("run", "add-slugify", session="run")
    assert again.code == 4 and state(repo, "add-slugify") == "AWAITING_USER_APPROVAL"
    log = repo.ok("status", "add-slugify", "--json", session="run").json()["transition_log"]
    targets = [e["to"] for e in log]
    assert targets.count("VALIDATION") == 2 and targets.count("REVIEW") == 2  # R-TRN-26


FAIL_ONCE = """
[agents.scripted]
faults = [{fault = "fail", agent = "quality", mode = "requirements", attempt = 1},
          {fault = "short-report", agent = "style", mode = "requirements", attempt = 1},
          {fault = "garbage", agent = "test", mode = "requirements", attempt = 1},
          {fault = "nothing", agent = "build", mode = "requirements", attempt = 1},
          {fault = "crash", agent = "architect", mode = "requirements", attempt = 1},
          {fault = "hang", agent = "usability", mode = "requirements", attempt = 1}]
"""


def test_partial_completion_is_retried(tmp_path: Path) -> None:
    repo = sample(tmp_path, extra=FAIL_ONCE)
    repo.ok("run", "add-slugify", "--yes", session="run")
    status = repo.ok("status", "add-slugify", "--json", session="run").json()
    assert status["state"] == "CLEANUP"
    trail = (repo.task_dir("add-slugify") / "audit-trail.json").read_text()
    for agent in ("quality", "style", "test", "build", "architect", "usability"):
        # each faulty agent was invoked again after its ERROR / TIMEOUT (R-AST-06)
        assert trail.count(f'"agent_name": "{agent}"') >= 3, agent


ALWAYS_FAIL = """
[agents.scripted]
faults = [{fault = "fail", agent = "quality", mode = "requirements"}]
"""


def test_escalation_after_three_retries(tmp_path: Path) -> None:
    repo = sample(tmp_path, extra=ALWAYS_FAIL)
    result = repo.run("run", "add-slugify", "--yes", session="run")
    assert result.code == 4
    assert "Max retries exceeded (3)" in result.err  # R-AST-07
    assert "Abandon task and select alternative" in result.err  # R-REC-16
    assert result.err.rstrip().splitlines()[-2].startswith("Please advise") or (
        "Please advise on how to proceed." in result.err
    )
    assert state(repo, "add-slugify") == "REQUIREMENTS"  # R-REC-17: escalation moves nothing
    agents = repo.ok("status", "add-slugify", "--json", session="run").json()["agents"]
    quality = next(a for a in agents if a["agent"] == "quality")
    assert quality["retry_count"] == 3 and quality["status"] == "ERROR"


REJECT_ONCE = """
[agents.scripted]
faults = [{fault = "reject", agent = "style", mode = "review", round = 1}]
"""


def test_rejection_leads_to_a_second_round(tmp_path: Path) -> None:
    repo = sample(tmp_path, extra=REJECT_ONCE)
    repo.ok("run", "add-slugify", "--yes", session="run")
    status = repo.ok("status", "add-slugify", "--json", session="run").json()
    targets = [e["to"] for e in status["transition_log"]]
    assert targets.count("REVIEW") == 2 and targets.count("IMPLEMENTATION") == 2
    rejected = [v for v in status["verdicts"] if v["decision"] == "REJECTED"]
    assert [v["agent"] for v in rejected] == ["style"] and rejected[0]["round"] == 1
    assert status["state"] == "CLEANUP"


SCOPE = """
[agents.scripted]
faults = [{fault = "scope", agent = "*", mode = "review", round = 1}]
"""


def test_scope_negotiation_defers_work_to_new_tasks(tmp_path: Path) -> None:
    repo = sample(tmp_path, extra=SCOPE)
    repo.ok("run", "add-slugify", "--yes", session="run")
    status = repo.ok("status", "add-slugify", "--json", session="run").json()
    targets = [e["to"] for e in status["transition_log"]]
    assert "SCOPE_NEGOTIATION" in targets
    after = targets[targets.index("SCOPE_NEGOTIATION") + 1]
    assert after == "SYNTHESIS"  # C-22: exits only to SYNTHESIS, with re-approval
    plan_approvals = [a for a in status["approvals"] if a["kind"] == "plan"]
    assert len(plan_approvals) == 2 and plan_approvals[0]["revoked_at"]  # R-TRN-24
    todo = (repo.path / "todo.md").read_text()
    assert "deferred from add-slugify" in todo  # R-REV-05: follow-up tasks on main


# The flaky build counts its runs in a file outside the repository (shared by the task's and
# main's build worktrees): a write the agents' sandbox refuses (issue 14), so these run
# unconfined (the demo's config ends with its [agents] table).
UNCONFINED = 'sandbox = "none"\n'


def flaky_build(tmp_path: Path, failures: int, marker: str) -> list[str]:
    """A build command that fails `failures` times printing `marker`, then passes."""
    script = tmp_path / "flaky.py"
    state_file = tmp_path / "flaky.count"
    script.write_text(
        "import pathlib, sys\n"
        f"p = pathlib.Path({str(state_file)!r})\n"
        "n = int(p.read_text()) if p.exists() else 0\n"
        "p.write_text(str(n + 1))\n"
        f"if n < {failures}:\n"
        f"    print({marker!r})\n"
        "    sys.exit(1)\n"
        "print('Tests run: 3, Failures: 0')\n"
    )
    return ["python3", str(script)]


@pytest.mark.parametrize(
    ("marker", "agent"),
    [
        ("There are test failures", "test"),  # R-VAL-06
        ("COMPILATION ERROR\n[ERROR] cannot find symbol", "architect"),  # R-VAL-05 main → architect
        ("COMPILATION ERROR\n[ERROR] incompatible types", "architect"),  # R-VAL-05
        ("You have 3 Checkstyle violations", "style"),  # R-VAL-07 (≤5: main → style in run)
        ("You have 9 Checkstyle violations", "style"),  # R-VAL-07
    ],
)
def test_each_build_failure_class_is_routed_and_recovers(
    tmp_path: Path, marker: str, agent: str
) -> None:
    repo = sample(tmp_path, build=flaky_build(tmp_path, 1, marker), extra=UNCONFINED)
    repo.ok("run", "add-slugify", "--yes", session="run")
    status = repo.ok("status", "add-slugify", "--json", session="run").json()
    back = [
        e
        for e in status["transition_log"]
        if (e["from"], e["to"]) == ("VALIDATION", "IMPLEMENTATION")
    ]
    assert len(back) == 1 and agent in back[0]["reason"]  # C-49
    assert status["state"] == "CLEANUP"


def test_validation_failure_is_routed_back_and_recovers(tmp_path: Path) -> None:
    repo = sample(tmp_path, build=flaky_build(tmp_path, 1, "There are test failures"),
                  extra=UNCONFINED)  # fmt: skip
    repo.ok("run", "add-slugify", "--yes", session="run")
    status = repo.ok("status", "add-slugify", "--json", session="run").json()
    targets = [e["to"] for e in status["transition_log"]]
    assert targets.count("VALIDATION") == 2
    back = [
        e
        for e in status["transition_log"]
        if e["from"] == "VALIDATION" and e["to"] == "IMPLEMENTATION"
    ]
    assert back and "test" in back[0]["reason"]  # R-VAL-06: test failures go to the test agent
    assert [v["success"] for v in status["validations"]] == [False, True]


def test_unknown_build_failure_escalates(tmp_path: Path) -> None:
    repo = sample(tmp_path, build=flaky_build(tmp_path, 5, "segfault somewhere"),
                  extra=UNCONFINED)  # fmt: skip
    result = repo.run("run", "add-slugify", "--yes", session="run")
    assert result.code == 4 and "unknown" in result.err  # R-VAL-08
    assert state(repo, "add-slugify") == "VALIDATION"


@pytest.mark.parametrize(
    "point",
    ["run:INIT", "run:CLASSIFIED", "run:REQUIREMENTS", "run:after-invoke", "run:SYNTHESIS",
     "run:IMPLEMENTATION", "run:VALIDATION", "run:REVIEW", "run:AWAITING_USER_APPROVAL",
     "run:COMPLETE"],
)  # fmt: skip
def test_resume_after_kill(tmp_path: Path, point: str) -> None:
    repo = sample(
        tmp_path,
    )
    killed = repo.run("run", "add-slugify", "--yes", session="run",
                      env={"TASKGATE_FAILPOINT": point})  # fmt: skip
    assert killed.code == -signal.SIGKILL, killed.err
    repo.ok("run", "add-slugify", "--yes", session="run")
    assert state(repo, "add-slugify") == "CLEANUP"
    assert len(main_commits(repo)) == 2
    git(repo.path, "fsck", "--no-progress")


THREE = """# Tasks

## base-a: First helper
- Purpose: a
- Scope: src/textkit/alpha.py
- Components: alpha
- Files: src/textkit/alpha.py, tests/test_alpha.py

## docs-c: Document the helpers
- Purpose: c
- Scope: docs/helpers.md
- Components: docs
- Files: docs/helpers.md
- Depends: base-a

## base-b: Second helper
- Purpose: b
- Scope: src/textkit/beta.py
- Components: beta
- Files: src/textkit/beta.py, tests/test_beta.py
"""


def test_continuous_mode_respects_dependencies(tmp_path: Path) -> None:
    repo = sample(tmp_path, todo=THREE)
    before = len(main_commits(repo))
    result = repo.ok("run", "--all", "--yes", "--json", session="run")
    starts = [line for line in result.out.splitlines() if '"event": "start"' in line]
    order = [line.split('"task": "')[1].split('"')[0] for line in starts]
    assert order == ["base-a", "docs-c", "base-b"]  # docs-c once base-a is done (R-BAT-04)
    assert len(main_commits(repo)) == before + 3  # one squashed commit per task (R-CMP-04)
    assert "## " not in (repo.path / "todo.md").read_text().split("# Tasks", 1)[1]


def test_run_names_a_missing_task(tmp_path: Path) -> None:
    repo = sample(
        tmp_path,
    )
    result = repo.run("run", "nope", "--yes", session="run")
    assert result.code == 2 and "todo.md" in result.err


ESCAPE = """
[agents.scripted]
faults = [{fault = "escape", agent = "quality", mode = "implementation", attempt = 1}]
"""


def test_an_agent_writing_outside_its_worktree_stops_the_run(tmp_path: Path) -> None:
    repo = sample(tmp_path, extra=ESCAPE)
    result = repo.run("run", "add-slugify", "--yes", session="run")
    assert result.code == 4 and "R-WTB-02" in result.err
    assert "Please advise on how to proceed." in result.err
    stray = [p.name for p in repo.worktree("add-slugify").iterdir() if "ESCAPED" in p.name]
    assert stray  # left exactly as the agent made it: nothing is guessed away
    assert state(repo, "add-slugify") == "IMPLEMENTATION"


def test_ctrl_c_ends_running_agents_and_the_task_resumes(tmp_path: Path) -> None:
    marker = f"tg-sleep-{os.getpid()}"
    agent = tmp_path / f"{marker}.py"  # the marker is in every agent's command line
    agent.write_text("import time\ntime.sleep(900)\n")  # far beyond every wait below
    # The interpreter by its real path, readable in the agents' sandbox with the script: a
    # `python3` found on PATH may be a shim the sandbox cannot run (pyenv's: exit 127 at
    # once), and then no agent is ever running when Ctrl-C comes.
    readable = json.dumps([str(tmp_path), sys.base_prefix])
    command = json.dumps([os.path.realpath(sys.executable), str(agent)])
    config = (f"max_parallel = {RUNNING}\nsandbox_readable = {readable}\n\n"
              f"[agents.command]\ncommand = {command}\n")  # fmt: skip
    repo = sample(tmp_path, extra=config)
    toml = repo.path / "taskgate.toml"
    toml.write_text(toml.read_text().replace('backend = "scripted"', 'backend = "command"'))
    git(repo.path, "commit", "-qam", "command agents")
    env = dict(os.environ, PYTHONPATH=str(SRC), TASKGATE_SESSION="run")
    proc = subprocess.Popen(
        [sys.executable, "-m", "taskgate", "run", "add-slugify", "--yes"],
        cwd=repo.path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Ctrl-C once the whole batch runs (six agents, RUNNING at a time: the rest stay queued).
    # An agent still being started at that moment: tests/test_run_interrupt.py.
    deadline = time.monotonic() + 180  # a bound for a loaded machine, not a speed claim
    while len(_agents(agent)) < RUNNING:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("the agents never all ran:\n" + "".join(proc.communicate()))
        time.sleep(0.05)
    running = _agents(agent)
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=120)  # not the agents' 60-minute timeout
    finally:
        if proc.poll() is None:  # it hangs: end it (its agents die with it), then fail
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, out + err
    # No agent outlives the run: bwrap's namespace is torn down as the run ends (a bounded
    # wait for the kernel to finish; an agent that kept running sleeps for 15 minutes).
    until = time.monotonic() + 30
    while _running(marker) and time.monotonic() < until:
        time.sleep(0.05)
    assert not _running(marker), running
    assert state(repo, "add-slugify") == "REQUIREMENTS"  # nothing corrupted; resumable
    check = repo.run("agent", "check", "add-slugify", "--json", session="run").json()
    assert {a["condition"] for a in check["agents"]} <= {"WORKING", "MISSING"}


RUNNING = 4  # agents the test's run starts at once ([agents] max_parallel)


def cmdlines() -> Iterator[tuple[int, list[bytes]]]:
    """(pid, argv) of every process, skipping one that exits meanwhile (Path.glob over /proc
    lets one ProcessLookupError end the whole scan)."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        yield int(name), argv


def _agents(script: Path) -> list[int]:
    """The agents running `script` (the interpreter itself, not bwrap around it)."""
    return [pid for pid, argv in cmdlines() if len(argv) > 1 and argv[1] == str(script).encode()]


def _running(marker: str) -> bool:
    return any(marker.encode() in b"\0".join(argv) for _, argv in cmdlines())
