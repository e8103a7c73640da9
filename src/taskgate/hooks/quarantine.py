"""What happens when the net (hooks/effects.py) finds a forbidden change (issue 15).

The change is moved aside, never deleted: the whole worktree as it was found (tracked,
staged and untracked files, ignored ones excepted) becomes a commit under
`refs/taskgate/quarantine/<task>/<id>`, moved refs keep their new value beside it; then the
worktree, its HEAD and the refs are put back exactly as the baseline had them (dirty files of
the baseline included: their content is in git's object store). A `effect_violation` event
records it in the task's hash-chained trail; `taskgate audit` fails the task until a person
resolves it (`taskgate violations T --resolve ID`, denied to agents). The agent is told what
happened and what to do instead.
"""

from __future__ import annotations

import contextlib
import os

from taskgate.engine.core import Engine
from taskgate.hooks import effects, putback
from taskgate.hooks.context import StoreUnreadable, load_actor
from taskgate.hooks.policy import FINISHING, Layout, forbids_main_writes
from taskgate.hooks.putback import QuarantineFailed as QuarantineFailed
from taskgate.store.base import Tx
from taskgate.store.records import TaskSnapshot

TYPE_CHECKING = False  # typing stays unimported on the command path (issue 18)
if TYPE_CHECKING:
    from typing import Any

QUARANTINE_PREFIX = "refs/taskgate/quarantine"
EVENT = "effect_violation"
RESOLVED = "effect_violation_resolved"


def layout_of(engine: Engine) -> Layout:
    """The hook layout of the engine's workspace."""
    ws = engine.ws
    return Layout(str(ws.repo), str(ws.common_dir), str(ws.state_dir), str(ws.tasks_root))


# -- the engine's side: every protocol step ---------------------------------------------------


def before_step(engine: Engine, task: str) -> None:
    """First step of a command on `task`: compare the baseline, quarantine what changed.
    Only sessions the hooks watch have a baseline (PreToolUse makes it). Without git or with
    an unreadable worktree there is nothing to compare: the command goes on. Without a git
    the agent cannot have planted (taskgate.spawn.git_program) it goes on too, and says so:
    the baseline stays, so the next check that has one finds what changed."""
    from taskgate.spawn import UntrustedGit

    try:
        _before_step(engine, task)
    except UntrustedGit as exc:
        import sys

        print(f"taskgate: warning: the effect check did not run: {exc.message}\n"
              f"hint: {exc.hint}", file=sys.stderr)  # fmt: skip
    except OSError:
        pass


def after_step(engine: Engine, task: str, session: str | None = None) -> None:
    """After a committed step: taskgate's own work is the new baseline of a watched session.
    `session`: the task's session as the step committed it ('' for none), when the caller has
    it (Engine.step: no read transaction of its own, issue 18)."""
    with contextlib.suppress(OSError):  # the next comparison takes a baseline again
        _after_step(engine, task, session)


def _watched(
    engine: Engine, task: str, session: str | None = None
) -> tuple[Layout, str, str, dict[str, Any]] | None:
    """(layout, baseline path, session, baseline) when the task's session is watched."""
    if session is None:
        with engine.store.read() as tx:
            row = tx.task(task)
        session = row.session_id if row is not None else None
    if not session:
        return None
    layout = layout_of(engine)
    path = effects.baseline_path(layout.state_dir, session)
    base = effects.load(path)
    if base is None or base.get("task") != task:
        return None
    return layout, path, session, base


def _before_step(engine: Engine, task: str) -> None:
    seen: set[str] = vars(engine).setdefault("_effects_seen", set())
    if task in seen:
        return
    seen.add(task)
    found = _watched(engine, task)
    if found is None:
        return
    layout, path, _, base = found
    changes = effects.compare(layout, base)
    if changes:
        enforce(engine, layout, base, path, changes, {"source": "taskgate command"})


def _after_step(engine: Engine, task: str, session: str | None = None) -> None:
    vars(engine).setdefault("_effects_seen", set()).add(task)
    found = _watched(engine, task, session)
    if found is not None:
        layout, path, session, _ = found
        _rebaseline(layout, path, session, task)


def _rebaseline(layout: Layout, path: str, session: str, task: str) -> None:
    try:
        actor = load_actor(layout, session, "")
    except StoreUnreadable:
        return  # the hook denies everything now; the next good step baselines again
    if actor.task is None or actor.task.name != task:
        effects.drop(path)
    else:
        effects.save(path, effects.take(layout, actor, session))


# -- the hook's side: PostToolUse -------------------------------------------------------------


def handle(
    layout: Layout, base: dict[str, Any], path: str, changes: list[str], data: dict[str, Any]
) -> str:
    """PostToolUse found changes: quarantine them through the engine; text for the agent."""
    from pathlib import Path

    from taskgate.engine.workspace import find_workspace

    ws = find_workspace(Path(layout.repo))
    engine = Engine(ws, session_id=data["session_id"], cwd=Path(data["cwd"]))
    tool_input = data.get("tool_input") if isinstance(data.get("tool_input"), dict) else {}
    assert isinstance(tool_input, dict)
    source = {
        "source": f"PostToolUse {data.get('tool_name', '')}",
        "agent": str(data.get("agent_type") or "main"),
        "command": str(tool_input.get("command") or tool_input.get("file_path") or "")[:500],
    }
    try:
        own = own_work(engine, layout, base)
        if own is base or effects.compare(layout, own):  # not all of it taskgate's own
            _await_own_step(engine, str(base["task"]), path)
        return enforce(engine, layout, base, path, changes, source)
    finally:
        engine.close()


def own_work(engine: Engine, layout: Layout, base: dict[str, Any]) -> dict[str, Any]:
    """`base` with taskgate's own work taken in when the task row's journal explains it
    (engine/journal_work.py: the merge commits, archival commit or squash a killed or running
    `taskgate merge`/`complete` made, its archival edit not yet committed, or a merge killed
    after its last step); `base` itself otherwise. In memory only."""
    tree, task = base.get("tree"), str(base.get("task") or "")
    if not base.get("guarded") or not isinstance(tree, dict):
        return base
    with engine.store.read() as tx:
        row = tx.task(task)
        pending = (row.pending if row is not None else None) or {}
        # a merge killed after its last step committed, before it took the new baseline
        closed = [] if pending else tx.events_of_kinds(task, ["agent_merge"], 2**62)[-1:]
    recorded = str(closed[0].payload.get("head") or "") if closed else ""
    if pending.get("op") not in ("merge", "complete") and not recorded:
        return base
    from taskgate.engine import journal_work

    worktree = effects.worktree_of(layout, task)
    own = journal_work.own_baseline(engine, worktree, base, pending, recorded)
    if own is base:
        return base
    # taskgate's own work is in the worktree's index, not in the comparison's copy of it
    # (hooks/gitsafe.py): this baseline is compared through the worktree's index
    copied = ("index", "index_head", "staged")
    return {**own, "tree": {k: v for k, v in own["tree"].items() if k not in copied}}


JOURNAL_WAIT = 20.0  # seconds: a journaled taskgate command's git work, to its last step
JOURNAL_GRACE = 2.0  # seconds: from its last step's commit to the baseline it takes after


def _await_own_step(engine: Engine, task: str, path: str) -> None:
    """While the task row journals a taskgate command's git work in flight (`pending`:
    `taskgate merge` between its git merge and its last step), a comparison sees taskgate's
    own work: wait, bounded, for that command to take its work into the baseline, then
    enforce compares again. Plain reads are compared in guarded sessions, so a sub-agent's
    `ls` lands there easily. Without a journal nothing waits; nor when the journaled merge or
    complete no longer runs (its lock is free: killed); another journal a crashed command
    left is judged after the wait, as before."""
    import time

    from taskgate.engine import journal_work

    def mark() -> tuple[int, int]:
        try:
            st = os.stat(path)
        except OSError:
            return (0, 0)
        return (st.st_ino, st.st_mtime_ns)

    start, taken = time.monotonic(), mark()
    journaled, cleared, locked = False, 0.0, False
    while True:
        now = time.monotonic()
        if now - start > JOURNAL_WAIT or mark() != taken:
            return  # too long, or a step took the baseline again
        with engine.store.read() as tx:
            row = tx.task(task)
        if locked and not journal_work.command_running(engine.ws.state_dir, task):
            return  # merge/complete ended, or was killed (journal_work.running): judge now
        if row is not None and row.pending:
            journaled, cleared = True, 0.0
            locked = row.pending.get("op") in journal_work.OPS
            if locked and not journal_work.command_running(engine.ws.state_dir, task):
                return
        elif not journaled:
            return  # no command in flight: judge now
        elif not cleared:
            cleared = now
        elif now - cleared > JOURNAL_GRACE:
            return
        time.sleep(0.05)


def enforce(
    engine: Engine,
    layout: Layout,
    base: dict[str, Any],
    path: str,
    changes: list[str],
    source: dict[str, str],
) -> str:
    """Judge the changes against the store, quarantine the forbidden ones, record, report.
    One at a time per repository (parallel tool calls end together): the second one finds the
    worktree already put back and only takes the baseline again."""
    import fcntl

    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(os.path.join(os.path.dirname(path), ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        current = own_work(engine, layout, effects.load(path) or base)
        changes = effects.compare(layout, current)  # again: another call may have restored
        return _enforce(engine, layout, current, path, changes, source) if changes else ""


def _enforce(
    engine: Engine,
    layout: Layout,
    base: dict[str, Any],
    path: str,
    changes: list[str],
    source: dict[str, str],
) -> str:
    task = str(base["task"])
    vars(engine).setdefault("_effects_seen", set()).add(task)
    with engine.store.read() as tx:
        rows = {r.name: r for r in tx.tasks()}
    session = str(base.get("session") or "")
    try:
        actor = load_actor(layout, session, "")
    except StoreUnreadable:
        return ""  # the hook denies guarded calls until the store is repaired
    if actor.task is None or actor.task.name != task or not forbids_main_writes(actor.task):
        _rebaseline(layout, path, session, task)  # the lease or state moved on: not forbidden
        return ""
    moved_refs = _moved_refs(layout, base, rows)
    worktree = effects.worktree_of(layout, task)
    from taskgate.hooks.gitsafe import tree_now

    tree = tree_now(layout, base)
    worktree_changed = (
        tree is not None and effects.differences({**base, "refs": {}}, tree, {}) != []
    )
    if not worktree_changed and not moved_refs:
        _rebaseline(layout, path, session, task)
        return ""
    stamp = engine.now().replace(":", "").replace("-", "")
    qid = f"{stamp}-{os.getpid()}"
    ref = f"{QUARANTINE_PREFIX}/{task}/{qid}"
    problems: list[str] = []
    left: list[str] = []
    try:
        if worktree_changed and tree is not None:
            putback.move_aside(worktree, base, tree, ref, task, changes)
            left = putback.restore_worktree(worktree, base, tree)
            switched = tree["branch"]
            made = switched not in ("", "(detached)", base["tree"]["branch"])
            if made and not _owner(switched, rows, effects.main_branch(layout.common_dir)):
                # a branch the change made: kept beside the quarantine, then deleted
                new = effects.read_refs(layout.common_dir).get(switched)
                if new is not None:
                    putback.restore_ref(layout, switched, None, new, ref)
        for name, (old, new) in moved_refs.items():
            putback.restore_ref(layout, name, old, new, ref)
    except (QuarantineFailed, OSError) as exc:
        problems.append(str(exc))
    rule = _rule(actor.task.state, moved_refs, layout, worktree_changed)
    payload = {
        "id": qid,
        "rule": rule,
        "changes": changes[:50],
        "quarantine": ref,
        "refs": {n: [o, v] for n, (o, v) in moved_refs.items()},
        "state": actor.task.state,
        "problems": problems,
        "left": left,
        **source,
    }

    def body(tx: Tx, snap: TaskSnapshot) -> None:
        engine.event(tx, task, EVENT, payload)
        engine.touch(tx, snap)

    engine.step(task, body, owner=False)  # its after_step takes the new baseline
    _rebaseline(layout, path, session, task)
    listed = "; ".join(changes[:6]) + (f"; and {len(changes) - 6} more" if len(changes) > 6 else "")
    failed = (
        f" The restore did not complete ({problems[0]}): run 'taskgate recover {task}'."
        if problems
        else ""
    )
    if left:
        failed += (
            f" Left as found (too large for the baseline to keep a copy; the quarantine has "
            f"the new content): {', '.join(left[:5])}."
        )
    shown = f"{ref}/worktree" if worktree_changed else ref
    return (
        f"[{rule}] taskgate: a change the main agent may not make in {actor.task.state} was "
        f"found after this call (task '{task}'): {listed}. It was moved aside under {ref} "
        f"(nothing is lost: git log {shown}; git for-each-ref {ref}) and the worktree and "
        f"refs were put back as they were.{failed} Delegate changes to a stakeholder agent "
        f"(or use 'taskgate merge {task}'). 'taskgate audit {task}' fails until the person "
        f"resolves it with 'taskgate violations {task} --resolve {qid}'."
    )


def _moved_refs(
    layout: Layout, base: dict[str, Any], rows: dict[str, Any]
) -> dict[str, tuple[str | None, str | None]]:
    """The watched branches moved or deleted against the rules -> (put back to, found at).
    Main may only move to a commit taskgate delivered (R-CMP-01). Another task's branches
    and every task's agent branches may move by work in their own worktree (an agent's
    commit; made_in_worktree) or by taskgate finishing that task (complete, cleanup,
    abandon); any other move or deletion is not the main agent's to make (R-LCK-09). A branch
    its own worktree moved since the baseline goes back to where that worktree left it."""
    common = layout.common_dir
    now = effects.read_refs(common)
    main = effects.main_branch(common)
    legit = {str(r.extra.get(k)) for r in rows.values() for k in ("merged_sha", "squash_sha")}
    found: dict[str, tuple[str | None, str | None]] = {}
    for name, old in base["refs"].items():
        new = now.get(name)
        if new == old or old is None:
            continue  # unchanged, or created since (another session's new task)
        owner = _owner(name, rows, main)
        if owner == "main":
            if new not in legit:
                found[name] = (old, new)
        elif (
            owner
            and not _finishing(rows[owner])
            and not effects.made_in_worktree(common, name, new)
        ):
            found[name] = (_put_back_to(common, name, old, base), new)
    return found


def _finishing(row: Any) -> bool:
    """taskgate itself moves and deletes the task's branches now (complete, cleanup, abandon,
    or any journaled git step in flight)."""
    return bool(row.state in FINISHING or row.pending or row.extra.get("abandoned"))


def _put_back_to(common: str, name: str, old: str | None, base: dict[str, Any]) -> str | None:
    """The baseline's value, or where the branch's own worktree moved it since."""
    log = effects.checked_out(common).get(name)
    tip = effects.worktree_tip(log) if log else None
    if tip is not None and tip[1] >= int(base.get("taken") or 0) and putback.is_sha(tip[0]):
        return tip[0]
    return old


def _owner(name: str, rows: dict[str, Any], main: str) -> str:
    if name == main:
        return "main"
    if name in rows:
        return name
    for task, row in rows.items():
        if name.startswith(f"{task}-") and name[len(task) + 1 :] in row.required_agents:
            return task
    for task in rows:
        if name.startswith(f"{task}-"):
            return task
    return ""


def _rule(state: str, moved: dict[str, Any], layout: Layout, worktree: bool) -> str:
    from taskgate.hooks.policy import TaskView, _main_write

    if worktree:
        return _main_write("", "task-worktree", TaskView("", state)).rule or "R-AGT-12"
    if effects.main_branch(layout.common_dir) in moved:
        return "R-CMP-01"
    return "R-LCK-09"


# -- resolution -------------------------------------------------------------------------------


def violations(engine: Engine, task: str) -> list[dict[str, Any]]:
    """Every effect violation of the task, oldest first, with `resolved` set."""
    snap = engine.require_snapshot(task)
    found: dict[str, dict[str, Any]] = {}
    for e in snap.events:
        if e.kind == EVENT:
            found[str(e.payload.get("id"))] = {**e.payload, "at": e.at, "resolved": False}
        elif e.kind == RESOLVED:
            for qid in e.payload.get("ids", []):
                if str(qid) in found:
                    found[str(qid)]["resolved"] = True
    return list(found.values())


def resolve(engine: Engine, task: str, ids: list[str], reason: str) -> list[str]:
    """The person resolves violations (`all` for every open one); returns the ids resolved."""
    from taskgate.errors import UsageError

    open_ids = [str(v["id"]) for v in violations(engine, task) if not v["resolved"]]
    chosen = open_ids if ids == ["all"] else ids
    unknown = [i for i in chosen if i not in open_ids]
    if unknown:
        raise UsageError(
            f"no open effect violation {', '.join(unknown)} on task '{task}'",
            hint=f"'taskgate violations {task}' lists them",
        )
    if not chosen:
        return []

    def body(tx: Tx, snap: TaskSnapshot) -> None:
        engine.event(tx, task, RESOLVED, {"ids": chosen, "reason": reason})
        engine.touch(tx, snap)

    engine.step(task, body, owner=False)
    return chosen
