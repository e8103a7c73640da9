"""Which store a workspace uses (issue 20): the embedded SQLite file, or a team's PostgreSQL.

`TASKGATE_DATABASE_URL` (the environment wins), else `[store] url = "postgresql://..."` in
taskgate.toml; neither means SQLite at `.taskgate/state.db`. taskgate.toml is committed, so a
URL there must not carry a password: credentials come from the environment (the variable
above, PGPASSWORD) or libpq's files (~/.pgpass / PGPASSFILE, PGSERVICEFILE).

Only a PostgreSQL URL imports store/postgres.py (and with it psycopg): the embedded path never
does (tests/test_store_postgres.py checks it).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:  # the hook process imports this module: nothing else at import time
    from typing import Any

    from taskgate.engine.workspace import Workspace
    from taskgate.store.base import Store
    from taskgate.store.postgres import PgStore
    from taskgate.store.snapshot import Index

ENV_VAR = "TASKGATE_DATABASE_URL"
_SCHEMES = ("postgresql://", "postgres://")
# user:password@ in the authority, or password= as a query parameter / keyword.
_PASSWORD = r"^[a-z]+://[^/@]*:[^/@]*@|[?&\s]password="


def _config_url(config_text: str, where: str) -> str | None:
    if "[store]" not in config_text:  # the common case: no TOML parse here
        return None
    import re
    import tomllib

    from taskgate.errors import UsageError

    try:
        table = tomllib.loads(config_text).get("store", {})
    except tomllib.TOMLDecodeError:
        return None  # load_config reports the parse error itself
    if not isinstance(table, dict):
        raise UsageError(f"{where}: [store] must be a table", hint="see docs/teams.md")
    unknown = sorted(set(table) - {"url"})
    if unknown:
        raise UsageError(
            f"{where}: unknown key(s) in [store]: {', '.join(unknown)}",
            hint='[store] takes one key: url = "postgresql://host/dbname" (docs/teams.md)',
        )
    url = table.get("url")
    if url is None:
        return None
    if not isinstance(url, str) or not url.strip():
        raise UsageError(f"{where}: [store] url must be a non-empty string", hint="docs/teams.md")
    if re.search(_PASSWORD, url, re.IGNORECASE):
        raise UsageError(
            f"{where}: [store] url carries a password; taskgate.toml is committed to git",
            hint="remove the password from the URL and put it in ~/.pgpass (or PGPASSFILE, a "
            "libpq service file, or TASKGATE_DATABASE_URL in the environment)",
        )
    return url.strip()


def database_url(config_text: str, where: str = "taskgate.toml") -> str | None:
    """The PostgreSQL URL this workspace uses, or None for the embedded SQLite store."""
    url = os.environ.get(ENV_VAR, "").strip() or _config_url(config_text, where)
    if url is None:
        return None
    if not url.startswith(_SCHEMES):
        from taskgate.errors import UsageError

        source = ENV_VAR if os.environ.get(ENV_VAR, "").strip() else f"{where} [store] url"
        raise UsageError(
            f"{source} must be a postgresql:// URL (SQLite needs no URL: leave it unset)",
            hint="for example postgresql://db.example.com/taskgate?user=alice",
        )
    return url


def uses_database_server(config_text: str) -> bool:
    """True when this workspace's store is PostgreSQL (cheap: no TOML parse, no psycopg).
    Such a workspace has no `.taskgate/state.db`; `taskgate init` on each machine writes
    `.taskgate/store-created` and the hook snapshot beside it."""
    if os.environ.get(ENV_VAR, "").strip():
        return True
    if "[store]" not in config_text:
        return False
    try:
        return _config_url(config_text, "taskgate.toml") is not None
    except Exception:  # a bad [store] table (UsageError): opening the store reports it
        return True


def open_store(ws: Workspace, *, timeout: float, read_only: bool = False) -> Store:
    """The workspace's store: PostgreSQL when a URL is configured, else SQLite."""
    url = database_url(ws.config.text, str(ws.config.path or "taskgate.toml"))
    if url is None:
        from taskgate.store.sqlite import SqliteStore

        return SqliteStore(ws.db_path, timeout=timeout, read_only=read_only)
    from pathlib import Path

    store_class = _pg_store()
    ws.state_dir.mkdir(parents=True, exist_ok=True)  # this machine's hook snapshot lives here
    return store_class(url, Path(ws.state_dir), timeout=timeout, read_only=read_only)


def _pg_store() -> type[PgStore]:
    """store/postgres.py's PgStore; UsageError when psycopg is not installed. The installed
    hook runs `python -S` (hooks/launch.py), which leaves site-packages, and psycopg with it,
    off the path: its events that write (SessionStart, UserPromptSubmit, PostToolUse, Stop)
    add them here, on a PostgreSQL workspace only (the SQLite path never gets here)."""
    import sys

    try:
        from taskgate.store.postgres import PgStore
    except ImportError as exc:
        missing = exc
    else:
        return PgStore
    if sys.flags.no_site:
        import site

        site.main()
        try:
            from taskgate.store.postgres import PgStore
        except ImportError as exc:
            missing = exc
        else:
            return PgStore
    from taskgate.errors import UsageError

    raise UsageError(
        f"this workspace uses PostgreSQL ({ENV_VAR} or [store] url) but psycopg is not "
        f"installed ({missing})",
        hint="pip install 'taskgate[postgres]' (psycopg 3) on this machine",
    ) from None


def server_snapshot(repo: str, state_dir: str | None = None) -> Index | None:
    """For the PreToolUse hook of a PostgreSQL workspace: store/snapshot.py's data as the
    server has it now, or None when `repo` uses SQLite.

    Never stale across machines: this machine's file (`state_dir`) is used only while the
    server's snapshot clock (store/pg_schema.py) still equals the clock the file was written
    at, which any machine's write advances before it commits; otherwise the data is read from
    the server in one consistent transaction. `taskgate serve`'s hook threads (answer_warm)
    keep the data in memory, checked against the clock the same way, refreshed on NOTIFY."""
    try:
        with open(os.path.join(repo, "taskgate.toml"), encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError):
        text = ""
    if not uses_database_server(text):
        return None
    url = database_url(text)
    assert url is not None
    import json

    from taskgate.store import snapshot

    if _WARM and _thread_ident() in _WARM:
        from taskgate.store import pg_warm  # the serve process: psycopg is loaded anyway

        return snapshot.Index.of(pg_warm.snapshot(url))
    from taskgate.store import pg_hook  # libpq through ctypes: no 0.2 s psycopg import

    local = _local_file(state_dir, json.loads) if state_dir else None
    try:
        found = pg_hook.snapshot(url, json.loads, clock=local[0] if local else None)
    except pg_hook.HookStoreError as exc:
        from taskgate.store.pg_fault import unreachable  # no psycopg: the hook runs -S

        raise unreachable(url, exc) from None
    if found is pg_hook.SAME and local is not None:
        return local[1]
    if found is not None:
        return snapshot.Index.of(found)
    from taskgate.store.postgres import read_hook_snapshot  # no libpq could be loaded

    return snapshot.Index.of(read_hook_snapshot(url))


def _thread_ident() -> int:
    import _thread

    return _thread.get_ident()


def _local_file(state_dir: str, loads: Any) -> tuple[int, Index] | None:
    """(clock, index) of this machine's hook snapshot, the clock file read first (the store
    drops it first and writes it last), or None when either is missing or unreadable."""
    from taskgate.store import snapshot

    try:
        with open(os.path.join(state_dir, CLOCK_FILE), encoding="ascii") as handle:
            clock = int(handle.read().strip())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    index = snapshot.read(state_dir, loads)
    return None if index is None else (clock, index)


# store/postgres.py's CLOCK_FILE (that module imports psycopg: not here).
CLOCK_FILE = "hook-snapshot.clock"
# The threads answering HTTP hooks in `taskgate serve` (server/hookdoor.py): only they use the
# in-memory data; the command hook, and any other caller in the process, never does.
_WARM: set[int] = set()


def answer_warm(on: bool) -> None:
    """Mark (or unmark) the calling thread as `taskgate serve`'s hook thread: its PostgreSQL
    PreToolUse data then comes from memory checked against the clock (store/pg_warm.py)."""
    import _thread

    from taskgate.store import pg_wait

    ident = _thread.get_ident()
    pg_wait.new_hook(ident)  # each request's waits have the whole hook budget
    (_WARM.add if on else _WARM.discard)(ident)
