"""What choosing the git the hooks run costs (docs/security.md, "The git the hooks run"):
taskgate.spawn.git_program, which takes the first `git` on PATH the agent cannot have written
(a stat per PATH entry up to git, one per component of its path), in the hook processes of a
guarded session (the main agent in IMPLEMENTATION): PreToolUse of a plain `ls` (the guard
marker's stat, then the choice: PreToolUse fails closed without such a git) and PostToolUse of
it (the effect check's `git status`, run by that git's real path instead of a PATH search).

With --against DIR (a checkout of the tree before, e.g. `git worktree add /tmp/before main`)
the same hooks of that tree run interleaved in the same rounds, on the same repository and
session. Medians: the wall as a ratio to `python3 -c pass`, and the child's CPU time (user +
sys, getrusage deltas), which the machine's load moves less.

Run: python bench/hook_git.py [rounds] [--against DIR]
"""

from __future__ import annotations

import json
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, compile_sources, env


def _run(cmd: list[str], cwd: Path, stdin: str) -> tuple[float, float]:
    """(wall, child CPU) seconds of one command fed `stdin` (it must succeed)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env(), input=stdin.encode(), check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def _in_process(rounds: int) -> float:
    """Median microseconds of one git_program() choice, its cache emptied each time."""
    from taskgate import spawn

    samples = []
    for _ in range(rounds * 10):
        spawn._FOUND.clear()
        start = time.perf_counter_ns()
        spawn.git_program()
        samples.append((time.perf_counter_ns() - start) / 1000)
    return statistics.median(samples)


def main() -> int:
    argv = sys.argv[1:]
    tree: Path | None = None
    if "--against" in argv:
        at = argv.index("--against")
        tree = Path(argv[at + 1]).resolve()
        del argv[at : at + 2]
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "src")],
                       check=True, capture_output=True)  # fmt: skip
    rounds = int(argv[0]) if argv else 30
    compile_sources()
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import Repo, make_repo  # the tests' repository builders, real CLI underneath
    from flow import to_implementation
    from taskgate.hooks.install import default_program

    home = Path(tempfile.mkdtemp(prefix="taskgate-bench-home-"))
    (home / ".gitconfig").write_text("[user]\n\tname = B\n\temail = b@example.com\n")
    os.environ.update(HOME=str(home), GIT_CONFIG_NOSYSTEM="1")  # never the real home
    base = Path(tempfile.mkdtemp(prefix="taskgate-bench-git-")) / "repo"
    repo: Repo = make_repo(base)
    to_implementation(repo, "add-login")
    work = repo.worktree("add-login")
    call = {"session_id": "s1", "transcript_path": "", "cwd": str(work),
            "permission_mode": "default", "tool_name": "Bash",
            "tool_input": {"command": "ls"}}  # fmt: skip
    pre = json.dumps({**call, "hook_event_name": "PreToolUse"})
    post = json.dumps({**call, "hook_event_name": "PostToolUse", "tool_response": {}})
    programs = {"this tree": shlex.split(default_program())}
    if tree is not None:
        programs["before"] = [sys.executable, "-S", str(tree / "src/taskgate/hooks/launch.py")]
    rows: dict[str, tuple[list[str], str]] = {"python3 -c pass": ([sys.executable, "-c", "pass"],
                                                                  "")}  # fmt: skip
    for event, stdin in (("PreToolUse", pre), ("PostToolUse", post)):
        for name, program in programs.items():
            rows[f"{event} `ls`, guarded, {name}"] = ([*program, event], stdin)
    _run([*programs["this tree"], "PreToolUse"], work, pre)  # the guarded baseline
    walls: dict[str, list[float]] = {name: [] for name in rows}
    cpus: dict[str, list[float]] = {name: [] for name in rows}
    load = os.getloadavg()
    for _ in range(rounds):
        for name, (cmd, stdin) in rows.items():
            wall, cpu = _run(cmd, work, stdin)
            walls[name].append(wall)
            cpus[name].append(cpu)
    print(f"the git the hooks run, {rounds} rounds, {os.cpu_count()} CPUs, load average "
          "{:.2f} {:.2f} {:.2f} at the start, {:.2f} {:.2f} {:.2f} at the end".format(
              *load, *os.getloadavg()))  # fmt: skip
    floor, cpu_floor = (statistics.median(v["python3 -c pass"]) for v in (walls, cpus))
    print(f"{'':44} {'median ms':>10} {'/ python':>9} {'CPU ms':>8} {'/ python':>9}")
    for name in rows:
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        print(f"{name:44} {wall * 1000:10.2f} {wall / floor:9.2f} {cpu * 1000:8.2f} "
              f"{cpu / cpu_floor:9.2f}")  # fmt: skip
    print(
        f"git_program() in the process, cache emptied: {_in_process(rounds):.1f} us median "
        f"(PATH of {len(os.environ.get('PATH', '').split(os.pathsep))} entries)"
    )
    shutil.rmtree(base.parent, ignore_errors=True)
    shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
