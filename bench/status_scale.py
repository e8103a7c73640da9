"""`taskgate status --json` over 10,000 tasks in the store: wall time and peak memory.

Run: python bench/status_scale.py [tasks]
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


def main() -> int:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    repo = scratch_repo()
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
