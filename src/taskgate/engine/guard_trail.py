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

if TYPE_CHECKING:
    from taskgate.engine.core import Engine
    from taskgate.store.base import Tx
    from taskgate.store.records import JSON, EventRow

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
