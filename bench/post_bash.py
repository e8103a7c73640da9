"""PostToolUse after a pure Bash line (`git status`), by session kind and worktree size
(guardcmp, issue 18 sixth pass).

In a session whose effect baseline is guarded (the main agent may not write its task
worktree), PostToolUse now compares after every Bash call, the lines the analyser judges pure
reads included; elsewhere it still returns at once, after one stat of the session's guard
marker (hooks/dispatch.py guard_marker). Rows, interleaved in every round on the same
repository and store:

- `python3 -c pass`, the floor every ratio is taken to;
- unguarded session (s2 holds fix-typo, whose main agent may write): this tree, and with
  `--against DIR` the tree before the change ("before");
- guarded session (s1 holds add-login in IMPLEMENTATION): the same two.

Medians of wall time and of the child's CPU time (user+sys, getrusage deltas), both as ratios
to `python3 -c pass`; the load average before and after each table.

Run: python bench/post_bash.py [rounds] [--files N,M,...] [--against DIR]
     (`git worktree add --detach /tmp/before <commit>` makes DIR; default rounds 20, files 0,3000:
     0 is the tests' small repository, N adds N tracked files in 500-file directories)
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMAND = "git status"


def _arg(name: str) -> str | None:
    for at, arg in enumerate(sys.argv):
        if arg.startswith(f"{name}="):
            return arg.split("=", 1)[1]
        if arg == name and at + 1 < len(sys.argv):
            return sys.argv[at + 1]
    return None


def _launcher(tree: Path) -> list[str]:
    """The hook command `taskgate hooks install` writes, for the tree at `tree`."""
    return [sys.executable, "-S", str(tree / "src" / "taskgate" / "hooks" / "launch.py")]


def _run(cmd: list[str], cwd: Path, stdin: str) -> tuple[float, float]:
    """(wall s, child CPU s) of one command fed `stdin`; it must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, input=stdin.encode(), capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0 or proc.stdout.strip():
        raise SystemExit(f"{cmd} -> {proc.returncode}: {proc.stdout!r} {proc.stderr!r}")
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def _repo(files: int) -> tuple[Path, Path, Path]:
    """(repo, add-login's worktree: guarded for s1, fix-typo's directory: s2 may write)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import make_repo  # the tests' builders: the real CLI underneath
    from flow import to_implementation

    base = Path(tempfile.mkdtemp(prefix="taskgate-bench-pb-")) / "repo"
    repo = make_repo(base)
    for i in range(files):
        sub = base / "src" / f"d{i // 500}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"m{i}.py").write_text(f"x = {i}\n")
    if files:
        subprocess.run(["git", "add", "src"], cwd=base, check=True, capture_output=True)
        subprocess.run(["git", "commit", "-qm", "files"], cwd=base, check=True, capture_output=True)
    to_implementation(repo, "add-login")
    repo.ok("start", "fix-typo", session="s2")
    other = repo.task_dir("fix-typo") / "code"
    return base, repo.worktree("add-login"), other if other.is_dir() else base


def _inputs(session: str, cwd: Path) -> tuple[str, str]:
    call = {"session_id": session, "transcript_path": "", "cwd": str(cwd),
            "permission_mode": "default", "tool_name": "Bash",
            "tool_input": {"command": COMMAND}}  # fmt: skip
    pre = json.dumps({**call, "hook_event_name": "PreToolUse"})
    post = json.dumps({**call, "hook_event_name": "PostToolUse", "tool_response": {}})
    return pre, post


def table(files: int, rounds: int, before: Path | None) -> None:
    base, guarded_cwd, free_cwd = _repo(files)
    from taskgate.hooks.dispatch import guard_marker

    now = _launcher(ROOT)
    sessions = {"unguarded": ("s2", free_cwd), "guarded": ("s1", guarded_cwd)}
    cases: dict[str, tuple[list[str], Path, str]] = {}
    for kind, (session, cwd) in sessions.items():
        pre, post = _inputs(session, cwd)
        _run([*now, "PreToolUse"], cwd, pre)  # the session's baseline (and guard marker)
        if before is not None:
            cases[f"{kind}, before"] = ([*_launcher(before), "PostToolUse"], cwd, post)
        cases[f"{kind}, after"] = ([*now, "PostToolUse"], cwd, post)
    assert Path(guard_marker("s1")).exists() and not Path(guard_marker("s2")).exists()
    rows: dict[str, tuple[list[float], list[float]]] = {"python3 -c pass": ([], [])}
    rows.update({name: ([], []) for name in cases})
    label = f"{files} added files" if files else "the tests' small repository"
    tracked = subprocess.run(["git", "ls-files"], cwd=guarded_cwd, capture_output=True, text=True)
    print(f"\nPostToolUse after `{COMMAND}` (pure), {label} ({len(tracked.stdout.splitlines())}"
          f" tracked files in the task worktree), {rounds} rounds")  # fmt: skip
    print("load average (1, 5, 15 min) before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    for _ in range(rounds):
        wall, cpu = _run([sys.executable, "-c", "pass"], base, "")
        rows["python3 -c pass"][0].append(wall)
        rows["python3 -c pass"][1].append(cpu)
        for name, (cmd, cwd, stdin) in cases.items():
            wall, cpu = _run(cmd, cwd, stdin)
            rows[name][0].append(wall)
            rows[name][1].append(cpu)
    floor = statistics.median(rows["python3 -c pass"][0])
    cpu_floor = statistics.median(rows["python3 -c pass"][1]) or 1e-9
    print(f"{'case':22} {'median ms':>10} {'/ python':>9} {'cpu ms':>8} {'/ python':>9}")
    for name, (walls, cpus) in rows.items():
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        print(f"{name:22} {wall * 1000:10.1f} {wall / floor:9.2f} "
              f"{cpu * 1000:8.1f} {cpu / cpu_floor:9.2f}")  # fmt: skip
    print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    shutil.rmtree(base.parent, ignore_errors=True)


def main() -> int:
    against = _arg("--against")
    before = Path(against).resolve() if against else None
    if before is not None and not (before / "src" / "taskgate" / "hooks" / "launch.py").is_file():
        raise SystemExit(f"--against {before}: no src/taskgate/hooks/launch.py there")
    sizes = [int(n) for n in (_arg("--files") or "0,3000").split(",")]
    skip = {against, _arg("--files")}
    args = [a for a in sys.argv[1:] if not a.startswith("--") and a not in skip]
    rounds = int(args[0]) if args else 20
    home = Path(tempfile.mkdtemp(prefix="taskgate-bench-home-"))
    (home / ".gitconfig").write_text("[user]\n\tname = B\n\temail = b@example.com\n")
    for key in [k for k in os.environ if k.startswith("GIT_")] + ["XDG_STATE_HOME"]:
        os.environ.pop(key, None)
    os.environ.update(HOME=str(home), GIT_CONFIG_NOSYSTEM="1")  # never the real home
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # measure cached bytecode, as installed
    for tree in filter(None, (ROOT, before)):
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "src")],
                       check=True, capture_output=True)  # fmt: skip
    print(f"python {sys.version.split()[0]}; this tree {ROOT}; before: {before or '(none)'}")
    try:
        for files in sizes:
            table(files, rounds, before)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
