"""Crash-consistency torture: workers drive tasks and are SIGKILLed at random moments (issue 8).

Each round forks one worker per task; a worker runs real CLI commands in-process (`main(argv)`,
no interpreter start) for its own session: start, classify, transitions, agent status, plan
presentation and approval, recover and audit. The parent kills every worker at a random moment,
now and then force-releases a lock as a human would, and then checks the invariants:

- the store opens and passes `PRAGMA integrity_check`;
- every task's state is a protocol state and matches its transition_log and its hash-chained
  events; after one `taskgate status T` the views match the store;
- at most one unreleased lock per session, one owner per task; fences only increase;
- no branch and no worktree that existed is lost; worktrees stay clean; `git fsck` is clean.

Run: python bench/torture.py [rounds] [seed]     (prints rounds survived and violations)
tests/test_torture.py runs the same harness with a bounded round count.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import signal
import sqlite3
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

TASKS = tuple(f"task-{i}" for i in range(3))
TODO = "".join(
    f"## {t}: Torture {t}\n- Purpose: p\n- Scope: s\n- Components: c\n- Files: src/{t}.py\n\n"
    for t in TASKS
)
CONFIG = "[protocol]\ncheck_cwd = false\n"
REPORT = "Requirements report. " + "The component must behave as specified. " * 4
PLAN = """
## Implementation Plan

### Files to Create
- src/feature.py

### API Design
`def feature() -> None`

### Behavior Specifications
It does the thing.

### Test Cases
- test_feature

### Implementation Sequence
1. architect implements it.

### Decision Log
- none
"""


@dataclass
class Report:
    """What a torture run found."""

    rounds: int = 0
    kills: int = 0
    violations: list[str] = field(default_factory=list)
    states: dict[str, set[str]] = field(default_factory=dict)


def _cli(argv: list[str]) -> int:
    from taskgate.cli.main import main

    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        return main(argv)


def _row(db: Path, task: str) -> tuple[str, list[str], bool, bool] | None:
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        row = conn.execute(
            "SELECT state, required_agents, lock_released_at, pending FROM tasks WHERE name = ?",
            (task,),
        ).fetchone()
    finally:
        conn.close()
    if row is None:
        return None
    import json

    return str(row[0]), list(json.loads(row[1])), row[2] is not None, row[3] is not None


def _worker_ops(repo: Path, task: str, rng: random.Random) -> list[list[str]]:
    """The next few commands for this task, chosen from its current state."""
    row = _row(repo / ".taskgate" / "state.db", task)
    if row is None or row[2]:
        return [["start", task, "--adopt"]]
    state, agents, _, pending = row
    task_dir = repo / ".taskgate" / "tasks" / task
    roll = rng.random()
    if pending and roll < 0.5:
        return [["start", task]]  # a resuming session finishes the journaled step (R-LCK-03)
    if roll < 0.08:
        return [["recover", task, "--repair"]]
    if roll < 0.12:
        return [["audit", task]]
    if roll < 0.15:
        return [["start", rng.choice([t for t in TASKS if t != task])]]  # foreign or R-LCK-19
    if state == "INIT":
        return [["classify", task]]
    if state == "CLASSIFIED":
        return [["transition", task, "REQUIREMENTS"]]
    if state == "REQUIREMENTS":
        choice = rng.random()
        if choice < 0.5:
            for agent in agents:
                (task_dir / f"{task}-{agent}-requirements.md").write_text(REPORT)
            return [["agent", "set", task, a, "COMPLETE"] for a in agents] + [
                ["transition", task, "SYNTHESIS"]
            ]
        if choice < 0.75:
            return [["agent", "set", task, rng.choice(agents), "WORKING"]]
        return [["transition", task, "CLASSIFIED", "--reason", "torture: agent blocker"]]
    if state == "SYNTHESIS":
        task_md = task_dir / "task.md"
        text = task_md.read_text() if task_md.exists() else ""
        if "## Implementation Plan" not in text:
            task_md.write_text(text + PLAN)
        return [
            ["present", task],
            ["approve", task, "plan"],
            ["transition", task, "IMPLEMENTATION"],
        ]
    if state == "IMPLEMENTATION":
        if rng.random() < 0.5:
            return [["agent", "set", task, rng.choice(agents), "WORKING"]]
        return [["transition", task, "SYNTHESIS", "--reason", "torture: plan deviation"]]
    return [["status", task]]


def _worker(repo: Path, task: str, session: str, seed: int) -> None:
    """Child process: run commands for one task until killed (never returns)."""
    os.chdir(repo)
    os.environ["TASKGATE_SESSION"] = session
    rng = random.Random(seed)
    try:
        while True:
            for argv in _worker_ops(repo, task, rng):
                _cli(argv)
    finally:
        os._exit(0)


def _kill_round(repo: Path, rng: random.Random, report: Report, max_delay: float) -> None:
    pids = []
    for n, task in enumerate(TASKS):
        seed = rng.randrange(1 << 30)
        pid = os.fork()
        if pid == 0:
            _worker(repo, task, f"w{n}", seed)
        pids.append(pid)
    deadline = {pid: rng.uniform(0.0, max_delay) for pid in pids}
    start = time.monotonic()
    for pid in sorted(pids, key=deadline.__getitem__):
        time.sleep(max(0.0, deadline[pid] - (time.monotonic() - start)))
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            report.kills += 1
    for pid in pids:
        os.waitpid(pid, 0)


@dataclass
class Seen:
    """What earlier rounds established, for the monotonic invariants."""

    fences: dict[str, int] = field(default_factory=dict)
    branches: set[str] = field(default_factory=set)
    worktrees: set[str] = field(default_factory=set)


def check(repo: Path, seen: Seen, report: Report, *, fsck: bool) -> list[str]:
    """Every invariant; returns the violations found now."""
    from taskgate.engine import audit as audit_mod
    from taskgate.engine.workspace import find_workspace
    from taskgate.git import repo as gitrepo
    from taskgate.git.cmd import git
    from taskgate.protocol import audit_checks as ac
    from taskgate.protocol.states import State
    from taskgate.store import snapshot as hook_snapshot
    from taskgate.store.sqlite import SqliteStore

    found: list[str] = []
    db = repo / ".taskgate" / "state.db"
    try:
        SqliteStore(db).close()  # opens (and recovers the WAL) like any command would
        conn = sqlite3.connect(db, timeout=30)
        try:
            if conn.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
                found.append("store integrity_check failed")
            doubles = conn.execute(
                "SELECT session_id FROM tasks WHERE lock_released_at IS NULL "
                "GROUP BY session_id HAVING COUNT(*) > 1"
            ).fetchall()
            found += [f"session {s} holds two unreleased locks" for (s,) in doubles]
            # PreToolUse decides from this file: a kill may leave none, never a stale one.
            shot = db.with_name(hook_snapshot.FILE_NAME)
            if shot.exists() and json.loads(shot.read_text()) != hook_snapshot.collect(
                conn, json.loads
            ):
                found.append("the hook snapshot differs from the store")
        finally:
            conn.close()
    except Exception as exc:
        return [f"store does not open: {exc}"]
    ws = find_workspace(repo)
    for task in TASKS:
        if _row(db, task) is not None:
            code = _cli(["--repo", str(repo), "--session", "checker", "status", task])
            if code != 0:
                found.append(f"{task}: status exited {code}")
    snaps = audit_mod.read_snapshots(ws, None)
    worktrees = {str(p.resolve()) for p in gitrepo.worktree_paths(repo)}
    for snap in snaps:
        t = snap.task
        report.states.setdefault(t.name, set()).add(t.state)
        try:
            State(t.state)
        except ValueError:
            found.append(f"{t.name}: invalid state {t.state!r}")
        checks = [
            audit_mod.check_hash_chain(snap),
            ac.check_transitions(audit_mod.audit_input(ws, snap)),
        ]
        found += [f"{t.name}: {c.id}: {f.evidence}" for c in checks for f in c.findings]
        found += [f"{t.name}: views: {p}" for p in audit_mod.view_problems(ws, snap)]
        if t.fence < seen.fences.get(t.name, 0):
            found.append(f"{t.name}: fence went down {seen.fences[t.name]} -> {t.fence}")
        seen.fences[t.name] = t.fence
        wts = [ws.task_worktree(t.name)] + [ws.agent_worktree(t.name, a) for a in t.required_agents]
        for wt in [] if t.pending else wts:  # a journaled step in flight is resumed, not done
            if str(wt.resolve()) in worktrees and gitrepo.is_worktree(wt):
                seen.worktrees.add(str(wt.resolve()))
                status = git("status", "--porcelain", cwd=wt, check=False)
                if not status.ok or status.stdout.strip():
                    found.append(
                        f"{t.name}: worktree {wt} unusable or dirty: "
                        f"{(status.stderr or status.stdout).strip()[:200]}"
                    )
    for path in sorted(seen.worktrees):
        if path not in worktrees or not gitrepo.is_worktree(Path(path)):
            found.append(f"worktree lost: {path}")
    branches = set(
        git("for-each-ref", "--format=%(refname:short)", "refs/heads", cwd=repo).stdout.split()
    )
    found += [f"branch lost: {b}" for b in sorted(seen.branches - branches)]
    seen.branches |= branches
    if fsck:
        result = git("fsck", "--no-progress", cwd=repo, check=False)
        if not result.ok:
            found.append(f"git fsck: {result.stderr.strip()[:300]}")
    return found


def torture(repo: Path, rounds: int, seed: int = 8, *, max_delay: float = 1.0) -> Report:
    """Run `rounds` kill rounds on an initialised repository with TODO and CONFIG."""
    rng = random.Random(seed)
    report = Report()
    seen = Seen()
    for n in range(rounds):
        _kill_round(repo, rng, report, max_delay)
        if rng.random() < 0.05:  # a human force-releases a lock; the worker re-adopts it
            _cli(
                [
                    "--repo",
                    str(repo),
                    "--session",
                    "human",
                    "release",
                    rng.choice(TASKS),
                    "--force",
                    "--reason",
                    "torture",
                ]
            )
        violations = check(repo, seen, report, fsck=(n % 25 == 24 or n == rounds - 1))
        report.violations += [f"round {n}: {v}" for v in violations]
        report.rounds = n + 1
    return report


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from common import ROOT, scratch_repo

    sys.path.insert(0, str(ROOT / "src"))
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    repo = scratch_repo(TODO)
    (repo / "taskgate.toml").write_text(CONFIG)
    for key in [k for k in os.environ if k.startswith("GIT_")]:
        del os.environ[key]
    start = time.monotonic()
    report = torture(repo, rounds, seed)
    elapsed = time.monotonic() - start
    print(
        f"torture: {report.rounds} rounds survived, {report.kills} workers killed, "
        f"{len(report.violations)} invariant violations ({elapsed:.0f} s, seed {seed})"
    )
    for task, states in sorted(report.states.items()):
        print(f"  {task}: states seen {', '.join(sorted(states))}")
    for violation in report.violations[:50]:
        print(f"  VIOLATION {violation}")
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
