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
  transaction reads, so it is the latest committed state and no commit can come between
  (after a step, from the file the step found, with the lines of the tasks it changed read
  again: store/snapshot_splice.py's `patched`, when `hook-snapshot.gen` shows the file was
  the store's just before);
- a crash anywhere leaves either the file of the latest state or no file (the hook then
  reads the store; the next write or hook event rewrites it).

A file that differs from the store while the write lock is held can only come from outside
taskgate (an edit behind its back, or a power loss that kept an old file); the PostToolUse
and SessionStart hooks rewrite it and report that (`SqliteStore.refresh_snapshot`).

This module is the file's format and what reads it: building it from the store (collect,
file_text, render), the index a decision looks tasks up in (read, Index), and the check that
the store lost no steps it saw (seen, ahead). It is read by the hook process, so it imports
nothing at module level; the writer's spliced rewrite lives in store/snapshot_splice.py.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

FILE_NAME = "hook-snapshot.json"
FORMAT = 3
# What the snapshot is made of: a transaction that writes any of these must drop the file.
TASK_COLUMNS = frozenset({"name", "state", "session_id", "required_agents", "lock_released_at"})
EVENT_KINDS = frozenset({"validation"})  # the last one says who fixes a build failure (C-27)
APPROVAL_KIND = "plan"
_HELD = "SELECT name FROM tasks WHERE session_id IS NOT NULL AND lock_released_at IS NULL"


def collect(conn: Any, loads: Callable[[str], Any]) -> dict[str, Any]:
    """The snapshot as the store has it, read through a DB-API connection (sqlite3 or the
    bare _sqlite3 of the hook process) with the caller's JSON parser. Three set-based queries
    whatever the number of tasks (issue 18: it was two per held task)."""
    rows = conn.execute(
        "SELECT name, state, session_id, required_agents, lock_released_at FROM tasks ORDER BY name"
    ).fetchall()
    held = {t["name"]: t for t in _held(conn, rows, loads)}
    tasks = []
    for name, state, _, agents, _ in rows:
        entry = held.get(str(name))
        if entry is None:
            entry = {"name": str(name), "state": str(state),
                     "agents": [str(a) for a in loads(agents)], "session": None}  # fmt: skip
        tasks.append(entry)
    return {"format": FORMAT, "tasks": tasks}


def _held(
    conn: Any, rows: list[Any], loads: Callable[[str], Any], only: list[str] | None = None
) -> list[dict[str, Any]]:
    """The entries of the held tasks among `rows` (name, state, session, agents, released):
    what the rules ask about a task whose lock is held (plan approved, C-27's fixer). With
    `only`, the rows are those tasks' and the queries look at them alone (`patched`)."""
    among, args = (_HELD, ()) if only is None else (",".join("?" * len(only)), tuple(only))
    approved = {
        str(task): int(count)
        for task, count in conn.execute(
            "SELECT task, COUNT(*) FROM approvals WHERE kind = ? AND revoked_at IS NULL "
            f"AND task IN ({among}) GROUP BY task",
            (APPROVAL_KIND, *args),
        ).fetchall()
    }
    validations = {
        str(task): payload
        for task, payload in conn.execute(
            "SELECT task, payload FROM events WHERE seq IN (SELECT MAX(seq) FROM events "
            f"WHERE kind = 'validation' AND task IN ({among}) GROUP BY task)",
            args,
        ).fetchall()
    }
    entries = []
    for name, state, session, agents, released in rows:
        if released is not None or session is None:
            continue
        last = validations.get(str(name))
        payload = loads(last) if last is not None else {}
        entries.append(
            {
                "name": str(name),
                "state": str(state),
                "agents": [str(a) for a in loads(agents)],
                "session": str(session),
                "plan_approved": approved.get(str(name), 0) > 0,
                "main_may_fix": isinstance(payload, dict) and payload.get("responsible") == "main",
            }
        )
    return entries


# Beside the file, `hook-snapshot.seq` holds the store's last event number when it was written
# (issue 16). Events are never deleted, so a store whose last event is older lost committed
# steps (a lost WAL, an old copy restored): that snapshot is ahead of the store. Both files
# are then renamed `*.ahead.*` (evidence), and PreToolUse never trusts them again.
SEQ_FILE = "hook-snapshot.seq"
AHEAD_NAME = "hook-snapshot.ahead.json"
AHEAD_SEQ = "hook-snapshot.ahead.seq"


def last_seq(conn: Any) -> int:
    """The store's last event number (0 when it has none), through a DB-API connection."""
    (top,) = conn.execute("SELECT MAX(seq) FROM events").fetchone()
    return int(top or 0)


def seen(state_dir: str, names: tuple[str, ...] = (SEQ_FILE, AHEAD_SEQ)) -> list[tuple[str, int]]:
    """(file name, event number) of the sequence files there. Read them before the store: the
    store only grows, so a number read first can never look ahead of it by a race."""
    import os

    found = []
    for name in names:
        try:
            with open(os.path.join(state_dir, name), "rb") as handle:  # no codec import
                text = handle.read(32).decode("ascii").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if text.isdigit():
            found.append((name, int(text)))
    return found


def ahead(found: list[tuple[str, int]], store_seq: int) -> tuple[str, str] | None:
    """(file name, why) for a snapshot that saw more of the store than it now has."""
    for name, number in found:
        if number > store_seq:
            return name, (
                f"the hook snapshot was written when the store held event #{number} ({name}), "
                f"the store now ends at #{store_seq}: committed steps were lost (state.db-wal "
                "deleted, or an older copy of state.db restored)"
            )
    return None


def set_aside(state_dir: str) -> None:
    """Keep a snapshot that is ahead of its store as evidence, where no hook reads it."""
    import os
    from contextlib import suppress

    for name, kept in ((FILE_NAME, AHEAD_NAME), (SEQ_FILE, AHEAD_SEQ)):
        with suppress(OSError):
            os.replace(os.path.join(state_dir, name), os.path.join(state_dir, kept))


AHEAD_HINT = (
    "run 'taskgate recover --rebuild' (rebuilds the store from the views, proven against "
    "git; the damaged store is kept aside), or restore state.db with its state.db-wal from a "
    "backup. To accept the older store, move .taskgate/hook-snapshot* aside (and any "
    "task views ahead of it)"
)


def file_text(conn: Any, loads: Callable[[str], Any]) -> str:
    """render(collect(conn, loads)) from a SQLite connection, the task lines concatenated by
    SQLite itself (issue 18: the hook's check at 10,000 tasks). Equal to render's text
    whenever the agents lists are stored as taskgate stores them (compact JSON): a
    hand-edited row makes it differ, and the caller then asks the engine; ValueError for a
    row that would break a line."""
    count, body = conn.execute(
        "SELECT COUNT(*), group_concat(line, '') FROM (SELECT name || char(9) || state || "
        "char(9) || required_agents || char(10) AS line FROM tasks ORDER BY name)"
    ).fetchone()
    body = body or ""
    if body.count("\n") != count or body.count("\t") != 2 * count or "\n=" in "\n" + body:
        raise ValueError("a task's name, state or agents list would break a snapshot line")
    rows = conn.execute(
        "SELECT name, state, session_id, required_agents, lock_released_at FROM tasks "
        "WHERE session_id IS NOT NULL AND lock_released_at IS NULL ORDER BY name"
    ).fetchall()
    return _header(count) + body + _held_lines(_held(conn, rows, loads))


# Beside the file, `hook-snapshot.gen` names the snapshot clock the file reflects and the file
# itself (file_key): the writer's rewrite after a step trusts the file it found only then
# (store/snapshot_splice.py). No hook reads it.
GEN_FILE = "hook-snapshot.gen"


def file_key(stat: Any) -> str:
    """One version of a file, without reading it (as store/snapshot_clock.file_key)."""
    return f"{stat.st_dev}:{stat.st_ino}:{stat.st_size}:{stat.st_mtime_ns}:{stat.st_ctime_ns}"


# -- the file: one line per task, then one line per held lock --------------------------------
#
# Line 1 is JSON: {"format": 3, "tasks": N}. Then one line per task, by name:
# NAME \t STATE \t ["agent", ...]. Then one line per task whose lock is held, by session:
# = "SESSION" \t NAME \t {the task's entry: name, state, agents, session, plan_approved,
# main_may_fix}, the session as a JSON string. A PreToolUse decision needs its own session's
# task (one `find` of its line) and, now and then, whether some other task exists and its
# agents (one `find` of the name), so it never parses 10,000 entries, whether the tasks are
# finished or each held by its own session (issue 18: a 1 MB parse at 10,000 tasks before).


def _header(count: int) -> str:
    return f'{{"format": {FORMAT}, "tasks": {count}}}\n'


def _session_key(session: str) -> str:
    from taskgate.store.canon import compact

    return "=" + compact(session) + "\t"


def _held_lines(held: list[dict[str, Any]]) -> str:
    from taskgate.store.canon import compact

    keyed = sorted((_session_key(t["session"]), t["name"], t) for t in held)
    return "".join(f"{key}{name}\t{compact(entry)}\n" for key, name, entry in keyed)


def render(data: dict[str, Any]) -> str:
    """The file's text for collect()'s data (ValueError for a name or state that would break
    a line: task names never hold a tab or a newline, or start with '=', R-TSK names)."""
    from taskgate.store.canon import compact

    lines = []
    for t in data["tasks"]:
        if any(c in t["name"] + t["state"] for c in "\t\n\r") or t["name"].startswith("="):
            raise ValueError(f"task {t['name']!r} cannot be written to the hook snapshot")
        lines.append(f"{t['name']}\t{t['state']}\t{compact(t['agents'])}\n")
    held = [t for t in data["tasks"] if t["session"] is not None]
    return _header(len(data["tasks"])) + "".join(lines) + _held_lines(held)


class Index:
    """The snapshot as a decision reads it: a session's held tasks, any task by name."""

    __slots__ = ("_body", "_found", "_loads", "_sessions", "count")

    def __init__(self, count: int, body: bytes, loads: Callable[[str], Any]) -> None:
        self.count = count  # how many tasks the store holds
        self._body = body  # b"\n" + the task lines + the held lines
        self._loads = loads
        self._found: dict[str, dict[str, Any] | None] = {}
        self._sessions: dict[str, list[dict[str, Any]]] = {}

    @classmethod
    def of(cls, data: dict[str, Any]) -> Index:
        """An index over collect()'s data (a store read, not a file)."""
        index = cls(len(data["tasks"]), b"", _no_json)
        for t in data["tasks"]:
            index._found[t["name"]] = t
            if t["session"] is not None:
                index._sessions.setdefault(t["session"], []).append(t)
        index._body = b""
        return index

    def held_by(self, session: str) -> list[dict[str, Any]]:
        """The entries of the tasks whose lock `session` holds (more than one is corruption,
        R-LCK-20: the caller says so)."""
        if session in self._sessions or not self._body:
            return self._sessions.get(session, [])
        key = ("\n" + _session_key(session)).encode("utf-8", "surrogateescape")
        found = []
        at = self._body.find(key)
        while at >= 0:
            end = self._body.find(b"\n", at + 1)
            entry = self._held_line(self._body[at + 1 : end if end >= 0 else None])
            if entry.get("session") != session:
                raise ValueError("a held line of the hook snapshot names another session")
            found.append(entry)
            at = self._body.find(key, at + 1)
        self._sessions[session] = found
        return found

    def held_entry(self, name: str) -> dict[str, Any] | None:
        """The full entry of task `name` when its lock is held, else None."""
        if not self._body:
            found = self._found.get(name)
            return found if found is not None and found["session"] is not None else None
        if any(c in name for c in "\t\n\r"):
            return None
        # Only a held line has a name followed by an object: a task line's third field is
        # the agents list, and a session key is a JSON string (no raw tab).
        at = self._body.find(b"\t" + name.encode("utf-8", "surrogateescape") + b"\t{")
        if at < 0:
            return None
        start = self._body.rfind(b"\n", 0, at) + 1
        end = self._body.find(b"\n", at)
        entry = self._held_line(self._body[start : end if end >= 0 else None])
        if entry["name"] != name:
            raise ValueError("a held line of the hook snapshot does not parse")
        return entry

    def _held_line(self, line: bytes) -> dict[str, Any]:
        parts = line.decode("utf-8").split("\t", 2)
        if len(parts) != 3 or not parts[0].startswith("="):
            raise ValueError("a held line of the hook snapshot does not have three fields")
        entry = self._loads(parts[2])
        if not _well_formed(entry) or entry["name"] != parts[1] or entry["session"] is None:
            raise ValueError("a held line of the hook snapshot does not parse")
        return dict(entry)

    def task(self, name: str) -> dict[str, Any] | None:
        """The task's entry (name, state, agents, session), None when the store has none."""
        if name in self._found:
            return self._found[name]
        entry = None
        if self._body and not any(c in name for c in "\t\n\r") and not name.startswith("="):
            at = self._body.find(b"\n" + name.encode("utf-8", "surrogateescape") + b"\t")
            if at >= 0:
                end = self._body.find(b"\n", at + 1)
                entry = self._line(self._body[at + 1 : end if end >= 0 else None])
        self._found[name] = entry
        return entry

    def tasks(self) -> list[dict[str, Any]]:
        """Every task's entry, by name, held ones in full (parses the whole file: for the
        rare callers that look at every task, like the effect check's baseline)."""
        if self._body:
            held: dict[str, dict[str, Any]] = {}
            for line in self._body.split(b"\n"):
                if line.startswith(b"="):
                    entry = self._held_line(line)
                    held[entry["name"]] = entry
                elif line:
                    found = self._line(line)
                    self._found.setdefault(found["name"], found)
            for name, entry in held.items():
                if name not in self._found:
                    raise ValueError("a held task of the hook snapshot has no task line")
                self._found[name] = entry
            self._body = b""
        return sorted((t for t in self._found.values() if t is not None), key=_name)

    def _line(self, line: bytes) -> dict[str, Any]:
        parts = line.decode("utf-8").split("\t")
        if len(parts) != 3:
            raise ValueError("a hook snapshot line does not have three fields")
        agents = self._loads(parts[2])
        if not isinstance(agents, list) or not all(isinstance(a, str) for a in agents):
            raise ValueError("a hook snapshot line's agents are not a list of names")
        return {"name": parts[0], "state": parts[1], "agents": agents, "session": None}


def _name(entry: dict[str, Any]) -> str:
    return str(entry["name"])


def _no_json(text: str) -> Any:  # pragma: no cover - an index over data parses nothing
    raise ValueError("nothing to parse")


def parse(text: str, loads: Callable[[str], Any]) -> dict[str, Any] | None:
    """collect()'s data back from the file's text, None when it does not parse."""
    index = _index(text.encode("utf-8"), loads)
    if index is None:
        return None
    try:
        return {"format": FORMAT, "tasks": index.tasks()}
    except (ValueError, UnicodeDecodeError, IndexError):
        return None


# path -> (the file's bytes, its index): a long-lived reader (the HTTP hooks of `taskgate
# serve`, issue 18) indexes each version once; the bytes are still read and compared every
# time (a memcmp), so a changed file is never answered from an old index.
_PARSED: dict[str, tuple[bytes, Index]] = {}


def read(state_dir: str, loads: Callable[[str], Any]) -> Index | None:
    """The snapshot file's index when it is there and has the expected header, else None.
    Lines are checked when they are looked up (ValueError for a bad one)."""
    import os

    path = os.path.join(state_dir, FILE_NAME)
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    cached = _PARSED.get(path)
    if cached is not None and cached[0] == data:
        return cached[1]
    index = _index(data, loads)
    if index is not None:
        _PARSED[path] = (data, index)
    return index


def _index(data: bytes, loads: Callable[[str], Any]) -> Index | None:
    end = data.find(b"\n")
    try:
        header = loads(data[: end if end >= 0 else None].decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        return None
    count = header.get("tasks")
    if not isinstance(count, int) or isinstance(count, bool) or end < 0:
        return None
    return Index(count, data[end:], loads)


def _well_formed(entry: Any) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("name"), str)
        and isinstance(entry.get("state"), str)
        and isinstance(entry.get("agents"), list)
        and all(isinstance(a, str) for a in entry["agents"])
        and (entry.get("session") is None or isinstance(entry.get("session"), str))
    )


# Moved to store/snapshot_splice.py (the writer's side, which the hook process never loads)
# and still importable from here: loaded only when one of them is asked for.
_SPLICE = frozenset(
    {"generation", "generation_text", "header_count", "patched", "read_file", "read_generation"}
)


def __getattr__(name: str) -> Any:
    if name in _SPLICE:
        from taskgate.store import snapshot_splice

        return getattr(snapshot_splice, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
