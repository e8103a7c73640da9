"""Ctrl-C during `taskgate run` while an agent is still being started (orchestrator/pool.py,
process.end_sessions_until_done).

The race: SIGINT reaches the main thread only; the pool ended the agents' process groups it
found and re-raised. An agent whose worker was still starting it (building the request,
preparing the sandbox) at that moment was not there to be ended, started right after, and the
run waited for it until the agent timeout. The test makes the window exact with TASKGATE_WAIT
(failpoints.wait): one agent's worker holds just before it starts its agent, the others run
and sleep; Ctrl-C lands; the first clean-up pass is done (`sessions:first-pass`); only then is
the held agent let go. The run must end long before the agent timeout, leave no agent
running, keep the work the killed agents committed, and resume to the end with a clean audit.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

from conftest import SRC, Repo, git
from test_run import cmdlines, sample, state

ROOT = Path(__file__).resolve().parent.parent
SCRIPTED = ROOT / "bench" / "scripted_agent.py"
TASK = "add-slugify"
HELD = "style"  # the agent still being started when Ctrl-C comes
TIMEOUT_MIN = 2  # [protocol] agent_timeout_minutes: what an unfixed run waits for
SLEEP_S = 900  # the agents' sleep: far beyond the timeout and every wait below

# While the `hang` file exists, an implementer commits its work in progress, then sleeps
# (its command line carries MARKER, so the test sees it); the held agent only sleeps. Without
# the file every agent is the built-in scripted agent (bench/scripted_agent.py).
AGENT = """
import os, pathlib, runpy, subprocess, sys
name, mode = os.environ["TASKGATE_AGENT"], os.environ["TASKGATE_MODE"]
if pathlib.Path(HANG).exists() and mode == "implementation":
    if name != HELD:
        pathlib.Path(f"wip-{name}.txt").write_text(f"{name}'s work in progress\\n")
        subprocess.run(["git", "add", f"wip-{name}.txt"], check=True)
        subprocess.run(["git", "commit", "-qm", f"[agent:{name}] work in progress"], check=True)
    os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(SLEEP)", MARKER])
sys.argv = [SCRIPTED]
runpy.run_path(SCRIPTED, run_name="__main__")
"""


def _setup(tmp_path: Path, marker: str) -> tuple[Repo, Path]:
    hang = tmp_path / "hang"
    script = tmp_path / "agent.py"
    script.write_text(
        textwrap.dedent(AGENT)
        .replace("HANG", repr(str(hang)))
        .replace("HELD", repr(HELD))
        .replace("SLEEP", str(SLEEP_S))
        .replace("MARKER", repr(marker))
        .replace("SCRIPTED", repr(str(SCRIPTED)))
    )
    # The real interpreter, not a `python3` found on PATH (a shim may not run in the sandbox);
    # all six agents at once, so the batch is one round of workers.
    command = json.dumps([os.path.realpath(sys.executable), str(script)])
    readable = json.dumps([str(tmp_path), str(ROOT / "bench"), sys.base_prefix])
    config = (f"max_parallel = 6\nsandbox_readable = {readable}\n\n"
              f"[agents.command]\ncommand = {command}\n")  # fmt: skip
    repo = sample(tmp_path, extra=config)
    toml = repo.path / "taskgate.toml"
    text = toml.read_text().replace('backend = "scripted"', 'backend = "command"')
    text = text.replace("[protocol]\n", f"[protocol]\nagent_timeout_minutes = {TIMEOUT_MIN}\n", 1)
    toml.write_text(text)
    git(repo.path, "commit", "-qm", "command agents", "--", "taskgate.toml")
    return repo, hang


def _start_run(repo: Repo, **env: str) -> subprocess.Popen[str]:
    """`taskgate run TASK --yes` as session "run", in the background, with `env` added."""
    return subprocess.Popen(
        [sys.executable, "-m", "taskgate", "run", TASK, "--yes"],
        cwd=repo.path,
        env=dict(os.environ, PYTHONPATH=str(SRC), TASKGATE_SESSION="run", **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _with_marker(marker: str) -> list[int]:
    """Processes whose command line carries `marker`."""
    return [pid for pid, argv in cmdlines() if marker.encode() in b"\0".join(argv)]


def _arrived(gate: Path) -> bool:
    return any(gate.parent.glob(f"{gate.name}.*.arrived"))


def _until(what: str, check: Callable[[], bool], proc: subprocess.Popen[str], limit: float) -> None:
    """Poll `check()` until true; fail (ending the run) if the run exits or `limit` s pass."""
    deadline = time.monotonic() + limit  # a bound for a loaded machine, not a speed claim
    while not check():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"{what} never happened:\n" + "".join(proc.communicate()))
        time.sleep(0.05)


def test_ctrl_c_while_an_agent_is_still_starting_ends_the_run_promptly(tmp_path: Path) -> None:
    marker = f"tg-interrupt-{os.getpid()}-{tmp_path.name}"
    repo, hang = _setup(tmp_path, marker)
    hang.write_text("the implementers commit, then sleep\n")
    held, interrupted = tmp_path / "held.go", tmp_path / "interrupted.go"
    waits = f"pool:start:implementation:{HELD}={held},sessions:first-pass={interrupted}"
    proc = _start_run(repo, TASKGATE_WAIT=waits)

    def batch_running() -> bool:
        """Every other implementer committed and sleeps; the held one's worker waits."""
        if not _arrived(held):
            return False
        team = repo.ok("status", TASK, "--json", session="run").json()["required_agents"]
        return len(_with_marker(marker)) == len(team) - 1

    _until("the batch running", batch_running, proc, 240)
    proc.send_signal(signal.SIGINT)
    _until("the pool's clean-up", lambda: _arrived(interrupted), proc, 120)
    held.touch()  # the held agent starts now, after the clean-up pass has ended the others
    interrupted.touch()
    released = time.monotonic()
    timeout_s = TIMEOUT_MIN * 60
    try:
        out, err = proc.communicate(timeout=timeout_s / 2)
    except subprocess.TimeoutExpired:
        alive = _with_marker(marker)  # the held agent, started after the clean-up
        proc.kill()  # its agents die with it (PR_SET_PDEATHSIG, bwrap --die-with-parent)
        out, err = proc.communicate()
        raise AssertionError(
            f"the run waits for its agent's timeout ({timeout_s} s); agents still running: "
            f"{alive}\n{err}"
        ) from None
    took = time.monotonic() - released
    assert proc.returncode == 130, out + err
    assert took < timeout_s / 2  # a ratio of the agent timeout, never a fixed figure
    # The held agent did start after the first pass, and the pool ended it (not its timeout).
    first = repo.task_dir(TASK) / "agents" / HELD / "implementation-r1-a1.result.json"
    assert json.loads(first.read_text())["result"]["exit_code"] == -signal.SIGKILL
    _ended_kept_and_resumed(repo, hang, marker)


def _ended_kept_and_resumed(repo: Repo, hang: Path, marker: str) -> None:
    """No agent outlives the run (a bounded wait for the kernel to tear the sandboxes down; an
    agent that kept running sleeps for SLEEP_S) and no registration of one is left behind; the
    killed implementers' commits are on their branches, their worktrees clean; audit passes;
    the task resumes to the end with their work on main."""
    until = time.monotonic() + 30
    while _with_marker(marker) and time.monotonic() < until:
        time.sleep(0.05)
    assert not _with_marker(marker)
    assert not list((repo.path / ".taskgate" / "peers").glob("*.json"))
    assert state(repo, TASK) == "IMPLEMENTATION"
    agents = repo.ok("status", TASK, "--json", session="run").json()["required_agents"]
    killed = [a for a in agents if a != HELD]
    for agent in killed:
        log = repo.git("log", "--format=%s", f"{TASK}-{agent}")
        assert f"[agent:{agent}] work in progress" in log, agent
        worktree = repo.task_dir(TASK) / "agents" / agent / "code"
        assert git(worktree, "status", "--porcelain") == "", agent
    assert repo.run("audit", TASK, "--json", session="run").code == 0
    # The task resumes: the agents work normally now and the run goes to the end.
    hang.unlink()
    repo.ok("run", TASK, "--yes", session="run")
    assert state(repo, TASK) == "CLEANUP"
    main_files = repo.git("ls-tree", "-r", "--name-only", "main").split()
    assert {f"wip-{a}.txt" for a in killed} <= set(main_files)  # the killed agents' work
    audit = repo.run("audit", TASK, "--json", session="run")
    assert audit.code == 0, audit.out
    git(repo.path, "fsck", "--no-progress")


def test_sigterm_ends_the_run_like_ctrl_c_and_keeps_the_agents_work(tmp_path: Path) -> None:
    """`kill PID` (or a closed terminal's SIGHUP): the default action ended `run` at once, and
    the commits the agents had made in their sandboxes never reached their branches."""
    marker = f"tg-term-{os.getpid()}-{tmp_path.name}"
    repo, hang = _setup(tmp_path, marker)
    hang.write_text("the implementers commit, then sleep\n")
    proc = _start_run(repo)

    def batch_running() -> bool:
        """Every implementer sleeps (all but HELD after committing)."""
        if len(_with_marker(marker)) < 2:
            return False
        team = repo.ok("status", TASK, "--json", session="run").json()["required_agents"]
        return len(_with_marker(marker)) == len(team)

    _until("the batch running", batch_running, proc, 240)
    proc.send_signal(signal.SIGTERM)
    timeout_s = TIMEOUT_MIN * 60
    out, err = proc.communicate(timeout=timeout_s / 2)  # a ratio of the agent timeout
    assert proc.returncode == 130, out + err
    _ended_kept_and_resumed(repo, hang, marker)
