"""What confinement costs (issue 14): bubblewrap around agent processes, against the same work
unconfined, in the same run. Ratios only; the absolute times depend on the machine.

Run: python bench/confinement.py [runs]

1. `taskgate demo --yes`: the demo's built-in agents run inside taskgate (no agent process), so
   confinement is not involved; its time is printed for reference.
2. The demo's two tasks with real agent processes (`taskgate run --all --yes`, the scripted
   agents as a command executable: bench/scripted_agent.py), `[agents] sandbox = "bwrap"`
   against `"none"`, alternating.
3. One agent invocation (a command agent that writes its requirement report and commits),
   confined against unconfined, alternating, through `taskgate.agents.invoke.invoke`.
4. The demo's tasks with the built-in agents (no agent process): what differs is the
   `[validation]` build (and the build on main) running confined or not, `[agents] sandbox =
   "bwrap"` against `"none"`, alternating.
5. One `taskgate validate` of a small pytest suite, confined against unconfined, alternating.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from common import ROOT, compile_sources, env

sys.path.insert(0, str(ROOT / "src"))

from taskgate.agents import sandbox
from taskgate.agents.base import Mode, TaskBrief
from taskgate.agents.config import parse_agents_config
from taskgate.agents.invoke import build_request, invoke
from taskgate.engine.workspace import find_workspace
from taskgate.orchestrator.demo import create_sample

AGENT = ROOT / "bench" / "scripted_agent.py"
ONE_AGENT = """#!/bin/sh
printf 'requirement %.0s' $(seq 40) > "$TASKGATE_REPORT_PATH"
echo x >> notes.txt && git add notes.txt && git commit -q -m "[agent:$TASKGATE_AGENT] notes"
echo '{"status": "COMPLETE", "message": "done"}'
"""


def cli(cwd: Path, *args: str) -> float:
    """Seconds for one `taskgate ARGS` (must succeed)."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "taskgate", *args],
        cwd=cwd,
        env=env("bench"),
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0, f"{args}: {proc.stdout[-1500:]}\n{proc.stderr[-1500:]}"
    return elapsed


def demo() -> float:
    target = Path(tempfile.mkdtemp(prefix="taskgate-bench-demo-")) / "textkit"
    return cli(ROOT, "demo", "--dir", str(target), "--yes")


def demo_tasks(setting: str) -> float:
    """The demo's tasks through agent processes, with `sandbox = setting`."""
    path = create_sample(
        Path(tempfile.mkdtemp(prefix="taskgate-bench-conf-")) / "textkit", auto_approve=True
    )
    toml = path / "taskgate.toml"
    text = toml.read_text().replace('backend = "scripted"', 'backend = "command"')
    text += f'sandbox = "{setting}"\n\n[agents.command]\n'
    text += f"command = {json.dumps([sys.executable, str(AGENT)])}\n"
    toml.write_text(text)
    subprocess.run(["git", "commit", "-qam", "agents"], cwd=path, env=env(), check=True)
    cli(path, "init")
    return cli(path, "run", "--all", "--yes")


def demo_builds(setting: str) -> float:
    """The demo's tasks with the built-in agents, the builds confined by `sandbox = setting`."""
    path = create_sample(
        Path(tempfile.mkdtemp(prefix="taskgate-bench-build-")) / "textkit", auto_approve=True
    )
    toml = path / "taskgate.toml"
    toml.write_text(toml.read_text() + f'sandbox = "{setting}"\n')
    subprocess.run(["git", "commit", "-qam", "sandbox"], cwd=path, env=env(), check=True)
    cli(path, "init")
    return cli(path, "run", "--all", "--yes")


SUITE = """
def test_one():
    assert 1 + 1 == 2


def test_two():
    assert "a".upper() == "A"
"""


def validation_env() -> Path:
    """The demo repository with a small pytest suite committed on main."""
    root = Path(tempfile.mkdtemp(prefix="taskgate-bench-validate-"))
    path = create_sample(root / "textkit", auto_approve=True)
    cli(path, "init")
    (path / "test_suite_bench.py").write_text(SUITE)
    subprocess.run(["git", "add", "."], cwd=path, env=env(), check=True)
    subprocess.run(["git", "commit", "-qm", "suite"], cwd=path, env=env(), check=True)
    return path


def validate_once(path: Path, setting: str) -> float:
    """One run of the suite in a linked worktree, as `taskgate validate` runs its commands
    (agents/build_sandbox.py), confined or not."""
    from taskgate.agents import build_sandbox
    from taskgate.agents.sandbox import Choice

    ws = find_workspace(path)
    conf = (build_sandbox.of(ws) if setting == "bwrap"
            else build_sandbox.Confinement(Choice(False, "bench")))  # fmt: skip
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_suite_bench.py"]
    worktree = path / ".taskgate" / "bench-validate"
    if not worktree.exists():
        subprocess.run(["git", "worktree", "add", "-q", "-b", "bench-validate", str(worktree)],
                       cwd=path, env=env(), check=True)  # fmt: skip
    start = time.perf_counter()
    result, outcome = conf.run(cmd, cwd=worktree, env=env(), timeout=300)
    elapsed = time.perf_counter() - start
    assert result.ok, result.stdout + result.stderr
    assert outcome.mode == ("confined" if setting == "bwrap" else "unconfined")
    return elapsed


def one_invocation_env() -> tuple[Path, str]:
    """A repository with a started task at REQUIREMENTS and an agent worktree."""
    root = Path(tempfile.mkdtemp(prefix="taskgate-bench-one-"))
    path = create_sample(root / "textkit", auto_approve=True)
    cli(path, "init")
    cli(path, "start", "add-slugify")
    worktree = path / ".taskgate" / "tasks" / "add-slugify" / "code"
    subprocess.run(
        [sys.executable, "-m", "taskgate", "classify", "add-slugify"],
        cwd=worktree, env=env("bench"), check=True, capture_output=True,
    )  # fmt: skip
    subprocess.run(
        [sys.executable, "-m", "taskgate", "transition", "add-slugify", "REQUIREMENTS"],
        cwd=worktree, env=env("bench"), check=True, capture_output=True,
    )  # fmt: skip
    status = subprocess.run(
        [sys.executable, "-m", "taskgate", "status", "add-slugify", "--json"],
        cwd=path, env=env("bench"), check=True, capture_output=True, text=True,
    )  # fmt: skip
    agent = json.loads(status.stdout)["required_agents"][0]
    script = root / "agent.sh"
    script.write_text(ONE_AGENT)
    script.chmod(0o755)
    return path, agent


def invocation(path: Path, agent: str, setting: str, attempt: int) -> float:
    ws = find_workspace(path)
    config = parse_agents_config(
        {"backend": "command", "sandbox": setting,
         "command": {"command": [str(path.parent / "agent.sh")]}},
        path,
    )  # fmt: skip
    request = build_request(
        ws, config, TaskBrief("add-slugify"), agent, Mode.REQUIREMENTS, attempt=attempt
    )
    start = time.perf_counter()
    result = invoke(replace(request, team=(agent,)))
    elapsed = time.perf_counter() - start
    assert result.ok, result.reason
    assert result.meta["sandbox"]["mode"] == ("confined" if setting == "bwrap" else "unconfined")
    return elapsed


def main() -> int:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    if not sandbox.probe()[0]:
        print(f"bubblewrap does not work here ({sandbox.probe()[1]}): nothing to compare")
        return 0
    compile_sources()
    demo_times = [demo() for _ in range(runs)]
    confined: list[float] = []
    unconfined: list[float] = []
    for _ in range(runs):
        unconfined.append(demo_tasks("none"))
        confined.append(demo_tasks("bwrap"))
    path, agent = one_invocation_env()
    one_c: list[float] = []
    one_u: list[float] = []
    for i in range(max(5, runs * 3)):
        one_u.append(invocation(path, agent, "none", 2 * i + 1))
        one_c.append(invocation(path, agent, "bwrap", 2 * i + 2))
    build_c: list[float] = []
    build_u: list[float] = []
    for _ in range(runs):
        build_u.append(demo_builds("none"))
        build_c.append(demo_builds("bwrap"))
    vpath = validation_env()
    val_c: list[float] = []
    val_u: list[float] = []
    for _ in range(max(5, runs * 3)):
        val_u.append(validate_once(vpath, "none"))
        val_c.append(validate_once(vpath, "bwrap"))
    med = statistics.median
    print(f"confinement overhead, {runs} runs (medians; bubblewrap {sandbox.probe()[0]}):")
    print(f"  taskgate demo --yes (built-in agents, no agent process)   {med(demo_times):6.2f} s")
    print(
        f"  demo tasks, agent processes: unconfined {med(unconfined):6.2f} s, "
        f"confined {med(confined):6.2f} s, ratio {med(confined) / med(unconfined):.2f}"
    )
    print(
        f"  one agent invocation ({len(one_c)} each): unconfined {med(one_u) * 1000:6.1f} ms, "
        f"confined {med(one_c) * 1000:6.1f} ms, ratio {med(one_c) / med(one_u):.2f}, "
        f"+{(med(one_c) - med(one_u)) * 1000:.1f} ms"
    )
    print(
        f"  demo tasks, built-in agents, builds: unconfined {med(build_u):6.2f} s, "
        f"confined {med(build_c):6.2f} s, ratio {med(build_c) / med(build_u):.2f}"
    )
    print(
        f"  one pytest build ({len(val_c)} each): unconfined {med(val_u) * 1000:6.1f} ms, "
        f"confined {med(val_c) * 1000:6.1f} ms, ratio {med(val_c) / med(val_u):.2f}, "
        f"+{(med(val_c) - med(val_u)) * 1000:.1f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
