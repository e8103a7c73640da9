"""Shared helpers for the bench scripts: a scratch repository and timing of CLI runs."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TODO = "".join(
    f"## task-{i}: Task {i}\n- Purpose: p\n- Scope: s\n- Components: c\n- Files: src/m{i}.py\n\n"
    for i in range(3)
)


def env(session: str = "bench") -> dict[str, str]:
    """Environment for CLI runs: no inherited GIT_*, a session id, the source tree importable."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    e["TASKGATE_SESSION"] = session
    e["PYTHONPATH"] = str(ROOT / "src")
    # An installed package has its bytecode cached; measure that, not recompilation.
    e.pop("PYTHONDONTWRITEBYTECODE", None)
    return e


def compile_sources() -> None:
    """Write the .pyc files once so that every timed run starts like an installed CLI."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(ROOT / "src")],
        env=env(),
        check=True,
        capture_output=True,
    )


def git(cwd: Path, *args: str) -> None:
    """Run git quietly."""
    subprocess.run(["git", *args], cwd=cwd, env=env(), check=True, capture_output=True)


def scratch_repo(todo: str = TODO) -> Path:
    """A new repository with one commit and taskgate initialised."""
    repo = Path(tempfile.mkdtemp(prefix="taskgate-bench-")) / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "bench@example.com")
    git(repo, "config", "user.name", "bench")
    (repo / "todo.md").write_text(todo)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "init")
    compile_sources()
    tg(repo, "init")
    return repo


def tg(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run the taskgate CLI as a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "taskgate", *args],
        cwd=cwd,
        env=env(),
        capture_output=True,
        text=True,
        check=check,
    )


def timed(cmd: list[str], cwd: Path) -> float:
    """Wall time of one command in seconds (it must succeed)."""
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env(), check=True, capture_output=True)
    return time.perf_counter() - start


def median_ms(samples: list[float]) -> float:
    """Median in milliseconds."""
    return statistics.median(samples) * 1000
