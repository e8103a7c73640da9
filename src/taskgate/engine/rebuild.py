"""`taskgate recover --rebuild`: a lost or damaged store rebuilt from what the views and git prove.

Every task's views include `store-record.jsonl`: each row the store held for the task, the
hash-chained events included, a line appended per rendering (engine/store_record.py; a
taskgate before it kept the rows as `store_record` in audit-trail.json, still read). A torn
or garbled line ends what is read of it, and is named among the task's problems. When the store
is gone (missing, zero bytes, not a database, a damaged schema) or behind its views (a lost
WAL, an old copy restored), `--rebuild`:

1. reads whatever the damaged store still holds, and each task's record from its views, and
   takes per task the newer of the two (a task the views do not know keeps its store rows);
2. proves each chain: every hash recomputes, every link holds, and the head anchored in git at
   the last checkpoint (engine/anchor.py, `refs/taskgate/audit/T`) is in it, exactly. Events
   after that head, approvals that no proven event records, and a state the proven chain does
   not reach are listed as unproven; nothing is dropped and nothing is made up;
3. writes the new store beside the old one, moves the damaged files to `.taskgate/lost-<time>/`
   (never deleted) and puts the new store in place;
4. appends a `recovery` event (procedure `rebuild`) to each restored task naming what is proven
   and what is not, and anchors it: `taskgate audit` passes for proven tasks and fails, with
   that reason, for the unproven parts (engine/audit.py `check_rebuild`).

The embedded SQLite store only: a PostgreSQL store (issue 20) is restored from its own backups.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from taskgate.engine import anchor, store_record, views
from taskgate.engine.core import Engine
from taskgate.engine.workspace import Workspace, store_problem
from taskgate.errors import Corrupted, EnvironmentFault, Locked, UsageError
from taskgate.fsutil import read_json
from taskgate.store import snapshot as hook_snapshot
from taskgate.store.base import Conflict, StoreCorrupt, Tx
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

PROCEDURE = "rebuild"
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


@dataclass
class RebuildResult:
    """The outcome of `recover --rebuild`."""

    damage: str  # what was wrong with the store ("" when nothing was)
    kept_aside: str = ""  # where the damaged files went
    kept_events: int = 0  # events of trails without a task (the repository's) kept from it
    tasks: list[TaskRebuild] = field(default_factory=list)

    @property
    def rebuilt(self) -> bool:
        """The store was replaced."""
        return bool(self.kept_aside)

    @property
    def proven(self) -> bool:
        """Everything restored from the views is proven, and every task was restored
        (a task kept from the damaged store is as it was: the rebuild proves nothing there)."""
        return all(t.proven for t in self.tasks if t.source != "store")

    def to_json(self) -> dict[str, Any]:
        """Stable JSON shape."""
        return {
            "damage": self.damage,
            "rebuilt": self.rebuilt,
            "kept_aside": self.kept_aside,
            "kept_repository_events": self.kept_events,
            "proven": self.proven,
            "tasks": [t.to_json() for t in self.tasks],
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


def _old_store(ws: Workspace) -> tuple[dict[str, TaskSnapshot], str]:
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


def _orphan_events(ws: Workspace) -> list[EventRow]:
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


def _view_tasks(ws: Workspace) -> list[str]:
    try:
        found = {p.parent.name for p in ws.tasks_root.glob("*/audit-trail.json")}
        found |= {p.parent.name for p in ws.tasks_root.glob("*/task.json")}
    except OSError:
        return []
    return sorted(found)


def _newer(view: TaskSnapshot, store: TaskSnapshot) -> bool:
    return (view.task.seq, len(view.events)) > (store.task.seq, len(store.events))


def damage(ws: Workspace) -> str:
    """What is wrong with the store that a rebuild answers; "" when it is intact."""
    old, problem = _old_store(ws)
    if problem:
        return problem
    behind = []
    for name in _view_tasks(ws):
        rendered = views.view_seq(ws, name)
        view, _, _ = record_from_views(ws, name)
        seq = old[name].task.seq if name in old else None
        if (rendered is not None and (seq is None or rendered > seq)) or (
            view is not None and (name not in old or _newer(view, old[name]))
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


# -- writing -------------------------------------------------------------------------------------


def _distrust(snap: TaskSnapshot, item: TaskRebuild, now: str) -> TaskSnapshot:
    """An approval no proven event records is kept, but revoked: a view edited to add one
    (an agent outside a sandbox can write the views) must not open a gate after a rebuild."""
    if not item.unbacked:
        return snap
    why = "restored by recover --rebuild: no event proven against git records it"
    rows = tuple(
        replace(a, revoked_at=now, revoke_reason=why)
        if i in item.unbacked and a.revoked_at is None
        else a
        for i, a in enumerate(snap.approvals)
    )
    return replace(snap, approvals=rows)


def _insert(tx: Tx, snap: TaskSnapshot) -> None:
    if not tx.insert_task(snap.task):
        raise Conflict(f"task {snap.task.name!r} is there twice")
    for t in snap.transitions:
        tx.add_transition(t)
    for a in snap.agents:
        tx.put_agent(a)
    for v in snap.verdicts:
        tx.put_verdict(v)
    for p in snap.presentations:
        tx.add_presentation(p)
    for ap in snap.approvals:
        tx.add_approval(ap)
    for val in snap.validations:
        tx.add_validation(val)
    from taskgate.store.sqlite import SqliteTx  # the embedded store only

    assert isinstance(tx, SqliteTx)
    for e in snap.events:
        tx.restore_event(e)


def _move_aside(ws: Workspace, stamp: str) -> Path:
    """The damaged store files (and the hook snapshot made from them) into lost-<stamp>/."""
    aside = ws.state_dir / f"lost-{stamp}"
    aside.mkdir(parents=True, exist_ok=False)
    db = ws.db_path
    snapshots = (hook_snapshot.FILE_NAME, hook_snapshot.SEQ_FILE, hook_snapshot.AHEAD_NAME,
                 hook_snapshot.AHEAD_SEQ, hook_snapshot.GEN_FILE)  # fmt: skip
    for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm"), *(ws.state_dir / n for n in snapshots)):
        if path.exists():
            os.replace(path, aside / path.name)
    return aside


def rebuild(engine: Engine) -> RebuildResult:
    """Rebuild the embedded store from the views and the git anchors when it is lost or behind."""
    ws = engine.ws
    if ws.uses_database_server:
        raise UsageError(
            "recover --rebuild restores the embedded store (.taskgate/state.db) only; this "
            "repository uses a PostgreSQL store",
            hint="restore the database from its own backups (docs/teams.md)",
        )
    if not ws.initialized and not ws.store_evidence():
        raise UsageError(f"taskgate is not initialised in {ws.repo}", hint="run 'taskgate init'")
    with _exclusive(ws.state_dir / "rebuild.lock"):
        return _rebuild(engine)  # judged under the lock: another rebuild may have run


@contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    """One rebuild at a time (the kernel drops the lock if this process dies)."""
    import fcntl

    with open(path, "a+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Locked(
                "another 'taskgate recover --rebuild' is running",
                hint="wait for it to finish, then run 'taskgate recover --rebuild' again",
            ) from None
        yield


def _rebuild(engine: Engine) -> RebuildResult:
    ws = engine.ws
    found = damage(ws)
    if not found:
        return RebuildResult("")
    old, _ = _old_store(ws)
    result = RebuildResult(found)
    chosen: list[tuple[TaskSnapshot, TaskRebuild]] = []
    for name in sorted(set(old) | set(_view_tasks(ws))):
        view, why, damaged = record_from_views(ws, name)
        stored = old.get(name)
        if view is not None and (stored is None or _newer(view, stored)):
            snap, item = view, TaskRebuild(name, "views", problems=list(damaged))
        elif stored is not None:
            snap, item = stored, TaskRebuild(name, "store")
        else:
            result.tasks.append(TaskRebuild(name, "none", problems=[why]))
            continue
        item.state, item.seq, item.events = snap.task.state, snap.task.seq, len(snap.events)
        prove(ws, snap, item)
        chosen.append((_distrust(snap, item, engine.now()), item))
    stamp = engine.now().replace("-", "").replace(":", "")
    work = ws.state_dir / f"rebuild-{stamp}"
    work.mkdir(parents=True, exist_ok=False)
    from taskgate.store.sqlite import SqliteStore, SqliteTx

    used: set[int] = set()
    orphans = _orphan_events(ws)
    try:
        fresh = SqliteStore(work / ws.db_path.name, timeout=10.0)
        try:
            if orphans:  # the repository's trail: only the store ever had it
                with fresh.write() as tx:
                    assert isinstance(tx, SqliteTx)
                    for e in orphans:
                        tx.restore_event(e)
                used |= {e.seq for e in orphans}
                result.kept_events = len(orphans)
            # The store's own rows first: a view cannot take an event number the store has.
            for snap, item in sorted(chosen, key=lambda c: c[1].source != "store"):
                clash = sorted(used & {e.seq for e in snap.events})
                if clash:
                    item.problems.append(
                        f"its events #{clash[0]}... are numbered like another task's: not "
                        "restored, its views are kept as they are"
                    )
                    item.source = "none"
                    continue
                try:
                    with fresh.write() as tx:
                        _insert(tx, snap)
                except (StoreCorrupt, Conflict) as exc:
                    item.problems.append(f"not restored: {exc}")
                    item.source = "none"
                    continue
                used |= {e.seq for e in snap.events}
        finally:
            fresh.close()
        engine.close()
        aside = _move_aside(ws, stamp)
        for suffix in ("", "-wal", "-shm"):
            built = Path(f"{work / ws.db_path.name}{suffix}")
            if built.exists():
                os.replace(built, Path(f"{ws.db_path}{suffix}"))
    finally:
        shutil.rmtree(work, ignore_errors=True)  # our own scratch directory only
    result.kept_aside = str(aside)
    result.tasks = sorted([i for _, i in chosen] + result.tasks, key=lambda i: i.task)
    for _, item in chosen:
        _views_beyond(ws, item, aside)
    for _, item in chosen:
        if item.source == "views":
            _record(engine, item, found, str(aside))
    engine.store.refresh_snapshot(wait_s=1.0)
    return result


def _views_beyond(ws: Workspace, item: TaskRebuild, aside: Path) -> None:
    """task.json rendered after what was restored (the record's last lines torn or lost as
    well as the store): those steps are gone. task.json goes aside with the damaged store,
    so the task carries on from what was restored, and the task's problems say so."""
    rendered = views.view_seq(ws, item.task)
    if item.source == "none" or item.seq is None or rendered is None or rendered <= item.seq:
        return
    kept = aside / f"{item.task}.task.json"
    os.replace(ws.task_dir(item.task) / "task.json", kept)
    item.problems.append(
        f"task.json was rendered at seq {rendered} but what was restored ends at seq "
        f"{item.seq}: the steps after it are lost (the store and the end of "
        f"{store_record.FILE_NAME} both); task.json is kept as {kept}"
    )


def _record(engine: Engine, item: TaskRebuild, found: str, aside: str) -> None:
    """The rebuild in the task's own trail, anchored in git (R-REC-13: every repair audited)."""
    payload = {
        "procedure": PROCEDURE,
        "damage": found,
        "source": "views",
        "store_kept": aside,
        "restored_seq": item.seq,
        "anchored_event": item.anchored,
        "unproven_events": item.unproven,
        "problems": item.problems,
    }

    def body(tx: Tx, snap: TaskSnapshot) -> None:
        engine.event(tx, item.task, "recovery", payload)
        engine.touch(tx, snap)

    engine.step(item.task, body, owner=False)
    anchor.anchor(engine, item.task)


def render_text(result: RebuildResult) -> str:
    """Human output: what was wrong, where the damaged store went, each task's proof."""
    if not result.damage:
        return "recover --rebuild: the store is intact and not behind its views; nothing changed"
    lines = [f"recover --rebuild: {result.damage}"]
    if result.rebuilt:
        lines.append(f"  the damaged store was moved to {result.kept_aside} (nothing deleted)")
    if result.kept_events:
        lines.append(
            f"  {result.kept_events} events of the repository's trail kept from the damaged store"
        )
    for t in result.tasks:
        if t.source == "none":
            lines.append(f"  {t.task}: NOT RESTORED")
        elif t.source == "store":
            lines.append(
                f"  {t.task}: {t.state} at seq {t.seq}, kept as the damaged store had it (its "
                "views were not ahead of it)"
            )
            continue
        else:
            proof = (
                f"proven against git anchor #{t.anchored}"
                if t.proven
                else "NOT PROVEN" + (f" after git anchor #{t.anchored}" if t.anchored else "")
            )
            lines.append(
                f"  {t.task}: {t.state} at seq {t.seq}, {t.events} events from the views; {proof}"
            )
        if t.unproven:
            after = "after the last anchor" if t.anchored else "no git anchor covers them"
            lines.append(
                f"    events only in the views, {after}: "
                f"#{t.unproven[0]}..#{t.unproven[-1]} ({len(t.unproven)})"
            )
        lines += [f"    {p}" for p in t.problems]
    if not result.proven:
        lines.append(
            "  hint: 'taskgate audit' fails the unproven parts with these reasons; check them "
            "against what you remember and the task's commits, or restore state.db from a "
            "backup (the rebuilt store can be moved aside the same way)"
        )
    return "\n".join(lines)
