"""Crash-consistency torture over the whole lifecycle (issues 8 and 16).

Each round forks one worker per slot; a worker runs real CLI commands in-process (`main(argv)`,
no interpreter start) for its own session and its slot's current task, chosen from the task's
state: start, classify, transitions forward and back, agent status, reports, plan
presentation and approval, commits in the task worktree, merge, validate, review verdicts, the
change approval, complete, cleanup, recover and audit — and, in the agent phases, `run T --yes`
with the scripted agents (issue 16: invocations that record their process, a verdict and its
completion in one step). The parent kills every worker at a
random moment, now and then force-releases a lock as a human would, gives a slot whose task
reached CLEANUP a new task (committed to main's todo.md like a person would), and then checks
the invariants:

- the store opens and passes `PRAGMA integrity_check`; no view is ahead of the store;
- every task's state is a protocol state and matches its transition_log and its hash-chained
  events; after one `taskgate status T` the views match the store;
- at most one unreleased lock per session, one owner per task; fences only increase;
- no object git could reach before the round (refs, reflogs, worktree HEADs and indexes) is
  unreachable after it; branches and worktrees disappear only by cleanup; taskgate never
  leaves a worktree dirty or half-made; `git fsck` is clean;
- main holds at most one squash per task, exactly one once the task is COMPLETE;
- every finished task passes `taskgate audit`;
- an invocation whose `run` process is dead is closed by the task's next write, whatever the
  command (no "agent invocations still running" after recovery, issue 16);
- at the end, every unfinished task resumes to CLEANUP through the documented commands within
  a bounded number of commands (no stuck task).

Run: python bench/torture.py [rounds] [seed]     (prints rounds, kills, violations, finished)
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
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from taskgate.store.records import TaskSnapshot

SLOTS = 3
TASKS = tuple(f"task-{i}" for i in range(SLOTS))  # the first task of each slot


def entry(task: str) -> str:
    """A todo.md entry for a torture task."""
    fields = f"- Purpose: p\n- Scope: s\n- Components: c\n- Files: src/{task}.py\n\n"
    return f"## {task}: Torture {task}\n{fields}"


TODO = "".join(entry(t) for t in TASKS)
# allow_auto_approve: the workers' `run T --yes` (the scripted agents) may pass checkpoints too
CONFIG = (
    "[protocol]\ncheck_cwd = false\nallow_auto_approve = true\n\n"
    '[validation]\ncommands = [["true"]]\n'
)
DRAIN_COMMANDS = 80  # commands a task may need to reach CLEANUP once nothing kills it
RUN_SHARE = 0.12  # how often a worker drives an agent phase with `taskgate run T --yes`
_RUN_STATES = ("REQUIREMENTS", "IMPLEMENTATION", "REVIEW")
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
    finished: list[str] = field(default_factory=list)  # tasks that reached CLEANUP
    drained: int = 0  # unfinished tasks driven to CLEANUP at the end without kills
    stale_locks: int = 0  # git index.lock files a killed git left (removed as a person would)
    dead: int = 0  # invocations of a killed `run` seen open, closed by the next command (16)


_LAST_FAILURE: list[str] = [""]  # the last command that failed, for a stuck task's report


def _cli(argv: list[str]) -> int:
    from taskgate.cli.main import main

    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        code = main(argv)
    if code:
        _LAST_FAILURE[0] = f"{' '.join(argv)} -> {code}: {sink.getvalue().strip()[:600]}"
    if code and os.environ.get("TORTURE_DEBUG"):
        print(f"  {_LAST_FAILURE[0]}", file=sys.stderr)
    return code


def _read_only(db: Path) -> Any:
    """A read connection (DB-API, `?` placeholders) to the store: the SQLite file `db`, or the
    PostgreSQL database in TASKGATE_DATABASE_URL (issue 20: the torture run on either store)."""
    url = os.environ.get("TASKGATE_DATABASE_URL")
    if not url:
        return sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    import psycopg

    from taskgate.store.pg_tx import QmarkConnection

    class _Pg(QmarkConnection):
        def close(self) -> None:
            self._c.close()

    return _Pg(psycopg.connect(url, autocommit=True, connect_timeout=30))


def _row(db: Path, task: str) -> tuple[str, list[str], bool, str] | None:
    conn = _read_only(db)
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

    pending = json.loads(row[3]) if row[3] else None  # stored as JSON: "null" when none
    op = str(pending.get("op") or "?") if pending else ""  # the journaled step in flight
    return str(row[0]), list(json.loads(row[1])), row[2] is not None, op


def _holder(repo: Path, task: str) -> str | None:
    """The session holding the task's lock."""
    conn = _read_only(repo / ".taskgate" / "state.db")
    try:
        row = conn.execute("SELECT session_id FROM tasks WHERE name = ?", (task,)).fetchone()
    finally:
        conn.close()
    return None if row is None else str(row[0])


def _held_elsewhere(repo: Path, task: str, session: str) -> list[str]:
    """The other tasks whose lock `session` holds (a worker's `start` of another slot's task
    claims it when its lock was released)."""
    conn = _read_only(repo / ".taskgate" / "state.db")
    try:
        rows = conn.execute(
            "SELECT name FROM tasks WHERE session_id = ? AND lock_released_at IS NULL "
            "AND name != ? ORDER BY name",
            (session, task),
        ).fetchall()
    finally:
        conn.close()
    return [str(r[0]) for r in rows]


Op = list[str] | Callable[[], object]


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)


def _agent_commit(repo: Path, task: str, agent: str, rng: random.Random) -> None:
    """An agent's commit in the task worktree (it removes its own stale index.lock first)."""
    wt = repo / ".taskgate" / "tasks" / task / "code"
    gitdir = _git(wt, "rev-parse", "--git-dir").stdout.strip()
    if gitdir:
        (wt / gitdir / "index.lock").unlink(missing_ok=True)
    # What a kill left staged is committed first: overwriting it would lose the agent's own
    # blob, which is no taskgate fault and not what the no-lost-object invariant measures.
    _git(wt, "commit", "-q", "-m", f"[agent:{agent}] {task} work (staged before a kill)")
    target = wt / "src" / f"{task}_work.py"  # apart from the scripted agents' src/{task}.py
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(f"value = {rng.randrange(1000)}\n")
    _git(wt, "add", "-A", "src")
    _git(wt, "commit", "-q", "-m", f"[agent:{agent}] {task} work")


def _tidy_agents(repo: Path, task: str, agents: list[str]) -> None:
    """What a killed `run` left in agent worktrees (the agents' own half-done work) is committed
    by the person, as `run`'s diagnosis (cause agent-worktree) and `agent set`'s refusal say."""
    for agent in agents:
        wt = repo / ".taskgate" / "tasks" / task / "agents" / agent / "code"
        gitdir = _git(wt, "rev-parse", "--git-dir").stdout.strip()
        if not gitdir:
            continue
        (wt / gitdir / "index.lock").unlink(missing_ok=True)
        for op in ("rebase", "merge", "cherry-pick"):
            _git(wt, op, "--abort")
        if _git(wt, "status", "--porcelain").stdout.strip():
            _git(wt, "add", "-A")
            _git(wt, "commit", "-q", "--no-verify", "-m", f"[agent:{agent}] left by a killed run")
        # After the task branch was rebased onto main (R-CMP-06) the agent branch still holds
        # the old copies of T's commits: rebasing onto T drops them (merge's R-WTB-06 hint).
        if _git(wt, "rebase", "-q", task).returncode != 0:
            _git(wt, "rebase", "--abort")


def _write(path: Path, text: str) -> None:
    """An agent's careful write (temp file + rename): a kill never leaves half a task.md,
    which would be the agent's own corruption, not what the harness measures."""
    tmp = path.with_name(f".{path.name}.worker")
    tmp.write_text(text)
    os.replace(tmp, path)


def _behind(repo: Path, task: str) -> bool:
    """main has commits the task branch lacks (another task completed): rebase first."""
    return _git(repo, "merge-base", "--is-ancestor", "main", task).returncode == 1


def _rebase(repo: Path, task: str) -> None:
    """The documented R-CMP-06 path: rebase the task branch onto main in its worktree."""
    wt = repo / ".taskgate" / "tasks" / task / "code"
    gitdir = _git(wt, "rev-parse", "--git-dir").stdout.strip()
    if gitdir:
        (wt / gitdir / "index.lock").unlink(missing_ok=True)
        if (wt / gitdir / "rebase-merge").exists() or (wt / gitdir / "rebase-apply").exists():
            _git(wt, "rebase", "--abort")
    # Work a kill left staged is committed first (git refuses to rebase a dirty index).
    _git(wt, "commit", "-q", "-m", f"[agent:architect] {task} work (staged before a kill)")
    if _git(wt, "rebase", "-q", "main").returncode != 0:
        _git(wt, "rebase", "--abort")


def _worker_ops(repo: Path, task: str, rng: random.Random, *, calm: bool = False) -> list[Op]:
    """The next few commands for this task, chosen from its current state (`calm`: the
    documented path only, for the final drain)."""
    row = _row(repo / ".taskgate" / "state.db", task)
    if row is None or (row[2] and row[0] != "CLEANUP"):
        session = os.environ.get("TASKGATE_SESSION", "")
        # A session holds one task (R-LCK-19): in the drain, a person first gives back what
        # this slot's session took from another slot, as the refusal's hint says.
        held = _held_elsewhere(repo, task, session) if calm else []
        return [["--session", "human", "release", other, "--force", "--reason",
                 "torture: the slot's session holds another slot's task"] for other in held
                ] + [["start", task, "--adopt"]]  # fmt: skip
    if not row[2] and _holder(repo, task) != os.environ.get("TASKGATE_SESSION"):
        # Another worker's session took the task over after its `run` died (documented:
        # a dead run's lease is taken over by `start`); a person gives it back to its slot.
        return [["--session", "human", "release", task, "--force", "--reason",
                 "torture: give the task back to its slot"]]  # fmt: skip
    state, agents, _, pending = row
    task_dir = repo / ".taskgate" / "tasks" / task
    roll = 1.0 if calm else rng.random()
    if pending == "merge":  # `run`'s merge of agent branches: resumed by `taskgate merge T`
        return [["start", task], ["merge", task]]
    if pending:
        # A resuming session finishes the journaled step first (R-LCK-03, R-REC-02); cleanup's
        # own journal is finished by start, run and next alike (issue 16). Presenting again in
        # the middle of `complete` would bind the approval to taskgate's own archival commit.
        return [["start", task]] + (
            [["complete", task]] if state == "AWAITING_USER_APPROVAL" else []
        )
    if roll < 0.06:
        return [["recover", task, "--repair"]]
    if roll < 0.09:
        return [["audit", task]]
    if roll < 0.11:
        return [["start", _other_task(repo, task, rng)]]  # foreign or R-LCK-19
    if state == "INIT":
        return [["classify", task]]
    if state == "CLASSIFIED":
        return [["transition", task, "REQUIREMENTS"]]
    if state == "REQUIREMENTS":
        choice = rng.random() if not calm else 0.0
        if choice < 0.6:
            for agent in agents:
                _write(task_dir / f"{task}-{agent}-requirements.md", REPORT)
            return [["agent", "set", task, a, "COMPLETE"] for a in agents] + [
                ["transition", task, "SYNTHESIS"]
            ]
        if choice < 0.85:
            return [["agent", "set", task, rng.choice(agents), "WORKING"]]
        return [["transition", task, "CLASSIFIED", "--reason", "torture: agent blocker"]]
    if state == "SYNTHESIS":
        task_md = task_dir / "task.md"
        text = task_md.read_text() if task_md.exists() else ""
        if "## Implementation Plan" not in text:
            _write(task_md, text + PLAN)
        return [
            ["present", task],
            ["approve", task, "plan"],
            ["transition", task, "IMPLEMENTATION"],
        ]
    if not calm and state in _RUN_STATES and rng.random() < RUN_SHARE:
        # `taskgate run` with the scripted agents: invocations that record their process, a
        # verdict and its completion in one step, killed anywhere (issue 16)
        return [["run", task, "--yes"]]
    if state == "IMPLEMENTATION":
        choice = rng.random() if not calm else 0.0
        if _behind(repo, task):
            return [lambda: _rebase(repo, task)]
        if choice < 0.7:
            first = agents[0]
            done: list[Op] = [lambda: _tidy_agents(repo, task, agents), ["merge", task]]
            done += [lambda: _agent_commit(repo, task, first, rng)]
            done += [["agent", "set", task, first, "COMPLETE", "--done"]]
            done += [
                ["agent", "set", task, a, "COMPLETE", "--done", "--no-change", "torture"]
                for a in agents[1:]
            ]
            return [*done, ["transition", task, "VALIDATION"]]
        if choice < 0.9:
            return [["agent", "set", task, rng.choice(agents), "WORKING"]]
        return [["transition", task, "SYNTHESIS", "--reason", "torture: plan deviation"]]
    if state == "VALIDATION":
        return [["validate", task], ["transition", task, "REVIEW"]]
    if state == "REVIEW":
        return [["agent", "verdict", task, a, "APPROVED"] for a in agents] + [
            ["transition", task, "AWAITING_USER_APPROVAL"]
        ]
    if state == "AWAITING_USER_APPROVAL":
        if _behind(repo, task):  # R-CMP-06: back to IMPLEMENTATION, rebase, and again
            return [["transition", task, "IMPLEMENTATION", "--reason", "rebase onto main"],
                    lambda: _rebase(repo, task)]  # fmt: skip
        return [["present", task], ["approve", task, "changes"], ["complete", task]]
    if state == "COMPLETE":
        if calm or rng.random() < 0.3:
            return [["cleanup", task], ["cleanup", task, "--quarantine"]]
        return [["cleanup", task]]
    return [["status", task]]


def _other_task(repo: Path, task: str, rng: random.Random) -> str:
    names = [n for n in _store_tasks(repo) if n != task]
    return rng.choice(names) if names else task


def _store_tasks(repo: Path) -> list[str]:
    conn = _read_only(repo / ".taskgate" / "state.db")
    try:
        return [r[0] for r in conn.execute("SELECT name FROM tasks ORDER BY name")]
    finally:
        conn.close()


def _run_op(op: Op) -> int:
    if callable(op):
        op()
        return 0
    return _cli(op)


def _worker(repo: Path, task: str, session: str, seed: int) -> None:
    """Child process: run commands for one task until killed (never returns)."""
    os.chdir(repo)
    os.environ["TASKGATE_SESSION"] = session
    rng = random.Random(seed)
    try:
        while True:
            for op in _worker_ops(repo, task, rng):
                _run_op(op)
    finally:
        os._exit(0)


def _kill_round(
    repo: Path, slots: list[str], rng: random.Random, report: Report, max_delay: float
) -> None:
    pids = []
    for n, task in enumerate(slots):
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
    objects: set[str] = field(default_factory=set)
    audited: set[str] = field(default_factory=set)
    # (task, agent, seq of its agent_invoked) -> the task's seq when its process was seen dead
    dead: dict[tuple[str, str, int], int] = field(default_factory=dict)


def reachable(repo: Path) -> set[str]:
    """Every object git keeps: refs, reflogs, all worktrees' HEADs and indexes (like gc)."""
    out = _git(repo, "rev-list", "--objects", "--all", "--reflog", "--indexed-objects").stdout
    return {line.split()[0] for line in out.splitlines() if line}


def squashes(repo: Path) -> dict[str, int]:
    """How many commits on main carry each task's squash trailer (`Task: T`)."""
    out = _git(repo, "log", "--format=%B%x00", "main").stdout
    counts: dict[str, int] = {}
    for message in out.split("\0"):
        for line in message.splitlines():
            if line.startswith("Task: "):
                name = line[len("Task: ") :].strip()
                counts[name] = counts.get(name, 0) + 1
    return counts


def _seq(db: Path, task: str) -> int | None:
    conn = _read_only(db)
    try:
        row = conn.execute("SELECT seq FROM tasks WHERE name = ?", (task,)).fetchone()
    finally:
        conn.close()
    return None if row is None else int(row[0])


def check(repo: Path, seen: Seen, report: Report, *, fsck: bool) -> list[str]:
    """Every invariant; returns the violations found now."""
    from taskgate.engine import audit as audit_mod
    from taskgate.engine.workspace import find_workspace
    from taskgate.git import repo as gitrepo
    from taskgate.git.cmd import git
    from taskgate.process import hostname
    from taskgate.protocol import audit_checks as ac
    from taskgate.protocol.states import State
    from taskgate.store import snapshot as hook_snapshot
    from taskgate.store.sqlite import SqliteStore

    found: list[str] = []
    db = repo / ".taskgate" / "state.db"
    on_server = bool(os.environ.get("TASKGATE_DATABASE_URL"))  # PostgreSQL (issue 20)
    try:
        if on_server:
            from taskgate.store.select import open_store

            open_store(find_workspace(repo), timeout=30).close()  # opens like any command
            conn = _read_only(db)
        else:
            SqliteStore(db).close()  # opens (and recovers the WAL) like any command would
            conn = sqlite3.connect(db, timeout=30)
        try:
            if not on_server and conn.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
                found.append("store integrity_check failed")
            doubles = conn.execute(
                "SELECT session_id FROM tasks WHERE lock_released_at IS NULL "
                "GROUP BY session_id HAVING COUNT(*) > 1"
            ).fetchall()
            found += [f"session {s} holds two unreleased locks" for (s,) in doubles]
            # PreToolUse decides from this file: a kill may leave none, never a stale one.
            shot = db.with_name(hook_snapshot.FILE_NAME)
            collect = hook_snapshot.collect
            if on_server:
                from taskgate.store.pg_hook import collect  # the store's own statement
            if shot.exists() and shot.read_text() != hook_snapshot.render(
                collect(conn, json.loads)
            ):
                found.append("the hook snapshot differs from the store")
        finally:
            conn.close()
    except Exception as exc:
        return [f"store does not open: {exc}"]
    from taskgate.engine import views

    ws = find_workspace(repo)
    names = _store_tasks(repo)
    for task in names:
        row_seq = _seq(db, task)
        rendered = views.view_seq(ws, task)
        if rendered is not None and row_seq is not None and rendered > row_seq:
            found.append(f"{task}: view at seq {rendered} ahead of the store at {row_seq}")
        code = _cli(["--repo", str(repo), "--session", "checker", "status", task])
        if code != 0:
            found.append(f"{task}: status exited {code}")
    snaps = audit_mod.read_snapshots(ws, None)
    host = hostname()
    counts = squashes(repo)
    finished = {s.task.name for s in snaps if s.task.state == State.CLEANUP.value}
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
        found += _dead_invocations(snap, seen, host, report)
        squashed = counts.get(t.name, 0)
        if squashed > 1 or (t.state in ("COMPLETE", "CLEANUP") and squashed != 1):
            found.append(f"{t.name}: {squashed} squash commits on main in state {t.state}")
        if t.name in finished and t.name not in seen.audited and not t.pending:
            code = _cli(["--repo", str(repo), "--session", "checker", "audit", t.name])
            if code != 0:
                found.append(f"{t.name}: audit FAILED (exit {code}) on a finished task")
            seen.audited.add(t.name)
        # A killed `run` leaves its agents' half-done edits in their worktrees: their work,
        # diagnosed by the next run (agent-worktree) and committed by the person; only the
        # task worktree must be clean then.
        ran = any(e.kind == "lease" for e in snap.events)
        wts = [ws.task_worktree(t.name)] + [ws.agent_worktree(t.name, a) for a in t.required_agents]
        for wt in [] if t.pending or t.name in finished else wts:  # journals resume later
            if str(wt.resolve()) in worktrees and gitrepo.is_worktree(wt):
                seen.worktrees.add(str(wt.resolve()))
                status = git("status", "--porcelain", cwd=wt, check=False)
                own = f"src/{t.name}_work.py"  # the worker's own file, left staged by a kill
                dirty = [x for x in status.stdout.splitlines() if not x.endswith(own)]
                if ran and wt != ws.task_worktree(t.name):
                    dirty = []
                if not status.ok or dirty:
                    found.append(
                        f"{t.name}: worktree {wt} unusable or dirty: "
                        f"{(status.stderr or status.stdout).strip()[:200]}"
                    )
    cleaned = {str(ws.task_dir(n).resolve()) for n in finished}
    for path in sorted(seen.worktrees):
        if any(path.startswith(c + "/") for c in cleaned):
            continue  # removed by cleanup, its work kept (checked by reachability below)
        if path not in worktrees or not gitrepo.is_worktree(Path(path)):
            found.append(f"worktree lost: {path}")
    branches = set(
        git("for-each-ref", "--format=%(refname:short)", "refs/heads", cwd=repo).stdout.split()
    )
    gone = {b for b in seen.branches - branches if not any(
        b == n or b.startswith(f"{n}-") for n in finished)}  # fmt: skip
    found += [f"branch lost: {b}" for b in sorted(gone)]
    seen.branches = branches
    objects = reachable(repo)
    lost = seen.objects - objects
    if lost:
        what = [
            f"{sha[:12]} {_git(repo, 'cat-file', '-t', sha).stdout.strip()} "
            f"{_git(repo, 'cat-file', '-p', sha).stdout[:80]!r}"
            for sha in sorted(lost)[:3]
        ]
        found.append(f"{len(lost)} objects became unreachable, e.g. {what}")
    seen.objects = objects
    report.finished = sorted(finished)
    if fsck:
        result = git("fsck", "--no-progress", cwd=repo, check=False)
        if not result.ok:
            found.append(f"git fsck: {result.stderr.strip()[:300]}")
    return found


def _dead_invocations(snap: TaskSnapshot, seen: Seen, host: str, report: Report) -> list[str]:
    """No invocation outlives its process past one more write on its task (issue 16): one whose
    `run` process was seen dead is closed by the next step, whichever command it is."""
    from taskgate.engine import invocations

    t = snap.task
    found = []
    opened = invocations.open_invocations(snap)
    for key, seq in list(seen.dead.items()):
        name, agent, invoked = key
        if name != t.name:
            continue
        still = agent in opened and opened[agent].seq == invoked
        if not still:
            del seen.dead[key]
        elif t.seq > seq and not t.pending:  # a claim's journal: its step closes them next
            found.append(
                f"{name}: the invocation of {agent} (event {invoked}) stayed open "
                f"after its process died and the task moved on (seq {seq} -> {t.seq})"
            )
            del seen.dead[key]
    for agent in invocations.dead_invocations(snap, host):
        key = (t.name, agent, opened[agent].seq)
        if key not in seen.dead:
            report.dead += 1
            seen.dead[key] = t.seq
    return found


def _refill(repo: Path, slots: list[str], report: Report) -> None:
    """A slot whose task reached CLEANUP gets a new task, committed to main's todo.md."""
    for n, task in enumerate(slots):
        row = _row(repo / ".taskgate" / "state.db", task)
        if row is None or row[0] != "CLEANUP" or row[3]:
            continue
        gen = int(task.rsplit("-", 1)[1]) + SLOTS if task.startswith("task-") else 0
        new = f"task-{gen}"
        lock = repo / ".git" / "index.lock"
        if lock.exists():  # a killed git in the main worktree; a person removes it
            lock.unlink()
            report.stale_locks += 1
        todo = repo / "todo.md"
        todo.write_text(todo.read_text() + entry(new))
        _git(repo, "add", "todo.md")
        _git(repo, "commit", "-q", "-m", f"todo: add {new}")
        slots[n] = new


def drain(repo: Path, slots: list[str], report: Report, rng: random.Random) -> list[str]:
    """Without kills, drive every unfinished task to CLEANUP by the documented commands."""
    stuck = []
    here = os.getcwd()
    os.chdir(repo)
    for n, task in enumerate(slots):
        os.environ["TASKGATE_SESSION"] = f"w{n}"
        _LAST_FAILURE[0] = ""
        for _ in range(DRAIN_COMMANDS):
            row = _row(repo / ".taskgate" / "state.db", task)
            if row is not None and row[0] == "CLEANUP" and not row[3]:
                report.drained += 1
                break
            for op in _worker_ops(repo, task, rng, calm=True):
                _run_op(op)
        else:
            row = _row(repo / ".taskgate" / "state.db", task)
            stuck.append(f"{task}: stuck in {row[0] if row else 'no record'} after "
                         f"{DRAIN_COMMANDS} rounds of documented commands; the last one "
                         f"that failed: {_LAST_FAILURE[0]}")  # fmt: skip
    os.environ.pop("TASKGATE_SESSION", None)
    os.chdir(here)
    return stuck


def torture(
    repo: Path, rounds: int, seed: int = 8, *, max_delay: float = 1.0, drain_end: bool = True
) -> Report:
    """Run `rounds` kill rounds on an initialised repository with TODO and CONFIG."""
    rng = random.Random(seed)
    report = Report()
    seen = Seen(objects=reachable(repo))
    slots = list(TASKS)
    for n in range(rounds):
        _kill_round(repo, slots, rng, report, max_delay)
        if rng.random() < 0.05:  # a human force-releases a lock; the worker re-adopts it
            _cli(["--repo", str(repo), "--session", "human", "release", rng.choice(slots),
                  "--force", "--reason", "torture"])  # fmt: skip
        violations = check(repo, seen, report, fsck=(n % 25 == 24 or n == rounds - 1))
        report.violations += [f"round {n}: {v}" for v in violations]
        report.rounds = n + 1
        _refill(repo, slots, report)
        seen.objects = reachable(repo)
    if drain_end:
        report.violations += [f"drain: {v}" for v in drain(repo, slots, report, rng)]
        report.violations += [f"after drain: {v}" for v in check(repo, seen, report, fsck=True)]
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
        f"{len(report.violations)} invariant violations ({elapsed:.0f} s, seed {seed}); "
        f"{len(report.finished)} tasks finished (CLEANUP, audit PASSED), {report.drained} "
        f"driven to CLEANUP without kills at the end, {report.stale_locks} stale main "
        f"index.lock removed, {report.dead} invocations left open by killed runs (each closed "
        "by the task's next command)"
    )
    for task, states in sorted(report.states.items()):
        print(f"  {task}: states seen {', '.join(sorted(states))}")
    for violation in report.violations[:50]:
        print(f"  VIOLATION {violation}")
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
