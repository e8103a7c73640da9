"""PreToolUse's data on PostgreSQL per machine (issue 20, hooks and the server per machine):
what a guarded tool call costs in the store read, with and without the snapshot clock, in one
run. 10,000 held tasks (every task held: the largest read), a throwaway cluster on a unix
socket (tests/pgserver.py: no network cost; over a LAN each row adds a round trip).

1. the command hook, full read: connect through libpq + the one-statement collect;
2. the command hook, this machine's file at the server's clock: connect + the clock query
   (+ reading the file, parsed once per version as in the hook);
3. `taskgate serve`, warm: the clock query on the held connection (store/pg_warm.py);
4. `taskgate serve`, right after another machine's write: the clock moved, full re-read.

Run: python bench/pg_hooks.py [tasks] [samples]
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from common import ROOT

sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

import pgserver
from taskgate.store import pg_hook, pg_warm
from taskgate.store.postgres import CLOCK_FILE, PgStore
from taskgate.store.records import TaskRow
from taskgate.store.select import server_snapshot


def median_ms(run: Callable[[], object], samples: int) -> float:
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> int:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    samples = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    server = pgserver.start_server()
    try:
        url = server.fresh_database()
        with tempfile.TemporaryDirectory() as tmp:
            repo, state = Path(tmp), Path(tmp) / ".taskgate"
            state.mkdir()
            (repo / "taskgate.toml").write_text(f'[store]\nurl = "{url}"\n')
            store = PgStore(url, state)
            with store.write() as tx:
                for i in range(count):
                    tx.insert_task(TaskRow(
                        name=f"t{i:05d}", state="REQUIREMENTS", session_id=f"s{i}",
                        host="bench", fence=1, created_at="2026-01-01T00:00:00Z",
                        updated_at="2026-01-01T00:00:00Z",
                        required_agents=("architect", "quality", "style", "build"),
                    ))  # fmt: skip
            assert (state / CLOCK_FILE).exists()
            full = median_ms(lambda: pg_hook.snapshot(url, json.loads), samples)
            local = median_ms(lambda: server_snapshot(str(repo), str(state)), samples)
            warm = pg_warm.Warm(url)
            warm.get()
            hot = median_ms(warm.get, samples)

            def after_write() -> None:
                with store.write() as tx:
                    row = tx.task("t00000")
                    assert row is not None
                    tx.update_task("t00000", row.seq, state="REQUIREMENTS")
                start = time.perf_counter()
                warm.get()
                reread.append(time.perf_counter() - start)

            reread: list[float] = []
            for _ in range(max(5, samples // 3)):
                after_write()
            moved = statistics.median(reread) * 1000
            warm.close()
            store.close()
    finally:
        pgserver.remove(server)
    print(f"PreToolUse store read on PostgreSQL, {count} held tasks, median of {samples}:")
    print(f"  command hook, full read (libpq connect + collect)   {full:8.2f} ms")
    print(f"  command hook, file at the server's clock            {local:8.2f} ms"
          f"  ({full / local:.1f}x faster)")  # fmt: skip
    print(f"  serve, warm (clock query on a held connection)      {hot:8.3f} ms"
          f"  ({full / hot:.0f}x faster)")  # fmt: skip
    print(f"  serve, right after another machine's write (re-read) {moved:7.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
