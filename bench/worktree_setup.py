"""Time to set up a task worktree plus 8 agent worktrees with taskgate's `ensure_worktrees`
(registration serialised on the repository lock, checkouts in parallel), as a ratio to the same
`git worktree add` commands run sequentially by a plain script, in the same run (issue 4).

Run: python bench/worktree_setup.py [rounds] [files]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, env, git, median_ms

sys.path.insert(0, str(ROOT / "src"))

from taskgate.git import repo as gitrepo

AGENTS = ("architect", "style", "quality", "build", "test", "security", "performance", "usability")


def sample_repo(files: int) -> Path:
    """A repository whose tree is big enough for checkout to matter (`files` small files)."""
    repo = Path(tempfile.mkdtemp(prefix="taskgate-bench-wt-")) / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "bench@example.com")
    git(repo, "config", "user.name", "bench")
    for i in range(files):
        path = repo / f"pkg{i % 40}" / f"mod{i}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"# module {i}\n" + "VALUE = 1\n" * 40)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "init")
    return repo


def layout(repo: Path, task: str) -> list[tuple[Path, str, str]]:
    """(path, branch, base) for the task worktree and its 8 agent worktrees, in order."""
    root = repo / ".taskgate" / "tasks" / task
    return [(root / "code", task, "main")] + [
        (root / "agents" / a / "code", f"{task}-{a}", task) for a in AGENTS
    ]


def plain(repo: Path, task: str) -> float:
    """The baseline: the same `git worktree add` commands, one after the other."""
    start = time.perf_counter()
    for path, branch, base in layout(repo, task):
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["git", "worktree", "add", "-q", "-b", branch, str(path), base],
            cwd=repo,
            env=env(),
            check=True,
            capture_output=True,
        )
    return time.perf_counter() - start


def ours(repo: Path, task: str) -> float:
    """taskgate: one `ensure_worktrees` call for the task and its agents."""
    specs = [gitrepo.WorktreeSpec(p, b, base) for p, b, base in layout(repo, task)]
    start = time.perf_counter()
    gitrepo.ensure_worktrees(repo, repo / ".git", specs)
    return time.perf_counter() - start


def reset(repo: Path, task: str) -> None:
    """Remove what one round created (not timed)."""
    shutil.rmtree(repo / ".taskgate" / "tasks" / task)
    git(repo, "worktree", "prune")
    for _, branch, _ in layout(repo, task):
        git(repo, "branch", "-q", "-D", branch)


def check(repo: Path, task: str) -> None:
    """Both variants must leave the same, clean worktrees."""
    for path, branch, _ in layout(repo, task):
        out = subprocess.run(
            ["git", "status", "--porcelain", "-b"], cwd=path, env=env(),
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        assert out.splitlines() == [f"## {branch}"], (path, out)


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    files = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    os.environ.update({k: v for k, v in env().items() if k != "TASKGATE_SESSION"})
    repo = sample_repo(files)
    base: list[float] = []
    mine: list[float] = []
    for i in range(rounds):  # interleaved, so machine noise hits both sides alike
        base.append(plain(repo, f"plain-{i}"))
        check(repo, f"plain-{i}")
        reset(repo, f"plain-{i}")
        mine.append(ours(repo, f"ours-{i}"))
        check(repo, f"ours-{i}")
        reset(repo, f"ours-{i}")
    shutil.rmtree(repo.parent)
    load = os.getloadavg()[0]  # the parallel part can only win idle cores: say how idle
    print(f"task + {len(AGENTS)} agent worktrees, {files} files each, {rounds} rounds, "
          f"{os.cpu_count()} CPUs (load average {load:.1f})")  # fmt: skip
    print(f"plain sequential git worktree add  median {median_ms(base):8.1f} ms")
    print(f"taskgate ensure_worktrees          median {median_ms(mine):8.1f} ms")
    print(f"taskgate / plain ratio                    {median_ms(mine) / median_ms(base):8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
