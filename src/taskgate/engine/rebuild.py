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
   that reason, for the unproven parts (engine/audit_chain.py `check_rebuild`).

The embedded SQLite store only: a PostgreSQL store (issue 20) is restored from its own backups.
Reading what is left and proving it is engine/rebuild_proof.py (its public names are
importable from here as well); this module writes the rebuilt store and reports.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from taskgate import failpoints
from taskgate.engine import anchor, store_record, views
from taskgate.engine.core import Engine
from taskgate.engine.rebuild_proof import (
    TaskRebuild,
    damage,
    hook_snapshot_ahead,
    newer,
    old_store,
    orphan_events,
    prove,
    record_from_views,
    view_tasks,
)
from taskgate.engine.workspace import Workspace
from taskgate.errors import Locked, UsageError
from taskgate.store import dbswap
from taskgate.store import snapshot as hook_snapshot
from taskgate.store.base import Conflict, StoreCorrupt, Tx
from taskgate.store.records import TaskSnapshot

__all__ = [
    "PROCEDURE",
    "RebuildResult",
    "TaskRebuild",
    "damage",
    "hook_snapshot_ahead",
    "prove",
    "rebuild",
    "record_from_views",
    "render_text",
]

PROCEDURE = "rebuild"


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


def _move_aside(ws: Workspace, aside: Path) -> None:
    """The damaged store files (and the hook snapshot made from them) into `aside`."""
    db = ws.db_path
    snapshots = (hook_snapshot.FILE_NAME, hook_snapshot.SEQ_FILE, hook_snapshot.AHEAD_NAME,
                 hook_snapshot.AHEAD_SEQ, hook_snapshot.GEN_FILE)  # fmt: skip
    for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm"), *(ws.state_dir / n for n in snapshots)):
        if path.exists():
            os.replace(path, aside / path.name)


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
    # Judged under both locks: another rebuild may have run, and no writer commits into
    # the old file from before it is read until the new one is in place (store/dbswap.py).
    with dbswap.exclusive(ws.state_dir), _old_file_locked(engine) as old_lock:
        return _rebuild(engine, old_lock)


class _OldLock:
    """The old store's write lock (`BEGIN IMMEDIATE` on a connection to it), held while the
    rebuild reads it, builds the new store and puts it in place: a writer that opened the
    old file waits, then finds it replaced and writes into the new one (R-REC-12, R-LCK-09).
    None of it when the old store is missing or SQLite cannot open it: nothing writes there."""

    def __init__(self, conn: Any | None) -> None:
        self.conn = conn

    def release(self) -> None:
        """Roll back (nothing was written through it) and close. Closing a connection to a
        file that was renamed folds no log into it (SQLite's SQLITE_FCNTL_HAS_MOVED): the
        files kept aside stay as they were found."""
        import sqlite3

        conn, self.conn = self.conn, None
        if conn is not None:
            with suppress(sqlite3.Error):  # a rollback that fails ends with the connection
                conn.execute("ROLLBACK")
            conn.close()


@contextmanager
def _old_file_locked(engine: Engine) -> Iterator[_OldLock]:
    """The old store's write lock for the whole rebuild, when SQLite can take it."""
    import sqlite3

    from taskgate.engine.workspace import store_problem

    ws = engine.ws
    lock = _OldLock(None)
    if store_problem(ws):  # missing or empty: no writer can have it open as a store
        yield lock
        return
    try:
        conn = sqlite3.connect(f"{ws.db_path.resolve().as_uri()}?mode=rw", uri=True,
                               timeout=0, isolation_level=None)  # fmt: skip
    except sqlite3.Error:
        conn = None  # not a database SQLite opens: the rebuild reports it
    if conn is not None:
        try:
            _begin(conn, engine)
            lock.conn = conn
        except sqlite3.Error:  # damaged beyond locking: nothing can write into it either
            conn.close()
        except BaseException:
            conn.close()
            raise
    try:
        yield lock
    finally:
        lock.release()  # still held when the rebuild stopped before its end


def _begin(conn: Any, engine: Engine) -> None:
    """BEGIN IMMEDIATE on the old store, waiting TASKGATE_LOCK_TIMEOUT for a writer that
    holds it (saying so); Locked when it does not finish in that time."""
    import sqlite3

    try:
        conn.execute("BEGIN IMMEDIATE")
        return
    except sqlite3.OperationalError as exc:
        if not _busy(exc):
            raise
    failpoints.wait("rebuild:busy")  # tests: a writer holds the lock
    wait = float(os.environ.get("TASKGATE_LOCK_TIMEOUT", "60"))
    if engine.progress is not None:
        engine.progress(
            f"recover --rebuild: waiting up to {wait:g} s for the taskgate command or hook "
            "that holds the store's write lock"
        )
    conn.execute(f"PRAGMA busy_timeout = {int(wait * 1000)}")
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if not _busy(exc):
            raise
        raise Locked(
            f"another process held the store's write lock for {wait:g} s: the rebuild did "
            "not start (nothing was changed)",
            hint="wait for the taskgate command or hook that writes to finish (or stop "
            "'taskgate serve' / 'taskgate run'), then run 'taskgate recover --rebuild' "
            "again; TASKGATE_LOCK_TIMEOUT sets how long it waits",
        ) from None


def _busy(exc: Exception) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


def _rebuild(engine: Engine, old_lock: _OldLock) -> RebuildResult:
    ws = engine.ws
    found = damage(ws)
    if not found:
        return RebuildResult("")
    old, _ = old_store(ws)
    result = RebuildResult(found)
    chosen: list[tuple[TaskSnapshot, TaskRebuild]] = []
    for name in sorted(set(old) | set(view_tasks(ws))):
        view, why, damaged = record_from_views(ws, name)
        stored = old.get(name)
        if view is not None and (stored is None or newer(view, stored)):
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
    orphans = orphan_events(ws)
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
        failpoints.wait("rebuild:built")  # tests: the new store built, the old one locked
        aside = ws.state_dir / f"lost-{stamp}"
        aside.mkdir(parents=True, exist_ok=False)
        for _, item in chosen:  # before the new store is in place: never behind a view
            _views_beyond(ws, item, aside)
        _move_aside(ws, aside)
        failpoints.wait("rebuild:moved")  # tests: no store at the path until the new one
        for suffix in ("", "-wal", "-shm"):
            built = Path(f"{work / ws.db_path.name}{suffix}")
            if built.exists():
                os.replace(built, Path(f"{ws.db_path}{suffix}"))
    finally:
        shutil.rmtree(work, ignore_errors=True)  # our own scratch directory only
    result.kept_aside = str(aside)
    result.tasks = sorted([i for _, i in chosen] + result.tasks, key=lambda i: i.task)
    for _, item in chosen:
        if item.source == "views":
            _record(engine, item, found, str(aside))
    engine.store.refresh_snapshot(wait_s=1.0)
    # Writers waiting on the old file now find it replaced and write into the new one.
    old_lock.release()
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
