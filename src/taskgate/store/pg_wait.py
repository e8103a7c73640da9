"""Waiting a bounded time for a PostgreSQL server that is full or restarting (issue 20).

A team's server refuses a connection for a while in two ordinary situations: it is full
(SQLSTATE 53300 too_many_connections: "sorry, too many clients already", "too many
connections for role/database", "remaining connection slots are reserved") when many sessions'
hooks and agents connect at once, and it is starting, in recovery, or shutting down (57P03
cannot_connect_now) during every restart or failover. Such a refusal is retried with growing,
jittered pauses until the connection succeeds or the bound passes; stderr says what taskgate
waits for, for how long at most, and (on success) how long it waited. After a "shutting down"
answer, a connection the stopping server closes and a socket where nothing listens are the
restart's gap and are waited for too.

Every other failure fails at once, as before: a wrong password (28P01), a missing database
(3D000) or role, a host where nothing listens (when no shutdown was seen first), a DNS failure,
a timeout. The bounds (docs/teams.md "Failure modes"):

- a command (and `taskgate serve`'s work outside hooks) waits as long as it waits for another
  writer's lock: the store's `timeout`, TASKGATE_LOCK_TIMEOUT (60 s);
- a hook (the command hook's process, `taskgate [OPTIONS] hook`, serve's hook threads) waits
  TASKGATE_PG_HOOK_WAIT (5 s, at most 20) for all its waits together, connecting and the
  writer lock (store/postgres.py): Claude Code gives a command hook 30 s, after which the call
  proceeds as if no hook ran, and an HTTP hook 10 s (then blocks). A PreToolUse hook that
  still cannot read the store denies guarded calls (fail closed, R-REC-14).

libpq reports a refused login as text only (no SQLSTATE on a connection that never opened).
A refusal is recognised by a SQLSTATE on the error or in libpq's verbose text, else by
PostgreSQL's English messages (lc_messages C/en, the default), else by one more attempt with
libpq's verbose errors (store/pg_hook.py refusal_state: `FATAL:  53300: ...`), so a server
answering in another language is waited for too (docs/teams.md "In any language").

Only the standard library, imported lazily beyond `os` and `sys`: the hook process imports
this module on every guarded call.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    T = TypeVar("T")

FULL = "full"  # 53300
RESTARTING = "restarting"  # 57P03, or nothing listening right after a shutdown was seen
HOOK_ENV = "TASKGATE_PG_HOOK_WAIT"
HOOK_DEFAULT_S = 5.0
HOOK_MAX_S = 20.0  # below Claude Code's 30 s for a command hook, with a connect_timeout to spare
# Set on the exception a wait gave up on: (kind, seconds waited, bound); postgres.unreachable
# words its message and hint from it.
ATTR = "taskgate_waited"

_FULL = (
    "too many clients already",
    "too many connections for role",
    "too many connections for database",
    "remaining connection slots are reserved",
)
_RESTARTING = (
    "the database system is starting up",
    "the database system is shutting down",
    "the database system is in recovery mode",
    "the database system is not yet accepting connections",
    "the database system is not accepting connections",
)
# After a shutdown was seen: the restart's gap (the stopping server closes a connection it
# accepted without a word, then nothing listens until it is back).
_GAP = ("connection refused", "no such file or directory", "server closed the connection")


_KINDS = {"53300": FULL, "57P03": RESTARTING}


def state_in(text: str) -> str | None:
    """The SQLSTATE in libpq's verbose error text (PQERRORS_VERBOSE: `FATAL:  53300: ...`, in
    any language: the code is never translated), else None."""
    for part in text.split(":  ")[1:]:
        code, colon, _ = part.partition(": ")
        if colon and len(code) == 5 and all(c in _CODE_CHARS for c in code):
            return code
    return None


_CODE_CHARS = frozenset("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def kind_of(exc: BaseException, *, after: str | None = None) -> str | None:
    """FULL, RESTARTING, or None for a failure that is not retried. `after` is the kind seen
    earlier in the same wait: after RESTARTING, nothing listening is the restart's gap."""
    text = str(exc)
    state = getattr(exc, "sqlstate", None) or state_in(text)
    if state in _KINDS:
        return _KINDS[state]
    text = text.lower()
    if any(m in text for m in _FULL):
        return FULL
    if any(m in text for m in _RESTARTING):
        return RESTARTING
    if after == RESTARTING and any(m in text for m in _GAP):
        return RESTARTING
    return None


PASSED = "passed"  # refusal_kind: the diagnosing connection opened (nothing refuses now)


def refusal_kind(diagnose: Callable[[], str | None]) -> str | None:
    """FULL or RESTARTING from the SQLSTATE `diagnose()` reads: a second connection attempt
    with libpq's verbose errors (store/pg_hook.py refusal_state), for a refusal whose text is
    not PostgreSQL's English. libpq keeps no SQLSTATE of a refused login (psycopg's
    OperationalError.sqlstate is None at connect), but its verbose text carries the code.
    PASSED when that attempt connected; None for every other outcome (no libpq, nothing
    answered, another SQLSTATE such as 28P01 or 3D000: not retried)."""
    state = diagnose()
    if state == "":
        return PASSED
    return _KINDS.get(state or "")


def in_hook() -> bool:
    """True in a hook: serve's hook threads (store/select.answer_warm), the command hook's
    process (hooks/launch.py sets HOOK_PROCESS, codex_launch.py CODEX_HOOK_PROCESS) or
    `taskgate [OPTIONS] hook EVENT` (cli/main.py sets HOOK_INVOCATION from the command line
    it parsed, global options and all)."""
    import _thread

    from taskgate.store import select

    if _thread.get_ident() in select._WARM:
        return True
    main = sys.modules.get("__main__")
    if getattr(main, "HOOK_PROCESS", False) is True:
        return True
    if getattr(main, "CODEX_HOOK_PROCESS", False) is True:  # hooks/codex_launch.py
        return True
    return getattr(sys.modules.get("taskgate.cli.main"), "HOOK_INVOCATION", False) is True


def hook_bound() -> float:
    """How long a hook waits (TASKGATE_PG_HOOK_WAIT seconds, 0..HOOK_MAX_S)."""
    try:
        wanted = float(os.environ.get(HOOK_ENV, "") or HOOK_DEFAULT_S)
    except ValueError:
        wanted = HOOK_DEFAULT_S
    return max(0.0, min(wanted, HOOK_MAX_S))


# Seconds each hook has waited so far, by thread: a hook's connection waits and its waits for
# the writer lock share one budget (hook_bound), so together they stay under the 30 s after
# which Claude Code cancels a command hook. serve's hook threads start afresh per request
# (store/select.answer_warm); a hook process answers one event.
_SPENT: dict[int, float] = {}


def hook_left() -> float:
    """What is left of this hook's budget: hook_bound() less what it has waited already."""
    import _thread

    return max(0.0, hook_bound() - _SPENT.get(_thread.get_ident(), 0.0))


def hook_spent() -> float:
    """Seconds this hook has waited so far (its connection and lock waits together)."""
    import _thread

    return _SPENT.get(_thread.get_ident(), 0.0)


def spent(seconds: float) -> None:
    """Count `seconds` of waiting against this hook's budget (nothing outside a hook)."""
    if seconds > 0 and in_hook():
        import _thread

        ident = _thread.get_ident()
        _SPENT[ident] = _SPENT.get(ident, 0.0) + seconds


def new_hook(ident: int) -> None:
    """Thread `ident` begins answering another hook: its budget is whole again."""
    _SPENT.pop(ident, None)


def lock_timeout() -> float:
    """A command's store wait, TASKGATE_LOCK_TIMEOUT seconds (engine/core.py reads it too)."""
    try:
        return float(os.environ.get("TASKGATE_LOCK_TIMEOUT", "") or 60.0)
    except ValueError:
        return 60.0


def bound(command_s: float) -> float:
    """The wait for this caller: what is left of the hook's budget in a hook (hook_left), else
    `command_s` (the store's lock timeout, TASKGATE_LOCK_TIMEOUT for commands)."""
    return hook_left() if in_hook() else max(0.0, command_s)


def connect(
    attempt: Callable[[], T],
    errors: tuple[type[BaseException], ...],
    *,
    where: Callable[[], str],
    wait_s: float,
    diagnose: Callable[[], str | None] | None = None,
) -> T:
    """attempt() until it returns, fails with a failure kind_of() does not retry, or `wait_s`
    seconds of refusals have passed; the last exception is then raised with ATTR set.
    `diagnose` reads the SQLSTATE of a refusal whose text kind_of() does not know (a server
    answering in another language; store/pg_hook.py refusal_state): "" when its own attempt
    connected (then attempt() once more at once), None when nothing answered."""
    start: float | None = None
    seen: str | None = None
    pause = 0.05
    passed = False
    known: dict[str, str] = {}  # a refusal's text -> the kind diagnose() found for it
    try:
        while True:
            try:
                found = attempt()
            except errors as exc:
                kind = kind_of(exc, after=seen) or known.get(str(exc))
                if kind is None and diagnose is not None:
                    state = diagnose()
                    if state == "" and not passed:
                        passed = True  # the refusal passed meanwhile: once more, at once
                        continue
                    kind = _KINDS.get(state or "")
                    if state is None and seen == RESTARTING:
                        kind = RESTARTING  # nothing answers now: the restart's gap (kind_of)
                    if kind is not None:
                        known[str(exc)] = kind  # the same words again: no second diagnosis
                if kind is None or wait_s <= 0:
                    raise
                import time

                now = time.monotonic()
                if start is None:
                    start = now
                    say(_announce(where(), kind, exc, wait_s))
                elif kind != seen and kind == RESTARTING:
                    say(f"taskgate: {where()} is restarting ({_first(exc)}); still waiting")
                seen = kind
                left = start + wait_s - now
                if left <= 0:
                    setattr(exc, ATTR, (seen, now - start, wait_s))
                    raise
                import random

                time.sleep(min(left, pause * (0.5 + random.random() / 2)))
                pause = min(1.0, pause * 2)
                continue
            if start is not None:
                import time

                waited = time.monotonic() - start
                say(f"taskgate: connected to {where()} after waiting {waited:.1f} s")
            return found
    finally:
        if start is not None:  # a hook's later waits (the writer lock) get what is left
            import time

            spent(time.monotonic() - start)


def _first(exc: BaseException) -> str:
    """The server's own words: the last line part after libpq's "...failed: "."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text.rsplit("failed: ", 1)[-1].replace("FATAL:  ", "")


def _announce(where: str, kind: str, exc: BaseException, wait_s: float) -> str:
    knob = f"{HOOK_ENV}, a hook" if in_hook() else "TASKGATE_LOCK_TIMEOUT"
    what = "is full" if kind == FULL else "is starting up or shutting down"
    until = "for a free connection" if kind == FULL else "for it to accept connections"
    return (
        f"taskgate: {where} {what} ({_first(exc)}); waiting up to {wait_s:g} s {until} "
        f"({knob}); nothing is changed before it connects"
    )


def say(line: str) -> None:
    """Print `line` on stderr; a closed pipe loses only the line."""
    from contextlib import suppress

    if sys.stderr is None:
        return
    with suppress(OSError, ValueError):  # a closed pipe: the wait goes on without the message
        print(line, file=sys.stderr, flush=True)


def gaveup_text(exc: BaseException) -> tuple[str, str] | None:
    """(what happened, hint) for StoreUnreachable when `exc` ended a wait, else None."""
    found = getattr(exc, ATTR, None)
    if not isinstance(found, tuple):
        return None
    kind, waited, wait_s = found
    longer = (
        f"to wait longer, raise TASKGATE_LOCK_TIMEOUT (commands) or {HOOK_ENV} (hooks, at "
        f"most {HOOK_MAX_S:g} s)"
    )
    if kind == FULL:
        return (
            f"it stayed full for the {waited:.1f} s taskgate waited (at most {wait_s:g} s); "
            "nothing was changed",
            "free connections (idle sessions: pg_stat_activity) or raise max_connections or "
            f"the role's / database's CONNECTION LIMIT, then run the command again; {longer}",
        )
    return (
        f"it did not accept connections within the {waited:.1f} s taskgate waited for it to "
        f"start up or restart (at most {wait_s:g} s); nothing was changed",
        "check that PostgreSQL comes back (pg_isready, the server's log) and run the command "
        f"again once it accepts connections; {longer}",
    )
