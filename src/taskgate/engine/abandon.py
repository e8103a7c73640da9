"""`taskgate abandon T --reason …`: a person drops a task; its work is kept, nothing is lost.

Every branch the task made (T and each T-A) and every worktree — commits, uncommitted and
untracked files, the staged index, reflogs — is kept under `refs/taskgate/quarantine/…` by
cleanup's own inventory and quarantine (engine/cleanup.py, issue 16), then the worktrees and
branches are removed, the lock is released and the task is marked abandoned with the reason
and who gave it. The task directory (task.md, reports, the audit trail) stays. The step is
journaled (`pending = {"op": "abandon"}`): a crash is resumed by running the command again.
`start` refuses an abandoned task; its todo.md entry is the person's to remove or rename.
"""

from __future__ import annotations

import time
from typing import Any

from taskgate.engine.checkpoints import _check_provenance, check_speaker
from taskgate.engine.core import Engine, current_state
from taskgate.errors import Refused, UsageError
from taskgate.git import ops
from taskgate.git import repo as gitrepo
from taskgate.protocol.states import State
from taskgate.protocol.violations import Violation
from taskgate.store.base import Tx
from taskgate.store.records import TaskSnapshot

OP = "abandon"


def abandon(engine: Engine, task: str, *, reason: str, provenance: str) -> dict[str, Any]:
    """Quarantine everything of `task`, remove its worktrees and branches, release it."""
    from taskgate.engine import cleanup

    if not reason.strip():
        raise UsageError("abandoning a task needs the reason", hint=f"taskgate abandon {task} "
                         "--reason 'why it is dropped'")  # fmt: skip
    snap = engine.require_snapshot(task)
    state = current_state(snap.task)
    if state in (State.COMPLETE, State.CLEANUP):
        raise Refused(
            f"'{task}' is {state}: its change is on main already",
            [Violation("R-CLN-01", "a completed task is cleaned up, not abandoned")],
            hint=f"taskgate cleanup {task}",
        )
    pending = snap.task.pending or {}
    if pending.get("op") not in (None, OP):
        raise Refused(
            f"the journaled step {pending.get('op')!r} of '{task}' is not finished",
            [Violation("R-REC-02", "an interrupted step is resumed first")],
            hint=f"taskgate recover {task} --repair",
        )
    stamp = str(pending.get("stamp") or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))

    def begin(tx: Tx, current: TaskSnapshot) -> None:
        check_speaker(engine, current.task)
        _check_provenance(engine, provenance)  # R-CKP-02: a person decides to drop work
        engine.touch(tx, current, pending={"op": OP, "stamp": stamp, "reason": reason.strip()})

    if not pending:
        engine.step(task, begin, owner=False)
    snap = engine.require_snapshot(task)
    repo = engine.ws.repo
    kept: dict[str, str] = {}
    with gitrepo.repo_lock(engine.ws.common_dir):
        for item in cleanup._items(engine, snap):  # H4's inventory: what each would lose
            if item.tip or gitrepo.is_worktree(item.worktree):
                ref = cleanup._quarantine(engine, task, item, stamp)
                if ref:
                    kept[item.branch] = ref
            gitrepo.remove_worktree(repo, item.worktree)
            if item.tip:
                ops.delete_ref(repo, f"refs/heads/{item.branch}", item.tip)
    record = {
        "reason": reason.strip(),
        "provenance": provenance,
        "state": state.value,
        "kept": kept,
        "at": engine.now(),
    }

    def done(tx: Tx, current: TaskSnapshot) -> None:
        engine.event(tx, task, "abandoned", record)
        engine.touch(
            tx,
            current,
            pending=None,
            lock_released_at=record["at"],
            extra={**current.task.extra, "abandoned": record},
        )

    engine.step(task, done, owner=False)
    return record
