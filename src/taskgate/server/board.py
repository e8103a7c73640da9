"""The board: every task of todo.md and of the store, in columns by protocol state.

Not-started tasks carry their availability (available, blocked by X, infeasible, foreign,
done); started ones their owner session, risk, checkpoint and agents with live status. One
read transaction gives the started tasks (no torn reads); todo.md adds the rest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from taskgate.engine.core import Engine
from taskgate.engine.lifecycle import TaskAvailability, availability
from taskgate.errors import Corrupted, UsageError
from taskgate.protocol.states import State
from taskgate.store.base import StoreCorrupt
from taskgate.store.records import AgentRow, TaskRow

_DONE_STATES = (State.COMPLETE.value, State.CLEANUP.value)
NOT_STARTED = "NOT_STARTED"
UNREADABLE = "UNREADABLE"  # a state the store holds that is none of the 11 (R-TRN-01)
COLUMNS = (NOT_STARTED, *(s.value for s in State))
COLUMN_TITLES = {
    NOT_STARTED: "not started",
    UNREADABLE: "unreadable state: taskgate recover",
    **{s.value: s.value.replace("_", " ") for s in State},
}


def _agent(a: AgentRow) -> dict[str, Any]:
    return {
        "agent": a.agent,
        "status": a.status or "PENDING",
        "phase": a.phase,
        "message": a.message,
        "updated_at": a.updated_at,
        "work_remaining": a.work_remaining,
    }


def _waiting(row: TaskRow, plan_approved: bool) -> str | None:
    """Which human checkpoint the task waits at, if any (for the badge)."""
    if row.released:
        return None
    if row.state == State.SYNTHESIS.value and not plan_approved:
        return "plan"
    if row.state == State.AWAITING_USER_APPROVAL.value and not (row.checkpoint or {}).get(
        "approved"
    ):
        return "changes"
    return None


def _started(row: TaskRow, agents: list[AgentRow], plan_approved: bool) -> dict[str, Any]:
    return {
        "task": row.name,
        "state": row.state,
        "column": row.state if row.state in COLUMNS else UNREADABLE,
        "title": row.name,
        "availability": None,
        "session_id": row.session_id,
        "released": row.released,
        "owner_pid": row.owner_pid,
        "host": row.host,
        "risk_level": row.risk_level,
        "required_agents": list(row.required_agents),
        "agents": [_agent(a) for a in agents],
        "waiting_for": _waiting(row, plan_approved),
        "pending": (row.pending or {}).get("op"),
        "updated_at": row.updated_at,
        "seq": row.seq,
    }


class CardCache:
    """Started tasks' cards by (name, seq): every step that changes a task's agents, state or
    approvals bumps its seq (Engine.touch), so an unchanged seq means an unchanged card."""

    def __init__(self) -> None:
        self._cards: dict[str, tuple[int, dict[str, Any]]] = {}
        self._todo_key: object = None
        self._todo: tuple[list[TaskAvailability], str] = ([], "")
        self.rows_key: object = None  # which tasks are started, and which of them are done

    def read(self, engine: Engine) -> dict[str, dict[str, Any]]:
        """Every started task's card, reading agents and approvals only for changed tasks."""
        try:
            with engine.store.read() as tx:
                rows = tx.tasks()
                fresh: dict[str, tuple[int, dict[str, Any]]] = {}
                for r in rows:
                    known = self._cards.get(r.name)
                    if known is not None and known[0] == r.seq:
                        fresh[r.name] = known
                        continue
                    approved = r.state == State.SYNTHESIS.value and any(
                        a.kind == "plan" and a.revoked_at is None for a in tx.approvals(r.name)
                    )
                    fresh[r.name] = (r.seq, _started(r, tx.agents(r.name), approved))
        except StoreCorrupt as exc:
            raise Corrupted(str(exc), hint="run 'taskgate recover'") from exc
        self._cards = fresh
        self.rows_key = (
            frozenset(fresh),
            frozenset(r.name for r in rows if r.state in _DONE_STATES),
        )
        return {name: dict(card) for name, (_, card) in fresh.items()}

    def availability(self, engine: Engine) -> tuple[list[TaskAvailability], str]:
        """`taskgate todo`'s rows and todo.md's error, computed again only when their inputs
        for not-started tasks changed: todo.md, changelog.md, the task directories, which
        tasks are started and which are done. A `run` moving started tasks changes none."""
        ws = engine.ws
        key = (
            _file_key(ws.todo_path),
            _file_key(ws.changelog_path),
            _file_key(ws.tasks_root),
            self.rows_key,
        )
        if key != self._todo_key or self.rows_key is None:
            try:
                self._todo = (availability(engine), "")
            except UsageError as exc:  # a broken todo.md must not take the board down
                self._todo = ([], f"{exc.message} ({exc.hint})" if exc.hint else exc.message)
            self._todo_key = key
        return self._todo


def _file_key(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def build(engine: Engine, cache: CardCache | None = None) -> dict[str, Any]:
    """The board as plain data (the page and `/api/board` share it)."""
    cards = cache or CardCache()
    tasks = cards.read(engine)
    todo, todo_error = cards.availability(engine)
    order: list[str] = []
    for item in todo:
        order.append(item.name)
        if item.name in tasks:
            tasks[item.name]["title"] = item.title
            continue
        tasks[item.name] = {
            "task": item.name,
            "state": None,
            "column": NOT_STARTED,
            "title": item.title,
            "availability": item.availability.value,
            "availability_rule": item.rule,
            "availability_message": item.message,
            "session_id": item.owner,
            "released": False,
            "risk_level": None,
            "required_agents": [],
            "agents": [],
            "waiting_for": None,
            "pending": None,
            "updated_at": None,
            "seq": 0,
        }
    listed = set(order)
    order += [name for name in sorted(tasks) if name not in listed]
    unreadable = any(t["column"] == UNREADABLE for t in tasks.values())
    columns = [
        {
            "state": col,
            "title": COLUMN_TITLES[col],
            "tasks": [tasks[n] for n in order if tasks[n]["column"] == col],
        }
        for col in (*COLUMNS, *((UNREADABLE,) if unreadable else ()))
    ]
    return {
        "repo": str(engine.ws.repo),
        "todo_error": todo_error,
        "counts": {c["state"]: len(c["tasks"]) for c in columns},
        "waiting": [t["task"] for t in tasks.values() if t["waiting_for"]],
        "columns": columns,
    }
