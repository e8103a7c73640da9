"""`taskgate todo [--json]` without the engine (issue 18: 10,000 tasks at 1.5 x a raw floor).

`output(args)` is the text `taskgate todo` prints, computed with os, re, sqlite3 and json
(the engine's modules are not imported), or None when this path cannot vouch for the answer;
the CLI then runs the command through the engine as before (availability.availability), which
also reports every error. It answers the plain case: `todo` or `todo --json` with no other
argument; the repository found as git/repo.discover finds it; a taskgate.toml of comments only
(or none); an SQLite store with all its migrations and columns; a todo.md that
protocol/todo_scan proves parses (in the documented layout with its fields), or that
parse_todo parses; rows whose JSON columns hold what selection reads. Everything is read as
the engine reads it; the decision is protocol/lockmatrix.decide (the body of
selection.select) with availability.selection's two overrides (abandoned, why blocked).

tests/test_todo_fast.py runs both paths on the same repositories (Hypothesis over todo.md,
store rows, worktrees, changelog and session) and asserts byte-identical output, and that
each case it cannot vouch for goes to the engine.
"""

from __future__ import annotations

import os
import re
import sqlite3

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# engine/core.py SESSION_VARS (tests/test_todo_fast.py checks they are the same).
SESSION_VARS = ("TASKGATE_SESSION", "CLAUDE_CODE_SESSION_ID", "CODEX_SESSION_ID")
# store/select.ENV_VAR: a PostgreSQL store is the engine's business.
_DATABASE_ENV = "TASKGATE_DATABASE_URL"
# store/sqlite._TASK_COLUMNS: a store lacking one is SchemaDamaged (exit 5) on the engine's
# path, so this path checks the same list (the test compares it with TaskRow's fields).
TASK_COLUMNS = frozenset(
    ("name", "state", "session_id", "host", "fence", "created_at", "updated_at", "seq",
     "owner_pid", "owner_started", "risk_level", "change_type", "required_agents",
     "classification", "checkpoint", "lock_released_at", "cleanup_timestamp", "pending",
     "base_branch", "base_sha", "extra")
)  # fmt: skip
_DONE_STATES = ("COMPLETE", "CLEANUP")  # availability.DONE_STATES
# protocol/states.State's values (the test compares them): a lock is readable when its row's
# state is one of them (core.current_state), without importing the enum.
STATES = frozenset(
    ("INIT", "CLASSIFIED", "REQUIREMENTS", "SYNTHESIS", "IMPLEMENTATION", "VALIDATION", "REVIEW",
     "AWAITING_USER_APPROVAL", "SCOPE_NEGOTIATION", "COMPLETE", "CLEANUP")
)  # fmt: skip
_DONE_ROWS = "SELECT name FROM tasks WHERE state IN ('COMPLETE', 'CLEANUP')"
_CHANGELOG_TASK = re.compile(r"^##[ \t]+([a-z0-9][a-z0-9._-]*):", re.MULTILINE)  # availability's
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # not allowed in a TOML comment
_ROWS = "SELECT name, state, session_id, lock_released_at FROM tasks"
# Rows whose JSON columns say something, decoded one by one (most stores: none). A value of
# another type than text in a column printed by --json makes _JsonRows raise (the engine answers).
_ODD_ROWS = (
    "SELECT name, pending, extra FROM tasks "
    "WHERE (pending IS NOT NULL AND pending IS NOT 'null') OR extra IS NOT '{}'"
)


class _Unsure(Exception):
    """This path cannot vouch for the answer: the engine's path gives it."""


def output(args: list[str]) -> str | None:
    """What `taskgate todo` + args prints (without the final newline), or None."""
    if args not in ([], ["--json"]):
        return None  # --repo, --session, --help, a typo: the parser's business
    try:
        return _listing(json_out=bool(args))
    except (_Unsure, OSError, ValueError, sqlite3.Error, LookupError, TypeError, AttributeError):
        return None


def _session() -> str:
    for var in SESSION_VARS:  # engine/core.session_from_env, then .strip() as engine_for
        value = os.environ.get(var, "").strip()
        if value:
            return value
    return ""


def _read(path: str) -> str | None:
    """fsutil.read_text: the text (universal newlines), None when missing or not UTF-8."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def _paths() -> tuple[str, str, str, str]:
    """(state dir, todo.md, changelog.md, tasks root) as engine/workspace finds them."""
    if os.environ.get(_DATABASE_ENV, "").strip():
        raise _Unsure
    cwd = os.getcwd()
    if not os.path.exists(cwd):
        raise _Unsure
    candidate = os.path.realpath(cwd)  # Path.resolve()
    while not os.path.isdir(os.path.join(candidate, ".git")):
        if os.path.exists(os.path.join(candidate, ".git")):
            candidate = _main_worktree(cwd)  # a linked worktree (a task's): its .git file
            break
        parent = os.path.dirname(candidate)
        if parent == candidate:
            raise _Unsure
        candidate = parent
    repo = candidate
    try:
        with open(os.path.join(repo, "taskgate.toml"), "rb") as handle:
            config = handle.read().decode("utf-8")
    except FileNotFoundError:
        config = ""
    # Comments only: every value is the default (engine/config.parse_config of such a text).
    if _CONTROL.search(config) or "\r" in config:
        raise _Unsure
    for line in config.split("\n"):
        bare = line.lstrip(" \t")
        if bare and not bare.startswith("#"):
            raise _Unsure
    return (
        os.path.join(repo, ".taskgate"),
        os.path.join(repo, "todo.md"),
        os.path.join(repo, "changelog.md"),
        os.path.join(repo, ".taskgate/tasks"),
    )


def _main_worktree(cwd: str) -> str:
    """The main worktree as engine/workspace.find_workspace finds it from a linked worktree."""
    from pathlib import Path

    from taskgate.git.repo import discover

    try:
        return str(discover(Path(cwd)).main_worktree)
    except Exception:  # its error is the engine's to report
        raise _Unsure from None


def _connect(state_dir: str) -> sqlite3.Connection:
    """The store as SqliteStore opens it, its migrations checked instead of applied."""
    from taskgate.store.dbfile import uri
    from taskgate.store.schema import MIGRATIONS

    db = os.path.join(state_dir, "state.db")
    if not os.stat(db).st_size:  # workspace.store_problem: an empty store is lost
        raise _Unsure
    timeout = float(os.environ.get("TASKGATE_LOCK_TIMEOUT", "60"))
    conn = sqlite3.connect(uri(db, "rw"), uri=True, timeout=timeout, isolation_level=None,
                           check_same_thread=False)  # fmt: skip
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
        applied = {r[0] for r in conn.execute("SELECT name FROM migrations")}
        if applied != {name for name, _ in MIGRATIONS}:
            raise _Unsure  # a migration to apply, or a newer taskgate's store
        if not {r[1] for r in conn.execute("PRAGMA table_info(tasks)")} >= TASK_COLUMNS:
            raise _Unsure
    except BaseException:
        conn.close()
        raise
    return conn


def _listing(*, json_out: bool) -> str:
    from taskgate.protocol.todo_scan import scan
    from taskgate.store import snapshot

    state_dir, todo_path, changelog_path, tasks_root = _paths()
    session = _session()
    text = _read(todo_path)  # Engine.todo() reads it first
    if text is None:
        if os.path.exists(todo_path):
            raise _Unsure  # "is not UTF-8 text"
        text = ""
    quick = scan(text)
    todo: Any = None  # protocol/todo.TodoList, parsed only when needed
    if quick is None:
        todo = _parse(text)
        names, titles = [t.name for t in todo.tasks], [t.title for t in todo.tasks]
    else:
        names, titles = quick.names, quick.titles
    conn = _connect(state_dir)
    try:
        seen = snapshot.seen(state_dir)  # Engine._check_hook_snapshot
        if seen:
            (top,) = conn.execute("SELECT MAX(seq) FROM events").fetchone()
            if snapshot.ahead(seen, int(top or 0)) is not None:
                raise _Unsure
        conn.execute("BEGIN")
        rows = {r[0]: r for r in conn.execute(_ROWS)}
        odd = conn.execute(_ODD_ROWS).fetchall()
        done = {r[0] for r in conn.execute(_DONE_ROWS)}  # availability.done_names
        conn.execute("COMMIT")
    finally:
        conn.close()
    held: dict[str, tuple[Any, Any]] = {}  # name -> (pending, extra), decoded
    if odd:
        import json

        for name, pending, extra in odd:
            held[name] = (None if pending is None else json.loads(pending), json.loads(extra))
    done.update(_CHANGELOG_TASK.findall(_read(changelog_path) or ""))
    from taskgate.protocol.lockmatrix import decide

    worktrees = _Worktrees(tasks_root)
    dirs, exists = worktrees.dirs, worktrees.exists
    valid = STATES
    get = rows.get
    out = _JsonRows() if json_out else _TextRows(max(map(len, names), default=4))
    add = out.add
    reasons: dict[str, str] | None = None
    for index, name in enumerate(names):
        row = get(name)
        # availability.Worktrees.exists: False without a stat when the listing lacks the name
        worktree = exists(name) if dirs is None or name in dirs else False
        if row is not None and row[3] is None and name not in held:
            # Locked, nothing pending, nothing extra: most rows of a busy store.
            availability, rule, message = decide(
                name, session, (row[2], row[1] in valid), worktree, False, (), (), False
            )
            add(name, titles[index], availability, rule, message, row[1], row[2])
            continue
        pending = extra = None
        if row is not None and name in held:
            pending, extra = held[name]
            if (pending is not None and type(pending) is not dict) or type(extra) is not dict:
                raise _Unsure  # availability.selection calls .get on them
        lock = None if row is None or row[3] is not None else (row[2], row[1] in valid)
        done_row = row is not None and row[3] is not None and row[1] == "CLEANUP"
        missing: tuple[str, ...] = ()
        unmet: tuple[str, ...] = ()
        if lock is None and not done_row and not worktree:  # the fields matter only here
            if quick is not None and quick.has_fields:
                missing = quick.missing_fields(index)
                depends = quick.depends.get(name, ())
            else:
                if todo is None:
                    todo = _parse(text)
                entry = todo.tasks[index]
                missing, depends = entry.missing_fields, entry.depends
            unmet = tuple(d for d in depends if d not in done)
        availability, rule, message = decide(
            name, session, lock, worktree, done_row, missing, unmet,
            bool(pending and pending.get("op") == "create_task_worktree"),
        )  # fmt: skip
        if extra and extra.get("abandoned"):  # availability.selection, issue 17
            reason = str(extra["abandoned"].get("reason", ""))
            availability, message = "abandoned", f"abandoned: {reason}".rstrip(": ")
        elif availability == "blocked":
            if reasons is None:  # once per listing, as availability.availability
                from taskgate.protocol.todo_deps import blocked_reasons_of

                if quick is not None and quick.has_fields:
                    reasons = blocked_reasons_of(names, quick.depends, done)
                else:
                    if todo is None:
                        todo = _parse(text)
                    reasons = blocked_reasons_of(
                        names, {t.name: t.depends for t in todo.tasks}, done
                    )
            message = reasons.get(name) or message
        state = None if row is None else row[1]
        owner = None if row is None or row[3] is not None else row[2]
        add(name, titles[index], availability, rule, message, state, owner)
    return out.text()


def _parse(text: str) -> Any:
    from taskgate.protocol.todo import TodoError, parse_todo

    try:
        return parse_todo(text)
    except TodoError:
        raise _Unsure from None  # the engine's path reports it with the line


class _Worktrees:
    """availability.Worktrees: one listing of the tasks root, a stat only for listed names."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.dirs: set[str] | None
        try:
            self.dirs = set(os.listdir(root))
        except FileNotFoundError:
            self.dirs = set()
        except OSError:
            self.dirs = None

    def exists(self, name: str) -> bool:
        if self.dirs is not None and name not in self.dirs:
            return False
        return os.path.exists(os.path.join(self.root, name, "code"))


class _TextRows:
    """cmd_todo's text: name, availability and message, the names padded to one width."""

    def __init__(self, width: int) -> None:
        self.lines: list[str] = []
        self.width = width

    def add(self, name: str, title: str, availability: str, rule: str, message: str,
            state: Any, owner: Any) -> None:  # fmt: skip
        self.lines.append(f"{name:<{self.width}}  {availability:<10}  {message}")

    def text(self) -> str:
        return "\n".join(self.lines) or "todo.md lists no tasks"


_ROW = (
    '{\n    "availability": %s,\n    "owner": %s,\n    "reason": %s,\n    "rule": %s,\n'
    '    "state": %s,\n    "task": %s,\n    "title": %s\n  }'
)


class _JsonRows:
    """json.dumps(records, indent=2, sort_keys=True, default=str) of cmd_todo's records, each
    value through the C encoder; a value that is neither str nor None (a store column of
    another type) raises TypeError, and the engine's path answers."""

    def __init__(self) -> None:
        from json.encoder import encode_basestring_ascii

        self.parts: list[str] = []
        self.q = encode_basestring_ascii
        self.quoted: dict[Any, str] = {None: "null"}  # availability, rule, state: a few values

    def _c(self, value: Any) -> str:
        text = self.quoted.get(value)
        if text is None:
            text = self.quoted[value] = self.q(value)
        return text

    def add(self, name: str, title: str, availability: str, rule: str, message: str,
            state: Any, owner: Any) -> None:  # fmt: skip
        q, c = self.q, self._c
        self.parts.append(
            _ROW % (c(availability), "null" if owner is None else q(owner), q(message), c(rule),
                    c(state), q(name), q(title))
        )  # fmt: skip

    def text(self) -> str:
        if not self.parts:
            return "[]"
        return "[\n  " + ",\n  ".join(self.parts) + "\n]"
