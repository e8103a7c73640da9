"""How a PostgreSQL store that cannot be reached is reported (issue 20), without psycopg.

The installed hook runs `python -S` (hooks/launch.py), which cannot import psycopg: its
PreToolUse reads the server through libpq itself (store/pg_hook.py) and must still name the
database and deny with the real reason (fail closed, R-REC-14), not with psycopg's ImportError.
store/postgres.py re-exports these names.
"""

from __future__ import annotations

from taskgate.errors import EnvironmentFault


class StoreUnreachable(EnvironmentFault):
    """PostgreSQL cannot be reached, or the connection broke (exit 6): nothing was changed
    unless the message says the outcome of a commit is unknown."""

    kind = "store-unreachable"


def describe(url: str) -> str:
    """The database as messages name it: host, port, database and user, never a password."""
    from urllib.parse import parse_qs, unquote, urlsplit

    try:
        parts = urlsplit(url)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        userinfo, _, hosts = parts.netloc.rpartition("@")
        host, port = hosts, ""
        if "," not in hosts and not hosts.endswith("]") and ":" in hosts:
            host, _, port = hosts.rpartition(":")
    except ValueError:
        return "a PostgreSQL database (the URL does not parse)"
    host = query.get("host") or unquote(host) or "the default socket"
    port = query.get("port") or port
    user = query.get("user") or unquote(userinfo.partition(":")[0])
    dbname = query.get("dbname") or unquote(parts.path.lstrip("/")) or "(default)"
    return (
        f"PostgreSQL database '{dbname}' on {host}{f':{port}' if port else ''}"
        f"{f' as {user}' if user else ''}"
    )


def unreachable(url: str, exc: BaseException, *, commit: bool = False) -> StoreUnreachable:
    """The StoreUnreachable for `exc`: the database named by describe(), no password; after a
    wait for a full or restarting server (store/pg_wait.py), how long it waited and what next."""
    from taskgate.store import pg_wait

    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "password" in first.lower():
        first = "authentication failed"  # libpq's text can quote the connection string
    waited = pg_wait.gaveup_text(exc)
    if waited is not None and not commit:
        what, hint = waited
        return StoreUnreachable(f"cannot reach {describe(url)}: {first}; {what}", hint=hint)
    if commit:
        return StoreUnreachable(
            f"the connection to {describe(url)} broke while committing ({first}); the step "
            "either committed completely or not at all",
            hint="when PostgreSQL is back, run 'taskgate status' to see which, then run the "
            "command again if it did not happen",
        )
    return StoreUnreachable(
        f"cannot reach {describe(url)}: {first}; nothing was changed",
        hint="start PostgreSQL or check TASKGATE_DATABASE_URL / [store] url (credentials come "
        "from the environment, ~/.pgpass or a service file), then run the command again",
    )
