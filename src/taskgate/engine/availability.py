"""Which todo.md tasks this session may take, and why not (D-LCK-1): `taskgate todo`, and the
selection `start`, `next` and `run` apply to one task (engine/lifecycle.py).

engine/todo_fast.py answers `todo` without the engine and must print the same bytes; its
tests compare both paths.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from taskgate.engine.core import Engine, current_state
from taskgate.errors import Corrupted
from taskgate.fsutil import read_text
from taskgate.protocol.selection import Availability, LockInfo, Selection, SelectionInput, select
from taskgate.protocol.states import State
from taskgate.protocol.todo import TodoList, TodoTask, blocked_reasons
from taskgate.store.base import StoreCorrupt
from taskgate.store.records import TaskHead, TaskRow

DONE_STATES = {State.COMPLETE.value, State.CLEANUP.value}
CHANGELOG_TASK = re.compile(r"^##[ \t]+([a-z0-9][a-z0-9._-]*):", re.MULTILINE)


@dataclass(frozen=True)
class TaskAvailability:
    """One row of `taskgate todo`."""

    name: str
    title: str
    availability: Availability
    rule: str
    message: str
    state: str | None = None
    owner: str | None = None


def done_names(engine: Engine, rows: Mapping[str, TaskRow | TaskHead]) -> set[str]:
    names = {n for n, r in rows.items() if r.state in DONE_STATES}
    changelog = read_text(engine.ws.changelog_path) or ""
    names.update(CHANGELOG_TASK.findall(changelog))
    return names


def task_rows(engine: Engine) -> dict[str, TaskRow]:
    try:
        with engine.store.read() as tx:
            return {r.name: r for r in tx.tasks()}
    except StoreCorrupt as exc:
        raise Corrupted(str(exc), hint="run 'taskgate recover'") from exc


def task_heads(engine: Engine) -> dict[str, TaskHead]:
    """What selection reads of every task row (a projection: `todo` at 10,000 tasks)."""
    try:
        with engine.store.read() as tx:
            return {r.name: r for r in tx.task_heads()}
    except StoreCorrupt as exc:
        raise Corrupted(str(exc), hint="run 'taskgate recover'") from exc


class Worktrees:
    """Which task worktrees exist, from one listing of the tasks root (issue 18: `todo` made
    a stat call per task); a name in it is checked like `Path.exists()` would. The names in
    `now` are answered at construction: `start` looks at git before it reads the store."""

    def __init__(self, engine: Engine, now: tuple[str, ...] = ()) -> None:
        self.root = str(engine.ws.tasks_root)
        try:
            self.dirs: set[str] | None = set(os.listdir(self.root))
        except FileNotFoundError:
            self.dirs = set()
        except OSError:
            self.dirs = None  # unreadable: ask for each task as before
        self.seen = {name: self._look(name) for name in now}

    def exists(self, name: str) -> bool:
        seen = self.seen.get(name)
        return self._look(name) if seen is None else seen

    def _look(self, name: str) -> bool:
        if self.dirs is not None and name not in self.dirs:
            return False
        return os.path.exists(os.path.join(self.root, name, "code"))


def selection(
    engine: Engine,
    name: str,
    entry: TodoTask | None,
    row: TaskRow | TaskHead | None,
    done: set[str],
    todo: TodoList | None = None,
    *,
    worktrees: Worktrees | None = None,
    reasons: dict[str, str] | None = None,
) -> Selection:
    """D-LCK-1 for one task; `worktrees` and `reasons` (blocked_reasons of `todo`) are
    computed once by callers that select every task."""
    lock = None
    if row is not None and not row.released:
        readable = True
        try:
            current_state(row)
        except Corrupted:
            readable = False
        lock = LockInfo(owner=row.session_id, readable=readable)
    pending = bool(row and row.pending and row.pending.get("op") == "create_task_worktree")
    unmet: tuple[str, ...] = ()
    if entry is not None:
        unmet = tuple(d for d in entry.depends if d not in done)
    sel = select(
        SelectionInput(
            task=name,
            session_id=engine.session_id,
            lock=lock,
            worktree_exists=(worktrees or Worktrees(engine)).exists(name),  # R-LCK-07, C-30
            # COMPLETE with a released lock (a person's release --force) still needs its
            # cleanup: it is adopted like any released task, never "already completed".
            done=bool(row and row.released and row.state == State.CLEANUP.value)
            # The changelog says done; a store row still short of COMPLETE (its complete was
            # interrupted after the merge) is resumed instead.
            or (entry is None and name in done and (row is None or row.state == "CLEANUP")),
            missing_fields=entry.missing_fields if entry else (),
            unmet_dependencies=unmet,
            pending_setup=pending,
        )
    )
    if row is not None and row.extra.get("abandoned"):  # issue 17: not available, not other
        reason = str(row.extra["abandoned"].get("reason", ""))
        return replace(
            sel, availability=Availability.ABANDONED, message=f"abandoned: {reason}".rstrip(": ")
        )
    if sel.availability is Availability.BLOCKED and todo is not None:
        why = (reasons if reasons is not None else blocked_reasons(todo, done)).get(name)
        if why:  # unknown dependencies and cycles said plainly, not only "waits for"
            sel = replace(sel, message=why)
    return sel


def availability(engine: Engine, *, held: bool = False) -> list[TaskAvailability]:
    """`taskgate todo`: every todo.md task with what this session may do with it; `held`
    (run --all, run --next, next) puts this session's own tasks that main's todo.md no
    longer lists first (their squash is on main, or their cleanup was interrupted)."""
    todo = engine.todo()
    worktrees = Worktrees(engine)  # before the store: lifecycle.start says why (R-LCK-04)
    rows = task_heads(engine)
    done = done_names(engine, rows)
    result = []
    reasons = blocked_reasons(todo, done)  # once, not per blocked task (it was quadratic)
    for entry in todo.tasks:
        row = rows.get(entry.name)
        sel = selection(
            engine, entry.name, entry, row, done, todo, worktrees=worktrees, reasons=reasons
        )
        result.append(
            TaskAvailability(
                entry.name,
                entry.title,
                sel.availability,
                sel.rule,
                sel.message,
                row.state if row else None,
                row.session_id if row and not row.released else None,
            )
        )
    listed = {entry.name for entry in todo.tasks}
    for row in rows.values() if held else ():
        if row.name in listed or row.session_id != engine.session_id:
            continue
        # The squash already took it out of main's todo.md: this session's task, or its
        # interrupted cleanup, is resumed all the same (run --all, run --next, next).
        if not row.released or cleanup_pending(row):
            result.insert(
                0,
                TaskAvailability(
                    row.name,
                    "(no longer listed in todo.md)",
                    Availability.RESUME,
                    "R-LCK-03",
                    f"resume '{row.name}': this session owns it (its squash is on main)",
                    row.state,
                    row.session_id,
                ),
            )
    return result


def cleanup_pending(row: TaskRow | TaskHead) -> bool:
    """A cleanup that entered CLEANUP (lock released) and was interrupted before its end."""
    return (
        row.released
        and row.state == State.CLEANUP.value
        and bool(row.pending)
        and (row.pending or {}).get("op") == "cleanup"
    )
