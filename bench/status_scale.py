"""`taskgate status --json` over 10,000 tasks in the store: wall time and peak memory; and
(issue 18) as ratios, in the same run, to a raw floor: `status --json` to a `python3` that
reads the same columns with sqlite3 and prints the same bytes with json (checked); `todo` and
`todo --json` to one that prints the same bytes as each (checked) from todo.md's headings and
four columns of every task (the least any `todo` must do).

With --against=DIR (a checkout of another commit, e.g. `git worktree add`): `todo` and
`todo --json` through DIR/src as well, in the same rounds, their outputs checked equal.

With --chain: `todo` over that many todo.md tasks in one chain of Depends, none started (the
blocked tasks' reasons), this tree and --against's.

Run: python bench/status_scale.py [tasks] [rounds] [--against=DIR]
     python bench/status_scale.py [tasks] [rounds] --chain [--against=DIR]
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from common import ROOT, env, scratch_repo

sys.path.insert(0, str(ROOT / "src"))

from taskgate.store.records import TaskRow
from taskgate.store.sqlite import SqliteStore

STATUS_FLOOR = """
import json, os, sqlite3
me = os.environ.get("TASKGATE_SESSION", "")
c = sqlite3.connect(".taskgate/state.db")
rows = [
    {"task_name": n, "state": s, "session_id": o, "owned_by_me": bool(me) and o == me
     and r is None, "released": r is not None, "risk_level": k,
     "required_agents": json.loads(a), "updated_at": u}
    for n, s, o, r, k, a, u in c.execute(
        "SELECT name, state, session_id, lock_released_at, risk_level, required_agents, "
        "updated_at FROM tasks ORDER BY name")
]
print(json.dumps(rows, indent=2, sort_keys=True, default=str))
"""
# `todo` floors (issue 18): a `python3` that prints the same bytes as `taskgate todo --json` /
# `taskgate todo` on this bench's data (checked each round): one regex over todo.md's headings,
# one query of four columns, per task the availability this data has (held by another session,
# or not started), the JSON strings through the C encoder. It validates nothing and applies no
# other rule of the listing, so it is the least any `todo` printing these bytes can do.
_TODO_FLOOR_HEAD = """
import os, re, sqlite3
me = os.environ.get("TASKGATE_SESSION", "")
heads = re.findall(r"^## ([^:\\n]+):[ \\t]+(.*)$", open("todo.md", encoding="utf-8").read(), re.M)
c = sqlite3.connect(".taskgate/state.db")
rows = {n: (s, o, r) for n, s, o, r in c.execute(
    "SELECT name, state, session_id, lock_released_at FROM tasks")}
"""
TODO_JSON_FLOOR = (
    _TODO_FLOOR_HEAD
    + """
from json.encoder import encode_basestring_ascii as q
out = []
for name, title in heads:
    s, o, r = rows.get(name, (None, None, None))
    if s is not None and r is None and o != me:
        a, rule, why = "foreign", "R-LCK-04", f"'{name}' is owned by another session ({o})"
    else:
        a, rule, why, o = "available", "R-LCK-06", f"'{name}' is available", None
    out.append(
        f'{{\\n    "availability": "{a}",\\n    "owner": {q(o) if o is not None else "null"},\\n'
        f'    "reason": {q(why)},\\n    "rule": "{rule}",\\n'
        f'    "state": {q(s) if s is not None else "null"},\\n'
        f'    "task": {q(name)},\\n    "title": {q(title)}\\n  }}'
    )
print("[\\n  " + ",\\n  ".join(out) + "\\n]" if out else "[]")
"""
)
TODO_TEXT_FLOOR = (
    _TODO_FLOOR_HEAD
    + """
width = max((len(n) for n, _ in heads), default=4)
out = []
for name, _ in heads:
    s, o, r = rows.get(name, (None, None, None))
    if s is not None and r is None and o != me:
        out.append(f"{name:<{width}}  foreign     '{name}' is owned by another session ({o})")
    else:
        out.append(f"{name:<{width}}  available   '{name}' is available")
print("\\n".join(out) or "todo.md lists no tasks")
"""
)


def _run(argv: list[str], repo: object, src: Path | None = None) -> tuple[float, float, str]:
    """(wall s, CPU s of the child, stdout) of one run; `src`: the taskgate tree to import."""
    e = env()
    if src is not None:
        e["PYTHONPATH"] = str(src)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=repo, env=e, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return wall, cpu, proc.stdout


def floors(repo: object, count: int, rounds: int, against: Path | None = None) -> None:
    """Ratios to the raw floors, interleaved in one run (issue 18); with `against`, the same
    commands through another checkout's src/ in the same rounds."""
    import os
    import statistics

    tg = [sys.executable, "-m", "taskgate"]
    cases: list[tuple[str, list[str], Path | None]] = [
        ("status --json", [*tg, "status", "--json"], None),
        ("status floor", [sys.executable, "-c", STATUS_FLOOR], None),
        ("todo --json", [*tg, "todo", "--json"], None),
        ("todo --json floor", [sys.executable, "-c", TODO_JSON_FLOOR], None),
        ("todo", [*tg, "todo"], None),
        ("todo floor", [sys.executable, "-c", TODO_TEXT_FLOOR], None),
    ]
    if against is not None:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(against / "src")],
                       check=True, capture_output=True)  # fmt: skip
        cases += [
            (f"todo --json [{against.name}]", [*tg, "todo", "--json"], against / "src"),
            (f"todo [{against.name}]", [*tg, "todo"], against / "src"),
        ]
    wall: dict[str, list[float]] = {name: [] for name, _, _ in cases}
    cpu: dict[str, list[float]] = {name: [] for name, _, _ in cases}
    load = os.getloadavg()
    for _ in range(rounds):
        outputs: dict[str, str] = {}
        for name, argv, src in cases:
            w, c, outputs[name] = _run(argv, repo, src)
            wall[name].append(w)
            cpu[name].append(c)
        for name, floor in (("status --json", "status floor"), ("todo --json", "todo --json floor"),
                            ("todo", "todo floor")):  # fmt: skip
            assert outputs[name] == outputs[floor], f"{name}: the floor's bytes differ"
        if against is not None:
            assert outputs["todo"] == outputs[f"todo [{against.name}]"]
            assert outputs["todo --json"] == outputs[f"todo --json [{against.name}]"]
    load_after = os.getloadavg()
    med = {k: statistics.median(v) for k, v in wall.items()}
    cpu_med = {k: statistics.median(v) for k, v in cpu.items()}
    print(f"{count} tasks, {rounds} rounds, medians (interleaved); load average "
          f"{load[0]:.2f} before, {load_after[0]:.2f} after:")  # fmt: skip
    for name in ("status --json", "todo --json", "todo"):
        floor = "status floor" if name == "status --json" else name + " floor"
        print(
            f"  {name:15} {med[name] * 1000:7.0f} ms   floor {med[floor] * 1000:6.0f} ms   "
            f"ratio {med[name] / med[floor]:5.2f}   (CPU {cpu_med[name] * 1000:4.0f} / "
            f"{cpu_med[floor] * 1000:4.0f} ms, ratio {cpu_med[name] / cpu_med[floor]:5.2f})"
        )
    if against is not None:
        print(f"  the same commands through {against} (outputs equal, checked):")
        for name in ("todo --json", "todo"):
            other = f"{name} [{against.name}]"
            print(
                f"  {name:15} {med[other] * 1000:7.0f} ms   floor "
                f"{med[name + ' floor'] * 1000:6.0f} ms   ratio "
                f"{med[other] / med[name + ' floor']:5.2f}   (CPU {cpu_med[other] * 1000:4.0f} / "
                f"{cpu_med[name + ' floor'] * 1000:4.0f} ms, ratio "
                f"{cpu_med[other] / cpu_med[name + ' floor']:5.2f})"
            )


def chain(count: int, rounds: int, against: Path | None) -> int:
    """`todo` on todo.md tasks in one chain of Depends, none started (every task but the first
    is blocked and says why): this tree, and `against`'s in the same rounds."""
    import os
    import statistics

    todo = "# Tasks\n\n" + "".join(
        f"## c{i:05d}: Task {i}\n- Purpose: p\n- Scope: s\n- Components: c\n"
        + (f"- Depends: c{i - 1:05d}\n" if i else "")
        + f"- Files: src/m{i}.py\n- Risk: LOW\nA line of description.\n\n"
        for i in range(count)
    )
    repo = scratch_repo(todo)
    trees = {"this tree": ROOT / "src"}
    if against is not None:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(against / "src")],
                       check=True, capture_output=True)  # fmt: skip
        trees[str(against)] = against / "src"
    wall: dict[str, list[float]] = {t: [] for t in trees}
    cpu: dict[str, list[float]] = {t: [] for t in trees}
    load = os.getloadavg()
    for _ in range(rounds):
        outputs = []
        for tree, src in trees.items():
            w, c, out = _run([sys.executable, "-m", "taskgate", "todo"], repo, src)
            wall[tree].append(w)
            cpu[tree].append(c)
            outputs.append(out)
        assert len(set(outputs)) == 1, "the trees print different listings"
    print(f"todo over {count} tasks in one chain of Depends, {rounds} rounds, medians "
          f"(interleaved); load average {load[0]:.2f}:")  # fmt: skip
    for tree in trees:
        print(f"  {tree:30} {statistics.median(wall[tree]) * 1000:8.0f} ms   "
              f"(CPU {statistics.median(cpu[tree]) * 1000:7.0f} ms)")  # fmt: skip
    return 0


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    count = int(args[0]) if args else 10_000
    rounds = int(args[1]) if len(args) > 1 else 5
    against = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--against=")), "")
    if "--chain" in sys.argv:
        return chain(count, rounds, Path(against).resolve() if against else None)
    todo = "".join(
        f"## t{i:05d}: Task {i}\n- Purpose: p\n- Scope: s\n- Components: c\n"
        f"- Files: src/m{i}.py\n\n"
        for i in range(count)
    )
    repo = scratch_repo(todo)
    store = SqliteStore(repo / ".taskgate" / "state.db")
    start = time.perf_counter()
    with store.write() as tx:
        for i in range(count):
            tx.insert_task(
                TaskRow(
                    name=f"t{i:05d}",
                    state="REQUIREMENTS",
                    session_id=f"s{i}",
                    host="bench",
                    fence=1,
                    created_at="2026-01-01T00:00:00Z",
                    updated_at="2026-01-01T00:00:00Z",
                    risk_level="HIGH",
                    required_agents=("architect", "quality", "style", "build"),
                )
            )
    store.close()
    print(f"populated {count} tasks in {time.perf_counter() - start:.2f} s")
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "taskgate", "status", "--json"],
            cwd=repo,
            env=env(),
            capture_output=True,
            text=True,
            check=True,
        )
        runs.append(time.perf_counter() - t0)
    rows = json.loads(proc.stdout)
    assert len(rows) == count
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    runs.sort()
    print(f"status --json over {count} tasks: median {runs[2] * 1000:.0f} ms "
          f"(min {runs[0] * 1000:.0f} ms), output {len(proc.stdout) / 1e6:.1f} MB")  # fmt: skip
    print(f"peak RSS of the CLI process: {peak_kib / 1024:.1f} MiB")
    floors(repo, count, rounds, Path(against).resolve() if against else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
