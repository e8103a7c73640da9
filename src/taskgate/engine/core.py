"""The Engine: one object per command holding the workspace, store, session and clock.

Every protocol step runs inside one store write transaction: facts are gathered and guards
judged inside it, so the state cannot move between the check and the write. Views are
rendered after the commit.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from taskgate import failpoints
from taskgate.dataclass_lite import dataclass, field
from taskgate.engine import views
from taskgate.engine.clock import Clock, iso, now_iso, system_clock
from taskgate.engine.workspace import Workspace, require_initialized
from taskgate.errors import Corrupted, ForeignTask, StoreLost, TaskgateError, UsageError
from taskgate.fsutil import read_text
from taskgate.process import hostname
from taskgate.protocol.names import task_name_problem
from taskgate.protocol.states import State
from taskgate.store.base import Store, StoreCorrupt, Tx
from taskgate.store.records import JSON, TaskHead, TaskRow, TaskSnapshot
from taskgate.store.select import open_store

TYPE_CHECKING = False  # typing stays unimported on the command path (issue 18)
if TYPE_CHECKING:
    from typing import TypeVar

    from taskgate.protocol.todo import TodoList

    T = TypeVar("T")

# The directory of the effect check's baselines under the state directory (hooks/effects.py).
EFFECTS_DIR = "effects"

# Where the session id comes from without --session (DESIGN "Sessions"): taskgate's own variable,
# else the one Claude Code exports to every Bash command and hook it runs (verified with
# 2.1.332), else Codex's (CODEX_SESSION_ID, the session_id of its hook inputs, verified with
# 0.169.0), so an agent's own `taskgate start T` names the session its hooks report.
SESSION_VARS = ("TASKGATE_SESSION", "CLAUDE_CODE_SESSION_ID", "CODEX_SESSION_ID")


def session_from_env(environ: Mapping[str, str] | None = None) -> str:
    """The first non-empty SESSION_VARS value, stripped ('' when none is set)."""
    env = os.environ if environ is None else environ
    for var in SESSION_VARS:
        value = env.get(var, "").strip()
        if value:
            return value
    return ""


# Set by the agent door in its child only (server/door.py, issue 14): the record of the
# forwarded command, written inside the command's own first write transaction.
DOOR_RECORD_VAR = "TASKGATE_DOOR_RECORD"


def door_record_from_env() -> JSON | None:
    """The agent door's record when this process is the door's child, else None."""
    raw = os.environ.get(DOOR_RECORD_VAR)
    if not raw or os.environ.get("TASKGATE_AGENT") != "agent-door":
        return None
    from taskgate.json_lite import loads

    try:
        data = loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


@dataclass
class Engine:
    """Application services for one repository and one session."""

    ws: Workspace
    session_id: str = ""
    clock: Clock = system_clock
    cwd: Path = field(default_factory=Path.cwd)
    host: str = field(default_factory=hostname)
    # A long-lived owner (`taskgate run`) records its pid and fence; every write checks both.
    owner_pid: int | None = None
    fence: int | None = None
    # Progress lines of long services (worktree setup commands, issue 21); the CLI prints them.
    progress: Callable[[str], None] | None = None
    # How agent worktrees' setup commands run confined (`taskgate run`, issue 21 / 14).
    setup_runner: Callable[..., object] | None = None
    # The agent door's record of the command this process runs for an agent (issue 14).
    door: JSON | None = field(default_factory=door_record_from_env)
    _store: Store | None = None
    # Inside `views_deferred`: task -> the newest snapshot committed or read, not rendered yet.
    _pending_views: dict[str, TaskSnapshot] | None = None

    @property
    def store(self) -> Store:
        """The store, opened on first use (so `--help` and parse errors never touch it)."""
        return self.open_store()

    def open_store(self, *, create: bool = False) -> Store:
        """Open the store; only `init` may create it."""
        if self._store is None:
            if not create:
                require_initialized(self.ws)
            try:
                # How long a command waits for another writer (seconds; tests shorten it).
                wait = float(os.environ.get("TASKGATE_LOCK_TIMEOUT", "60"))
                self._store = open_store(self.ws, timeout=wait)  # SQLite or PostgreSQL
            except StoreCorrupt as exc:
                raise Corrupted(str(exc), hint="run 'taskgate recover'") from exc
            if not create:
                self._check_hook_snapshot(self._store)
        return self._store

    def _check_hook_snapshot(self, store: Store) -> None:
        """A hook snapshot ahead of the store means lost steps (issue 16): exit 5. The file is
        renamed to hook-snapshot.ahead.json (kept), so PreToolUse stops trusting it."""
        from taskgate.store import snapshot

        state_dir = str(self.ws.state_dir)
        files = snapshot.seen(state_dir)  # first: see snapshot.seen
        if not files:
            return
        with store.read() as tx:
            top = tx.last_event_seq()
        found = None if top is None else snapshot.ahead(files, top)
        if found is None:
            return
        snapshot.set_aside(state_dir)
        problem = found[1]
        with store.read() as tx:
            seqs = {t.name: t.seq for t in tx.tasks()}
        for view in self.ws.tasks_root.glob("*/task.json"):
            rendered = views.view_seq(self.ws, view.parent.name)
            if rendered is not None and rendered > seqs.get(view.parent.name, -1):
                return  # the views' check names the task and its sequence numbers
        self.close()
        raise StoreLost(problem, hint=snapshot.AHEAD_HINT)

    def close(self) -> None:
        """Close the store connection."""
        if self._store is not None:
            self._store.close()
            self._store = None

    def now(self) -> str:
        """The current time as `YYYY-MM-DDTHH:MM:SSZ`."""
        if self.clock is system_clock:  # the same text without importing datetime (issue 18)
            return now_iso()
        return iso(self.clock())

    # -- inputs ------------------------------------------------------------------------------

    def require_session(self) -> str:
        """The session id, or a usage error saying how to set it (exit 2)."""
        if not self.session_id:
            raise UsageError(
                "this command needs a session id",
                hint="pass --session ID or set TASKGATE_SESSION (inside Claude Code, "
                "CLAUDE_CODE_SESSION_ID is used; inside Codex, CODEX_SESSION_ID)",
            )
        return self.session_id

    @staticmethod
    def check_task_name(name: str) -> str:
        """Validate a task name before any file or git operation (DESIGN.md Workspace)."""
        problem = task_name_problem(name)
        if problem:
            raise UsageError(problem, hint="task names look like 'add-login' (see todo.md)")
        return name

    def todo(self) -> TodoList:
        """todo.md parsed strictly; a parse error is a usage error naming the line."""
        from taskgate.protocol.todo import TodoError, TodoList, parse_todo  # not every step

        text = read_text(self.ws.todo_path)
        if text is None:
            if self.ws.todo_path.exists():
                raise UsageError(f"{self.ws.todo_path} is not UTF-8 text")
            return TodoList()
        try:
            return parse_todo(text)
        except TodoError as exc:
            raise UsageError(str(exc), hint=f"fix {self.ws.todo_path}") from None

    # -- steps -------------------------------------------------------------------------------

    def snapshot(self, task: str) -> TaskSnapshot | None:
        """A consistent read of one task; its views are refreshed when stale (DESIGN.md State).

        A view is rendered only after its step committed, so a view ahead of the store means
        the store lost committed steps (a lost WAL, an old copy restored): exit 5, and the
        views are left as they are (they are the evidence), never re-rendered backwards.
        """
        rendered = views.view_seq(self.ws, task)  # read before the store: see _ahead
        try:
            with self.store.read() as tx:
                snap = tx.snapshot(task)
        except StoreCorrupt as exc:
            raise Corrupted(str(exc), hint="run 'taskgate recover'") from exc
        check_history(self.ws, task, rendered, snap)
        if snap is not None:
            self._views_of(snap, force=False)
        return snap

    def require_snapshot(self, task: str) -> TaskSnapshot:
        """The task's snapshot, or a usage error when it was never started."""
        snap = self.snapshot(self.check_task_name(task))
        if snap is None:
            raise UsageError(
                f"task '{task}' has not been started", hint=f"run 'taskgate start {task}'"
            )
        return snap

    def step(self, task: str, body: Callable[[Tx, TaskSnapshot], T], *, owner: bool = True) -> T:
        """Run one protocol step on `task` in a single write transaction, then render views."""
        self.check_task_name(task)
        from taskgate.engine import invocations

        if self._effects_watched():  # issue 15: the effect check around each step
            from taskgate.hooks import quarantine

            quarantine.before_step(self, task)
        else:  # as before_step marks it when no baseline is found (one comparison per task)
            vars(self).setdefault("_effects_seen", set()).add(task)
        closed: list[str] = []
        try:
            with self.store.write() as tx:
                # Its events are read as asked (store/event_log.py; issue 18: every event
                # was read and decoded on every step).
                snap = tx.snapshot(task, lazy=True)
                # Under the write lock: no step can commit between reading the view and the row.
                check_history(self.ws, task, views.view_seq(self.ws, task), snap)
                if snap is None:
                    raise UsageError(
                        f"task '{task}' has not been started",
                        hint=f"run 'taskgate start {task}'",
                    )
                if owner:
                    self.require_owner(snap.task)
                # Issue 16: an invocation whose process is provably dead is closed first, in
                # this step, so no command waits for it ("agent invocations still running").
                closed = invocations.close_dead(self, tx, snap)
                if closed:
                    snap = tx.snapshot(task, lazy=True) or snap
                result = body(tx, snap)
                self.attest(tx, task)
                after = tx.snapshot(task, since=snap)
                failpoints.hit("step:before-commit")
        except StoreCorrupt as exc:
            raise Corrupted(str(exc), hint="run 'taskgate recover'") from exc
        except Corrupted:
            raise
        except TaskgateError:
            if closed:  # the refusal rolled the closing back: it stands on its own
                with contextlib.suppress(TaskgateError):
                    self.step(task, lambda tx, snap: None, owner=owner)
            self.snapshot(task)  # a refused step changed nothing, but repairs stale views
            raise
        self.committed()
        failpoints.hit("step:after-commit")
        if after is not None:
            self._views_of(after, force=True)
        if self._effects_watched():  # looked at again: a hook may have taken one meanwhile
            from taskgate.hooks import quarantine

            quarantine.after_step(self, task, (after.task.session_id or "") if after else None)
        return result

    def _effects_watched(self) -> bool:
        """Whether any session of this workspace may have an effect-check baseline: they live
        in `<state dir>/effects/` (hooks/effects.baseline_path). Without that directory no
        baseline can be read, so quarantine.before_step/after_step would find nothing to
        compare or re-take: they and the hook modules they import (about 130 KB of bytecode)
        are not loaded (issue 18). One stat."""
        return os.path.isdir(os.path.join(self.ws.state_dir, EFFECTS_DIR))

    def require_owner(self, row: TaskRow) -> None:
        """R-TRN-07 / R-LCK-09: only the session holding the lease (and fence) may write."""
        session = self.require_session()
        if row.released:
            raise ForeignTask(
                f"the lock of '{row.name}' was released at {row.lock_released_at}",
                hint=f"run 'taskgate start {row.name}' to claim it again",
            )
        if row.session_id != session:
            raise ForeignTask(
                f"FATAL: Cannot update lock owned by {row.session_id} (R-TRN-07)",
                hint="select another task with 'taskgate next'",
            )
        if self.fence is not None and row.fence != self.fence:
            raise ForeignTask(
                f"this process's lease on '{row.name}' was superseded (fence {self.fence} -> "
                f"{row.fence})",
                hint="another owner took over after a forced release; stop working on it",
            )

    def event(self, tx: Tx, task: str, kind: str, payload: JSON) -> None:
        """Append an audit event attributed to this session."""
        tx.append_event(task, kind, {"session": self.session_id, **payload}, self.now())

    def attest(self, tx: Tx, task: str) -> None:
        """In a command the agent door forwarded: its `agent-door` record, in this (the
        command's first) write transaction, so no kill can leave the write without it."""
        if self.door is not None:
            self.event(tx, task, "agent-door", self.door)  # committed(): once per command

    def committed(self) -> None:
        """After a write transaction that `attest`ed committed: the record is in the store."""
        self.door = None

    def touch(self, tx: Tx, snap: TaskSnapshot, **changes: object) -> TaskRow:
        """Compare-and-swap update of the task row (bumps seq, sets updated_at)."""
        return tx.update_task(snap.task.name, snap.task.seq, updated_at=self.now(), **changes)

    @contextlib.contextmanager
    def views_deferred(self) -> Iterator[None]:
        """Render the views of the steps taken inside once, when the block ends (issue 18).

        Outside this block every step renders its views after its commit. Inside it they are
        rendered at the end, or earlier by `flush_views`, which runs before anything outside
        this process may read them (an agent is started, an anchor is written to git). A crash
        in between leaves the views behind the store, never ahead of it, exactly as a crash
        between a commit and its rendering does: the next command re-renders them. The hook
        snapshot is rewritten at the same points (Store.hold_snapshot): a write still drops it
        before its commit, so in between the hooks read the store.
        """
        if self._pending_views is not None:  # nested: the outermost block renders
            yield
            return
        self._pending_views = {}
        store = self.store
        store.hold_snapshot = True  # the hook snapshot too: the hooks read the store meanwhile
        try:
            yield
        finally:
            try:
                self.flush_views()
            finally:
                self._pending_views = None
                store.hold_snapshot = False

    def flush_views(self) -> None:
        """Render the views `views_deferred` holds back, and the hook snapshot, now."""
        pending = self._pending_views
        while pending:
            _, snap = pending.popitem()
            self._refresh_views(snap, force=True)
        if self._store is not None:
            self._store.refresh_held()

    def _views_of(self, snap: TaskSnapshot, *, force: bool) -> None:
        """After a commit (`force`) or a read: render, or hold back inside `views_deferred`."""
        pending = self._pending_views
        name = snap.task.name
        if pending is None:
            self._refresh_views(snap, force=force)
        elif force or name in pending:  # the newest snapshot of a held-back task is rendered
            held = pending.get(name)
            if held is None or (snap.task.seq, len(snap.events)) >= (
                held.task.seq,
                len(held.events),
            ):
                pending[name] = snap
        else:
            self._refresh_views(snap)

    def _refresh_views(self, snap: TaskSnapshot, *, force: bool = False) -> None:
        try:
            if force:
                views.render(self.ws, snap)
            else:
                views.ensure_current(self.ws, snap)
        except (OSError, StoreCorrupt):
            # A view that cannot be written is re-rendered by the next command; the store
            # already holds the truth, so this never fails the step that committed (nor
            # does a store that cannot give the events a step's snapshot reads on demand).
            pass


def check_history(ws: Workspace, task: str, rendered: int | None,
                  snap: TaskSnapshot | None) -> None:  # fmt: skip
    """Raise StoreLost when the views (read before `snap`) show a newer store than `snap`."""
    seq = snap.task.seq if snap is not None else None
    if rendered is None or (seq is not None and rendered <= seq):
        return
    where = ws.task_dir(task) / "task.json"
    found = f"the store has it at seq {seq}" if seq is not None else "the store has no record"
    raise StoreLost(
        f"the store is behind its views for '{task}': {where} was rendered at seq "
        f"{rendered}, {found}; committed steps were lost (state.db-wal deleted, or an "
        "older copy of state.db restored)",
        hint="run 'taskgate recover --rebuild' (restores the lost steps from the views, "
        "proven against git; the damaged store is kept aside), or restore .taskgate/state.db "
        "together with its state.db-wal from a backup; nothing was changed. To accept the "
        f"older store, move the task's views aside (mv {where} {where}.lost, and "
        ".taskgate/hook-snapshot*) and run the command again",
    )


def current_state(row: TaskRow | TaskHead) -> State:
    """The row's state, validated (R-TRN-01); corrupted rows raise exit 5."""
    try:
        return State(row.state)
    except ValueError:
        raise Corrupted(
            f"task '{row.name}' has an invalid state {row.state!r} in the store (R-TRN-01)",
            hint=f"run 'taskgate recover {row.name}'",
        ) from None


def pid_start_time(pid: int) -> str | None:
    """The start time of a process (Linux /proc), to tell a live owner from a reused pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def owner_alive(row: TaskRow, host: str) -> bool | None:
    """Is the long-lived owner alive? None when unknown (another host, or a session owner)."""
    if row.owner_pid is None or row.host != host:
        return None
    try:
        os.kill(row.owner_pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    started = pid_start_time(row.owner_pid)
    return started is None or row.owner_started in (None, started)
