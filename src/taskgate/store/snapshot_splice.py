"""The hook snapshot's rewrite after a step: only the lines of the tasks it changed, and the
`hook-snapshot.gen` side file that says when the file found can be trusted for that.

Used by the writer (store/sqlite.py's SqliteStore, under the write lock); the hook process
never imports it. The file's format, and what reads it, are in store/snapshot.py.

The store's snapshot clock (store/snapshot_clock.py: SQLite triggers move it on every
change of what the snapshot is made of, through taskgate or around it) is the file's
generation: `hook-snapshot.gen`, written after the file, names the clock the file reflects
and the file itself (device, inode, size and times: a crash between the two writes, an old
file back after a power loss, or one written over in place does not match, and is not
trusted for a splice; no hook reads it). A step that changed tasks A and B
rewrites the file from the one it found (read under the write lock, before its commit) by
replacing the lines of A and B only, when that file reflects the clock at the start of the
step and no write came between the step's commit and the rewrite: then every other line is
the store's already (issue 18: the whole file was rebuilt from every task on every such
step, about 70 ms of CPU at 10,000 held tasks). Anything else (no file, a gen file that
does not name it, a clock moved by a change around taskgate, a line that does not fit)
rebuilds it whole, as before.
"""

from __future__ import annotations

from taskgate.store.snapshot import (
    FORMAT,
    GEN_FILE,
    _header,
    _held,
    _held_lines,
    _session_key,
    file_key,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_CLOCK = "SELECT seq FROM snapshot_clock WHERE id = 1"  # store/snapshot_clock.py TABLE


def read_generation(state_dir: str) -> tuple[int, str] | None:
    """(clock, file key) that hook-snapshot.gen names, None when missing or unreadable."""
    import os

    try:
        with open(os.path.join(state_dir, GEN_FILE), "rb") as handle:
            text = ascii_text(handle.read(8192))[:200]  # what text mode's read(200) returns
        clock, _, key = text.strip().partition(" ")
    except (OSError, UnicodeDecodeError):
        return None
    return (int(clock), key) if clock.isdigit() and key else None


def ascii_text(data: bytes) -> str:
    """`data` as a text-mode file with encoding="ascii" reads it (UnicodeDecodeError on a
    non-ASCII byte, universal newlines), without that codec's module: bytes.decode("ascii")
    is built in, open(encoding="ascii") imports encodings.ascii (0.15 ms, issue 18)."""
    return data.decode("ascii").replace("\r\n", "\n").replace("\r", "\n")


def generation_text(clock: int, path: str) -> str | None:
    """hook-snapshot.gen's text for the file at `path` at `clock`, None when it is gone."""
    import os

    try:
        return f"{clock} {file_key(os.stat(path))}\n"
    except OSError:
        return None


def read_file(path: str) -> tuple[bytes | None, str]:
    """The snapshot file's bytes and key (None, "" when missing)."""
    import os

    try:
        with open(path, "rb") as handle:
            return handle.read(), file_key(os.fstat(handle.fileno()))
    except OSError:
        return None, ""


def generation(conn: Any) -> int | None:
    """The store's snapshot clock; None where it has none (PostgreSQL, an older store)."""
    try:
        row = conn.execute(_CLOCK).fetchone()
    except Exception:  # sqlite3.Error of whichever module the caller uses
        return None
    return row[0] if row is not None and type(row[0]) is int else None


def _task_line(name: Any, state: Any, agents: Any) -> str | None:
    """A task line as file_text's SQL writes it; None when it would break the line."""
    if not (isinstance(name, str) and isinstance(state, str) and isinstance(agents, str)):
        return None
    line = f"{name}\t{state}\t{agents}\n"
    if line.count("\t") != 2 or line.count("\n") != 1 or name.startswith("="):
        return None
    return line


def _bisect_lines(buf: bytes, lo: int, hi: int, below: Callable[[bytes], bool]) -> int:
    """The start of the first line in buf[lo:hi] (whole lines, sorted) that is not `below`
    the one looked for; `hi` when every line is."""
    while lo < hi:
        mid = (lo + hi) // 2
        start = buf.rfind(b"\n", lo, mid) + 1 or lo
        end = buf.find(b"\n", start) + 1
        if below(buf[start : end - 1]):
            lo = end
        else:
            hi = start
    return lo


def _task_line_start(line: bytes) -> bool:
    return line[:1] != b"="


def _before_name(key: bytes) -> Callable[[bytes], bool]:
    return lambda line: line.split(b"\t", 1)[0] < key


def _before_held(order: tuple[bytes, bytes]) -> Callable[[bytes], bool]:
    return lambda line: _held_order(line) < order


def _held_line_of(data: bytes, cut: int, key: bytes, session: Any) -> tuple[int, int] | None:
    """(start, end) of task `key`'s held line in data[cut:], None when it has none. Looked
    up where its session (the store's now: a step seldom changes it) sorts it, else searched."""
    mark = b"\t" + key + b"\t{"
    if isinstance(session, str):
        order = (_session_key(session)[:-1].encode("utf-8"), key)
        at = _bisect_lines(data, cut, len(data), _before_held(order))
        whole = order[0] + mark
        if data[at : at + len(whole)] == whole:
            return at, data.find(b"\n", at) + 1
    found = data.find(mark, cut)  # a name is followed by a tab and an object only there
    if found < 0:
        return None
    return data.rfind(b"\n", cut, found) + 1 or cut, data.find(b"\n", found) + 1


def _held_order(line: bytes) -> tuple[bytes, bytes]:
    """(session key, name) of a held line: the order _held_lines sorts them in (the UTF-8
    bytes of a str sort as its code points do; a key is a whole JSON string, never the
    prefix of another)."""
    key, name, _ = line.split(b"\t", 2)
    return key, name


def patched(
    old: tuple[bytes | None, bool],
    clocks: tuple[int | None, int | None],
    conn: Any,
    names: set[str],
    loads: Callable[[str], Any],
) -> list[bytes | memoryview] | None:
    """file_text(conn, loads) from `old` (the file as a write transaction found it, and
    whether hook-snapshot.gen named that very file at the clock the transaction started at),
    with the lines of `names` (the tasks it changed) taken from the store; `clocks`: the
    snapshot clock at the transaction's start and at its commit. None when the file cannot
    be trusted for it (rebuild it whole). The text comes as pieces, most of them views of
    `old`: the lines found by a binary search, nothing of the rest copied (issue 18: at
    10,000 held tasks the file is 2 MB, and every copy of it costs a new process about 1 ms)."""
    (data, vouched), (before, after) = old, clocks
    if data is None or not names or before is None or not vouched:
        return None
    if generation(conn) != after:  # another write came between
        return None
    end = data.find(b"\n")
    try:
        header = loads(data[:end].decode("utf-8")) if end >= 0 else None
    except (ValueError, UnicodeDecodeError):
        return None
    count = header_count(header)
    if count is None or header != {"format": FORMAT, "tasks": count}:
        return None
    first = end + 1  # offsets below are into `data`; the lines start here
    if len(data) > first and data[-1:] != b"\n":
        return None
    # Where the held lines start: every line before is a task line, which never starts with
    # '=' (render and file_text refuse such a name, _task_line too), and every held line does
    # (_session_key). A binary search (issue 18: a find of "\n=" read 600 KB at 10,000 tasks).
    cut = _bisect_lines(data, first, len(data), _task_line_start)
    wanted = sorted(names)
    rows = conn.execute(
        "SELECT name, state, session_id, required_agents, lock_released_at FROM tasks "
        f"WHERE name IN ({','.join('?' * len(wanted))}) ORDER BY name",
        wanted,
    ).fetchall()
    found = {str(r[0]): r for r in rows}
    edits: list[tuple[int, int, int, bytes]] = []  # (start, end, region, new text)
    for name in wanted:
        key = name.encode("utf-8")
        if not key or b"\n" in key or b"\t" in key:
            return None
        at = _bisect_lines(data, first, cut, _before_name(key))
        present = at < cut and data[at : at + len(key) + 1] == key + b"\t"
        row = found.get(name)
        line = "" if row is None else _task_line(row[0], row[1], row[3])
        if line is None:
            return None
        edits.append((at, data.find(b"\n", at) + 1 if present else at, 0, line.encode("utf-8")))
        gone = _held_line_of(data, cut, key, row[2] if row is not None else None)
        if gone is not None:
            edits.append((*gone, 1, b""))
        count += (row is not None) - present
    for text in _held_lines(_held(conn, rows, loads, wanted)).splitlines(keepends=True):
        held = text.encode("utf-8")
        at = _bisect_lines(data, cut, len(data), _before_held(_held_order(held)))
        edits.append((at, at, 1, held))
    if count != int(conn.execute("SELECT COUNT(*) FROM tasks").fetchone()[0]):
        return None  # the header's count was not the file's (the gen file vouches for lines)
    view = memoryview(data)
    pieces: list[bytes | memoryview] = [_header(count).encode("utf-8")]
    done = first
    for start, stop, _, text_ in sorted(edits):
        if start < done:
            return None  # overlapping edits: cannot happen for whole, distinct lines
        pieces += [view[done:start], text_]
        done = stop
    pieces.append(view[done:])
    return pieces


def header_count(header: Any) -> int | None:
    """The header's task count when it is a proper one."""
    count = header.get("tasks") if isinstance(header, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) else None
