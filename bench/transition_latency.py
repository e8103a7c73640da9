"""Median latency of one guarded `taskgate transition` through the CLI, as a ratio to a bare
`python3 -c pass` measured in the same run (issue 2), plus the CLI's import time.

With --scale (issue 18): the same transition on a task with 2,000 audit events and in a store
with 10,000 other tasks, as ratios to a fresh repository, interleaved in one run.

With --against=DIR: the same transition through this tree and another checkout, interleaved,
through `python -m taskgate` and through the console script, wall and CPU time, with each
tree's import-time breakdown (issue 18).

With --scale --against=DIR: the scale cases of both trees, interleaved, with the CPU time of
each command beside its wall clock; then the step alone in-process (imports excluded) in each
case and on a task whose events are agent-door records (issue 18, fourth pass).

Run: python bench/transition_latency.py [rounds] [--scale [--events=N] [--tasks=N]]
     python bench/transition_latency.py [rounds] --scale --against=DIR
     python bench/transition_latency.py [rounds] --against=DIR
"""

from __future__ import annotations

import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, env, median_ms, scratch_repo, tg, timed

IMPORT_ROW = re.compile(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)")


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    rounds = int(args[0]) if args else 40
    against = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--against=")), "")
    if "--scale" in sys.argv:
        sizes = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
        events, tasks = int(sizes.get("events", 2000)), int(sizes.get("tasks", 10_000))
        if against:
            return scale_versus(rounds, events, tasks, Path(against).resolve())
        return scale(rounds, events, tasks)
    if against:
        return versus(rounds, Path(against).resolve())
    repo = scratch_repo()
    tg(repo, "start", "task-0")
    wt = repo / ".taskgate" / "tasks" / "task-0" / "code"
    tg(wt, "classify", "task-0")
    base: list[float] = []
    forward: list[float] = []
    backward: list[float] = []
    cli = [sys.executable, "-m", "taskgate", "transition", "task-0"]
    for _ in range(rounds):  # interleaved, so machine noise hits both sides alike
        base.append(timed([sys.executable, "-c", "pass"], wt))
        forward.append(timed([*cli, "REQUIREMENTS"], wt))
        base.append(timed([sys.executable, "-c", "pass"], wt))
        backward.append(timed([*cli, "CLASSIFIED", "--reason", "bench round trip"], wt))
    both = forward + backward
    print(f"rounds: {rounds} (each: one forward + one backward transition)")
    print(f"python3 -c pass           median {median_ms(base):7.1f} ms")
    print(f"transition (forward)      median {median_ms(forward):7.1f} ms")
    print(f"transition (backward)     median {median_ms(backward):7.1f} ms")
    print(f"transition / python ratio {median_ms(both) / median_ms(base):7.2f}")
    parser_cost()
    for label, argv in (
        ("taskgate --help", ["--help"]),
        ("taskgate transition", ["transition", "task-0", "REQUIREMENTS"]),
    ):
        out = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "taskgate", *argv],
            cwd=wt,
            env=env(),
            capture_output=True,
            text=True,
            check=True,
        ).stderr
        rows = [IMPORT_ROW.match(line) for line in out.splitlines()]
        total = sum(int(m.group(1)) for m in rows if m)
        ours = sum(int(m.group(1)) for m in rows if m and m.group(2).startswith("taskgate"))
        print(
            f"imports of {label:<20} {total / 1000:6.1f} ms self-time in total "
            f"({ours / 1000:.1f} ms in taskgate modules)"
        )
    return 0


def _classified_repo() -> tuple[Path, Path]:
    repo = scratch_repo()
    tg(repo, "start", "task-0")
    wt = repo / ".taskgate" / "tasks" / "task-0" / "code"
    tg(wt, "classify", "task-0")
    return repo, wt


def _add_events(repo: Path, count: int) -> None:
    """`count` tool_usage events on task-0, as PostToolUse hooks record them."""
    from taskgate.store.sqlite import SqliteStore

    store = SqliteStore(repo / ".taskgate" / "state.db")
    try:
        with store.write() as tx:
            for i in range(count):
                payload = {"session": "bench", "tool": "Edit", "file": f"src/m{i % 50}.py"}
                tx.append_event("task-0", "tool_usage", payload, "2026-01-01T00:00:00Z")
    finally:
        store.close()


def _add_tasks(repo: Path, count: int) -> None:
    """`count` other tasks in the store (each its own session, in REQUIREMENTS)."""
    from taskgate.store.records import TaskRow
    from taskgate.store.sqlite import SqliteStore

    store = SqliteStore(repo / ".taskgate" / "state.db")
    try:
        with store.write() as tx:
            for i in range(count):
                tx.insert_task(
                    TaskRow(name=f"t{i:05d}", state="REQUIREMENTS", session_id=f"s{i}",
                            host="bench", fence=1, created_at="2026-01-01T00:00:00Z",
                            updated_at="2026-01-01T00:00:00Z", risk_level="HIGH",
                            required_agents=("architect", "quality", "style", "build"))
                )  # fmt: skip
    finally:
        store.close()


def scale(rounds: int, events: int, tasks: int) -> int:
    """Issue 18: transition cost with 2,000 events / 10,000 tasks vs a fresh repository."""
    sys.path.insert(0, str(ROOT / "src"))
    cases: dict[str, tuple[Path, Path]] = {}
    cases["fresh repository"] = _classified_repo()
    cases[f"task with {events:,} events"] = _classified_repo()
    _add_events(cases[f"task with {events:,} events"][0], events)
    cases[f"store with {tasks:,} tasks"] = _classified_repo()
    _add_tasks(cases[f"store with {tasks:,} tasks"][0], tasks)
    times: dict[str, list[float]] = {name: [] for name in cases}
    base: list[float] = []
    cli = [sys.executable, "-m", "taskgate", "transition", "task-0"]
    for _ in range(rounds):  # interleaved: machine noise hits every case alike
        base.append(timed([sys.executable, "-c", "pass"], cases["fresh repository"][1]))
        for name, (_, wt) in cases.items():
            times[name].append(timed([*cli, "REQUIREMENTS"], wt))
            times[name].append(timed([*cli, "CLASSIFIED", "--reason", "bench round trip"], wt))
    fresh = median_ms(times["fresh repository"])
    print(f"transition at scale (issue 18), {rounds} rounds of a forward + a backward move")
    print(f"python3 -c pass              median {median_ms(base):7.1f} ms")
    for name, samples in times.items():
        ms = median_ms(samples)
        print(f"{name:<28} median {ms:7.1f} ms   / fresh {ms / fresh:5.2f}")
    return 0


_SETUP = """
import sys
from pathlib import Path
from taskgate.store.records import TaskRow
from taskgate.store.sqlite import SqliteStore
what, count, db = sys.argv[1], int(sys.argv[2]), sys.argv[3]
store = SqliteStore(Path(db))
try:
    with store.write() as tx:
        for i in range(count):
            if what == "events":
                payload = {"session": "bench", "tool": "Edit", "file": f"src/m{i % 50}.py"}
                tx.append_event("task-0", "tool_usage", payload, "2026-01-01T00:00:00Z")
            elif what == "door":  # commands an agent ran through the agent door
                payload = {"session": "bench", "agent": "quality", "argv": ["status"]}
                tx.append_event("task-0", "agent-door", payload, "2026-01-01T00:00:00Z")
            else:
                tx.insert_task(TaskRow(name=f"t{i:05d}", state="REQUIREMENTS", session_id=f"s{i}",
                    host="bench", fence=1, created_at="2026-01-01T00:00:00Z",
                    updated_at="2026-01-01T00:00:00Z", risk_level="HIGH",
                    required_agents=("architect", "quality", "style", "build")))
finally:
    store.close()
"""


def _tree_case(src: Path, what: str, count: int) -> Path:
    """A classified task-0 made by the tree at `src`, with `count` events on it or other
    tasks beside it written by that tree's own store code; its worktree."""
    repo = scratch_repo()
    wt = repo / ".taskgate" / "tasks" / "task-0" / "code"
    for args, cwd in ((["start", "task-0"], repo), (["classify", "task-0"], wt)):
        subprocess.run([sys.executable, "-m", "taskgate", *args], cwd=cwd, env=_env_for(src),
                       check=True, capture_output=True)  # fmt: skip
    if count:
        db = str(repo / ".taskgate" / "state.db")
        subprocess.run([sys.executable, "-c", _SETUP, what, str(count), db], env=_env_for(src),
                       check=True, capture_output=True)  # fmt: skip
    return wt


def scale_versus(rounds: int, events: int, tasks: int, other: Path) -> int:
    """--scale through this tree and another checkout (`--against=DIR`), every case of both
    trees interleaved in each round: the ratios to a fresh repository per tree, in wall
    clock and in CPU time of the command (less moved by the machine's load)."""
    trees = {"this tree": ROOT / "src", f"before ({other.name})": other / "src"}
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(other / "src")], check=True,
                   capture_output=True)  # fmt: skip
    names = ("fresh repository", f"task with {events:,} events", f"store with {tasks:,} tasks")
    counts = (("", 0), ("events", events), ("tasks", tasks))
    cases = {
        (tree, name): _tree_case(src, what, count)
        for tree, src in trees.items()
        for name, (what, count) in zip(names, counts, strict=True)
    }
    load = os.getloadavg()
    walls: dict[tuple[str, str], list[float]] = {key: [] for key in cases}
    cpus: dict[tuple[str, str], list[float]] = {key: [] for key in cases}
    base: list[float] = []
    cli = [sys.executable, "-m", "taskgate", "transition", "task-0"]
    for _ in range(rounds):  # interleaved: machine noise hits every case of both trees alike
        base.append(timed([sys.executable, "-c", "pass"], ROOT))
        for (tree, name), wt in cases.items():
            for target in (["REQUIREMENTS"], ["CLASSIFIED", "--reason", "bench round trip"]):
                wall, cpu = _cpu_timed([*cli, *target], wt, trees[tree])
                walls[(tree, name)].append(wall)
                cpus[(tree, name)].append(cpu)
    end = os.getloadavg()
    print(f"transition at scale (issue 18), {rounds} rounds of a forward + a backward move, "
          f"both trees interleaved; load average {load[0]:.1f} -> {end[0]:.1f} "
          f"({os.cpu_count()} CPUs)")  # fmt: skip
    print(f"python3 -c pass              median {median_ms(base):7.1f} ms")
    for tree in trees:
        print(f"{tree}:")
        fresh_wall, fresh_cpu = (
            median_ms(walls[(tree, names[0])]),
            median_ms(cpus[(tree, names[0])]),
        )
        for name in names:
            wall, cpu = median_ms(walls[(tree, name)]), median_ms(cpus[(tree, name)])
            print(f"  {name:<26} median {wall:7.1f} ms / fresh {wall / fresh_wall:5.2f}   "
                  f"CPU {cpu:6.1f} ms / fresh {cpu / fresh_cpu:5.2f}")  # fmt: skip
    step_cases(trees, cases, names, rounds, events)
    return 0


# One tree's transition step in-process (cli.main.main, the imports done once before): the CPU
# of each forward + backward pair after a first one, per move.
_STEP = """
import contextlib, io, statistics, sys, time
from taskgate.cli.main import main
def move(*target):
    try:
        main(["transition", "task-0", *target])
    except SystemExit:
        pass
def pair():
    with contextlib.redirect_stdout(io.StringIO()):
        move("REQUIREMENTS")
        move("CLASSIFIED", "--reason", "bench round trip")
pair()
times = []
for _ in range(int(sys.argv[1])):
    start = time.process_time()
    pair()
    times.append((time.process_time() - start) / 2)
print(statistics.median(times) * 1000)
"""


def step_cases(trees: dict[str, Path], cases: dict[tuple[str, str], Path],
               names: tuple[str, ...], rounds: int, events: int) -> None:  # fmt: skip
    """The step alone, in-process (issue 18, fourth pass): what the scale cases add to a
    step without the interpreter and the imports, and a task whose `events` are commands
    run through the agent door (not tool_usage: read by kind, not skipped)."""
    door = f"{events:,} agent-door events"
    cases = {**cases, **{(tree, door): _tree_case(src, "door", events)
                         for tree, src in trees.items()}}  # fmt: skip
    load = os.getloadavg()
    cpu: dict[tuple[str, str], list[float]] = {key: [] for key in cases}
    for _ in range(3):  # three passes, every case of both trees in each
        for key, wt in cases.items():
            out = subprocess.run([sys.executable, "-c", _STEP, str(max(rounds // 3, 1))],
                                 cwd=wt, env=_env_for(trees[key[0]]), capture_output=True,
                                 text=True, check=True).stdout  # fmt: skip
            cpu[key].append(float(out.split()[-1]))
    print(f"the step in-process (cli.main.main, imports excluded), CPU per move, median of 3 "
          f"passes; load average {load[0]:.1f} -> {os.getloadavg()[0]:.1f}")  # fmt: skip
    for tree in trees:
        fresh = statistics.median(cpu[(tree, names[0])])
        print(f"{tree}:")
        for name in (*names, door):
            ms = statistics.median(cpu[(tree, name)])
            print(f"  {name:<26} CPU {ms:6.2f} ms / fresh {ms / fresh:5.2f}   "
                  f"{ms - fresh:+6.2f} ms")  # fmt: skip


def _env_for(src: Path) -> dict[str, str]:
    e = env()
    e["PYTHONPATH"] = str(src)
    return e


def _timed_with(cmd: list[str], cwd: Path, src: Path) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=_env_for(src), check=True, capture_output=True)
    return time.perf_counter() - start


# What pip writes as the `taskgate` console script (.venv/bin/taskgate), run with this
# interpreter so that PYTHONPATH picks the tree.
CONSOLE_SCRIPT = (
    "import re\nimport sys\nfrom taskgate.cli.main import entry\n"
    "if __name__ == '__main__':\n"
    "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
    "    sys.exit(entry())\n"
)


FLOOR = "import pathlib, json, _sqlite3"


def _cpu_timed(cmd: list[str], cwd: Path, src: Path | None = None) -> tuple[float, float]:
    """(wall, CPU user+sys of the child) in seconds; the CPU time moves less with the load."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env() if src is None else _env_for(src), check=True,
                   capture_output=True)  # fmt: skip
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def versus(rounds: int, other: Path) -> int:
    """The same transitions through this tree and another checkout (`--against=DIR`, e.g. a
    `git worktree add` of an older commit), interleaved with `python3 -c pass` in one run:
    through `python -m taskgate` and through the console script, wall and CPU time, then each
    tree's import time (issue 18)."""
    trees = {"this tree": ROOT / "src", f"{other.name}": other / "src"}
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(other / "src")], check=True,
                   capture_output=True)  # fmt: skip
    script = Path(tempfile.mkdtemp(prefix="taskgate-bench-")) / "taskgate"
    script.write_text(CONSOLE_SCRIPT)
    wts: dict[str, Path] = {}
    for name, src in trees.items():
        repo = scratch_repo()
        for args in (["init"], ["start", "task-0"]):
            subprocess.run([sys.executable, "-m", "taskgate", *args], cwd=repo,
                           env=_env_for(src), check=True, capture_output=True)  # fmt: skip
        wts[name] = repo / ".taskgate" / "tasks" / "task-0" / "code"
        subprocess.run([sys.executable, "-m", "taskgate", "classify", "task-0"], cwd=wts[name],
                       env=_env_for(src), check=True, capture_output=True)  # fmt: skip
    ways = {"-m taskgate": [sys.executable, "-m", "taskgate"],
            "console script": [sys.executable, str(script)]}  # fmt: skip
    base: list[tuple[float, float]] = []
    floor: list[tuple[float, float]] = []  # the standard modules any engine path imports
    # What is left (fourth pass): this tree's own transition's modules, imported as its CLI
    # imports them, without running anything: the standard ones, then taskgate's as well.
    std_mods, our_mods = _transition_modules(trees["this tree"], wts["this tree"])
    imports_only = {
        f"+ the standard modules it imports ({len(std_mods)})": _import_code(std_mods),
        f"+ taskgate's modules ({len(our_mods)}), nothing run": _import_code(std_mods + our_mods),
    }
    left: dict[str, list[tuple[float, float]]] = {label: [] for label in imports_only}
    times: dict[tuple[str, str], list[tuple[float, float]]] = {
        (name, way): [] for name in trees for way in ways
    }
    load = os.getloadavg()
    for _ in range(rounds):
        for name, src in trees.items():
            base.append(_cpu_timed([sys.executable, "-c", "pass"], wts[name]))
            floor.append(_cpu_timed([sys.executable, "-c", FLOOR], wts[name]))
            if name == "this tree":
                for label, code in imports_only.items():
                    left[label].append(_cpu_timed([sys.executable, "-c", code], ROOT, src))
            for way, prefix in ways.items():
                cli = [*prefix, "transition", "task-0"]
                times[name, way].append(_cpu_timed([*cli, "REQUIREMENTS"], wts[name], src))
                times[name, way].append(
                    _cpu_timed([*cli, "CLASSIFIED", "--reason", "bench round trip"], wts[name],
                               src)
                )  # fmt: skip
    load_after = os.getloadavg()
    cpus = os.cpu_count()
    print(f"transition through two trees, {rounds} rounds, interleaved, {cpus} CPUs, load "
          f"average {load[0]:.1f} before, {load_after[0]:.1f} after")  # fmt: skip
    base_wall = median_ms([w for w, _ in base])
    base_cpu = median_ms([c for _, c in base])
    print(f"{'':34}  wall ms  / python    CPU ms  / python")
    print(f"{'python3 -c pass':34} {base_wall:8.1f}  {1:7.2f}  {base_cpu:8.1f}  {1:7.2f}")
    for (name, way), samples in [(("import pathlib, json, _sqlite3", ""), floor), *times.items()]:
        name = f"{name} ({way})" if way else name
        wall = median_ms([w for w, _ in samples])
        cpu = median_ms([c for _, c in samples])
        print(f"{name:34} {wall:8.1f}  {wall / base_wall:7.2f}  "
              f"{cpu:8.1f}  {cpu / base_cpu:7.2f}")  # fmt: skip
    print("what is left in this tree's transition, medians of the same run:")
    rows = [("python3 -c pass", base), *left.items(),
            ("the transition (-m taskgate)", times["this tree", "-m taskgate"])]  # fmt: skip
    for label, samples in rows:
        wall = median_ms([w for w, _ in samples])
        cpu = median_ms([c for _, c in samples])
        print(f"  {label:50} CPU {cpu:6.1f} ms {cpu / base_cpu:5.2f}   wall {wall:6.1f} ms")
    for name, src in trees.items():
        import_breakdown(name, src, wts[name])
    return 0


# The interpreter's own start-up modules and `-m`'s machinery (the console script has neither).
_STARTUP = {"runpy", "importlib.util", "importlib.machinery", "importlib._abc", "importlib"}


def _transition_modules(src: Path, wt: Path) -> tuple[list[str], list[str]]:
    """(standard modules, taskgate modules) a forward transition through `src` imports beyond
    a bare interpreter's start-up, in import order; the task is moved back afterwards."""
    startup = subprocess.run(
        [sys.executable, "-c", "import sys; print(' '.join(sys.modules))"],
        env=_env_for(src), capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "taskgate", "transition", "task-0",
         "REQUIREMENTS"], cwd=wt, env=_env_for(src), capture_output=True, text=True, check=True,
    ).stderr  # fmt: skip
    subprocess.run([sys.executable, "-m", "taskgate", "transition", "task-0", "CLASSIFIED",
                    "--reason", "bench round trip"], cwd=wt, env=_env_for(src),
                   capture_output=True, check=True)  # fmt: skip
    names = [m.group(2) for m in map(IMPORT_ROW.match, out.splitlines()) if m]
    fresh = [n for n in names if n not in startup and n not in _STARTUP]
    ours = [n for n in fresh if n == "taskgate" or n.startswith("taskgate.")]
    return [n for n in fresh if n not in ours], ours


def _import_code(modules: list[str]) -> str:
    """Import `modules` in order as the CLI does (pathlib through cli/pathlib_import where the
    tree has it, the collector paused); those absent here (ntpath's `nt`) are skipped."""
    return (
        "import gc\ngc.disable()\n"
        "try:\n    from taskgate.cli.pathlib_import import import_pathlib\n"
        "except ImportError:\n    pass\nelse:\n    import_pathlib()\n"
        f"for name in {modules!r}:\n"
        "    try:\n        __import__(name)\n    except ImportError:\n        pass\n"
    )


def import_breakdown(label: str, src: Path, wt: Path, runs: int = 5, top: int = 12) -> None:
    """`-X importtime` of a transition through `src`: median self time per module over `runs`
    forward + backward moves; the total, taskgate's share, and the largest modules."""
    selfs: dict[str, list[int]] = {}
    totals: list[int] = []
    for i in range(runs * 2):
        move = ["REQUIREMENTS"] if i % 2 == 0 else ["CLASSIFIED", "--reason", "bench round trip"]
        out = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "taskgate", "transition", "task-0", *move],
            cwd=wt, env=_env_for(src), capture_output=True, text=True, check=True,
        ).stderr  # fmt: skip
        rows = [m for m in (IMPORT_ROW.match(line) for line in out.splitlines()) if m]
        totals.append(sum(int(m.group(1)) for m in rows))
        for m in rows:
            selfs.setdefault(m.group(2), []).append(int(m.group(1)))
    medians = {mod: statistics.median(v) / 1000 for mod, v in selfs.items()}
    ours = sum(ms for mod, ms in medians.items() if mod.startswith("taskgate"))
    total = statistics.median(totals) / 1000
    print(f"imports of a transition, {label}: {total:.1f} ms self-time in total "
          f"({ours:.1f} ms in taskgate modules), {len(medians)} modules")  # fmt: skip
    largest = sorted(medians.items(), key=lambda kv: -kv[1])[:top]
    print("  largest: " + ", ".join(f"{mod} {ms:.2f}" for mod, ms in largest))


def parser_cost() -> None:
    """In-process: building the whole CLI parser vs only the command being run (issue 18)."""

    code = (
        "import statistics, time\n"
        "from taskgate.cli import main as m\n"
        "m._parser()\n"
        "for label, only in (('whole parser', None), ('transition only', 'transition')):\n"
        "    ts = []\n"
        "    for _ in range(30):\n"
        "        t = time.perf_counter(); m._parser(only); ts.append(time.perf_counter() - t)\n"
        "    print(f'parser construction, {label:16} {statistics.median(ts) * 1000:6.2f} ms')\n"
        "ts = []\n"
        "for _ in range(30):\n"
        "    t = time.perf_counter()\n"
        "    m.simple_args(['transition', 'task-0', 'REQUIREMENTS'])\n"
        "    ts.append(time.perf_counter() - t)\n"
        "print(f'transition read without argparse {statistics.median(ts) * 1000:7.3f} ms "
        "(cli/main.simple_args)')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env(), capture_output=True, text=True, check=False
    )
    print(out.stdout.rstrip() or f"parser construction: not measured ({out.stderr[-200:]})")


if __name__ == "__main__":
    sys.exit(main())
