"""Time of `taskgate audit T` for a task with 1,000 audit events (issue 8).

The task is driven to IMPLEMENTATION through the real CLI; the rest of its trail is tool-usage
events of agents, as the Claude Code hooks record them, appended through the store's API so
that the hash chain is the real one. Reports the median wall time of the CLI (and the audit
call alone, in-process) against a bare `python3 -c pass` measured in the same run.

Run: python bench/audit_time.py [events] [rounds]
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

from common import ROOT, median_ms, scratch_repo, tg, timed
from torture import PLAN, REPORT

sys.path.insert(0, str(ROOT / "src"))


def build(events: int) -> tuple[Path, int]:
    """A repository whose task-0 has `events` audit events; returns it and the exact count."""
    from taskgate.engine.core import Engine
    from taskgate.engine.workspace import find_workspace
    from taskgate.store.base import Tx
    from taskgate.store.records import TaskSnapshot

    repo = scratch_repo()
    task = "task-0"
    tg(repo, "start", task)
    wt = repo / ".taskgate" / "tasks" / task / "code"
    tg(wt, "classify", task)
    tg(wt, "transition", task, "REQUIREMENTS")
    agents = json.loads(tg(repo, "status", task, "--json").stdout)["required_agents"]
    for agent in agents:
        (repo / ".taskgate" / "tasks" / task / f"{task}-{agent}-requirements.md").write_text(REPORT)
        tg(repo, "agent", "set", task, agent, "COMPLETE")
    tg(wt, "transition", task, "SYNTHESIS")
    task_md = repo / ".taskgate" / "tasks" / task / "task.md"
    task_md.write_text(task_md.read_text() + PLAN)
    tg(repo, "present", task)
    tg(repo, "approve", task, "plan")
    tg(repo, "transition", task, "IMPLEMENTATION")
    # Appended in one engine step (ownership, seq bump, views re-rendered), as the hooks do.
    engine = Engine(find_workspace(repo), session_id="bench")

    def body(tx: Tx, snap: TaskSnapshot) -> int:
        for n in range(max(0, events - len(snap.events))):
            path = str(wt / f"src/m{n % 50}.py")
            engine.event(tx, task, "tool_usage", {"tool": "Edit", "file_path": path,
                                                  "agent": agents[n % len(agents)]})  # fmt: skip
        engine.touch(tx, snap)
        return len(tx.events(task))

    total = engine.step(task, body)
    engine.close()
    return repo, total


def main() -> int:
    events = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    repo, total = build(events)
    check = tg(repo, "audit", "task-0", check=False)
    if check.returncode != 0:
        print(check.stdout, check.stderr)
        return 1
    base: list[float] = []
    cli: list[float] = []
    for _ in range(rounds):
        base.append(timed([sys.executable, "-c", "pass"], repo))
        cli.append(timed([sys.executable, "-m", "taskgate", "audit", "task-0", "--json"], repo))
    from taskgate.engine.audit import audit
    from taskgate.engine.core import Engine
    from taskgate.engine.workspace import find_workspace

    engine = Engine(find_workspace(repo))
    inproc = []
    for _ in range(rounds):
        start = time.perf_counter()
        audit(engine, "task-0")
        inproc.append(time.perf_counter() - start)
    print(f"audit of a task with {total} audit events ({rounds} rounds, verdict PASSED)")
    print(f"python3 -c pass              median {median_ms(base):7.1f} ms")
    print(f"taskgate audit T --json      median {median_ms(cli):7.1f} ms")
    print(f"audit() in-process           median {statistics.median(inproc) * 1000:7.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
