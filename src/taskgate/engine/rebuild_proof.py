"""What is left of a lost or damaged store, and what git proves of it (`recover --rebuild`).

Reads only: the rows the damaged store still yields, each task's record from its views
(store-record.jsonl, engine/store_record.py; or the `store_record` of an older
audit-trail.json), whether the store is behind its views (`damage`), and the proof of each
chain against the head anchored in git (`prove`, engine/anchor.py). engine/rebuild.py writes
the rebuilt store from what this module reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from taskgate.engine import anchor, store_record, views
from taskgate.engine.workspace import Workspace, store_problem
from taskgate.errors import Corrupted, EnvironmentFault
from taskgate.fsutil import read_json
from taskgate.store import snapshot as hook_snapshot
from taskgate.store.base import StoreCorrupt
from taskgate.store.records import (
    GENESIS_HASH,
    AgentRow,
    ApprovalRow,
    EventRow,
    PresentationRow,
    TaskRow,
    TaskSnapshot,
    TransitionRow,
    ValidationRow,
    VerdictRow,
    event_hash,
)
from taskgate.store.select import open_store

_ROW_TYPES: dict[str, type] = {
    "transitions": TransitionRow,
    "agents": AgentRow,
    "verdicts": VerdictRow,
    "presentations": PresentationRow,
    "approvals": ApprovalRow,
    "validations": ValidationRow,
    "events": EventRow,
}


@dataclass
class TaskRebuild:
    """What the rebuild did with one task and how much of it git proves."""

    task: str
    source: str  # "views" | "store" | "none" (nothing to restore from)
    state: str = ""
    seq: int | None = None
    events: int = 0
    anchored: int | None = None  # the seq of the event git anchors, when it is in the chain
    unproven: list[int] = field(default_factory=list)  # event seqs no anchor covers
    problems: list[str] = field(default_factory=list)  # why (parts of) it cannot be proven
    unbacked: list[int] = field(default_factory=list)  # approvals no proven event records

    @property
    def proven(self) -> bool:
        """Every restored event and record is covered by the anchored head."""
        return self.source != "none" and not self.unproven and not self.problems

    def to_json(self) -> dict[str, Any]:
        """Stable JSON shape."""
        return {
            "task": self.task,
            "source": self.source,
            "state": self.state,
            "seq": self.seq,
            "events": self.events,
            "anchored_event": self.anchored,
            "unproven_events": self.unproven,
            "problems": self.problems,
            "proven": self.proven,
        }


# -- reading what is left ------------------------------------------------------------------------


def record_from_views(ws: Workspace, task: str) -> tuple[TaskSnapshot | None, str, list[str]]:
    """The store rows the task's store-record.jsonl adds up to (or, rendered by a taskgate
    before it, its audit-trail.json's `store_record`): the rows, or None and why not, and
    what was wrong with the file (lines that do not verify are not used)."""
    path = ws.task_dir(task) / store_record.FILE_NAME
    got = store_record.replay(path)
    if got is None:
        return _record_in_trail(ws, task)
    if got.record is None:
        return None, f"{path}: no line verifies ({'; '.join(got.damage)})", got.damage
    try:
        return _snapshot_of(task, got.record), "", got.damage
    except (TypeError, ValueError, KeyError) as exc:
        return None, f"{path}: the store record does not parse ({exc})", got.damage


def _record_in_trail(ws: Workspace, task: str) -> tuple[TaskSnapshot | None, str, list[str]]:
    path = ws.task_dir(task) / "audit-trail.json"
    data = read_json(path)
    record = data.get("store_record") if isinstance(data, dict) else None
    if not isinstance(record, dict):  # nor an audit-trail.json of a taskgate before it
        return None, f"{ws.task_dir(task) / store_record.FILE_NAME} is missing", []
    try:
        return _snapshot_of(task, record), "", []
    except (TypeError, ValueError, KeyError) as exc:
        return None, f"{path}: the store record does not parse ({exc})", []


def _snapshot_of(task: str, record: dict[str, Any]) -> TaskSnapshot:
    row = record["task"]
    if not isinstance(row, dict) or row.get("name") != task:
        raise ValueError(f"it names task {row.get('name') if isinstance(row, dict) else '?'!r}")
    known = {f.name for f in fields(TaskRow)}
    if set(row) - known:
        raise ValueError(f"unknown task fields {sorted(set(row) - known)}")
    task_row = TaskRow(**{**row, "required_agents": tuple(row.get("required_agents") or ())})
    parts: dict[str, tuple[Any, ...]] = {}
    for name, cls in _ROW_TYPES.items():
        items = record.get(name)
        if not isinstance(items, list):
            raise ValueError(f"{name} is not a list")
        names = {f.name for f in fields(cls)}
        rows = []
        for item in items:
            if not isinstance(item, dict) or set(item) - names or item.get("task") != task:
                raise ValueError(f"a row of {name} does not belong to this task")
            rows.append(cls(**item))
        parts[name] = tuple(rows)
    return TaskSnapshot(task=task_row, **parts)


def old_store(ws: Workspace) -> tuple[dict[str, TaskSnapshot], str]:
    """Every task the damaged store still yields, and what is wrong with it ("" when opened)."""
    problem = store_problem(ws)
    if problem:
        return {}, problem
    try:
        store = open_store(ws, timeout=10.0, read_only=True)
    except EnvironmentFault:
        raise  # disk full, permissions: fix the machine, nothing to rebuild
    except (StoreCorrupt, Corrupted) as exc:
        return {}, f"the store cannot be opened: {getattr(exc, 'message', exc)}"
    try:
        return {s.task.name: s for s in store.iter_snapshots()}, ""
    except EnvironmentFault:
        raise
    except (StoreCorrupt, Corrupted) as exc:
        return {}, f"the store cannot be read: {getattr(exc, 'message', exc)}"
    finally:
        store.close()


def orphan_events(ws: Workspace) -> list[EventRow]:
    """Events of trails without a task row (the repository's trail, engine/guard_trail.py)
    that the damaged store still yields: no view carries them, so they are copied as they are."""
    import json
    import sqlite3

    try:
        conn = sqlite3.connect(f"{ws.db_path.resolve().as_uri()}?mode=ro", uri=True, timeout=10)
        try:
            rows = conn.execute(
                "SELECT seq, task, at, kind, payload, prev_hash, hash FROM events "
                "WHERE task NOT IN (SELECT name FROM tasks) ORDER BY seq"
            ).fetchall()
        finally:
            conn.close()
    except (sqlite3.Error, OSError):
        return []  # unreadable: reported as the store's damage already
    found = []
    for seq, task, at, kind, payload, prev, digest in rows:
        try:
            data = json.loads(payload)
        except ValueError:
            data = {"_unparseable": payload}
        found.append(EventRow(task, at, kind, data, prev, digest, int(seq)))
    return found


def view_tasks(ws: Workspace) -> list[str]:
    """The tasks that have views here (a task.json or an audit-trail.json)."""
    try:
        found = {p.parent.name for p in ws.tasks_root.glob("*/audit-trail.json")}
        found |= {p.parent.name for p in ws.tasks_root.glob("*/task.json")}
    except OSError:
        return []
    return sorted(found)


def newer(view: TaskSnapshot, store: TaskSnapshot) -> bool:
    """The views' record is further along than the store's rows."""
    return (view.task.seq, len(view.events)) > (store.task.seq, len(store.events))


def damage(ws: Workspace) -> str:
    """What is wrong with the store that a rebuild answers; "" when it is intact."""
    old, problem = old_store(ws)
    if problem:
        return problem
    behind = []
    for name in view_tasks(ws):
        rendered = views.view_seq(ws, name)
        view, _, _ = record_from_views(ws, name)
        seq = old[name].task.seq if name in old else None
        if (rendered is not None and (seq is None or rendered > seq)) or (
            view is not None and (name not in old or newer(view, old[name]))
        ):
            behind.append(name)
    if behind:
        return (
            f"the store is behind its views for {', '.join(behind)}: committed steps were lost "
            "(state.db-wal deleted, or an older copy of state.db restored)"
        )
    ahead = hook_snapshot_ahead(ws, old)
    return ahead or ""


def hook_snapshot_ahead(ws: Workspace, old: dict[str, TaskSnapshot]) -> str:
    """The hook snapshot saw events the store no longer has (store/snapshot.py store_seq)."""
    have = max((e.seq for s in old.values() for e in s.events), default=0)
    found = hook_snapshot.ahead(hook_snapshot.seen(str(ws.state_dir)), have)
    return found[1] if found else ""


# -- proof ---------------------------------------------------------------------------------------


def prove(ws: Workspace, snap: TaskSnapshot, result: TaskRebuild) -> None:
    """Check the chain against the head git anchors; fill in what is not proven."""
    events = snap.events
    task = snap.task.name
    intact = len(events)  # events[:intact] link and hash correctly
    previous = GENESIS_HASH
    for i, e in enumerate(events):
        if e.prev_hash != previous or event_hash(e.prev_hash, e.task, e.at, e.kind,
                                                 e.payload) != e.hash:  # fmt: skip
            intact = i
            result.problems.append(
                f"event #{e.seq} ({e.kind}) breaks the hash chain: it or an earlier one was "
                "edited in the views"
            )
            break
        previous = e.hash
    anchored = anchor.read_anchor(ws, task)
    covered = 0  # events[:covered] are proven
    if anchored is None:
        result.problems.append(
            f"git holds no anchor for '{task}' ({anchor.ref(task)}; one is written at each "
            "checkpoint): its chain cannot be proven"
        )
    else:
        seq, digest = anchored
        where = [i for i, e in enumerate(events[:intact]) if e.seq == seq and e.hash == digest]
        if where:
            covered = where[0] + 1
            result.anchored = seq
        else:
            result.problems.append(
                f"the chain does not contain event #{seq} ({digest[:12]}) that git anchors in "
                f"{anchor.ref(task)}: events up to that checkpoint are missing or were altered"
            )
    result.unproven = [e.seq for e in events[covered:]]
    proven = events[:covered]
    for i, a in enumerate(snap.approvals):  # an approval counts only if a proven event has it
        if not any(
            e.kind == "approval"
            and e.payload.get("kind") == a.kind
            and e.payload.get("bound_to") == a.bound_to
            and e.payload.get("provenance") == a.provenance
            for e in proven
        ):
            result.problems.append(
                f"the {a.kind} approval bound to {a.bound_to[:12]} ({a.provenance}, "
                f"{a.approved_at}) is recorded by no proven event"
                + ("; restored revoked: it approves nothing" if a.revoked_at is None else "")
            )
            result.unbacked.append(i)
    moves = [e.payload.get("to") for e in proven if e.kind == "transition"]
    tail = [e for e in events[covered:] if e.kind == "transition"]
    if moves and not tail and moves[-1] != snap.task.state:
        result.problems.append(
            f"the state {snap.task.state} is not the one the proven chain ends in ({moves[-1]})"
        )
