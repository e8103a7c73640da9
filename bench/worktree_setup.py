"""Two measurements of a task's worktrees, each a ratio to a plain script in the same run.

`checkout` (issue 4): the task worktree plus 8 agent worktrees with taskgate's `ensure_worktrees`
(registration serialised on the repository lock, checkouts in parallel) against the same
`git worktree add` commands run one after the other.

`setup` (issue 21): the same 9 worktrees made ready to work in, with a `.env` named by
`.worktreeinclude` and a `[worktree] setup` command (`pip install --no-index` of local wheels
into the worktree): `taskgate start` + `taskgate classify` (worktrees set up in parallel, and
with jobs = 1) against a plain script that adds each worktree, copies `.env` and runs the
command, one worktree after the other.

Run: python bench/worktree_setup.py [rounds] [files]
     python bench/worktree_setup.py setup [rounds] [wheels]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, env, git, median_ms, scratch_repo

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
    if sys.argv[1:2] == ["setup"]:
        return setup_main(sys.argv[2:])
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


# -- issue 21: worktrees ready to work in -------------------------------------------------------


def make_wheels(folder: Path, count: int) -> list[str]:
    """`count` small pure-Python wheels (a module of ~20 kB each) for `pip install --no-index`."""
    import base64
    import hashlib
    import zipfile

    folder.mkdir(parents=True)
    names = []
    for i in range(count):
        name = f"benchpkg{i}"
        files = {
            f"{name}/__init__.py": "".join(f"VALUE_{n} = {n}\n" for n in range(1500)),
            f"{name}-1.0.dist-info/METADATA": (
                f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
            ),
            f"{name}-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: bench\n"
            "Root-Is-Purelib: true\nTag: py3-none-any\n",
        }
        record = []
        for path, text in files.items():
            digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest())
            record.append(f"{path},sha256={digest.decode().rstrip('=')},{len(text.encode())}")
        record.append(f"{name}-1.0.dist-info/RECORD,,")
        files[f"{name}-1.0.dist-info/RECORD"] = "\n".join(record) + "\n"
        with zipfile.ZipFile(folder / f"{name}-1.0-py3-none-any.whl", "w") as whl:
            for path, text in files.items():
                whl.writestr(path, text)
        names.append(name)
    return names


def setup_command(wheels: Path, names: list[str]) -> list[str]:
    """The project's setup: its dependencies installed into the worktree from local wheels."""
    return [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
            "--no-index", "--find-links", str(wheels), "--target", ".deps", *names]  # fmt: skip


def ready_repo(rounds: int, command: list[str]) -> Path:
    """A repository with an ignored .env named by .worktreeinclude and one task per run."""
    todo = "".join(
        f"## ready-{i}: Task {i}\n- Purpose: p\n- Scope: s\n- Components: c\n- Risk: HIGH\n\n"
        for i in range(3 * rounds)
    )
    repo = scratch_repo(todo)
    (repo / ".gitignore").write_text(".env\n.deps/\n")
    (repo / ".worktreeinclude").write_text(".env\n")
    (repo / ".env").write_text("DATABASE_URL=postgres://localhost/bench\n")
    (repo / ".env").chmod(0o600)
    agents = json.dumps(list(AGENTS))
    # setup runs confined (issue 14): the wheels outside the repository are listed as readable
    wheels = command[command.index("--find-links") + 1] if "--find-links" in command else ""
    readable = f"[agents]\nsandbox_readable = [{json.dumps(wheels)}]\n\n" if wheels else ""
    (repo / "taskgate.toml").write_text(
        f"{readable}[risk.agents]\nhigh = {agents}\n\n[worktree]\nsetup = [{json.dumps(command)}]\n"
    )
    git(repo, "add", ".gitignore", ".worktreeinclude", "taskgate.toml")
    git(repo, "commit", "-q", "-m", "setup")
    return repo


def plain_ready(repo: Path, task: str, command: list[str]) -> float:
    """The baseline: add each worktree, copy .env, run the setup command, one after the other."""
    start = time.perf_counter()
    for path, branch, base in layout(repo, task):
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "worktree", "add", "-q", "-b", branch, str(path), base],
                       cwd=repo, env=env(), check=True, capture_output=True)  # fmt: skip
        shutil.copy2(repo / ".env", path / ".env")
        subprocess.run(command, cwd=path, env=env(), check=True, capture_output=True)
    return time.perf_counter() - start


def ours_ready(repo: Path, task: str, jobs: int, *, linked: bool = False) -> float:
    """taskgate: `start` + `classify` with [worktree] jobs (0: parallel); `linked`: no setup
    command, the main worktree's `.deps` is linked into every worktree instead."""
    config = repo / "taskgate.toml"
    text = config.read_text().split("jobs =")[0].rstrip("\n") + f"\njobs = {jobs}\n"
    if linked:
        text = text.replace("setup = [", 'symlink = [".deps"]\n# setup = [')
    config.write_text(text)
    session = env(session=f"bench-{task}")
    start = time.perf_counter()
    for args, cwd in ((["start", task], repo), (["classify", task], repo / ".taskgate" / "tasks"
                      / task / "code")):  # fmt: skip
        subprocess.run([sys.executable, "-m", "taskgate", *args], cwd=cwd, env=session,
                       check=True, capture_output=True)  # fmt: skip
    return time.perf_counter() - start


def check_ready(repo: Path, task: str, packages: int) -> None:
    """Every worktree has the .env and the installed packages, and a clean status."""
    for path, _, _ in layout(repo, task):
        assert (path / ".env").read_text() == (repo / ".env").read_text(), path
        installed = [p for p in (path / ".deps").glob("benchpkg*") if "." not in p.name]
        assert len(installed) == packages, (path, installed)
        out = subprocess.run(["git", "status", "--porcelain"], cwd=path, env=env(),
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
        assert out == "", (path, out)


def setup_main(argv: list[str]) -> int:
    """`setup [rounds] [wheels]`: the three variants, interleaved, and their ratios."""
    rounds = int(argv[0]) if argv else 3
    count = int(argv[1]) if len(argv) > 1 else 40
    os.environ.update({k: v for k, v in env().items() if k != "TASKGATE_SESSION"})
    os.environ["PIP_NO_CACHE_DIR"] = "1"
    scratch = Path(tempfile.mkdtemp(prefix="taskgate-bench-ready-"))
    names = make_wheels(scratch / "wheels", count)
    command = setup_command(scratch / "wheels", names)
    repo = ready_repo(rounds, command)
    # the person's own checkout has its dependencies installed once (not timed)
    subprocess.run(command, cwd=repo, env=env(), check=True, capture_output=True)
    linked: list[float] = []
    base: list[float] = []
    serial: list[float] = []
    parallel: list[float] = []

    def plain_run(i: int) -> None:
        base.append(plain_ready(repo, f"plain-{i}", command))
        check_ready(repo, f"plain-{i}", count)

    def ours_run(i: int, offset: int, samples: list[float], jobs: int, linked: bool) -> None:
        task = f"ready-{3 * i + offset}"
        saved = (repo / "taskgate.toml").read_text()
        samples.append(ours_ready(repo, task, jobs=jobs, linked=linked))
        (repo / "taskgate.toml").write_text(saved)
        check_ready(repo, task, count)

    variants = [
        plain_run,
        lambda i: ours_run(i, 0, serial, 1, False),
        lambda i: ours_run(i, 1, parallel, 0, False),
        lambda i: ours_run(i, 2, linked, 0, True),
    ]
    for i in range(rounds):  # interleaved and rotated, so machine noise hits all alike
        for k in range(len(variants)):
            variants[(i + k) % len(variants)](i)
    shutil.rmtree(repo.parent)
    shutil.rmtree(scratch)
    load = os.getloadavg()[0]
    print(f"task + {len(AGENTS)} agent worktrees made ready (.env copied, setup: pip install "
          f"--no-index of {count} local wheels), {rounds} rounds, {os.cpu_count()} CPUs "
          f"(load average {load:.1f})")  # fmt: skip
    print(f"plain script, one worktree after the other  median {median_ms(base):8.1f} ms")
    print(f"taskgate start + classify, jobs = 1          median {median_ms(serial):8.1f} ms")
    print(f"taskgate start + classify, parallel          median {median_ms(parallel):8.1f} ms")
    print(f"taskgate start + classify, .deps linked      median {median_ms(linked):8.1f} ms")
    print(f"taskgate parallel / plain ratio                     "
          f"{median_ms(parallel) / median_ms(base):8.2f}")  # fmt: skip
    print(f"taskgate jobs = 1 / plain ratio                     "
          f"{median_ms(serial) / median_ms(base):8.2f}")  # fmt: skip
    print(f"taskgate linked / plain ratio                       "
          f"{median_ms(linked) / median_ms(base):8.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
