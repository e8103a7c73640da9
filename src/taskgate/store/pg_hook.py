"""The PreToolUse hook's read of a PostgreSQL store through libpq itself (ctypes), issue 20.

Importing psycopg costs about 0.2 s, paid on every guarded tool call of a PostgreSQL
workspace. The hook needs only a few read-only queries (store/snapshot.py's collect), so it
talks to libpq directly: the system's libpq.so.5 (Debian's libpq5, which the PostgreSQL
client installs) or the copy psycopg[binary] ships. `snapshot(url)` returns None when no
libpq can be loaded (the caller then uses psycopg) and raises HookStoreError when the server
cannot be read (the hook then denies: fail closed).

Values come back as text; integer columns (COUNT(*)) are converted by their type OID, so the
result is the same dict as collect() gives through sqlite3 or psycopg (tested).
"""

from __future__ import annotations

import ctypes
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_OK = 0  # CONNECTION_OK
_RESULT_OK = (1, 2)  # PGRES_COMMAND_OK, PGRES_TUPLES_OK
_INT_OIDS = {20, 21, 23}  # int8, int2, int4


class HookStoreError(Exception):
    """The server could not be read; the message never holds the URL."""


def _load() -> ctypes.CDLL | None:
    candidates = ["libpq.so.5", "libpq.5.dylib"]
    for entry in sys.path:  # psycopg[binary]'s bundled copy
        libs = os.path.join(entry, "psycopg_binary.libs")
        try:
            names = sorted(n for n in os.listdir(libs) if n.startswith("libpq"))
        except OSError:
            continue
        candidates += [os.path.join(libs, n) for n in names]
    for name in candidates:
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        _declare(lib)
        return lib
    return None


def _declare(lib: ctypes.CDLL) -> None:
    p, c = ctypes.c_void_p, ctypes.c_char_p
    i = ctypes.c_int
    lib.PQconnectdbParams.restype = p
    lib.PQconnectdbParams.argtypes = [ctypes.POINTER(c), ctypes.POINTER(c), i]
    lib.PQstatus.restype = i
    lib.PQstatus.argtypes = [p]
    lib.PQerrorMessage.restype = c
    lib.PQerrorMessage.argtypes = [p]
    lib.PQfinish.argtypes = [p]
    lib.PQexecParams.restype = p
    lib.PQexecParams.argtypes = [p, c, i, p, ctypes.POINTER(c), p, p, i]
    lib.PQresultStatus.restype = i
    lib.PQresultStatus.argtypes = [p]
    lib.PQresultErrorMessage.restype = c
    lib.PQresultErrorMessage.argtypes = [p]
    lib.PQntuples.restype = i
    lib.PQntuples.argtypes = [p]
    lib.PQnfields.restype = i
    lib.PQnfields.argtypes = [p]
    lib.PQftype.restype = ctypes.c_uint
    lib.PQftype.argtypes = [p, i]
    lib.PQgetisnull.restype = i
    lib.PQgetisnull.argtypes = [p, i, i]
    lib.PQgetvalue.restype = c
    lib.PQgetvalue.argtypes = [p, i, i]
    lib.PQclear.argtypes = [p]


class _Rows:
    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self._rows = rows

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self._rows


class _Conn:
    """Just enough of a DB-API connection for snapshot.collect (`?` placeholders)."""

    def __init__(self, lib: ctypes.CDLL, handle: int) -> None:
        self._lib = lib
        self._h = handle

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> _Rows:
        parts = sql.split("?")
        text = parts[0] + "".join(f"${n}{part}" for n, part in enumerate(parts[1:], 1))
        values = (ctypes.c_char_p * max(1, len(params)))(*[str(v).encode("utf-8") for v in params])
        lib = self._lib
        res = lib.PQexecParams(self._h, text.encode("utf-8"), len(params), None, values,
                               None, None, 0)  # fmt: skip
        try:
            if not res or lib.PQresultStatus(res) not in _RESULT_OK:
                why = lib.PQresultErrorMessage(res) if res else lib.PQerrorMessage(self._h)
                raise HookStoreError((why or b"query failed").decode("utf-8", "replace").strip())
            ints = [lib.PQftype(res, j) in _INT_OIDS for j in range(lib.PQnfields(res))]
            rows = []
            for r in range(lib.PQntuples(res)):
                row: list[Any] = []
                for j, is_int in enumerate(ints):
                    if lib.PQgetisnull(res, r, j):
                        row.append(None)
                        continue
                    value = lib.PQgetvalue(res, r, j).decode("utf-8")
                    row.append(int(value) if is_int else value)
                rows.append(tuple(row))
            return _Rows(rows)
        finally:
            if res:
                lib.PQclear(res)


# store/snapshot.py's collect() as one statement: it asks two questions per held task, which
# on a server is two round trips each (20,000 for 10,000 tasks, seconds per write); here the
# server answers them all at once. Same rows, same dict (tested against collect()).
_ONE_QUERY = (
    "SELECT t.name, t.state, t.session_id, t.required_agents, t.lock_released_at, "
    "CASE WHEN t.lock_released_at IS NULL THEN (SELECT COUNT(*) FROM approvals a "
    "WHERE a.task = t.name AND a.kind = ? AND a.revoked_at IS NULL) END, "
    "CASE WHEN t.lock_released_at IS NULL THEN (SELECT e.payload FROM events e "
    "WHERE e.task = t.name AND e.kind = 'validation' ORDER BY e.seq DESC LIMIT 1) END "
    "FROM tasks t ORDER BY t.name"
)


def collect(conn: Any, loads: Any) -> dict[str, Any]:
    """The hook snapshot (store/snapshot.py's shape) from a PostgreSQL connection speaking `?`
    placeholders (this module's _Conn, or postgres.QmarkConnection), in one query."""
    from taskgate.store import snapshot as snap

    tasks = []
    for name, state, session, agents, released, approved, last in conn.execute(
        _ONE_QUERY, (snap.APPROVAL_KIND,)
    ).fetchall():
        entry: dict[str, Any] = {
            "name": str(name),
            "state": str(state),
            "agents": [str(a) for a in loads(agents)],
            "session": None if released is not None or session is None else str(session),
        }
        if entry["session"] is not None:
            payload = loads(last) if last else {}
            entry["plan_approved"] = bool(approved)
            entry["main_may_fix"] = isinstance(payload, dict) and (
                payload.get("responsible") == "main"
            )
        tasks.append(entry)
    return {"format": snap.FORMAT, "tasks": tasks}


# snapshot()'s answer when the server's snapshot clock still says `clock`: the caller's file
# of that clock is the store's current data (store/postgres.py writes the two together).
SAME: dict[str, Any] = {}
# pg_schema.CLOCK_READ (that module is not imported here: the hook's import budget).
_CLOCK_READ = "SELECT seq FROM snapshot_clock WHERE id = 1"


def _params(url: str, connect_timeout: int, name: bytes) -> tuple[Any, Any]:
    """PQconnectdbParams' keywords and values: the URL (expand_dbname: its own keys too)."""
    keys = (ctypes.c_char_p * 4)(b"dbname", b"connect_timeout", b"application_name", None)
    values = (ctypes.c_char_p * 4)(url.encode("utf-8"), str(connect_timeout).encode(), name, None)
    return keys, values


_POLL_FAILED, _POLL_READING, _POLL_WRITING, _POLL_OK = 0, 1, 2, 3  # PostgresPollingStatusType
_VERBOSE = 2  # PQERRORS_VERBOSE: the error text carries the SQLSTATE


def refusal_state(url: str, connect_timeout: int, lib: ctypes.CDLL | None = None) -> str | None:
    """The SQLSTATE with which the server refuses a connection right now, read in any language:
    one more connection attempt, with libpq's verbose errors set before the server answers
    (`FATAL:  53300: ...`; libpq keeps no SQLSTATE of a refused login otherwise). "" when
    that attempt connected (closed at once); None without libpq, when nothing answered within
    `connect_timeout`, or when the text carries no code. For store/pg_wait.py refusal_kind:
    both the hook's libpq path and psycopg's (which exposes no verbosity before connecting)."""
    lib = lib or _load()
    if lib is None:
        return None
    p = ctypes.c_void_p
    lib.PQconnectStartParams.restype = p
    lib.PQconnectStartParams.argtypes = [ctypes.POINTER(ctypes.c_char_p)] * 2 + [ctypes.c_int]
    lib.PQconnectPoll.restype = ctypes.c_int
    lib.PQconnectPoll.argtypes = [p]
    lib.PQsocket.restype = ctypes.c_int
    lib.PQsocket.argtypes = [p]
    lib.PQsetErrorVerbosity.argtypes = [p, ctypes.c_int]
    handle = lib.PQconnectStartParams(*_params(url, connect_timeout, b"taskgate-check"), 1)
    if not handle:
        return None
    import select
    import time

    try:
        lib.PQsetErrorVerbosity(handle, _VERBOSE)
        deadline = time.monotonic() + max(1, connect_timeout)
        status = _POLL_WRITING  # PQconnectStart began it: poll once the socket is ready
        while True:
            if status == _POLL_OK:
                return ""
            sock = lib.PQsocket(handle)
            left = deadline - time.monotonic()
            if status == _POLL_FAILED or sock < 0 or left <= 0:
                break
            reading = status == _POLL_READING
            select.select([sock] if reading else [], [] if reading else [sock], [], left)
            status = lib.PQconnectPoll(handle)
        text = (lib.PQerrorMessage(handle) or b"").decode("utf-8", "replace")
    finally:
        lib.PQfinish(handle)
    from taskgate.store import pg_wait

    return pg_wait.state_in(text)


def _connect(lib: ctypes.CDLL, url: str, connect_timeout: int) -> int:
    """An open connection's handle; a server that is full or restarting is waited for up to
    the hook's bound (store/pg_wait.py), anything else raises HookStoreError at once."""
    keys, values = _params(url, connect_timeout, b"taskgate-hook")

    def attempt() -> int:
        handle = lib.PQconnectdbParams(keys, values, 1)  # expand_dbname: the URL's own keys
        if handle and lib.PQstatus(handle) == _OK:
            return int(handle)
        why = lib.PQerrorMessage(handle) if handle else b"out of memory"
        if handle:
            lib.PQfinish(handle)
        first = (why or b"").decode("utf-8", "replace").strip().splitlines()
        raise HookStoreError(first[0] if first else "connection failed")

    try:
        return attempt()
    except HookStoreError as exc:
        from taskgate.store import pg_wait  # only when the first attempt was refused

        def diagnose() -> str | None:  # a refusal in another language: its SQLSTATE
            return refusal_state(url, connect_timeout, lib)

        if pg_wait.kind_of(exc) is None and pg_wait.refusal_kind(diagnose) is None:
            raise

        def where() -> str:
            from taskgate.store.pg_fault import describe

            return describe(url)

        return pg_wait.connect(
            attempt, (HookStoreError,), where=where, wait_s=pg_wait.hook_left(),
            diagnose=diagnose,
        )  # fmt: skip


def snapshot(
    url: str, loads: Any, *, clock: int | None = None, connect_timeout: int = 5
) -> dict[str, Any] | None:
    """store/snapshot.py's data read in one REPEATABLE READ transaction, or None without
    libpq; SAME when `clock` (a local file's) is still the server's snapshot clock."""
    lib = _load()
    if lib is None:
        return None
    handle = _connect(lib, url, connect_timeout)
    try:
        conn = _Conn(lib, handle)
        if clock is not None:
            try:
                now = conn.execute(_CLOCK_READ).fetchone()
            except HookStoreError:  # no clock table (a store no write opened since): read all
                now = None
            if now is not None and now[0] == clock:
                return SAME
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        return collect(conn, loads)
    finally:
        if handle:
            lib.PQfinish(handle)
