"""A plain command ends without the interpreter's finalization (cli/main.exit_with, issue 18):
the same output, exit code and store state as a normal exit, and the normal exit whenever
something is left to finalize."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SRC, Repo

# The same CLI through a normal interpreter exit (sys.exit after main returns).
NORMAL = "import sys\nfrom taskgate.cli.main import main\nsys.exit(main(sys.argv[1:]))\n"


def _environ(**extra: str) -> dict[str, str]:
    """The environment, with output buffered as it is by default (a pipe holds it until the
    flush: what the quick exit must not lose)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return {**env, "PYTHONPATH": str(SRC), **extra}


def _run(cwd: Path, *args: str, normal: bool) -> tuple[int, str, str]:
    env = _environ(TASKGATE_SESSION="s1", TASKGATE_FAKE_NOW="2026-01-02T03:04:05Z")
    head = ["-c", NORMAL] if normal else ["-m", "taskgate"]
    proc = subprocess.run([sys.executable, *head, *args], cwd=cwd, env=env,
                          capture_output=True, text=True)  # fmt: skip
    return proc.returncode, proc.stdout, proc.stderr


def _state(repo: Repo, wt: Path) -> tuple[str, list[str]]:
    data = json.loads(repo.ok("status", "add-login", "--json", cwd=wt).out)
    trail = json.loads((repo.task_dir("add-login") / "audit-trail.json").read_text())
    kinds = [e.get("kind", "") for e in trail.get("store_record", {}).get("events", [])]
    return data["state"], kinds


@pytest.mark.parametrize(
    "moves",
    [
        [("REQUIREMENTS",), ("CLASSIFIED", "--reason", "back"), ("REQUIREMENTS", "--json")],
        [("COMPLETE",), ("NOPE",), ("CLASSIFIED",)],  # refused: a guard, no such state, no reason
    ],
)
def test_the_quick_exit_and_the_normal_one_leave_the_same(
    tmp_path: Path, moves: list[tuple[str, ...]]
) -> None:
    from conftest import make_repo

    seen = []
    for normal in (False, True):
        repo = make_repo(tmp_path / ("normal" if normal else "quick"))
        repo.ok("start", "add-login")
        wt = repo.worktree("add-login")
        repo.ok("classify", "add-login", cwd=wt)
        outcome = []
        for move in moves:
            code, out, err = _run(wt, "transition", "add-login", *move, normal=normal)
            outcome.append((code, out, err.replace(str(repo.path), "REPO")))
        seen.append((outcome, _state(repo, wt)))
    assert seen[0] == seen[1]
    assert seen[0][0][0][0] == (0 if moves[0] == ("REQUIREMENTS",) else 1)
    assert all(out or err for _, out, err in seen[0][0])  # nothing lost in a pipe's buffer


EXIT = (
    "import atexit, sys\n"
    "from taskgate.cli import main as m\n"
    "class Finalized:\n"
    "    def __del__(self):\n"
    "        print('finalized', flush=True)\n"
    "kept = Finalized()\n"
    "m._PLAIN_RUN = {plain}\n"
    "{extra}\n"
    "print('output before the exit')\n"
    "m.exit_with(3)\n"
)


@pytest.mark.parametrize(
    ("plain", "extra", "finalized"),
    [
        (True, "", False),  # a plain command with nothing left: straight out
        (False, "", True),  # argparse's path: the normal exit
        (True, "atexit.register(print, 'atexit ran')", True),  # a callback: the normal exit
        (True, "import threading, time\n"
               "threading.Thread(target=time.sleep, args=(0.2,)).start()", True),
    ],
)  # fmt: skip
def test_exit_with_skips_finalization_only_when_nothing_is_left(
    plain: bool, extra: str, finalized: bool
) -> None:
    code = EXIT.format(plain=plain, extra=extra)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=_environ())  # fmt: skip
    assert proc.returncode == 3
    assert proc.stdout.startswith("output before the exit\n")
    assert ("finalized" in proc.stdout) is finalized, proc.stdout


def test_without_atexit_loaded_nothing_is_registered_and_the_exit_is_straight() -> None:
    """exit_with asks atexit for callbacks only when something imported it (registering one
    does); where nothing did, the plain exit is taken without importing it."""
    code = EXIT.replace("import atexit, sys", "import sys").format(plain=True, extra="")
    code = code.replace("m.exit_with(3)", "print('atexit' in sys.modules)\nm.exit_with(3)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=_environ())  # fmt: skip
    assert (proc.returncode, proc.stdout) == (3, "output before the exit\nFalse\n")
    late = EXIT.replace("import atexit, sys", "import sys").format(
        plain=True, extra="__import__('atexit').register(print, 'atexit ran')"
    )
    proc = subprocess.run([sys.executable, "-c", late], capture_output=True, text=True,
                          env=_environ())  # fmt: skip
    assert proc.returncode == 3 and "atexit ran" in proc.stdout and "finalized" in proc.stdout


def test_a_profiler_or_tracer_gets_the_normal_exit() -> None:
    code = (
        "import sys\nfrom taskgate.cli import main as m\n"
        "seen = [m._nothing_left_to_finalize()]\n"
        "sys.setprofile(lambda *a: None); seen.append(m._nothing_left_to_finalize())\n"
        "sys.setprofile(None); sys.settrace(lambda *a: None)\n"
        "seen.append(m._nothing_left_to_finalize()); sys.settrace(None); print(seen)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=_environ(), check=True)  # fmt: skip
    assert proc.stdout.strip() == "[True, False, False]"
