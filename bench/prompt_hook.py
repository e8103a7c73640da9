"""The UserPromptSubmit command hook of a session holding a task (issue 18): where its time goes,
and what it costs as the store's log grows.

1. Phases: the hook program (src/taskgate/hooks/launch.py) run as Claude Code runs it, with
   timers around its parts, in one process per round: `import os` and launch.py up to
   hooks/dispatch (the interpreter's own start is not in it: compare the walls of
   `python3 -S -c pass` and of the hook), the rest of the modules the prompt loads (those of
   hooks/preload.PROMPT_STEP preloaded as the hook does, the others imported in the order the
   hook imports them), and the step itself (the store's transaction, the
   anchor, the answer) with everything loaded. Medians in ms. With --against DIR, the same for
   that tree's hook, interleaved, on a store of its own.
2. The log (--log N): N prompts in a row through the hook, nothing else touching the store
   (a session that only talks and edits), the median wall of each window of 50 as a ratio to
   `python3 -c pass` measured in the same window, and the size of state.db-wal at the
   window's end. With --against DIR the hook of that tree runs the same prompts on a store of
   its own, interleaved (store/hook_tx.py: LOG_LINGER).

Run: python bench/prompt_hook.py [rounds] [--log N] [--against DIR]
"""

from __future__ import annotations

import atexit
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, env, tg
from common import scratch_repo as _scratch_repo
from hook_latency import _hook_modules

# Runs launch.py as the hook's __main__ (so HOOK_PROCESS is where store/hook_tx.py looks), with
# timers: T1 after hooks/dispatch is imported, T2 after the prompt's other modules, T3 at the end.
_DRIVER = """
import sys, time
LAUNCH, MODULES = sys.argv[1], sys.argv[2].split(",")
sys.argv = [LAUNCH, "UserPromptSubmit"]
source = open(LAUNCH).read()
head, tail = source.split("HOOK_PROCESS = True", 1)
preload = '''
T1 = time.perf_counter_ns()
try:  # as hooks/prompt.record does (a tree before hooks/preload.py has none)
    from taskgate.hooks.preload import PROMPT_STEP, load
    load(PROMPT_STEP)
except ImportError:
    pass
for name in MODULES:
    if name == "_sqlite3":  # as the hook loads it (store/hook_tx.sqlite_module)
        from taskgate.store.hook_tx import sqlite_module
        sqlite_module()
    elif name:
        __import__(name)
T2 = time.perf_counter_ns()
'''
tail = tail.replace("os._exit(code)", "sys.stderr.write('T %d %d %d\\\\n' % (T1 - T0, T2 - T1, "
                    "time.perf_counter_ns() - T2)); sys.stderr.flush(); os._exit(code)")
code = compile(head + preload + "HOOK_PROCESS = True" + tail, LAUNCH, "exec")
globals()["__file__"] = LAUNCH
T0 = time.perf_counter_ns()  # launch.py starts (the hook compiles it first: not counted here)
exec(code, globals())
"""


def scratch_repo() -> Path:
    """A scratch repository with task-0 started by session `bench`, removed at exit."""
    repo = _scratch_repo()
    atexit.register(shutil.rmtree, repo.parent, True)
    tg(repo, "start", "task-0", check=True)
    return repo


def prompt(repo: Path, text: str = "what is the status?") -> str:
    return json.dumps({"session_id": "bench", "transcript_path": "", "cwd": str(repo),
                       "permission_mode": "default", "hook_event_name": "UserPromptSubmit",
                       "prompt": text})  # fmt: skip


def launcher(tree: Path) -> str:
    return str(tree / "src" / "taskgate" / "hooks" / "launch.py")


def run(cmd: list[str], repo: Path, body: str) -> tuple[float, str, str]:
    """(wall seconds, stdout, stderr) of one run that must succeed."""
    start = time.perf_counter()
    out = subprocess.run(cmd, cwd=repo, env=env(), input=body, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"{cmd} failed: {out.stderr[-2000:]}")
    return wall, out.stdout, out.stderr


def modules(launch: str, repo: Path) -> list[str]:
    """The modules the prompt hook imports after hooks/dispatch, in import order (`-X
    importtime` of one run, read by hook_latency.py): taskgate's and the C modules it loads
    inside functions."""
    names = _hook_modules(launch, repo, prompt(repo))
    after = names[names.index("taskgate.hooks.dispatch") + 1 :]
    c_modules = ("_sqlite3", "zlib", "_sha1", "_sha256", "_json")
    return [n for n in after if n.startswith("taskgate") or n in c_modules]


def phases(rounds: int, tree: Path | None) -> None:
    trees = {"this tree": ROOT, **({"before": tree} if tree else {})}
    repos = {name: scratch_repo() for name in trees}  # a store each: the same prompts
    loaded = {}
    for name, where in trees.items():
        launch = launcher(where)
        for _ in range(2):  # git writes the first anchor, the second reads git's (zlib)
            run([sys.executable, "-S", launch, "UserPromptSubmit"], repos[name],
                prompt(repos[name]))  # fmt: skip
        loaded[name] = modules(launch, repos[name])  # the third prompt: the usual path
    driver = Path(tempfile.mkdtemp(prefix="taskgate-phases-")) / "driver.py"
    atexit.register(shutil.rmtree, driver.parent, True)
    driver.write_text(_DRIVER)
    hook_row = "the hook as installed (python3 -S launch.py)"
    walls: dict[str, list[float]] = {"python3 -c pass": [], "python3 -S -c pass": []}
    walls.update({f"{hook_row}, {name}": [] for name in trees})
    parts: dict[str, list[list[int]]] = {name: [] for name in trees}
    for _ in range(rounds):
        walls["python3 -c pass"].append(run([sys.executable, "-c", "pass"], ROOT, "")[0])
        walls["python3 -S -c pass"].append(run([sys.executable, "-S", "-c", "pass"], ROOT, "")[0])
        for name, where in trees.items():
            launch, repo, body = launcher(where), repos[name], prompt(repos[name])
            hook = [sys.executable, "-S", launch, "UserPromptSubmit"]
            walls[f"{hook_row}, {name}"].append(run(hook, repo, body)[0])
            timed = [sys.executable, "-S", str(driver), launch, ",".join(loaded[name])]
            _, out, err = run(timed, repo, body)
            if "[QUESTION]" not in out:
                raise SystemExit(f"the prompt was not recorded by the hook: {out!r}")
            parts[name].append([int(x) for x in err.rsplit("T ", 1)[1].split()])
    base = statistics.median(walls["python3 -c pass"])
    print(f"the prompt hook holding a task, {rounds} rounds, {_load()}")
    print(f"{'wall of the process':62} {'median ms':>10} {'/ python':>9}")
    for row, values in walls.items():
        print(f"{row:62} {statistics.median(values) * 1000:10.2f} "
              f"{statistics.median(values) / base:9.2f}")  # fmt: skip
    for name in trees:
        labels = ("import os, launch.py, hooks/dispatch (+ jsonio, _json)",
                  f"the prompt's other {len(loaded[name])} modules",
                  "the step, everything loaded", "in all")  # fmt: skip
        print(f"{'in the hook process, ' + name:62} {'median ms':>10}")
        for at, label in enumerate(labels):
            values = [p[at] if at < 3 else sum(p) for p in parts[name]]
            print(f"{label:62} {statistics.median(values) / 1e6:10.2f}")
        print(f"modules ({name}): " + ", ".join(loaded[name]))


def log_growth(prompts: int, tree: Path | None) -> None:
    trees = {"this tree": ROOT, **({"before": tree} if tree else {})}
    repos = {name: scratch_repo() for name in trees}
    windows: dict[str, list[list[float]]] = {name: [] for name in trees}
    floors: list[list[float]] = []
    sizes: dict[str, list[int]] = {name: [] for name in trees}
    for at in range(prompts):
        if at % 50 == 0:
            floors.append([])
            for name in trees:
                windows[name].append([])
        floors[-1].append(run([sys.executable, "-c", "pass"], ROOT, "")[0])
        for name, where in trees.items():
            cmd = [sys.executable, "-S", launcher(where), "UserPromptSubmit"]
            windows[name][-1].append(run(cmd, repos[name], prompt(repos[name]))[0])
            if at % 50 == 49 or at == prompts - 1:
                wal = repos[name] / ".taskgate" / "state.db-wal"
                sizes[name].append(wal.stat().st_size if wal.exists() else 0)
    print(f"{prompts} prompts in a row through the hook, nothing else on the store, {_load()}")
    head = "".join(f"{name + ' / python':>22} {'log KiB':>8}" for name in trees)
    print(f"{'prompts':>9}{head}")
    for at, floor in enumerate(floors):
        base = statistics.median(floor)
        cells = "".join(f"{statistics.median(windows[name][at]) / base:22.2f} "
                        f"{sizes[name][at] // 1024:8d}" for name in trees)  # fmt: skip
        print(f"{at * 50 + 1:>4}-{min(at * 50 + 50, prompts):<4}{cells}")


def _load() -> str:
    import os

    one, five, _ = os.getloadavg()
    return f"{os.cpu_count()} CPUs, load average {one:.1f} (5 min {five:.1f})"


def main() -> int:
    argv = sys.argv[1:]
    tree = None
    if "--against" in argv:
        at = argv.index("--against")
        tree = Path(argv[at + 1]).resolve()
        del argv[at : at + 2]
        if not Path(launcher(tree)).is_file():
            raise SystemExit(f"--against {tree}: no src/taskgate/hooks/launch.py there")
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "src")],
                       check=True, capture_output=True)  # fmt: skip
    if "--log" in argv:
        at = argv.index("--log")
        log_growth(int(argv[at + 1]), tree)
        return 0
    phases(int(argv[0]) if argv else 20, tree)
    return 0


if __name__ == "__main__":
    sys.exit(main())
