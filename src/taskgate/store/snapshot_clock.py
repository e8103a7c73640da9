"""The hook snapshot's clock in a SQLite store: PostToolUse's and SessionStart's check of the
snapshot against the store without reading every task (issue 18).

The check (R-LCK-09: a snapshot forged, or left stale by a power loss, or a store row changed
around taskgate, is found at the next PostToolUse or SessionStart) compared the whole file
with the text SQLite builds from every task: about 9 ms at 10,000 tasks, in every PostToolUse
after an edit. Now the store keeps, in one row of `snapshot_clock`:

- `seq`, moved by triggers on every change of what the snapshot is made of (a task's name,
  state, session, agents or release; any plan approval; a `validation` event; any update or
  delete of an event), made through taskgate or around it (the `sqlite3` shell fires them
  too);
- `checked_seq`, `checked_schema`, `checked_sha256`, `checked_file`: the clock, the schema
  version, the SHA-256 and (once settled) the key of the snapshot file the last full check
  found equal to the store, both tagged with the snapshot's format, recorded by the hook's
  own write transaction (store/hook_tx.py; no commit of its own).

While the clock and the schema version (any dropped or changed trigger moves it) are the
checked ones, the store still holds what that file was found equal to, so a file with the
same SHA-256 equals the store: one row and one hash instead of every task. Anything else
(another clock, another schema, another file, no row) takes the full comparison, as before.
The row is bookkeeping, not a migration (like PostgreSQL's clock, store/pg_schema.py): every
SQLite store gets it when taskgate opens it for writing (`SqliteStore._migrate`), with
`IF NOT EXISTS`, so a changed table or trigger needs a new name.
"""

from __future__ import annotations

import os

from taskgate.store import snapshot

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

TABLE = "snapshot_clock"
_BUMP = f"BEGIN UPDATE {TABLE} SET seq = seq + 1 WHERE id = 1; END"
# What store/snapshot.py reads: TASK_COLUMNS of tasks, the approvals (any row: APPROVAL_KIND's
# are counted), events of EVENT_KINDS. A snapshot made of more needs its trigger here.
_TASK_CHANGED = " OR ".join(f"OLD.{c} IS NOT NEW.{c}" for c in sorted(snapshot.TASK_COLUMNS))
_EVENT_KINDS = ", ".join(f"'{kind}'" for kind in sorted(snapshot.EVENT_KINDS))
_TRIGGERS = (  # name, event, condition
    ("tasks_insert", "INSERT ON tasks", ""),
    ("tasks_delete", "DELETE ON tasks", ""),
    ("tasks_update", "UPDATE ON tasks", _TASK_CHANGED),
    ("approvals_insert", "INSERT ON approvals", ""),
    ("approvals_delete", "DELETE ON approvals", ""),
    ("approvals_update", "UPDATE ON approvals", ""),
    ("events_insert", "INSERT ON events", f"NEW.kind IN ({_EVENT_KINDS})"),
    ("events_delete", "DELETE ON events", ""),
    ("events_update", "UPDATE ON events", ""),
)
DDL = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (id INTEGER PRIMARY KEY CHECK (id = 1), "
    "seq INTEGER NOT NULL, checked_seq INTEGER, checked_schema INTEGER, checked_sha256 TEXT, "
    "checked_file TEXT)",
    f"INSERT OR IGNORE INTO {TABLE} (id, seq) VALUES (1, 0)",
    *(
        f"CREATE TRIGGER IF NOT EXISTS {TABLE}_{name} AFTER {event} FOR EACH ROW "
        + (f"WHEN {condition} " if condition else "")
        + _BUMP
        for name, event, condition in _TRIGGERS
    ),
)
_READ = (
    "SELECT seq, checked_seq, checked_schema, checked_sha256, checked_file, "
    f"(SELECT schema_version FROM pragma_schema_version) FROM {TABLE} WHERE id = 1"
)


def install(conn: Any) -> None:
    """Create the row and its triggers where they are missing (inside the caller's write
    transaction; nothing changes where they exist)."""
    for statement in DDL:
        conn.execute(statement)


class Clock:
    """The row as a transaction read it: the clock, the schema version, and what the last
    full check recorded (its clock and schema version, the file's SHA-256 and key)."""

    __slots__ = ("current", "file", "schema", "seq", "sha256")

    def __init__(self, seq: int, schema: int, checked: tuple[Any, ...]) -> None:
        self.seq = seq
        self.schema = schema
        checked_seq, checked_schema, self.sha256, self.file = checked
        self.current = (checked_seq, checked_schema) == (seq, schema) and self.sha256 is not None

    def vouches_for(self, sha256: str) -> bool:
        """Whether a file with this SHA-256 was found equal to the store as it still is."""
        return self.current and self.sha256 == sha256

    def vouches_for_file(self, key: str) -> bool:
        """Whether the file with this key (file_key) is the one found equal to the store as
        it still is, unchanged since (its key was recorded only once settled)."""
        return self.current and self.file == key


def read(conn: Any) -> Clock | None:
    """The clock row; None when the store has none (not opened by this taskgate for writing
    yet) or it cannot be read: the caller compares everything."""
    try:
        row = conn.execute(_READ).fetchone()
    except Exception:  # sqlite3.Error of whichever module the caller uses
        return None
    if row is None or not isinstance(row[0], int):
        return None
    return Clock(row[0], int(row[5]), tuple(row[1:5]))


# Both prefixed with the snapshot's format: a taskgate that renders another format never
# takes a file the previous one checked for this one's.


def file_key(stat: os.stat_result) -> str:
    """What identifies one version of a file without reading it: device, inode, size, and
    the times of its last write and last change (the kernel sets ctime on every write,
    rename or utime, and no program can set it back)."""
    return (
        f"{snapshot.FORMAT}:{stat.st_dev}:{stat.st_ino}:{stat.st_size}:"
        f"{stat.st_mtime_ns}:{stat.st_ctime_ns}"
    )


def digest(data: bytes) -> str:
    """The SHA-256 recorded for a file's bytes (of the format's number and the bytes)."""
    from taskgate.store.canon import sha256_hex

    return sha256_hex(b"%d\n" % snapshot.FORMAT + data)


# A file's key is recorded only when its last change is older than the file system's
# timestamp granularity, so that any later write gives it another ctime: timestamps in
# nanoseconds move at least every clock tick (10 ms at most); a ctime in whole milliseconds
# or coarser may be a file system that keeps seconds, or 2 s (FAT).
FINE_SETTLED_NS = 100_000_000
COARSE_SETTLED_NS = 3_000_000_000


def settled(ctime_ns: int) -> bool:
    """Whether no write can still leave a file with this ctime."""
    import time

    coarse = ctime_ns % 1_000_000 == 0
    return time.time_ns() - ctime_ns > (COARSE_SETTLED_NS if coarse else FINE_SETTLED_NS)


def record(conn: Any, clock: Clock, sha256: str, key: str | None) -> None:
    """Record that the file with this SHA-256 (and, when settled, this key) equals the store
    at `clock` (in the caller's write transaction, committed with it)."""
    conn.execute(
        f"UPDATE {TABLE} SET checked_seq = ?, checked_schema = ?, checked_sha256 = ?, "
        "checked_file = ? WHERE id = 1 AND seq = ?",
        (clock.seq, clock.schema, sha256, key, clock.seq),
    )
