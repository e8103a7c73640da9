"""Run whole tasks: one (`run T`), the next available (`--next`) or all of them (`--all`)."""

from __future__ import annotations

import fnmatch
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from taskgate.agents import confinement, setup_sandbox
from taskgate.agents.config import parse_agents_config
from taskgate.engine import lifecycle
from taskgate.engine.core import Engine
from taskgate.errors import ForeignTask, Refused, TaskgateError, UsageError
from taskgate.orchestrator.approver import (
    Approver,
    AutoApprove,
    StopAtCheckpoint,
    TerminalApprover,
)
from taskgate.orchestrator.progress import Progress
from taskgate.orchestrator.runner import Runner
from taskgate.protocol.selection import Availability
from taskgate.protocol.violations import Violation


@dataclass
class RunOutcome:
    """What a run did: the tasks it finished, and where it stopped if it stopped."""

    finished: list[str] = field(default_factory=list)
    stopped: str | None = None


def choose_approver(engine: Engine, *, yes: bool, interactive: bool | None = None) -> Approver:
    """--yes (only where the config allows it), a terminal prompt, or stop with exit 4."""
    if yes:
        if not engine.ws.config.protocol.allow_auto_approve:  # R-CKP-02
            raise Refused(
                "--yes would approve checkpoints automatically, which this repository forbids",
                [Violation("R-CKP-02", "no bypass mode satisfies a checkpoint by default")],
                hint="set allow_auto_approve = true under [protocol] in taskgate.toml, or "
                "run without --yes and approve yourself",
            )
        return AutoApprove()
    tty = sys.stdin.isatty() and sys.stdout.isatty() if interactive is None else interactive
    return (
        TerminalApprover(details=lambda task: details(engine, task)) if tty else StopAtCheckpoint()
    )


def details(engine: Engine, task: str, limit: int = 20_000) -> str:
    """The `[d]etails` answer: the whole task.md at the plan, the full diff at the change review."""
    from taskgate.fsutil import read_text
    from taskgate.git.cmd import git

    snap = engine.require_snapshot(task)
    if snap.task.state == "SYNTHESIS":
        text = read_text(engine.ws.task_md(task)) or "(task.md is missing)"
    else:
        base = snap.task.base_sha or snap.task.base_branch
        text = git("diff", f"{base}...HEAD", cwd=engine.ws.task_worktree(task), check=False).stdout
        text = text or "(no changes)"
    return (
        text if len(text) <= limit else text[:limit] + f"\n… ({len(text) - limit} more characters)"
    )


def _matches(name: str, filters: Sequence[str]) -> bool:
    return not filters or any(fnmatch.fnmatch(name, f) or f in name for f in filters)


def _next_task(engine: Engine, filters: Sequence[str], skip: set[str]) -> str | None:
    """This session's own task first, then the first available one (R-BAT-04, R-LCK-20)."""
    items = [i for i in lifecycle.availability(engine, held=True) if _matches(i.name, filters)]
    for wanted in (Availability.RESUME, Availability.AVAILABLE):
        for item in items:
            if item.availability is wanted and item.name not in skip:
                return item.name
    return None


def run_one(
    engine: Engine, task: str, approver: Approver, progress: Progress, *, parallel: int = 4
) -> str:
    """Claim or resume `task` as this process and drive it to CLEANUP."""
    # Agent worktrees' setup commands run confined (issue 21 with 14), also when `start`
    # resumes an interrupted classification.
    engine.setup_runner = setup_sandbox.runner(
        parse_agents_config(engine.ws.config.agents, engine.ws.repo)
    )
    # The views of the whole run are rendered at Runner.run's flush points (issue 18).
    with engine.views_deferred():
        result = lifecycle.start(engine, task)
        progress.emit("start", task, f"{result.action} (state {result.state})",
                      action=result.action)  # fmt: skip
        if result.state == "CLEANUP":  # an interrupted cleanup that start finished (issue 16)
            return result.state
        lifecycle.take_process_lease(engine, task)
        engine.cwd = engine.ws.task_worktree(task)  # the seeds' cwd checks (R-TRN-09/10)
        agents = parse_agents_config(engine.ws.config.agents, engine.ws.repo)
        warning = confinement.notice(agents)  # unconfined agents: said on every run (issue 14)
        if warning:
            progress.emit("sandbox", task, warning, confined=False)
        runner = Runner(engine, task, approver, progress, agents, parallel=parallel)
        try:
            return runner.run()
        except TaskgateError as exc:  # a deliberate stop keeps the lease (issue 16)
            lifecycle.drop_process_lease(engine, task, why=exc.kind)
            raise


@contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP (a closed terminal) end `run` like Ctrl-C: the agents are ended and
    their sandboxes' commits imported to their branches (orchestrator/pool.py). The default
    action killed `run` at once, and the work the agents had committed was lost. An ignored
    signal (`nohup`) stays ignored."""
    import signal

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            if signal.getsignal(sig) is not signal.SIG_IGN:
                previous[sig] = signal.signal(sig, interrupt)
        except ValueError:  # not the main thread: nothing to install
            break
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run(
    engine: Engine,
    *,
    tasks: Sequence[str] = (),
    next_only: bool = False,
    run_all: bool = False,
    filters: Sequence[str] = (),
    approver: Approver,
    progress: Progress,
    parallel: int = 4,
) -> RunOutcome:
    """`taskgate run`: each task fully isolated, one after another (R-BAT-01)."""
    if sum(bool(x) for x in (tasks, next_only, run_all)) != 1:
        raise UsageError("name a task, or pass --next or --all", hint="taskgate run --help")
    with _terminate_as_interrupt():
        return _run(engine, tasks, next_only, filters, approver, progress, parallel)


def _run(
    engine: Engine,
    tasks: Sequence[str],
    next_only: bool,
    filters: Sequence[str],
    approver: Approver,
    progress: Progress,
    parallel: int,
) -> RunOutcome:
    outcome = RunOutcome()
    if tasks:
        for name in tasks:
            run_one(engine, name, approver, progress, parallel=parallel)
            outcome.finished.append(name)
        return outcome
    skip: set[str] = set()
    while True:
        task = _next_task(engine, filters, skip)
        if task is None:
            if not outcome.finished:
                raise Refused("No available tasks found. Exiting.", [], hint="taskgate todo")
            return outcome
        try:
            run_one(engine, task, approver, progress, parallel=parallel)
        except ForeignTask:
            skip.add(task)  # lost the race to another session: select the next task (R-LCK-11)
            continue
        outcome.finished.append(task)
        engine.fence = None
        if next_only:
            return outcome
