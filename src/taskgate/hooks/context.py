"""What a PreToolUse decision needs, read fast: the repository layout and the session's task.

The store is read through a read-only SQLite connection with a handful of queries (no Engine,
no views, no git subprocess), because this runs before every guarded tool call.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

    from taskgate.hooks.policy import Actor
    from taskgate.store.snapshot import Index

# The [workspace] tasks_root default of engine/config.py (tests/test_hooks_dispatch.py checks
# that the two agree); taskgate.toml is parsed in full only when it sets tasks_root.
DEFAULT_TASKS_ROOT = ".taskgate/tasks"
STATE_DIR = ".taskgate"
GOVERNED_MARKER = "taskgate-governed"  # engine/workspace.py: written by `taskgate init`


class Layout:
    """Where one repository's taskgate files live (realpaths). Here, not in hooks/policy.py
    (which re-exports it), so that the hooks that need no tool-use rules — UserPromptSubmit of
    a session holding a task, on every prompt — do not load them (issue 18)."""

    __slots__ = ("common_dir", "repo", "state_dir", "tasks_root")

    def __init__(self, repo: str, common_dir: str, state_dir: str, tasks_root: str) -> None:
        self.repo = real_repo = os.path.realpath(repo)
        self.common_dir = _realpath_below(repo, real_repo, common_dir)
        self.state_dir = _realpath_below(repo, real_repo, state_dir)
        self.tasks_root = _realpath_below(repo, real_repo, tasks_root)


def _realpath_below(base: str, real_base: str, path: str) -> str:
    """os.path.realpath(path), where `real_base` is the realpath of `base`: a `path` below
    `base` has only its components after it looked at (a repository's `.git`, `.taskgate`
    and tasks root share every leading directory with it: an lstat each, issue 18)."""
    rest = path[len(base) + 1 :].split("/") if path.startswith(base + "/") else []
    if not rest or any(part in ("", ".", "..") for part in rest):
        return os.path.realpath(path)
    real = real_base
    for part in rest:
        real = os.path.join(real, part)
        try:
            mode = os.lstat(real).st_mode
        except OSError:
            return os.path.realpath(path)  # missing: realpath keeps the rest as written
        if mode & 0o170000 == 0o120000:  # a symlink: resolved the whole way, as realpath does
            return os.path.realpath(path)
    return real


class StoreUnreadable(Exception):
    """The store is missing, corrupt, or holds a state the protocol does not know."""

    def __init__(self, message: str, rule: str) -> None:
        super().__init__(message)
        self.rule = rule


def load_layout(start: str) -> Layout | None:
    """The layout of the taskgate repository containing `start`; None when not governed."""
    found = discover(start)
    if found is None:
        return None
    common_dir, repo = found
    state_dir = os.path.join(repo, STATE_DIR)
    if not os.path.exists(os.path.join(repo, "taskgate.toml")) and not os.path.isdir(state_dir):
        try:  # `taskgate init` left a marker: still governed, fail closed (issue 14)
            with open(os.path.join(common_dir, GOVERNED_MARKER), encoding="utf-8") as f:
                root = f.readline().strip()
        except OSError:
            return None  # taskgate was never initialised here: nothing to guard
        return Layout(repo, common_dir, state_dir, root or os.path.join(repo, DEFAULT_TASKS_ROOT))
    return Layout(repo, common_dir, state_dir, _tasks_root(repo))


def discover(start: str) -> tuple[str, str] | None:
    """(common git dir, main worktree) of the repository containing `start`, or None.

    The same reading of .git files as taskgate.git.repo.discover (tests check they agree),
    without that module's imports: dataclasses, subprocess and concurrent.futures cost about
    45 ms per hook process on a slow disk, several times the interpreter's own start.
    """
    current = os.path.realpath(start)
    while True:
        dot_git = os.path.join(current, ".git")
        if os.path.isdir(dot_git):
            return dot_git, current
        if os.path.isfile(dot_git):
            gitdir = _read_link(dot_git, "gitdir:")
            if gitdir is None:
                return None
            common = _read_link(os.path.join(gitdir, "commondir"), "") or gitdir
            return common, os.path.dirname(common)
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def _read_link(path: str, prefix: str) -> str | None:
    """The path a `.git` file (`gitdir: X`) or a `commondir` file names, made absolute."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read().strip()
    except OSError:
        return None
    if not text.startswith(prefix):
        return None
    target = text[len(prefix) :].strip()
    return os.path.realpath(os.path.join(os.path.dirname(path), target))


def _tasks_root(repo: str, text: str | None = None) -> str:
    """The tasks root of `repo`, from its taskgate.toml (`text`, when the caller read it)."""
    if text is None:
        config = os.path.join(repo, "taskgate.toml")
        try:
            with open(config, encoding="utf-8") as handle:
                text = handle.read()
        except OSError:
            text = ""
    root = DEFAULT_TASKS_ROOT
    if any(line.strip().startswith("tasks_root") for line in text.splitlines()):
        from pathlib import Path

        from taskgate.engine.config import load_config

        root = load_config(Path(repo)).workspace.tasks_root
    return root if os.path.isabs(root) else os.path.join(repo, root)


def load_actor(layout: Layout, session: str, agent: str) -> Actor:
    """The session's task (R-LCK-20) and every task's agents: from the hook snapshot, which the
    store keeps current under its write lock (store/snapshot.py), else from the store itself."""
    from taskgate.hooks.jsonio import loads
    from taskgate.store import snapshot

    db = os.path.join(layout.state_dir, "state.db")
    try:  # never open()+close(): that drops this process's SQLite locks (store/dbfile.py)
        from taskgate.store.dbfile import read_head

        header = read_head(db, 16)
    except OSError:
        from taskgate.store.select import server_snapshot  # issue 20: PostgreSQL, no state.db

        served = server_snapshot(layout.repo, layout.state_dir)
        if served is not None:

            def full() -> snapshot.Index:  # a damaged line of this machine's file
                again = server_snapshot(layout.repo)  # the server's data, no file
                assert again is not None
                return again

            return actor_from(served, session, agent, orchestrated(), full)
        raise StoreUnreadable(  # e.g. .taskgate/ deleted: still guarded (GOVERNED_MARKER)
            f"the taskgate store {db} is missing; restore .taskgate/ and taskgate.toml (the "
            f"repository stays guarded while .git/{GOVERNED_MARKER} exists)",
            "R-LCK-08",
        ) from None
    if header != b"SQLite format 3\x00":  # overwritten or truncated: never trust the snapshot
        raise StoreUnreadable(f"the taskgate store {db} is not a SQLite database", "R-LCK-08")
    found = snapshot.read(layout.state_dir, loads)
    run_by = orchestrated()
    if found is not None:
        try:
            return actor_from(found, session, agent, run_by, lambda: _from_store(db))
        except (StoreUnreadable, ValueError, UnicodeDecodeError):
            pass  # the store has the last word on corruption, and on a damaged line
    return actor_from(_from_store(db), session, agent, run_by)


def orchestrated() -> tuple[str, str] | None:
    """(task, agent) when this hook runs under a client that `taskgate run` started for one
    of a task's agents (agents/command.py sets both variables; the agent cannot change its
    client's environment, and a session started by the person does not have them)."""
    task = os.environ.get("TASKGATE_TASK", "")
    agent = os.environ.get("TASKGATE_AGENT", "")
    return (task, agent) if task and agent else None


class Tasks(dict[str, tuple[str, ...]]):
    """Every task in the store -> its agents, looked up one name at a time in the snapshot's
    index (issue 18): a decision asks about the few tasks its paths and branches name, never
    builds 10,000 entries. Iterating loads them all (the effect check's baseline does)."""

    def __init__(self, index: Index, store: Callable[[], Index] | None = None) -> None:
        super().__init__()
        self._index = index
        self._store = store  # where a damaged line of the snapshot file is read instead

    def entry(self, name: str) -> dict[str, Any] | None:
        """The task's snapshot entry, None when the store has no such task."""
        try:
            return self._index.task(name)
        except (ValueError, UnicodeDecodeError):
            if self._store is None:
                raise StoreUnreadable(
                    f"the hook snapshot's entry for task {name!r} does not parse", "R-LCK-08"
                ) from None
            self._index, self._store = self._store(), None  # the store has the last word
            return self._index.task(name)

    def held_entry(self, name: str) -> dict[str, Any] | None:
        """The task's full entry when its lock is held (what the rules ask of a held task)."""
        try:
            return self._index.held_entry(name)
        except (ValueError, UnicodeDecodeError):
            if self._store is None:
                raise StoreUnreadable(
                    f"the hook snapshot's entry for task {name!r} does not parse", "R-LCK-08"
                ) from None
            self._index, self._store = self._store(), None
            return self._index.held_entry(name)

    def _agents(self, name: str) -> tuple[str, ...] | None:
        entry = self.entry(name)
        return None if entry is None else tuple(entry["agents"])

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._agents(name) is not None

    def __getitem__(self, name: str) -> tuple[str, ...]:
        found = self._agents(name)
        if found is None:
            raise KeyError(name)
        return found

    def get(self, name: str, default: Any = None) -> Any:
        found = self._agents(name)
        return default if found is None else found

    def __bool__(self) -> bool:
        return self._index.count > 0

    def __len__(self) -> int:
        return self._index.count

    def _all(self) -> dict[str, tuple[str, ...]]:
        try:
            every = self._index.tasks()
        except (ValueError, UnicodeDecodeError):
            if self._store is None:
                raise StoreUnreadable("the hook snapshot does not parse", "R-LCK-08") from None
            self._index, self._store = self._store(), None
            every = self._index.tasks()
        return {t["name"]: tuple(t["agents"]) for t in every}

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def items(self) -> Any:
        return self._all().items()

    def keys(self) -> Any:
        return self._all().keys()

    def values(self) -> Any:
        return self._all().values()


def actor_from(
    index: Index,
    session: str,
    agent: str,
    run_by: tuple[str, str] | None = None,
    store: Callable[[], Index] | None = None,
) -> Actor:
    """The Actor a snapshot index (store/snapshot.py) describes for one session; a session
    holding no task that `taskgate run` started for one of a task's agents acts as that agent."""
    from taskgate.hooks.policy import STATES, Actor, TaskView  # not on the prompt hook's path

    tasks = Tasks(index, store)
    mine = index.held_by(session) if session else []
    if not mine and run_by is not None and run_by[1] in tasks.get(run_by[0], ()):
        ran = tasks.entry(run_by[0])
        held = tasks.held_entry(run_by[0]) if ran is not None else None
        mine = [held or ran] if ran is not None else []
        agent = run_by[1]
    if len(mine) > 1:
        names = ", ".join(t["name"] for t in mine)
        raise StoreUnreadable(
            f"session {session} holds several task locks ({names}): "
            "corruption, manual intervention",
            "R-LCK-20",
        )
    view = None
    if mine:
        t = mine[0]
        if t["state"] not in STATES:
            raise StoreUnreadable(
                f"task '{t['name']}' has the unknown state {t['state']!r}", "R-REC-07"
            )
        view = TaskView(
            t["name"],
            t["state"],
            tuple(t["agents"]),
            plan_approved=t.get("plan_approved") is True,
            main_may_fix=t.get("main_may_fix") is True,
        )
    return Actor(view, agent, tasks)


def _from_store(db: str) -> Index:
    """The snapshot read from the store `db` through a read-only connection (no Engine)."""
    from taskgate.store.hook_tx import sqlite_module

    try:  # the C module alone, without functools (store/hook_tx.py)
        sqlite3 = sqlite_module()
    except ImportError:  # pragma: no cover - other interpreters
        import sqlite3

    from taskgate.hooks.jsonio import loads
    from taskgate.store import snapshot

    uri = "file:" + db.replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    kept = snapshot.seen(os.path.dirname(db), (snapshot.AHEAD_SEQ,))  # before the store
    try:
        conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=10)
        try:
            conn.execute("BEGIN")  # one consistent read
            found = snapshot.collect(conn, loads)
            top = snapshot.last_seq(conn) if kept else 0
        finally:
            conn.close()
    except (sqlite3.Error, ValueError, TypeError) as exc:
        raise StoreUnreadable(f"the taskgate store cannot be read: {exc}", "R-LCK-08") from exc
    lost = snapshot.ahead(kept, top)  # issue 16: a store known to have lost steps
    if lost is not None:
        raise StoreUnreadable(f"{lost[1]}; {snapshot.AHEAD_HINT}", "R-REC-12")
    return snapshot.Index.of(found)


# -- the session's repository, for hook calls whose cwd is outside it (issue 15) -------------


def safe_name(session: str) -> str:
    """A file name for a session id (ids are UUIDs; anything else is hex-encoded)."""
    if session and len(session) <= 128 and all(c.isalnum() or c in "-_." for c in session):
        return session.lstrip(".") or session.encode().hex()
    return session.encode("utf-8", "replace").hex()[:200]


def _sessions_dir() -> str:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return os.path.join(base, "taskgate", "sessions")


def session_repo(session: str) -> str | None:
    """The main worktree of the repository where `session` holds a task, as PreToolUse last
    saw it; None when unknown. A hook cwd outside every repository is judged against it."""
    try:
        with open(os.path.join(_sessions_dir(), safe_name(session)), encoding="utf-8") as f:
            return f.read().strip() or None
    except OSError:
        return None


def remember_session(session: str, repo: str) -> None:
    """Record where `session` holds its task (written only when it changed)."""
    if session_repo(session) == repo:
        return
    directory = _sessions_dir()
    try:
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f".{safe_name(session)}.{os.getpid()}")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(repo)
        os.replace(tmp, os.path.join(directory, safe_name(session)))
    except OSError:
        pass  # a read-only home: calls from outside the repository fall back to the paths
