"""`taskgate status --json` over 10,000 tasks in the store: wall time and peak memory; and
(issue 18) as ratios, in the same run, to a raw floor: `status --json` to a `python3` that
reads the same columns with sqlite3 and prints the same bytes with json (checked), `todo` to
one that parses todo.md's headings and reads every task's state (what any `todo` must do).

Run: python bench/status_scale.py [tasks] [rounds]
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

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
TODO_FLOOR = """
import re, sqlite3
names = re.findall(r"^## ([^:\\n]+):", open("todo.md").read(), re.M)
c = sqlite3.connect(".taskgate/state.db")
states = dict(c.execute("SELECT name, state FROM tasks"))
print("\\n".join(f"{n}  {states.get(n, 'available')}" for n in names))
"""


def _run(argv: list[str], repo: object) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=repo, env=env(), capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, proc.stdout


def floors(repo: object, count: int, rounds: int) -> None:
    """Ratios to the raw floors, interleaved in one run (issue 18)."""
    import statistics

    rows: dict[str, list[float]] = {k: [] for k in ("status", "status floor", "todo", "todo floor")}
    for _ in range(rounds):
        t, ours = _run([sys.executable, "-m", "taskgate", "status", "--json"], repo)
        rows["status"].append(t)
        t, raw = _run([sys.executable, "-c", STATUS_FLOOR], repo)
        rows["status floor"].append(t)
        assert ours == raw, "the floor must print the same bytes as status --json"
        rows["todo"].append(_run([sys.executable, "-m", "taskgate", "todo", "--json"], repo)[0])
        rows["todo floor"].append(_run([sys.executable, "-c", TODO_FLOOR], repo)[0])
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(f"{count} tasks, {rounds} rounds, medians (interleaved):")
    for name in ("status", "todo"):
        print(
            f"  {name + ' --json':15} {med[name] * 1000:7.0f} ms   floor "
            f"{med[name + ' floor'] * 1000:6.0f} ms   ratio {med[name] / med[name + ' floor']:5.2f}"
        )


def main() -> int:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
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
    floors(repo, count, rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
