"""Records of attacks on the guards themselves (issue 14): a request the agent door refused
because it came from another session than it claimed (or from nobody the door can name), and
hook settings found removed, changed or switched off at SessionStart.

Each goes into the audit trail of the task it concerns (hash-chained with the task's other
events); when there is no such task, into the repository's own trail: events under the name
`(repository)`, which no task can have (task names never hold parentheses). `taskgate audit`
reads both (engine/audit.py `check_guards`).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from taskgate.engine import views
from taskgate.protocol import audit_records as ar

if TYPE_CHECKING:
    from collections.abc import Sequence

    from taskgate.engine.core import Engine
    from taskgate.engine.workspace import Workspace
    from taskgate.store.base import Tx
    from taskgate.store.records import JSON, EventRow, TaskSnapshot

REPOSITORY = "(repository)"
DOOR_REFUSED = "agent-door-refused"
HOOKS_CHANGED = "hook_settings_changed"
KINDS = (DOOR_REFUSED, HOOKS_CHANGED)


def record(engine: Engine, tasks: list[str], kind: str, payload: JSON) -> list[str]:
    """Append the event to each of `tasks` that exists (the repository's trail when none
    does), in one write transaction; the trails written, in order."""
    with engine.store.write() as tx:
        names = [t for t in dict.fromkeys(tasks) if t != REPOSITORY and tx.task(t) is not None]
        for name in names or [REPOSITORY]:
            engine.event(tx, name, kind, payload)
        after = [s for n in names if (s := tx.snapshot(n)) is not None]
    for snap in after:
        with contextlib.suppress(OSError):  # else the next command renders it: the store wins
            views.render(engine.ws, snap)  # the audit trail view shows the event
    return names or [REPOSITORY]


def repository_events(tx: Tx) -> list[EventRow]:
    """The repository's own trail, in order."""
    return tx.events(REPOSITORY)


def read_repository_events(ws: Workspace) -> list[EventRow]:
    """The repository's trail, from a read-only store connection (`taskgate audit`)."""
    from taskgate.errors import Corrupted
    from taskgate.store.base import StoreCorrupt
    from taskgate.store.select import open_store

    store = open_store(ws, timeout=60.0, read_only=True)
    try:
        with store.read() as tx:
            return repository_events(tx)
    except StoreCorrupt as exc:
        raise Corrupted(f"the store cannot be read: {exc}", hint="run 'taskgate recover'") from exc
    finally:
        store.close()


def linked(snap: TaskSnapshot, repository: Sequence[EventRow]) -> list[EventRow]:
    """The repository trail's hook-settings records of the sessions that worked on the task
    (its lease, its events' sessions): a session that claimed the task after its SessionStart
    found the settings changed touched it unguarded too."""
    sessions = {str(e.payload.get("session") or "") for e in snap.events}
    sessions = {s for s in (sessions | {snap.task.session_id}) if s}
    return [e for e in repository
            if e.kind == HOOKS_CHANGED and e.payload.get("session") in sessions]  # fmt: skip


def check_guards(events: Sequence[EventRow], linked: Sequence[EventRow] = ()) -> ar.CheckResult:
    """`taskgate audit`'s `guards` check: hook settings found removed, changed or off at a
    SessionStart fail (the session may have run unguarded), on this trail and the `linked`
    repository records; requests the agent door refused for their identity are noted."""
    findings: list[ar.Finding] = []
    notes: list[str] = []
    for e, where in [*((e, "") for e in events), *((e, "repository trail ") for e in linked)]:
        if e.kind == HOOKS_CHANGED:
            problems = "; ".join(map(str, e.payload.get("problems") or []))
            findings.append(
                ar.Finding(
                    f"{where}event #{e.seq} at {e.at}: session {e.payload.get('session', '?')} "
                    f"started with taskgate's hook settings changed: {problems}",
                    "run 'taskgate hooks install' (and 'taskgate hooks status'), then review "
                    "what that session did",
                    "a hook entry was removed, edited or switched off (disableAllHooks) outside "
                    "'taskgate hooks install'",
                )
            )
        elif e.kind == DOOR_REFUSED:
            notes.append(
                f"event #{e.seq} at {e.at}: the agent door refused {e.payload.get('argv')} "
                f"[{e.payload.get('rule')}] {e.payload.get('reason')}"
            )
    return ar.CheckResult(
        "guards",
        "the hook settings were in place at every SessionStart; identities at the agent door",
        ("R-LCK-09", "R-REC-14"),
        tuple(findings),
        tuple(notes),
    )
