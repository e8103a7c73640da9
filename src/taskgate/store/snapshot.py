"""The hook snapshot: what a PreToolUse decision needs from the store, in one small file.

A PreToolUse hook runs before every guarded tool call and is budgeted at a few milliseconds
beyond the interpreter's start (issue 7); loading SQLite alone costs about 4 ms. So the
store keeps `<state dir>/hook-snapshot.json` (every task's state, lease and agents, and for
held tasks whether the plan is approved and whether the last build failure is the main
agent's, C-27), and the hook reads that instead, falling back to the store whenever the file
is missing or does not parse.

The file is never stale, because it changes only under the store's write lock:

- a write transaction that changes anything the snapshot holds deletes the file before it
  commits (`SqliteTx.touches_snapshot`);
- the file is (re)written only inside a `BEGIN IMMEDIATE` transaction, from what that
  transaction reads, so it is the latest committed state and no commit can come between;
- a crash anywhere leaves either the file of the latest state or no file (the hook then
  reads the store; the next write or hook event rewrites it).

A file that differs from the store while the write lock is held can only come from outside
taskgate (an edit behind its back, or a power loss that kept an old file); the PostToolUse
and SessionStart hooks rewrite it and report that (`SqliteStore.refresh_snapshot`).

This module is read by the hook process, so it imports nothing at module level.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

FILE_NAME = "hook-snapshot.json"
FORMAT = 1
# What the snapshot is made of: a transaction that writes any of these must drop the file.
TASK_COLUMNS = frozenset({"name", "state", "session_id", "required_agents", "lock_released_at"})
EVENT_KINDS = frozenset({"validation"})  # the last one says who fixes a build failure (C-27)
APPROVAL_KIND = "plan"


def collect(conn: Any, loads: Callable[[str], Any]) -> dict[str, Any]:
    """The snapshot as the store has it, read through a DB-API connection (sqlite3 or the
    bare _sqlite3 of the hook process) with the caller's JSON parser."""
    tasks = []
    rows = conn.execute(
        "SELECT name, state, session_id, required_agents, lock_released_at FROM tasks ORDER BY name"
    ).fetchall()
    for name, state, session, agents, released in rows:
        entry: dict[str, Any] = {
            "name": str(name),
            "state": str(state),
            "agents": [str(a) for a in loads(agents)],
            "session": None if released is not None or session is None else str(session),
        }
        if entry["session"] is not None:  # a held lock: the rules ask more about this task
            approved = conn.execute(
                "SELECT COUNT(*) FROM approvals WHERE task = ? AND kind = ? AND revoked_at IS NULL",
                (entry["name"], APPROVAL_KIND),
            ).fetchone()[0]
            last = conn.execute(
                "SELECT payload FROM events WHERE task = ? AND kind = 'validation' "
                "ORDER BY seq DESC LIMIT 1",
                (entry["name"],),
            ).fetchone()
            payload = loads(last[0]) if last else {}
            entry["plan_approved"] = bool(approved)
            entry["main_may_fix"] = isinstance(payload, dict) and (
                payload.get("responsible") == "main"
            )
        tasks.append(entry)
    return {"format": FORMAT, "tasks": tasks}


# path -> (the file's text, its parsed content): a long-lived reader (the HTTP hooks of
# `taskgate serve`, issue 18) parses each version once; the text is still read and compared
# every time (a memcmp), so a changed file is never answered from an old parse.
_PARSED: dict[str, tuple[str, dict[str, Any]]] = {}


def read(state_dir: str, loads: Callable[[str], Any]) -> dict[str, Any] | None:
    """The snapshot file's content when it is there and has the expected shape, else None.
    Callers must not change the returned dict (it may be the cached parse)."""
    import os

    path = os.path.join(state_dir, FILE_NAME)
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        cached = _PARSED.get(path)
        if cached is not None and cached[0] == text:
            return cached[1]
        data = loads(text)
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    tasks = data.get("tasks")
    if not isinstance(tasks, list) or not all(_well_formed(t) for t in tasks):
        return None
    _PARSED[path] = (text, data)
    return data


def _well_formed(entry: Any) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("name"), str)
        and isinstance(entry.get("state"), str)
        and isinstance(entry.get("agents"), list)
        and all(isinstance(a, str) for a in entry["agents"])
        and (entry.get("session") is None or isinstance(entry.get("session"), str))
    )
