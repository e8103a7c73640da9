"""store-record.jsonl: every row the store holds for a task, appended step by step.

What `taskgate recover --rebuild` restores a lost store from (engine/rebuild.py). It sat in
audit-trail.json as `store_record` and was rendered whole on every step, every event of the
task twice over (issue 18: at 2,000 events most of a step). Now it is a file of its own in
the task directory, one JSON line per rendering that changed something:

    {"v": 1, "seq": S, "task": {the task row}, "add": {table: [rows appended since]},
     "set": {table: [the whole table], for the tables changed since}, "n": {table: rows so
     far}, "last": [seq, hash] of the last event so far, "sums": {table: digest},
     "prev": the previous line's hash, "hash": SHA-256 of this line without "hash"}

Transitions, presentations, validations and events only grow in the store ("add" holds the
new ones); agents, verdicts and approvals change in place ("set", when their digest in
"sums" moved). A step reads the last line only and appends one line, under an exclusive
lock on the file; like the other views it is not fsynced (the store holds the truth).

A crash while appending leaves a torn last line: the next rendering cuts it off, and a
reader (`replay`) uses the lines up to the last one whose hash and counts verify, saying
where it stopped. The line hashes find a torn or garbled line, not an edit: an edited line
with recomputed hashes is found by what proves the record, the events' hash chain and the
head git anchors (engine/rebuild_proof.py `prove`), and `taskgate audit` compares the whole
record with the store (`problems`). When the last line does not follow from the store (the
file damaged, or written for another history) the file is rewritten whole; when it is ahead
of the store (lost steps) it is left as it is: it is the evidence a rebuild restores from.
"""

from __future__ import annotations

import os
from pathlib import Path

from taskgate.dataclass_lite import dataclass, field
from taskgate.store.canon import _sha256, compact
from taskgate.store.records import TaskSnapshot

TYPE_CHECKING = False  # typing and dataclasses stay off the command path (issue 18)
if TYPE_CHECKING:
    from typing import Any

FILE_NAME = "store-record.jsonl"
VERSION = 1
GROWING = ("transitions", "presentations", "validations", "events")
CHANGING = ("agents", "verdicts", "approvals")
TABLES = ("transitions", "agents", "verdicts", "presentations", "approvals", "validations",
          "events")  # fmt: skip
_TAIL_CHUNK = 1 << 16
_SHORT = 1 << 13  # a line longer than this is followed by one that adds nothing


def row_dict(row: Any) -> dict[str, Any]:
    """A record row's fields as a dict (dataclass or slotted class)."""
    try:
        return dict(vars(row))
    except TypeError:
        return {name: getattr(row, name) for name in type(row).__slots__}


def task_dict(snap: TaskSnapshot) -> dict[str, Any]:
    """The task row as the record holds it (required_agents a list)."""
    task = row_dict(snap.task)
    task["required_agents"] = list(snap.task.required_agents)
    return task


def whole(snap: TaskSnapshot) -> dict[str, Any]:
    """Every row the store holds for the task: what a replay of the file must give."""
    return {
        "task": task_dict(snap),
        **{name: [row_dict(row) for row in getattr(snap, name)] for name in TABLES},
    }


def _sum(rows: list[dict[str, Any]]) -> str:
    return _sha256(compact(rows).encode("utf-8"))[:32]


def _line(entry: dict[str, Any], prev: str) -> bytes:
    """The line's bytes with "prev" and "hash" filled in."""
    entry["prev"] = prev
    entry.pop("hash", None)
    entry["hash"] = _sha256(compact(entry).encode("utf-8"))
    return (compact(entry) + "\n").encode("ascii")


def _lines(entry: dict[str, Any], prev: str) -> bytes:
    """The entry's line, and after a long one (the first rendering of a task with a long
    history, or many events the hooks appended) a line that adds nothing: the next step
    reads the last line only, so it stays short."""
    line = _line(entry, prev)
    if len(line) <= _SHORT:
        return line
    rest = {**entry, "add": {}, "set": {}}
    return line + _line(rest, str(entry["hash"]))


def _verified(raw: bytes) -> dict[str, Any] | None:
    """A line's content when it parses and its hash is its own, else None."""
    from taskgate.json_lite import loads

    try:
        entry = loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(entry, dict) or entry.get("v") != VERSION:
        return None
    digest = entry.pop("hash", None)
    ok = digest == _sha256(compact(entry).encode("utf-8"))
    entry["hash"] = digest
    return entry if ok else None


def _next(snap: TaskSnapshot, tail: dict[str, Any] | None) -> dict[str, Any] | None:
    """The line that brings a record ending in `tail` (None: an empty record) to `snap`;
    None when nothing changed. Raises _Behind when the tail is ahead of the store and
    _Unrelated when it does not follow from the store's rows."""
    counts = tail.get("n") if tail is not None else {}
    sums = tail.get("sums") if tail is not None else {}
    if not isinstance(counts, dict) or not isinstance(sums, dict):
        raise _Unrelated
    entry: dict[str, Any] = {"v": VERSION, "seq": snap.task.seq, "task": task_dict(snap)}
    add: dict[str, list[dict[str, Any]]] = {}
    n: dict[str, int] = {}
    for name in GROWING:
        rows = getattr(snap, name)
        have = counts.get(name, 0)
        if type(have) is not int or have < 0:
            raise _Unrelated
        if have > len(rows):
            raise _Behind
        if rows[have:]:
            add[name] = [row_dict(r) for r in rows[have:]]
        n[name] = len(rows)
    events = snap.events
    have = counts.get("events", 0)
    last = tail.get("last") if tail is not None else None
    if have and last != [events[have - 1].seq, events[have - 1].hash]:
        raise _Unrelated
    if tail is not None and type(tail.get("seq")) is int and tail["seq"] > snap.task.seq:
        raise _Behind
    changed: dict[str, list[dict[str, Any]]] = {}
    new_sums: dict[str, str] = {}
    for name in CHANGING:
        rows_ = [row_dict(r) for r in getattr(snap, name)]
        new_sums[name] = _sum(rows_)
        if sums.get(name) != new_sums[name]:
            changed[name] = rows_
    if tail is not None and not add and not changed and tail.get("task") == entry["task"]:
        return None
    entry |= {
        "add": add,
        "set": changed,
        "n": n,
        "last": [events[-1].seq, events[-1].hash] if events else None,
        "sums": new_sums,
    }
    return entry


class _Behind(Exception):
    """The record holds more than the store: never rewritten (it is the evidence)."""


class _Unrelated(Exception):
    """The record's last line does not follow from the store's rows."""


def _tail(fd: int, size: int) -> tuple[dict[str, Any] | None, int, bool]:
    """(the last whole line's content or None, the offset just after it, whether that line
    verified). A torn end (no newline) is not a line."""
    chunk = min(size, _TAIL_CHUNK)
    while True:
        data = os.pread(fd, chunk, size - chunk)
        end = data.rfind(b"\n")
        if end < 0:
            if chunk == size:
                return None, 0, True  # no whole line: empty, or one torn line
            chunk = min(size, chunk * 4)
            continue
        start = data.rfind(b"\n", 0, end) + 1
        if start == 0 and chunk < size:
            chunk = min(size, chunk * 4)
            continue
        entry = _verified(data[start:end])
        return entry, size - chunk + end + 1, entry is not None


def render(task_dir: Path, snap: TaskSnapshot) -> None:
    """Bring the task's store-record.jsonl up to `snap`: one line appended, or the file
    rewritten whole when its last line cannot be continued; left alone when ahead."""
    import fcntl

    path = task_dir / FILE_NAME
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                same = os.stat(path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # replaced while this process waited for the lock: the new one
                continue
            _render_locked(fd, path, snap)
            return
        finally:
            os.close(fd)


def _render_locked(fd: int, path: Path, snap: TaskSnapshot) -> None:
    from taskgate.fsutil import atomic_write

    size = os.fstat(fd).st_size
    tail, end, ok = _tail(fd, size) if size else (None, 0, True)
    try:
        if not ok:
            raise _Unrelated
        entry = _next(snap, tail)
    except _Behind:
        return
    except _Unrelated:
        atomic_write(path, _lines(_first(snap), ""), durable=False)
        return
    if end < size:  # a torn last line (a crash while appending): cut off, then continue
        os.ftruncate(fd, end)
    if entry is not None:
        os.pwrite(fd, _lines(entry, str(tail["hash"]) if tail else ""), end)


def _first(snap: TaskSnapshot) -> dict[str, Any]:
    entry = _next(snap, None)
    assert entry is not None  # an empty record always takes a first line
    return entry


def rewrite(task_dir: Path, snap: TaskSnapshot) -> None:
    """The file rewritten whole from the store (`recover --repair`: damage anywhere in it)."""
    from taskgate.fsutil import atomic_write

    task_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(task_dir / FILE_NAME, _lines(_first(snap), ""), durable=False)


def encode(record: dict[str, Any]) -> bytes:
    """whole()'s shape (from `replay`, say) as a file of one line."""
    events = record["events"]
    entry = {
        "v": VERSION,
        "seq": record["task"]["seq"],
        "task": record["task"],
        "add": {name: record[name] for name in GROWING if record[name]},
        "set": {name: record[name] for name in CHANGING},
        "n": {name: len(record[name]) for name in GROWING},
        "last": [events[-1]["seq"], events[-1]["hash"]] if events else None,
        "sums": {name: _sum(record[name]) for name in CHANGING},
    }
    return _lines(entry, "")


# -- reading it back -----------------------------------------------------------------------------


@dataclass
class Replay:
    """The record as its verified lines give it."""

    record: dict[str, Any] | None  # whole()'s shape; None when no line verified
    lines: int = 0  # lines used
    damage: list[str] = field(default_factory=list)  # why reading stopped early


def replay(path: Path) -> Replay | None:
    """The rows the file's lines add up to, up to the last line that verifies; None when
    the file is missing or unreadable."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    record: dict[str, Any] = {"task": None, **{name: [] for name in TABLES}}
    out = Replay(None)
    prev = ""
    raw_lines = data.split(b"\n")
    torn = raw_lines.pop()  # b"" when the file ends with a newline
    for number, raw in enumerate(raw_lines, 1):
        entry = _verified(raw)
        problem = _apply(record, entry, prev) if entry is not None else "does not verify"
        if problem:
            out.damage.append(
                f"{path.name} line {number} of {len(raw_lines)} {problem} (torn, garbled or "
                "edited): it and the lines after it are not used"
            )
            break
        assert entry is not None
        prev = str(entry["hash"])
        out.lines = number
    else:
        if torn:
            out.damage.append(
                f"{path.name} ends in a torn line ({len(torn)} bytes: a crash while appending)"
            )
    if out.lines:
        out.record = record
    return out


def _apply(record: dict[str, Any], entry: dict[str, Any], prev: str) -> str:
    """Add one verified line to `record`; what is wrong with it ("" when nothing)."""
    if entry.get("prev") != prev:
        return "does not follow the line before it"
    task, add, changed = entry.get("task"), entry.get("add"), entry.get("set")
    counts, sums = entry.get("n"), entry.get("sums")
    if not all(isinstance(x, dict) for x in (task, add, changed, counts, sums)):
        return "is not a record line"
    assert isinstance(add, dict) and isinstance(changed, dict) and isinstance(counts, dict)
    for name, rows in add.items():
        if name not in GROWING or not isinstance(rows, list):
            return f"adds to an unknown table {name!r}"
        record[name] += rows
    for name, rows in changed.items():
        if name not in CHANGING or not isinstance(rows, list):
            return f"sets an unknown table {name!r}"
        record[name] = rows
    if any(counts.get(name) != len(record[name]) for name in GROWING):
        return "does not count the rows before it"
    record["task"] = task
    return ""
