"""Worktrees ready to work in (issue 21): config copied, heavy directories shared, setup run
once, and a block of ports per worktree.

taskgate calls `prepare` wherever it creates a task or agent worktree (start, classify,
`agent add`, `recover --repair`). For each worktree it

1. allocates a slot in the store (a `worktree_ports` audit event, written in a store write
   transaction, so two live worktrees never get the same one; a task's slots are free again
   once its cleanup finished) and writes `setup/env.json` for `worktree_env`;
2. places the files of `.worktreeinclude` / `[worktree] include`, `symlink` and `copy`
   (worktree_files.py), once;
3. runs the `[worktree] setup` commands in it, without a shell, worktrees in parallel where
   that is safe, each command's output in `setup/N-name.log` beside the agent's transcripts;
   success is marked per command in the worktree's private git dir, so a rerun resumes with
   the command that failed and a recreated worktree starts afresh;
4. records a `worktree_prepared` audit event (paths only, never file content), and raises
   SetupFailed (exit 4) naming the failed command and how to resume.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from taskgate.engine import worktree_files as files
from taskgate.engine.workspace import STATE_DIR, Workspace
from taskgate.errors import NeedsHuman, UsageError
from taskgate.fsutil import atomic_write, atomic_write_json, read_json
from taskgate.git import repo as gitrepo
from taskgate.process import Result, clean_env, end_sessions_until_done

if TYPE_CHECKING:
    from taskgate.engine.core import Engine
    from taskgate.engine.worktree_config import WorktreeConfig
    from taskgate.store.base import Tx
    from taskgate.store.records import EventRow, TaskSnapshot

PORTS_EVENT = "worktree_ports"
PREPARED_EVENT = "worktree_prepared"
_STRIP = ("TASKGATE_SESSION", "TASKGATE_FAILPOINT")
_DEFAULT_JOBS = 4
Runner = Callable[..., Result]  # Engine.setup_runner: agents/setup_sandbox.py


class SetupFailed(NeedsHuman):
    """A `[worktree] setup` command failed (exit 4): the project's environment needs a person;
    it is not an agent failure and is not retried as one."""

    kind = "setup-failed"


@dataclass(frozen=True)
class Target:
    """One worktree to prepare: the task's (agent None) or an agent's."""

    key: str  # its branch: T or T-A
    agent: str | None
    path: Path
    record_dir: Path  # <task dir>/setup or <agent dir>/setup: env.json and the setup logs
    title: str = ""  # how messages name it, when it is neither the task's nor an agent's

    @property
    def label(self) -> str:
        """How progress lines name the worktree."""
        return self.agent or self.title or "task"

    @property
    def described(self) -> str:
        """How error messages name the worktree."""
        if self.agent:
            return f"the worktree of agent '{self.agent}'"
        return f"the {self.title} worktree" if self.title else "the worktree of the task"


@dataclass(frozen=True)
class Slot:
    """A worktree's index and its block of ports [port_base, port_base + ports)."""

    index: int
    port_base: int
    ports: int

    def env(self) -> dict[str, str]:
        """The variables every command in the worktree sees."""
        return {
            "TASKGATE_WORKTREE_INDEX": str(self.index),
            "TASKGATE_PORT_BASE": str(self.port_base),
            "TASKGATE_PORT_COUNT": str(self.ports),
        }


@dataclass
class Outcome:
    """What preparing one worktree did in this call."""

    target: Target
    slot: Slot
    placed: files.Placed | None = None  # None: placed by an earlier call
    ran: list[dict[str, Any]] = field(default_factory=list)
    failed: dict[str, Any] | None = None
    created: list[str] = field(default_factory=list)  # untracked paths the setup made
    excluded: list[str] = field(default_factory=list)  # of those, added to info/exclude
    warnings: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """True when this call did anything worth an audit event."""
        placed = self.placed
        return bool(self.ran) or (placed is not None and bool(placed.paths() or placed.skipped))


def record_dir(ws: Workspace, task: str, agent: str | None) -> Path:
    """Where a worktree's env.json and setup logs live (next to the agent's transcripts)."""
    return (ws.agent_dir(task, agent) if agent else ws.task_dir(task)) / "setup"


def targets(
    ws: Workspace, task: str, agents: Iterable[str], *, task_worktree: bool
) -> list[Target]:
    """The task worktree (when asked) and the agents' worktrees, in that order."""
    result = []
    if task_worktree:
        result.append(Target(task, None, ws.task_worktree(task), record_dir(ws, task, None)))
    for agent in agents:
        path = ws.agent_worktree(task, agent)
        result.append(Target(f"{task}-{agent}", agent, path, record_dir(ws, task, agent)))
    return result


def worktree_env(ws: Workspace, task: str, agent: str | None) -> dict[str, str]:
    """TASKGATE_PORT_BASE, TASKGATE_PORT_COUNT and TASKGATE_WORKTREE_INDEX of a worktree
    (agent None: the task worktree); empty when it was never prepared."""
    data = read_json(record_dir(ws, task, agent) / "env.json")
    if not isinstance(data, dict):
        return {}
    return {k: str(v) for k, v in data.items() if k.startswith("TASKGATE_")}


# -- slots: recorded in the store ---------------------------------------------------------------


def _slots(events: Iterable[EventRow]) -> dict[str, Slot]:
    found: dict[str, Slot] = {}
    for e in events:
        if e.kind == PORTS_EVENT:
            for key, s in (e.payload.get("slots") or {}).items():
                found[str(key)] = Slot(int(s["index"]), int(s["port_base"]), int(s["ports"]))
    return found


def slots_of(snap: TaskSnapshot) -> dict[str, Slot]:
    """The slots a task holds, by worktree key (its branch name)."""
    return _slots(snap.events)


def allocate(engine: Engine, task: str, keys: Sequence[str]) -> dict[str, Slot]:
    """A slot for each key, reusing the task's own; new ones in one store write transaction,
    which serialises every allocating process, so two live worktrees never share one."""
    from taskgate.protocol.states import State

    cfg = engine.ws.config.worktree
    have = slots_of(engine.require_snapshot(task))
    if all(k in have for k in keys):
        return have

    def body(tx: Tx, snap: TaskSnapshot) -> dict[str, Slot]:
        mine = slots_of(snap)
        missing = [k for k in keys if k not in mine]
        if not missing:
            return mine
        used = {s.index for s in mine.values()}
        for row in tx.tasks():
            finished = row.state == State.CLEANUP.value and not row.pending
            if row.name != task and not finished:  # cleanup done: its blocks are free
                used |= {s.index for s in _slots(tx.events(row.name)).values()}
        new: dict[str, Slot] = {}
        index = 1  # index 0 and its block are left to the main worktree
        for key in missing:
            while index in used:
                index += 1
            if index > cfg.max_slots:
                raise UsageError(
                    f"no free block of {cfg.ports_per_worktree} ports above {cfg.port_start} "
                    f"for {len(missing)} more worktree(s)",
                    hint="clean up finished tasks (taskgate cleanup T), or lower "
                    "[worktree] ports_per_worktree / port_start in taskgate.toml",
                )
            used.add(index)
            base = cfg.port_start + index * cfg.ports_per_worktree
            new[key] = Slot(index, base, cfg.ports_per_worktree)
        payload = {k: {"index": s.index, "port_base": s.port_base, "ports": s.ports}
                   for k, s in new.items()}  # fmt: skip
        engine.event(tx, task, PORTS_EVENT, {"slots": payload})
        return mine | new

    return engine.step(task, body)


def disposable_paths(ws: Workspace, worktree: Path) -> tuple[str, ...]:
    """What cleanup may drop with the worktree instead of keeping it in a quarantine snapshot:
    the paths taskgate placed that are still exactly as placed (links, unedited copies; an
    edited copy is work and is not listed) and what the setup commands created."""
    created = [str(p).rstrip("/") for p in files.read_marker(worktree).get("created") or []]
    return (*files.disposable(ws.repo, worktree, files.placed_paths(worktree)), *created)


# -- setup commands -----------------------------------------------------------------------------


def _log_name(number: int, cmd: Sequence[str]) -> str:
    stem = "".join(c if c.isalnum() or c in "._-" else "-" for c in Path(cmd[0]).name)[:40]
    return f"{number}-{stem or 'command'}.log"


def _short(shown: str, width: int = 72) -> str:
    """A command on one short line for progress (logs and the audit trail keep it whole)."""
    line = " ".join(shown.split())
    return line if len(line) <= width else line[: width - 3] + "..."


def _setup_env(engine: Engine, task: str, target: Target, slot: Slot) -> dict[str, str]:
    env = clean_env(slot.env())
    for key in _STRIP:
        env.pop(key, None)
    env.update({"TASKGATE_TASK": task, "TASKGATE_WORKTREE": str(target.path)})
    return env


def _run_setup(
    engine: Engine, task: str, outcome: Outcome, progress: Callable[[str], None]
) -> None:
    """Run the target's setup commands not yet marked done, in order; stop at a failure."""
    cfg = engine.ws.config.worktree
    target = outcome.target
    marker = files.read_marker(target.path)
    done = [list(c) for c in marker.get("done") or []]
    todo = [(n, c) for n, c in enumerate(cfg.setup, 1) if list(c) not in done]
    if not todo:
        return
    before = files.tree_state(target.path)
    env = _setup_env(engine, task, target, outcome.slot)
    # Setup runs over content agents may have written (their branches, T): in the agents'
    # sandbox (issue 14), under `taskgate run` (its runner) and when the CLI starts it alike.
    confined = cast("Runner | None", engine.setup_runner) if target.agent else None
    from taskgate.agents import build_sandbox

    confinement = build_sandbox.of(engine.ws)
    if confined is None and confinement.notice(""):
        progress(f"setup [{target.label}]: " + confinement.notice("setup"))
    for number, cmd in todo:
        shown = shlex.join(cmd)
        started = time.monotonic()
        timeout = cfg.setup_timeout_minutes * 60.0
        if confined is not None:
            result = confined(cmd, cwd=target.path, branch=target.key, env=env, timeout=timeout)
        else:
            result, _ = confinement.run(cmd, cwd=target.path, env=env, timeout=timeout)
        seconds = round(time.monotonic() - started, 1)
        log = target.record_dir / _log_name(number, cmd)
        head = f"$ {shown}\n# in {target.path}\n# exit {result.returncode} after {seconds} s\n"
        atomic_write(log, f"{head}\n{result.stdout}\n--- stderr ---\n{result.stderr}")
        entry = {"command": shown, "exit_code": result.returncode, "seconds": seconds,
                 "log": str(log),
                 "sandbox": "bwrap" if confined or confinement.confined else "none"}  # fmt: skip
        outcome.ran.append(entry)
        if not result.ok:
            why = "timed out" if result.timed_out else f"exit {result.returncode}"
            progress(f"setup [{target.label}] {_short(shown)}: FAILED ({why}) - log: {log}")
            tail = (result.stderr.strip() or result.stdout.strip()).splitlines()[-5:]
            outcome.failed = entry | {"tail": tail}
            break
        done.append(list(cmd))
        marker["done"] = done
        files.write_marker(target.path, marker)
        progress(f"setup [{target.label}] {_short(shown)}: ok in {seconds} s")
    after = files.tree_state(target.path)
    outcome.excluded = files.exclude_new_untracked(
        target.path, engine.ws.common_dir, before.untracked, after.untracked
    )
    if outcome.excluded:
        shown_paths = ", ".join(outcome.excluded[:5]) + ("..." if len(outcome.excluded) > 5 else "")
        progress(f"setup [{target.label}] created {shown_paths}: kept out of git "
                 "(.git/info/exclude)")  # fmt: skip
    # Everything new, ignored or not, is setup output: disposable at cleanup (issue 16). A path
    # that only became ignored (another worktree's exclude entry) and held files before is not.
    appeared = [
        p
        for p in after.ignored - before.ignored
        if not any(u == p or u.startswith(p.rstrip("/") + "/") for u in before.untracked)
    ]
    outcome.created = sorted({*appeared, *outcome.excluded})  # fmt: skip
    if outcome.created:
        marker = files.read_marker(target.path)
        marker["created"] = sorted({*(marker.get("created") or []), *outcome.created})
        files.write_marker(target.path, marker)
    touched = [p for p in after.changed if p not in before.changed]
    if touched:
        outcome.warnings.append(f"setup changed tracked files: {', '.join(touched[:10])}")
        progress(f"setup [{target.label}] changed tracked files: {', '.join(touched[:5])} "
                 "(the agent will see them as its own uncommitted changes)")  # fmt: skip


def _jobs(cfg: WorktreeConfig, count: int) -> int:
    if cfg.jobs:
        return min(cfg.jobs, count)
    if cfg.symlink:
        return 1  # setup commands may write into the shared directories: one at a time
    return max(1, min(_DEFAULT_JOBS, os.cpu_count() or 1, count))


# -- the entry point ----------------------------------------------------------------------------


def prepare(
    engine: Engine,
    task: str,
    agents: Iterable[str] = (),
    *,
    task_worktree: bool = False,
    retry: str = "",
) -> list[Outcome]:
    """Make the task's (and/or the agents') existing worktrees ready to work in; idempotent.

    `retry` is the command that resumes the caller's step, named in SetupFailed's hint.
    """
    ws = engine.ws
    cfg = ws.config.worktree
    wanted = [t for t in targets(ws, task, agents, task_worktree=task_worktree)
              if gitrepo.is_worktree(t.path)]  # fmt: skip
    if not wanted:
        return []
    slots = allocate(engine, task, [t.key for t in wanted])
    progress = engine.progress or _quiet
    outcomes = [Outcome(t, slots[t.key]) for t in wanted]
    for o in outcomes:
        env = o.slot.env()
        if worktree_env(ws, task, o.target.agent) != env:
            atomic_write_json(o.target.record_dir / "env.json", env, durable=False)
    _place_all(engine, outcomes, progress)
    pending = [o for o in outcomes if _has_pending(cfg, o.target.path)]
    jobs = _jobs(cfg, len(pending))
    if pending:
        progress(f"setup: {len(cfg.setup)} command(s) in {len(pending)} worktree(s), "
                 f"{jobs} at a time")  # fmt: skip
    if jobs > 1:
        from concurrent.futures import ThreadPoolExecutor  # only here: ~6 ms to import

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(_run_setup, engine, task, o, progress) for o in pending]
            try:
                for future in futures:
                    future.result()
            except BaseException:  # Ctrl-C reaches this thread only: end the commands too,
                end_sessions_until_done(futures)  # one still being started included
                raise
    else:
        for o in pending:
            _run_setup(engine, task, o, progress)
    _record(engine, task, [o for o in outcomes if o.changed])
    failed = [o for o in outcomes if o.failed]
    if failed:
        raise _failure(task, failed, retry)
    return outcomes


def prepare_build(engine: Engine, task: str, worktree: Path) -> dict[str, str]:
    """Give the throwaway main-build worktree (R-CMP-08) the same files and setup commands, so
    the build on main sees what the task's validation saw; returns its commands' variables
    (the task worktree's port block: that worktree is idle while main is built)."""
    ws = engine.ws
    cfg = ws.config.worktree
    env = worktree_env(ws, task, None)
    slot = Slot(int(env.get("TASKGATE_WORKTREE_INDEX", 0)),
                int(env.get("TASKGATE_PORT_BASE", cfg.port_start)),
                int(env.get("TASKGATE_PORT_COUNT", cfg.ports_per_worktree)))  # fmt: skip
    target = Target(f"{task}-main-build", None, worktree,
                    record_dir(ws, task, None) / "main-build", title="main build")  # fmt: skip
    progress = engine.progress or _quiet
    outcome = Outcome(target, slot)
    _place_all(engine, [outcome], progress)
    _run_setup(engine, task, outcome, progress)
    if outcome.failed:
        raise _failure(task, [outcome], f"taskgate cleanup {task}")
    return slot.env()


def _quiet(_line: str) -> None:
    """Progress nobody shows (the hooks, tests)."""


def _has_pending(cfg: WorktreeConfig, worktree: Path) -> bool:
    done = [list(c) for c in files.read_marker(worktree).get("done") or []]
    return any(list(c) not in done for c in cfg.setup)


def _place_all(engine: Engine, outcomes: list[Outcome], progress: Callable[[str], None]) -> None:
    """Copy and link into every worktree not placed yet (git lists the included files once)."""
    ws = engine.ws
    cfg = ws.config.worktree
    todo = [o for o in outcomes if "placed" not in files.read_marker(o.target.path)]
    if not todo:
        return
    skip = [STATE_DIR]
    if ws.tasks_root.is_relative_to(ws.repo):
        skip.append(ws.tasks_root.relative_to(ws.repo).as_posix())
    included = files.included_files(ws.repo, cfg, skip)
    for o in todo:
        placed = files.place(ws.repo, o.target.path, cfg, included, ws.common_dir)
        o.placed = placed
        marker = files.read_marker(o.target.path)
        marker["placed"] = placed.paths()
        files.write_marker(o.target.path, marker)
        what = [f"{len(placed.copied)} file(s) copied"] if placed.copied else []
        what += [f"{p} linked" for p in placed.linked]
        what += [f"{p} copied" for p in placed.copied_dirs]
        if what or placed.skipped:
            progress(f"worktree [{o.target.label}] {', '.join(what) or 'nothing placed'}"
                     + "".join(f"; skipped {s}" for s in placed.skipped))  # fmt: skip


def _record(engine: Engine, task: str, outcomes: list[Outcome]) -> None:
    """One audit event per worktree that changed: paths and commands, never file content."""
    if not outcomes:
        return

    def body(tx: Tx, snap: TaskSnapshot) -> None:
        for o in outcomes:
            payload: dict[str, Any] = {
                "worktree": str(o.target.path),
                "branch": o.target.key,
                "agent": o.target.agent,
                "index": o.slot.index,
                "port_base": o.slot.port_base,
            }
            if o.placed is not None:
                payload |= {
                    "copied": o.placed.copied,
                    "linked": o.placed.linked,
                    "copied_dirs": o.placed.copied_dirs,
                    "excluded": o.placed.excluded,
                    "skipped": o.placed.skipped,
                }
            if o.ran:
                payload["setup"] = o.ran
                payload["result"] = "FAILURE" if o.failed else "SUCCESS"
            if o.created:
                payload["setup_created"] = o.created
            if o.excluded:
                payload["setup_excluded"] = o.excluded
            if o.warnings:
                payload["warnings"] = o.warnings
            engine.event(tx, task, PREPARED_EVENT, payload)

    engine.step(task, body)


def _failure(task: str, failed: list[Outcome], retry: str) -> SetupFailed:
    """One paragraph per failing command and exit code, naming every worktree it failed in."""
    groups: dict[tuple[str, int], list[Outcome]] = {}
    for o in failed:
        f = o.failed or {}
        groups.setdefault((str(f.get("command")), int(f.get("exit_code", -1))), []).append(o)
    lines = []
    for (command, code), outcomes in groups.items():
        where = outcomes[0].target.described
        if len(outcomes) > 1:
            names = ", ".join(f"'{o.target.agent or o.target.label}'" for o in outcomes)
            where = f"the worktrees of {names}"
        lines.append(f"setup command '{command}' failed in {where} (exit {code})")
        lines += [f"    {line}" for line in (outcomes[0].failed or {}).get("tail") or []]
        lines += [f"    log: {(o.failed or {}).get('log')}" for o in outcomes]
    again = f"run '{retry}' again" if retry else "run the same command again"
    return SetupFailed(
        "\n".join(lines),
        hint=f"fix the cause (see the log), then {again} (or 'taskgate run {task}', or "
        f"'taskgate recover {task} --repair'): setup commands that succeeded are not run again",
    )
