"""`taskgate recover`: the RULES §16 decision tree, safe repairs, and the escalation message.

Diagnosis reads only. `--repair` acts only on what is safe and owned by this session: it
resumes interrupted journaled steps, records agent retries (P2), re-renders wrong views and
recreates missing worktrees from existing branches (P4, R-REC-11). Every repair is journaled
(`pending` on the task row) and audited (a `recovery` event); detection then runs again
(R-REC-13). What cannot be repaired becomes the D-REC-3 escalation message (exit 4).

Diagnosis (the decision tree, reading only) is engine/recover_diagnosis.py, its public names
importable from here as well; this module repairs and runs detection again.
"""

from __future__ import annotations

from dataclasses import replace

from taskgate import failpoints
from taskgate.engine.audit import read_snapshots
from taskgate.engine.audit_views import record_problems
from taskgate.engine.core import Engine
from taskgate.engine.recover_diagnosis import (
    RESUME_COMMANDS,
    Check,
    Diagnosis,
    corruption_checks,
    diagnose,
    store_escalation,
    worktree_usable,
)
from taskgate.errors import Corrupted, SchemaDamaged, StoreLost, UsageError
from taskgate.git import repo as gitrepo
from taskgate.protocol.escalation import escalation_message
from taskgate.protocol.states import State
from taskgate.store.base import Tx
from taskgate.store.records import TaskSnapshot

# -- repair --------------------------------------------------------------------------------------


def repair(engine: Engine, snap: TaskSnapshot, d: Diagnosis) -> None:
    """Apply the safe repair for the selected procedure; journaled and audited."""
    if d.procedure == "P1":
        _resume_pending(engine, snap, d)
    elif d.procedure == "stop":
        from taskgate.engine.stops import resolve

        if resolve(engine, snap.task.name, by="recover --repair") is not None:
            d.repaired.append("the stop's cause is resolved: its exhausted counters start again; "
                              f"resume with 'taskgate run {snap.task.name}'")  # fmt: skip
    elif d.procedure == "P2" and not d.retry:  # only dead invocations: any step closes them
        _audit_repair(engine, snap.task.name, "P2", ["closed interrupted agent invocations"])
        d.repaired.append("closed interrupted agent invocations")
    elif d.procedure == "P2":
        _record_retries(engine, snap, d)
    if d.corrupt:
        # The first repair may have fixed the rest (a resumed step re-renders the views).
        fresh = diagnose(engine, _read(engine, snap.task.name))
        if fresh.corrupt and fresh.repairable and fresh.escalation is None:
            _repair_corruption(engine, snap, fresh)
            d.repaired += fresh.repaired


def _resume_pending(engine: Engine, snap: TaskSnapshot, d: Diagnosis) -> None:
    from taskgate.engine.flow import finish_classification
    from taskgate.engine.lifecycle import _finish_setup

    op = (snap.task.pending or {}).get("op")
    if op == "cleanup":
        from taskgate.engine.cleanup import cleanup

        cleanup(engine, snap.task.name)  # audited by its own "cleanup" event
        d.repaired.append("finished the interrupted cleanup")
        return
    if op == "create_task_worktree":
        _finish_setup(engine, snap.task)
    elif op == "create_agent_worktrees":
        finish_classification(engine, snap.task.name)
    elif op == "recover_worktrees":
        _recreate_worktrees(engine, snap.task.name)
    else:
        return
    _audit_repair(engine, snap.task.name, "P1", [f"resumed the journaled step {op}"])
    d.repaired.append(f"resumed the journaled step {op}")


def _record_retries(engine: Engine, snap: TaskSnapshot, d: Diagnosis) -> None:
    """Seed 000 P2 steps 3-5: count the retry of each agent to re-invoke (C-01)."""
    max_retries = engine.ws.config.protocol.max_agent_retries
    redo = d.retry

    def body(tx: Tx, current: TaskSnapshot) -> list[str]:
        done = []
        for name in redo:
            row = current.agent(name)
            if row is None or row.retry_count >= max_retries:
                continue
            tx.put_agent(replace(row, retry_count=row.retry_count + 1))
            done.append(f"{name}: retry {row.retry_count + 1}/{max_retries} recorded, re-invoke it")
        engine.event(tx, current.task.name, "recovery", {"procedure": "P2", "repaired": done})
        engine.touch(tx, current)
        return done

    if redo:
        d.repaired += engine.step(snap.task.name, body)


def _repair_corruption(engine: Engine, snap: TaskSnapshot, d: Diagnosis) -> None:
    failed = {c.number for c in d.checks if not c.passed and c.repairable}
    name = snap.task.name
    if failed & {4, 5}:
        d.repaired += _recreate_worktrees(engine, name)
    if 2 in failed:
        # Re-rendering happens after the step's commit (Engine.step); the event records why.
        _audit_repair(engine, name, "P4", ["re-rendered the views from the store"])
        d.repaired.append("re-rendered the views from the store")
        _rewrite_record(engine, name)


def _rewrite_record(engine: Engine, task: str) -> None:
    """A step appends to store-record.jsonl; damage before its last line needs it whole."""
    from taskgate.engine import store_record

    snap = engine.snapshot(task)
    if snap is not None and record_problems(engine.ws, snap):
        store_record.rewrite(engine.ws.task_dir(task), snap)


def _audit_repair(engine: Engine, task: str, procedure: str, repaired: list[str]) -> None:
    def body(tx: Tx, snap: TaskSnapshot) -> None:
        engine.event(tx, task, "recovery", {"procedure": procedure, "repaired": repaired})
        engine.touch(tx, snap)

    engine.step(task, body)


def _recreate_worktrees(engine: Engine, task: str) -> list[str]:
    """R-REC-11: recreate missing worktrees from existing branches; never create a branch."""
    ws = engine.ws

    def intent(tx: Tx, snap: TaskSnapshot) -> None:
        if not snap.task.pending:
            engine.touch(tx, snap, pending={"op": "recover_worktrees"})

    engine.step(task, intent)
    snap = engine.require_snapshot(task)
    wanted = [(ws.task_worktree(task), task)]
    if snap.task.state != State.INIT.value:
        wanted += [(ws.agent_worktree(task, a), f"{task}-{a}") for a in snap.task.required_agents]
    made: list[str] = []
    with gitrepo.repo_lock(ws.common_dir):
        for path, branch in wanted:
            if worktree_usable(path) or not gitrepo.branch_exists(ws.repo, branch):
                continue  # re-checked under the lock: another process may have done it
            gitrepo.ensure_worktree(ws.repo, path, branch, branch)
            made.append(f"recreated worktree {path} from branch {branch}")
    failpoints.hit("recover:after-worktrees")
    from taskgate.engine.worktree_setup import prepare  # issue 21: .env, links, setup, ports

    agents = snap.task.required_agents if snap.task.state != State.INIT.value else ()
    prepare(engine, task, agents, task_worktree=True, retry=f"taskgate recover {task} --repair")

    def done(tx: Tx, current: TaskSnapshot) -> None:
        ours = (current.task.pending or {}).get("op") == "recover_worktrees"
        engine.touch(tx, current, pending=None if ours else current.task.pending)
        engine.event(tx, task, "recovery", {"procedure": "P4", "repaired": made})

    engine.step(task, done)
    return made


# -- entry point ---------------------------------------------------------------------------------


def recover(engine: Engine, task: str | None, *, do_repair: bool) -> list[Diagnosis]:
    """Diagnose one task (or this session's / every task) and optionally repair, then re-detect."""
    try:
        names = _targets(engine, task)
        snaps = [_read(engine, name) for name in names]
    except (StoreLost, SchemaDamaged):
        raise  # restoring the store is the answer, never deleting a record
    except Corrupted as exc:  # R-REC-12: never repaired automatically
        return [
            Diagnosis(
                task or "",
                "unknown",
                procedure="P4",
                summary=exc.message,
                escalation=store_escalation(task or "", exc.message),
            )
        ]
    result = []
    for snap in snaps:
        name = snap.task.name
        d = diagnose(engine, snap)
        if do_repair and d.repairable and not d.foreign and d.escalation is None:
            if not snap.task.released:  # an interrupted cleanup checks its session itself
                engine.require_owner(snap.task)  # R-REC-10: only the owner repairs
            repair(engine, snap, d)
            if d.procedure == "P2" and not d.corrupt:
                # The retries are recorded, the re-invocations not yet run: detecting again
                # now would count a retry that has not happened (seed 000 P2 step 4).
                result.append(d)
                continue
            attempts = (*d.attempts, *d.repaired)
            again = diagnose(engine, _read(engine, name), attempts)  # R-REC-13
            again.repaired = d.repaired
            if d.corrupt:
                again.summary += (
                    " - Automatic recovery failed - manual intervention required"
                    if again.corrupt
                    else " - State corruption recovered successfully"
                )
            d = again
        result.append(d)
    return result


def _read(engine: Engine, name: str) -> TaskSnapshot:
    # A read-only snapshot: diagnosis must not re-render views before it has compared them.
    return read_snapshots(engine.ws, name)[0]


def _targets(engine: Engine, task: str | None) -> list[str]:
    if task is not None:
        engine.check_task_name(task)
        return [task]
    snaps = read_snapshots(engine.ws, None)
    mine = [
        s.task.name for s in snaps if s.task.session_id == engine.session_id and not s.task.released
    ]
    if engine.session_id and mine:
        return mine
    if not snaps:
        raise UsageError("no tasks started yet", hint="see 'taskgate todo'")
    return [s.task.name for s in snaps if not s.task.released]


__all__ = [
    "RESUME_COMMANDS",
    "Check",
    "Corrupted",
    "Diagnosis",
    "corruption_checks",
    "diagnose",
    "escalation_message",
    "recover",
    "repair",
    "store_escalation",
]
