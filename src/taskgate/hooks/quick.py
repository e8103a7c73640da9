"""The engine-path hook events answered without the engine, in their usual case (issue 18).

PostToolUse after an Edit, SessionStart, UserPromptSubmit: through the engine each costs
about 50 ms of imports (dataclasses, the views, git, argparse's world) before its first
query, on every edit and every prompt. Here they use the C modules alone (`_sqlite3`, `_json`
through hooks/jsonio.py, the chain through store/canon.py) and store/hook_tx.py's write
transaction, and hand everything else to the engine: each function returns None when the
engine's path must answer.

PostToolUse (`record`): what hooks/record.record_tool_use does (R-AUD-03: one `tool_usage`
event per written file, the task row's seq moved so the views are known stale) and what
dispatch's snapshot check does, in one write transaction. The views are left stale on
purpose: their `_seq` says so, and every reader re-renders a stale view before it uses one
(Engine.snapshot; `taskgate audit` tells a lazily deferred render from an edited view,
engine/audit_views.py). Taken only where the engine's path would do nothing more:

- the tool's writes are known (Edit, Write, MultiEdit, NotebookEdit; a Bash line the
  analyser read completely that runs no code) and none lands in the store or a view, so the
  engine's check for views edited behind taskgate's back has nothing new to find;
- the effect check found nothing (dispatch calls this only then), so the engine step's
  comparison before the step would find nothing either; the baseline is taken again after
  the write exactly as the step's `after_step` does;
- the store is this machine's SQLite, its schema current, its snapshot equal to it (a
  difference is reported and recorded by the engine's path, R-LCK-09), the views not ahead
  of it (StoreLost is the engine's to raise).

SessionStart (`session_start`): a new session holds no task (the usual case: `startup`);
then the answer is the snapshot check and one line. A session resuming the task it holds gets
the engine's resume text (protocol/recovery.py) from the rows hooks/resume.py reads.

Stop, SubagentStop, SessionEnd (`session_end`): the session's task from the snapshot (Stop,
after every turn), or one event appended (SubagentStop, SessionEnd) as the engine's step would,
unless the session has a guarded effect-check baseline (the engine's step compares it first).

UserPromptSubmit (`holds_no_task`): every prompt of a session holding a task is the
person's word on it and goes to the engine (recorded, judged, anchored); a session holding
no task has nothing to record, which the hook snapshot answers without SQLite.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from taskgate.hooks.policy import Layout, TaskView
    from taskgate.hooks.shell import Analysis

WRITE_TOOLS = ("Write", "Edit", "MultiEdit", "NotebookEdit")
MAX_PATHS = 20  # hooks/record.py records at most this many paths per call


def written(data: dict[str, Any], analysis: Analysis | None) -> list[str] | None:
    """The paths the call wrote, as hooks/record.py computes them; None when unknown."""
    tool = str(data.get("tool_name", ""))
    tool_input = data.get("tool_input")
    if not isinstance(tool_input, dict):
        return None
    if tool in WRITE_TOOLS:
        raw = tool_input.get("notebook_path" if tool == "NotebookEdit" else "file_path")
        return [os.path.normpath(os.path.join(str(data["cwd"]), str(raw)))] if raw else []
    if analysis is None or not analysis.complete or analysis.runs_code or analysis.unbounded:
        return None
    if analysis.dir_writes or analysis.tree_writes or analysis.link_targets or analysis.budget:
        return None
    return sorted(analysis.writes)


def workspace(cwd: str) -> Layout | None:
    """The layout of the SQLite workspace containing `cwd`; None for PostgreSQL (the engine's
    path). Raises LookupError when `cwd` is in no initialised workspace (nothing to record,
    as the engine's path finds)."""
    from taskgate.hooks.context import STATE_DIR, Layout, _tasks_root, discover

    found = discover(cwd)
    if found is None:
        raise LookupError(cwd)
    common_dir, repo = found
    if os.environ.get("TASKGATE_DATABASE_URL", "").strip():
        return None
    try:
        with open(os.path.join(repo, "taskgate.toml"), encoding="utf-8") as handle:
            text: str | None = handle.read()
    except (OSError, UnicodeDecodeError):
        text = None  # _tasks_root reads it again: its own errors
    if text is not None and "[store]" in text:
        return None  # maybe a team's PostgreSQL (store/select.py decides)
    state_dir = os.path.join(repo, STATE_DIR)
    if not os.path.isfile(os.path.join(state_dir, "state.db")):
        raise LookupError(cwd)  # not initialised: Workspace.initialized is False
    return Layout(repo, common_dir, state_dir, _tasks_root(repo, text))


def record(data: dict[str, Any], analysis: Analysis | None) -> str | None:
    """Record the call's writes for the session's task; "" when done (nothing to say), None
    when the engine's path must do it."""
    paths = written(data, analysis)
    if paths is None:
        _engine_path("the call's writes are not known")
        return None
    try:
        layout = workspace(data["cwd"])
    except LookupError:
        return ""
    if layout is None or _touches_store(paths, layout):
        _engine_path("PostgreSQL, or a write into the store or a view")
        return None
    from taskgate.store import hook_tx

    session = str(data["session_id"])
    errors = _errors()
    try:
        with hook_tx.HookTx(layout.state_dir) as tx:
            tx.check_snapshot()
            owned = tx.held_by(session)
            if len(owned) != 1 or not paths:
                return ""  # the engine's path records nothing either
            name, state, seq = owned[0]
            agents = tx.agents(name)
            rendered = hook_tx.view_seq(os.path.join(layout.tasks_root, name))
            if rendered is not None and rendered > seq:  # lost steps: StoreLost is the engine's
                _engine_path(f"task.json was rendered at seq {rendered}, the store is at {seq}")
                return None
            agent = str(data.get("agent_type") or "main")
            worktree = os.path.join(layout.tasks_root, name, "code")
            recovery = (
                state == "VALIDATION"
                and agent == "main"
                and any(p.startswith(worktree + os.sep) for p in paths)
            )
            at = hook_tx.now()
            tool = str(data.get("tool_name", ""))
            for path in paths[:MAX_PATHS]:
                payload = {"tool": tool, "file_path": path, "agent": agent,
                           "note": "recovery-fix" if recovery else ""}  # fmt: skip  # R-VAL-10
                tx.append_event(name, "tool_usage", {"session": session, **payload}, at)
            tx.touch(name, seq, at)
            tx.commit()
    except errors as exc:
        _engine_path(exc)
        return None
    _rebaseline(layout, session, name, (state, agents))
    return ""


def _errors() -> tuple[type[Exception], ...]:
    """What a fast path's store work may raise, for which the engine's path answers."""
    from taskgate.store import hook_tx

    try:
        return (hook_tx.Unusable, hook_tx.sqlite_module().Error)
    except ImportError:  # pragma: no cover - other interpreters
        return (hook_tx.Unusable,)


def _engine_path(why: object) -> None:
    """The engine's path answers: with TASKGATE_DEBUG set, say why on stderr."""
    if os.environ.get("TASKGATE_DEBUG"):
        import sys

        print(f"taskgate hook: the engine's path answers: {why}", file=sys.stderr)


NO_TASK = "No active tasks for current session (taskgate todo lists the tasks)"


def session_start(data: dict[str, Any]) -> str | None:
    """SessionStart's text ("" outside a workspace): NO_TASK for a session holding no task,
    the resume text for one resuming the task it holds (hooks/resume.py); None when the
    engine's path must answer (several held tasks, a snapshot that differs from the store,
    anything hooks/resume.py cannot vouch for)."""
    try:
        layout = workspace(data["cwd"])
    except LookupError:
        return ""
    if layout is None:
        _engine_path("PostgreSQL")
        return None
    from taskgate.hooks import resume
    from taskgate.store import hook_tx

    errors = _errors()
    try:
        # The engine's check waits 1 s for the lock, then goes on without it ("busy").
        with hook_tx.HookTx(layout.state_dir, timeout=1.0) as tx:
            tx.check_snapshot()
            resume.open_as_the_engine(tx)
            held = tx.held_by(str(data["session_id"]))
            if not held:
                return NO_TASK
            if len(held) > 1:
                raise hook_tx.Unusable(f"the session holds {len(held)} tasks: reported")
            return resume.answer(tx, layout, *held[0])
    except errors as exc:
        _engine_path(exc)
        return None


def holds_no_task(data: dict[str, Any], found: list[Layout | None] | None = None) -> bool:
    """True when the session provably holds no task (or `cwd` is in no workspace): the hook
    snapshot has a line per held lock, by session (store/snapshot.py): no SQLite is needed;
    without a usable snapshot, or on PostgreSQL, False (the engine's path decides). The
    workspace found is appended to `found` (hooks/prompt.record takes it: one discovery)."""
    try:
        layout = workspace(data["cwd"])
    except LookupError:
        return True
    if found is not None:
        found.append(layout)
    if layout is None:
        return False
    from taskgate.hooks.jsonio import loads
    from taskgate.store import snapshot

    index = snapshot.read(layout.state_dir, loads)
    session = str(data["session_id"])
    try:
        return index is not None and not index.held_by(session)
    except (ValueError, UnicodeDecodeError):
        return False  # a damaged line: the engine's path reads the store


def session_end(data: dict[str, Any], event: str) -> tuple[str, ...] | None:
    """Stop, SubagentStop, SessionEnd: () when the session holds no task (or `cwd` is in no
    workspace), (name, state) of the one it holds after recording what the engine's path
    records (hooks/record.record_event: `subagent_stop`, `session_end`, each its own event);
    None when the engine's path must answer. Stop records nothing: the snapshot's line of the
    session answers it without SQLite."""
    try:
        layout = workspace(data["cwd"])
    except LookupError:
        return ()
    if layout is None:
        return None
    session = str(data["session_id"])
    if event == "Stop":
        from taskgate.hooks.jsonio import loads
        from taskgate.store import snapshot

        index = snapshot.read(layout.state_dir, loads)
        if index is None:
            return None
        try:
            mine = index.held_by(session)
        except (ValueError, UnicodeDecodeError):
            return None
        return (str(mine[0]["name"]), str(mine[0]["state"])) if len(mine) == 1 else ()
    from taskgate.hooks import effects

    base = effects.load(effects.baseline_path(layout.state_dir, session))
    if base is not None and base.get("guarded"):
        _engine_path("a guarded baseline: the engine's step compares it first")
        return None
    if event == "SubagentStop":
        kind = "subagent_stop"
        payload = {"agent": data.get("agent_type") or "", "agent_id": data.get("agent_id")}
    else:
        kind, payload = "session_end", {"reason": data.get("reason", "")}
    from taskgate.store import hook_tx

    errors = _errors()
    try:
        with hook_tx.HookTx(layout.state_dir) as tx:
            owned = tx.held_by(session)
            if len(owned) != 1:
                return ()
            name, state, seq = owned[0]
            rendered = hook_tx.view_seq(os.path.join(layout.tasks_root, name))
            if rendered is not None and rendered > seq:
                _engine_path(f"task.json rendered at seq {rendered}, the store at {seq}")
                return None
            tx.append_event(name, kind, {"session": session, **payload}, hook_tx.now())
            tx.commit()
    except errors as exc:
        _engine_path(exc)
        return None
    _rebaseline(layout, session, name)
    return (name, state)


def _touches_store(paths: list[str], layout: Layout) -> bool:
    """A write into the store's directory or a task's views (the engine checks those)."""
    from taskgate.hooks.policy import place

    return any(
        place(candidate, layout)[0] == "store"
        for path in paths
        for candidate in (path, os.path.realpath(path))
    )


def _rebaseline(
    layout: Layout, session: str, task: str, row: tuple[str, tuple[str, ...]] | None = None
) -> None:
    """hooks/quarantine.after_step's work after a step: the session's baseline, when it has
    one for this task, is taken again (the step's own writes are taskgate's). `row`: the
    task's (state, agents) as the step's transaction read them."""
    from taskgate.hooks import effects
    from taskgate.hooks.context import StoreUnreadable, load_actor

    path = effects.baseline_path(layout.state_dir, session)
    base = effects.load(path)
    if base is None or base.get("task") != task:
        return
    marker = _marker(task, row)
    if marker is not None:  # the main agent may write: take() reads no other task
        from taskgate.hooks.policy import Actor

        actor = Actor(marker)
    else:
        try:
            actor = load_actor(layout, session, "")
        except StoreUnreadable:
            return  # the hook denies everything now; the next good step baselines again
    try:
        if actor.task is None or actor.task.name != task:
            effects.drop(path)
        else:
            fresh = effects.take(layout, actor, session)
            if not _same_marker(base, fresh):
                effects.save(path, fresh)
    except OSError:
        pass  # the next comparison takes a baseline again (quarantine.after_step)


def _same_marker(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Both are the marker of the same task, state and session: only the time they were
    taken differs, which nothing reads of a marker (effects.compare finds nothing in one;
    quarantine reads `taken` of a guarded baseline only), so the file is kept."""
    if old.get("guarded") or new.get("guarded"):
        return False
    return {k: v for k, v in old.items() if k != "taken"} == {
        k: v for k, v in new.items() if k != "taken"
    }


def _marker(task: str, row: tuple[str, tuple[str, ...]] | None) -> TaskView | None:
    """The session's task as load_actor would see it, when the main agent may write it
    whatever the plan's approval and the last build failure say (the two things the
    snapshot holds beyond the row; issue 18: the baseline then needs no snapshot read,
    which at 10,000 tasks is a 0.5 MB file); None otherwise, or for an unknown state."""
    from taskgate.hooks.policy import STATES, TaskView, forbids_main_writes

    if row is None or row[0] not in STATES:
        return None
    views = [
        TaskView(task, row[0], row[1], plan_approved=approved, main_may_fix=fix)
        for approved in (False, True)
        for fix in (False, True)
    ]
    return None if any(forbids_main_writes(v) for v in views) else views[0]
