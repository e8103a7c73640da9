"""Claiming, resuming and releasing tasks: the selection matrix D-LCK-1 made executable."""

from __future__ import annotations

from dataclasses import dataclass

from taskgate import failpoints
from taskgate.engine.availability import (  # re-exported: callers import them from here
    TaskAvailability as TaskAvailability,
)
from taskgate.engine.availability import (
    Worktrees,
    cleanup_pending,
    done_names,
    selection,
    task_rows,
)
from taskgate.engine.availability import (
    availability as availability,
)
from taskgate.engine.core import Engine, current_state, owner_alive, pid_start_time
from taskgate.engine.lease import drop_process_lease, take_process_lease
from taskgate.engine.workspace import LOST_STORE_HINT, init_files, store_problem
from taskgate.errors import ForeignTask, NeedsHuman, Refused, StoreLost, UsageError
from taskgate.fsutil import atomic_write
from taskgate.git import repo as gitrepo
from taskgate.protocol.selection import Availability, crashed_session_prompt
from taskgate.protocol.states import State
from taskgate.protocol.violations import Violation
from taskgate.store.base import Conflict, Tx
from taskgate.store.records import TaskRow, TaskSnapshot

MAX_REASON = 2000  # characters of a --reason: it is recorded in events and views


@dataclass(frozen=True)
class StartResult:
    """What `start` did: claimed a new task or resumed this session's task."""

    task: str
    action: str  # "claimed" | "resumed" | "adopted" | "took-over"
    state: str
    worktree: str


def init(engine: Engine) -> list[str]:
    """`taskgate init`: config, state dir, git exclude, todo.md/changelog.md, store schema."""
    problem = store_problem(engine.ws)
    if problem:  # a lost store is never silently replaced by an empty one
        raise StoreLost(problem, hint=LOST_STORE_HINT)
    created = init_files(engine.ws)
    new_db = not engine.ws.uses_database_server and not engine.ws.db_path.exists()  # issue 20
    _ = engine.open_store(create=True).schema_version()
    if new_db:
        created.append(".taskgate/state.db")
    if not engine.ws.store_marker.exists():
        atomic_write(engine.ws.store_marker, f"{engine.now()}\n")
    return created


def _next_available(engine: Engine, exclude: str = "") -> str | None:
    for item in availability(engine):
        if item.availability is Availability.AVAILABLE and item.name != exclude:
            return item.name
    return None


def start(engine: Engine, name: str, *, adopt: bool = False) -> StartResult:
    """`taskgate start T`: apply D-LCK-1 and claim, resume, or refuse with the right exit code."""
    engine.check_task_name(name)
    session = engine.require_session()  # R-LCK-22
    todo = engine.todo()
    entry = todo.get(name)
    # Git before the store (R-LCK-01/04): a claim commits its row before it makes the branch
    # and the worktree, so a worktree seen here has its row in the read below; read the other
    # way round, a concurrent winner's fresh worktree looks like one without a lock (R-LCK-05).
    worktrees = Worktrees(engine, (name,))
    rows = task_rows(engine)
    row = rows.get(name)
    failpoints.wait("start:after-read")  # tests: another session claims it meanwhile
    if entry is None and row is None:
        raise UsageError(
            f"no task named '{name}' in {engine.ws.todo_path.name}",
            hint="add it to todo.md (see docs/todo-format.md) or run 'taskgate todo'",
        )
    if row is not None and row.extra.get("abandoned"):  # issue 17: `taskgate abandon`
        kept = ", ".join(dict(row.extra["abandoned"].get("kept") or {}).values()) or "nothing"
        raise Refused(
            f"task '{name}' was abandoned: {row.extra['abandoned'].get('reason', '')}",
            [Violation("R-LCK-05", f"its work is kept under {kept}")],
            hint=f"remove '{name}' from todo.md, or start the work afresh under a new name",
        )
    if row is not None and cleanup_pending(row) and row.session_id == session:
        from taskgate.engine.cleanup import cleanup

        cleanup(engine, name)  # R-CLN-07: idempotent; finishes what the kill interrupted
        return StartResult(name, "resumed", State.CLEANUP.value, str(engine.ws.task_dir(name)))
    sel = selection(engine, name, entry, row, done_names(engine, rows), todo, worktrees=worktrees)
    kind = sel.availability
    if kind is Availability.RESUME:
        assert row is not None
        return _resume(engine, row)
    if kind is Availability.FOREIGN:
        assert row is not None
        if owner_alive(row, engine.host) is False:
            return _claim(engine, name, row, action="took-over", expected=row)
        nxt = _next_available(engine, exclude=name)
        raise ForeignTask(
            f"{sel.message}; select an alternative task (R-LCK-04)",
            hint=f"next available task: {nxt}" if nxt else "No available tasks found.",
        )
    if kind is Availability.ASK_USER:
        if adopt and sel.rule == "R-LCK-05" and (row is None or row.released):
            return _claim(engine, name, row, action="adopted")
        prompt = sel.message
        if row is None or row.released:
            prompt = crashed_session_prompt(name, str(engine.ws.task_dir(name)))
        raise NeedsHuman(f"[{sel.rule}] {prompt}", hint="ask the user which option to take")
    if kind is Availability.DONE:
        raise Refused(f"task '{name}' is already completed", [Violation(sel.rule, sel.message)])
    if kind in (Availability.INFEASIBLE, Availability.BLOCKED):
        nxt = _next_available(engine, exclude=name)
        raise Refused(
            f"task '{name}' cannot be started",
            [Violation(sel.rule, sel.message, _fix_hint(kind))],
            hint=f"next available task: {nxt}" if nxt else "",
        )
    held = next((r for r in rows.values() if r.session_id == session and not r.released), None)
    if held is not None and held.name != name:
        raise Refused(
            f"session {session} already holds task '{held.name}' (R-LCK-19)",
            [Violation("R-LCK-19", "a session holds at most one unreleased task lock")],
            hint=f"finish '{held.name}' first (or a human runs 'taskgate release "
            f"{held.name} --force')",
        )
    if gitrepo.branch_exists(engine.ws.repo, name) and row is None:
        if _row_now(engine, name) is not None:  # a concurrent claim made it: decide again
            return start(engine, name, adopt=adopt)  # with its row: FOREIGN (R-LCK-04)
        raise Refused(
            f"a branch named '{name}' already exists",
            [Violation("R-WTB-01", "the task branch must be created by taskgate")],
            hint=f"rename or delete the branch '{name}' (git branch -m {name} <other>)",
        )
    return _claim(engine, name, row, action="claimed")


def _row_now(engine: Engine, name: str) -> TaskRow | None:
    """The task's row as committed now: a claim commits it before it creates branch T, so a
    branch seen before this read that has no row here was not made by taskgate (R-WTB-01)."""
    with engine.store.read() as tx:
        return tx.task(name)


def _fix_hint(kind: Availability) -> str:
    if kind is Availability.INFEASIBLE:
        return "add Purpose:, Scope: and Components: lines to the task in todo.md"
    return "complete the dependencies first"


def _base_branch(engine: Engine) -> str:
    configured = engine.ws.config.workspace.main_branch
    return configured or gitrepo.current_branch(engine.ws.repo)


def _same_owner(current: TaskRow, expected: TaskRow) -> bool:
    """Compare-and-swap key of a take-over: the dead owner seen outside the transaction."""
    return not current.released and (
        current.session_id, current.host, current.owner_pid, current.owner_started,
        current.fence,
    ) == (
        expected.session_id, expected.host, expected.owner_pid, expected.owner_started,
        expected.fence,
    )  # fmt: skip


def _claim(
    engine: Engine,
    name: str,
    row: TaskRow | None,
    *,
    action: str,
    expected: TaskRow | None = None,
) -> StartResult:
    """Exclusive claim (R-LCK-01/02), then the journaled task-worktree step.

    A take-over (`expected` = the dead owner's row) re-checks inside the write transaction
    that the owner is still that same dead process with the same fence: of two sessions
    racing to take over, exactly one wins (STYLE.md 6).
    """
    session = engine.session_id
    now = engine.now()
    base = row.base_branch if row else _base_branch(engine)
    if gitrepo.rev_parse(engine.ws.repo, base) is None:
        raise UsageError(
            f"the main branch '{base}' has no commit yet",
            hint="commit something on it first (git commit --allow-empty -m init)",
        )
    lease = {
        "session_id": session,
        "host": engine.host,
        "owner_pid": engine.owner_pid,
        "owner_started": pid_start_time(engine.owner_pid) if engine.owner_pid else None,
    }
    failpoints.wait("claim:before-transaction")  # tests: racing take-overs meet here
    try:
        with engine.store.write() as tx:
            current = tx.task(name)
            if expected is not None and (current is None or not _same_owner(current, expected)):
                raise ForeignTask(
                    f"'{name}' was taken over by another session a moment ago (R-LCK-01)",
                    hint="select another task with 'taskgate next'",
                )
            if current is not None and not current.released and expected is None:
                raise ForeignTask(
                    f"'{name}' was claimed by {current.session_id} a moment ago (R-LCK-01)",
                    hint="select another task with 'taskgate next'",
                )
            held = tx.active_task_of(session)
            if held is not None and held.name != name:
                raise Refused(
                    f"session {session} already holds task '{held.name}' (R-LCK-19)",
                    [Violation("R-LCK-19", "a session holds at most one unreleased task lock")],
                )
            pending: dict[str, object] = {"op": "create_task_worktree", "base": base}
            left = current.pending if current is not None else None
            if left and left.get("op") != "create_task_worktree":
                pending["resume"] = left  # a journaled step left by the released owner
            if current is None:
                fence = 1
                created = tx.insert_task(
                    TaskRow(
                        name=name,
                        state=State.INIT.value,
                        fence=fence,
                        created_at=now,
                        updated_at=now,
                        pending=pending,
                        base_branch=base,
                        **lease,  # type: ignore[arg-type]
                    )
                )
                if not created:
                    raise ForeignTask(f"'{name}' was claimed a moment ago (R-LCK-01)")
            else:
                fence = current.fence + 1
                tx.update_task(
                    name,
                    current.seq,
                    updated_at=now,
                    fence=fence,
                    lock_released_at=None,
                    pending=pending,
                    **lease,
                )
            tx.append_event(name, action, {"session": session, "fence": fence}, now)
            engine.attest(tx, name)  # the agent door's record, when it forwarded this claim
    except Conflict as exc:
        raise ForeignTask(f"could not claim '{name}': {exc}", hint="run 'taskgate next'") from exc
    engine.committed()
    failpoints.hit("claim:after-insert")
    if engine.owner_pid is not None:
        engine.fence = fence
    row_after = engine.require_snapshot(name).task
    _finish_setup(engine, row_after)
    snap = engine.require_snapshot(name)
    return StartResult(name, action, snap.task.state, str(engine.ws.task_worktree(name)))


def _finish_setup(engine: Engine, row: TaskRow) -> None:
    """The journaled worktree step: idempotent, so a crash before `done` simply redoes it."""
    if not row.pending or row.pending.get("op") != "create_task_worktree":
        return
    path = engine.ws.task_worktree(row.name)
    from taskgate.engine import remote_sync  # issue 20: a team's branches come from the remote

    remote_sync.fetch_task(engine, row.name, row.required_agents, row.base_branch)
    with gitrepo.repo_lock(engine.ws.common_dir):
        gitrepo.ensure_worktree(engine.ws.repo, path, row.name, str(row.pending["base"]))
    remote_sync.agent_worktrees(engine, row.name, row.required_agents, row.state)
    failpoints.hit("setup:after-worktree")
    from taskgate.engine.worktree_setup import prepare  # issue 21: .env, links, setup, ports

    prepare(engine, row.name, task_worktree=True, retry=f"taskgate start {row.name}")
    base_sha = gitrepo.rev_parse(engine.ws.repo, row.base_branch) or ""

    def done(tx: Tx, snap: TaskSnapshot) -> None:
        resume = (snap.task.pending or {}).get("resume")  # the released owner's journal
        engine.touch(tx, snap, pending=resume or None, base_sha=snap.task.base_sha or base_sha)
        engine.event(tx, row.name, "worktree_created", {"path": str(path), "branch": row.name})

    engine.step(row.name, done)


def _resume(engine: Engine, row: TaskRow) -> StartResult:
    """Matrix row 1 (R-LCK-03): skip INIT, verify the state, continue from the last phase."""
    from taskgate.engine.flow import finish_classification

    current_state(row)
    _finish_setup(engine, row)
    finish_classification(engine, row.name)
    if not gitrepo.is_worktree(engine.ws.task_worktree(row.name)):  # R-WTB-09
        raise NeedsHuman(
            f"ERROR: Inconsistent state - lock for '{row.name}' exists but worktree missing",
            hint=f"run 'taskgate recover {row.name}'",
        )
    snap = engine.require_snapshot(row.name)
    return StartResult(row.name, "resumed", snap.task.state, str(engine.ws.task_worktree(row.name)))


def next_task(engine: Engine) -> StartResult:
    """`taskgate next`: resume this session's task, else start the next available one."""
    engine.require_session()
    items = availability(engine, held=True)
    for item in items:
        if item.availability is Availability.RESUME:
            return start(engine, item.name)
    for item in items:
        if item.availability is Availability.AVAILABLE:
            try:
                return start(engine, item.name)
            except ForeignTask:
                continue  # R-LCK-11: lost a race, select the next one
    raise Refused("No available tasks found. Exiting.", [], hint="see 'taskgate todo'")


def release(engine: Engine, name: str, *, force: bool, reason: str = "") -> TaskRow:
    """`taskgate release T --force`: the human's override (R-LCK-21); audited."""
    if not force:
        raise UsageError(
            "release requires --force: only a human may release a lock (R-LCK-21)",
            hint=f"taskgate release {name} --force --reason '...'",
        )
    if len(reason) > MAX_REASON:
        raise UsageError(
            f"--reason is {len(reason)} characters; the limit is {MAX_REASON}",
            hint="say why in a sentence or two; put long notes in the task directory",
        )

    shared = {}
    if gitrepo.is_worktree(engine.ws.task_worktree(engine.check_task_name(name))):
        from taskgate.engine import remote_sync  # issue 20: hand the work over to a team

        agents = engine.require_snapshot(name).task.required_agents
        shared = remote_sync.share_quietly(engine, name, agents)

    def body(tx: Tx, snap: TaskSnapshot) -> TaskRow:
        if snap.task.released:
            raise Refused(f"the lock of '{name}' is already released", [])
        engine.event(
            tx,
            name,
            "force_release",
            {"previous_owner": snap.task.session_id, "fence": snap.task.fence, "reason": reason}
            | shared,
        )
        # A journaled git step in flight (complete, merge ...) stays journaled: whoever claims
        # the task next resumes it instead of starting over on top of half-done git work.
        return engine.touch(tx, snap, lock_released_at=engine.now())

    return engine.step(name, body, owner=False)


__all__ = ["drop_process_lease", "take_process_lease"]  # `run` takes and drops the lease
