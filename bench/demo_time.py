"""Wall time of `taskgate demo --yes` and where it goes: taskgate itself, git, the build, and the
agents (issue 6).

Run: python bench/demo_time.py [runs] [--against=DIR]

The demo runs in this process so the helpers can be timed: agent batches are timed around the
runner's parallel invocation (wall time, so parallel agents are not double counted), git and
the build around their subprocess calls made outside agent batches. taskgate's own share is
the rest.

With --against=DIR (another checkout, e.g. `git worktree add --detach /tmp/before main`): each
run is a fresh process on this tree or on DIR's src (this script's timing either way),
alternating, after one untimed run in that process (imports); the CPU time of the process
(user + sys, its threads included, not its git and build children) is printed too.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import ROOT

# --tree=DIR (a child of --against): that checkout's src instead of this one's
sys.path.insert(
    0, str(next((Path(a[7:]).resolve() for a in sys.argv if a[:7] == "--tree="), ROOT) / "src")
)

from taskgate.agents import build_sandbox
from taskgate.cli.main import main
from taskgate.engine import anchor as anchor_mod
from taskgate.engine import views as views_mod
from taskgate.git import cmd as git_cmd
from taskgate.orchestrator import pool as pool_mod

TIMES: dict[str, float] = {"git": 0.0, "build": 0.0, "agents": 0.0}
COUNTS: dict[str, int] = {"git": 0, "views": 0}  # taskgate's own git processes, view writes
_IN_AGENTS = threading.local()
_BUSY = [0]  # agent batches or builds running now (their threads' git is theirs)
# Git that taskgate runs in its own worker threads (parallel checkouts, outside agent batches
# and builds): (start, end) per process; their union is git's wall time, while the main thread
# waits for them.
_WORKER_GIT: list[tuple[float, float]] = []
_LOCK = threading.Lock()


def _timed(name: str, fn: Callable[..., Any]) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            TIMES[name] += time.perf_counter() - start

    return wrapper


def _git(fn: Callable[..., Any]) -> Any:
    """taskgate's own git: on the main thread outside agent batches and builds, and in its
    worker threads while none runs."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        main_thread = threading.current_thread() is threading.main_thread()
        if getattr(_IN_AGENTS, "on", False) or (not main_thread and _BUSY[0]):
            return fn(*args, **kwargs)
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            end = time.perf_counter()
            with _LOCK:
                COUNTS["git"] += 1
                if main_thread:
                    TIMES["git"] += end - start
                else:
                    _WORKER_GIT.append((start, end))

    return wrapper


def _union(spans: list[tuple[float, float]]) -> float:
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def _build(fn: Callable[..., Any]) -> Callable[..., Any]:
    timed = _timed("build", fn)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        was = getattr(_IN_AGENTS, "on", False)
        _IN_AGENTS.on = True  # git started by the build's sandbox is not taskgate's own
        _BUSY[0] += 1
        try:
            return timed(*args, **kwargs)
        finally:
            _IN_AGENTS.on = was
            _BUSY[0] -= 1

    return wrapper


def _counted(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        COUNTS[name] += 1
        return fn(*args, **kwargs)

    return wrapper


def _agents(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wall time of agent work started from the main thread (a parallel batch counts once)."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        outer = threading.current_thread() is threading.main_thread() and not getattr(
            _IN_AGENTS, "on", False
        )
        if outer:
            _IN_AGENTS.on = True
            _BUSY[0] += 1
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            if outer:
                TIMES["agents"] += time.perf_counter() - start
                _IN_AGENTS.on = False
                _BUSY[0] -= 1

    return wrapper


def one_run() -> dict[str, float]:
    for key in TIMES:
        TIMES[key] = 0.0
    for key in COUNTS:
        COUNTS[key] = 0
    _WORKER_GIT.clear()
    INSIDE["steps"] = 0.0
    target = Path(tempfile.mkdtemp(prefix="taskgate-bench-demo-")) / "textkit"
    start = time.perf_counter()
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["demo", "--dir", str(target), "--yes"])
    total = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    assert code == 0, f"demo failed ({code}):\n{out.getvalue()[-2000:]}\n{err.getvalue()}"
    threads = _union(_WORKER_GIT)
    TIMES["git"] += threads
    own = total - sum(TIMES.values())
    return {
        "total": total,
        **TIMES,
        "taskgate": own,
        "cpu": after.ru_utime - cpu.ru_utime + after.ru_stime - cpu.ru_stime,
        "git_threads": threads,
        "inside_agents": INSIDE["steps"],
        **{f"n_{k}": v for k, v in COUNTS.items()},
    }


INSIDE: dict[str, float] = {"steps": 0.0}  # taskgate's own steps inside agent batches


def _inside_agents(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Time taskgate's store steps and view renders that run on the main thread inside an
    agent batch (WORKING marks, the views rendered before the agents start): counted as the
    agents' time like the rest of the batch, printed on their own line."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        inside = getattr(_IN_AGENTS, "on", False) and not getattr(_IN_AGENTS, "step", False)
        if not inside or threading.current_thread() is not threading.main_thread():
            return fn(*args, **kwargs)
        _IN_AGENTS.step = True
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            INSIDE["steps"] += time.perf_counter() - start
            _IN_AGENTS.step = False

    return wrapper


def _instrument() -> None:
    from taskgate.engine.core import Engine

    Engine.step = _inside_agents(Engine.step)  # type: ignore[method-assign]
    if hasattr(Engine, "flush_views"):
        Engine.flush_views = _inside_agents(Engine.flush_views)  # type: ignore[method-assign]
    git_cmd.run = _git(git_cmd.run)
    if hasattr(anchor_mod, "_git"):  # anchors start their git without git.cmd (issue 18)
        anchor_mod._git = _git(anchor_mod._git)
    # The build runs through the build sandbox (issue 14); the git it runs there is the build's.
    build_sandbox.Confinement.run = _build(build_sandbox.Confinement.run)  # type: ignore[method-assign]
    pool_mod.AgentPool.invoke_all = _agents(pool_mod.AgentPool.invoke_all)  # type: ignore[method-assign]
    pool_mod.invoke = _agents(pool_mod.invoke)  # type: ignore[assignment]
    views_mod._write_view = _counted("views", views_mod._write_view)  # type: ignore[assignment]


def _report(title: str, results: list[dict[str, float]]) -> None:
    print(title)
    total = statistics.median(r["total"] for r in results)
    for key in ("total", "taskgate", "git", "agents", "build"):
        value = statistics.median(r[key] for r in results)
        print(f"  {key:<9} {value:6.2f} s  {value / total * 100:5.1f} %")
    git_runs = statistics.median(r["n_git"] for r in results)
    view_writes = statistics.median(r["n_views"] for r in results)
    print(f"  taskgate's own git processes: {git_runs:.0f}; view files written: {view_writes:.0f}")
    threads = statistics.median(r.get("git_threads", 0.0) for r in results)
    print(f"  of git, in taskgate's worker threads (parallel checkouts): {threads:.2f} s")
    inside = statistics.median(r.get("inside_agents", 0.0) for r in results)
    print(f"  of agents, taskgate's steps and view renders inside the batches: {inside:.2f} s")
    cpu = statistics.median(r["cpu"] for r in results)
    print(f"  CPU of the process (user+sys): {cpu:.2f} s")


def _child(tree: Path) -> dict[str, float]:
    """One timed run in a fresh process on `tree`'s src (after an untimed one)."""
    result = subprocess.run(
        [sys.executable, __file__, "--child", f"--tree={tree}"],
        cwd=Path(__file__).parent,
        env={k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    data: dict[str, float] = json.loads(result.stdout.strip().splitlines()[-1])
    return data


def versus(runs: int, other: Path) -> int:
    print(f"load average before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    mine: list[dict[str, float]] = []
    theirs: list[dict[str, float]] = []
    for _ in range(runs):
        mine.append(_child(ROOT))
        theirs.append(_child(other))
    title = f"taskgate demo --yes, {runs} runs (two tasks: HIGH code + LOW docs), median:"
    _report(f"this tree: {title}", mine)
    _report(f"{other}: {title}", theirs)
    print(f"load average after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    return 0


def main_bench() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    runs = int(args[0]) if args else 3
    against = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--against=")), "")
    if against:
        return versus(runs, Path(against).resolve())
    _instrument()
    if "--child" in sys.argv:
        one_run()  # imports and first-use caches, untimed
        print(json.dumps(one_run()))
        return 0
    results = [one_run() for _ in range(runs)]
    _report(f"taskgate demo --yes, {runs} runs (two tasks: HIGH code + LOW docs), median:", results)
    return 0


if __name__ == "__main__":
    sys.exit(main_bench())
