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
from typing import Any

from taskgate.engine.core import Engine
from taskgate.hooks import effects
from taskgate.hooks.context import StoreUnreadable, load_actor
from taskgate.hooks.policy import FINISHING, Layout, forbids_main_writes
from taskgate.store.base import Tx
from taskgate.store.records import TaskSnapshot

QUARANTINE_PREFIX = "refs/taskgate/quarantine"
EVENT = "effect_violation"
RESOLVED = "effect_violation_resolved"


class QuarantineFailed(Exception):
    """A git step of the quarantine failed (the violation is still recorded)."""


def _git(
    args: list[str], cwd: str, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> bytes:
    code, out = effects.run_git(args, cwd, stdin, env)
    if code != 0:
        raise QuarantineFailed(f"git {' '.join(args)} failed with exit code {code} in {cwd}")
    return out


def layout_of(engine: Engine) -> Layout:
    """The hook layout of the engine's workspace."""
    ws = engine.ws
    return Layout(str(ws.repo), str(ws.common_dir), str(ws.state_dir), str(ws.tasks_root))


# -- the engine's side: every protocol step ---------------------------------------------------


def before_step(engine: Engine, task: str) -> None:
    """First step of a command on `task`: compare the baseline, quarantine what changed.
    Only sessions the hooks watch have a baseline (PreToolUse makes it). Without git or with
    an unreadable worktree there is nothing to compare: the command goes on."""
    with contextlib.suppress(OSError):
        _before_step(engine, task)


def after_step(engine: Engine, task: str) -> None:
    """After a committed step: taskgate's own work is the new baseline of a watched session."""
    with contextlib.suppress(OSError):  # the next comparison takes a baseline again
        _after_step(engine, task)


def _before_step(engine: Engine, task: str) -> None:
    seen: set[str] = vars(engine).setdefault("_effects_seen", set())
    if task in seen:
        return
    seen.add(task)
    with engine.store.read() as tx:
        row = tx.task(task)
    if row is None or not row.session_id:
        return
    layout = layout_of(engine)
    path = effects.baseline_path(layout.state_dir, row.session_id)
    base = effects.load(path)
    if base is None or base.get("task") != task:
        return
    changes = effects.compare(layout, base)
    if changes:
        enforce(engine, layout, base, path, changes, {"source": "taskgate command"})


def _after_step(engine: Engine, task: str) -> None:
    vars(engine).setdefault("_effects_seen", set()).add(task)
    with engine.store.read() as tx:
        row = tx.task(task)
    if row is None or not row.session_id:
        return
    layout = layout_of(engine)
    path = effects.baseline_path(layout.state_dir, row.session_id)
    base = effects.load(path)
    if base is None or base.get("task") != task:
        return
    _rebaseline(layout, path, row.session_id, task)


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
        return enforce(engine, layout, base, path, changes, source)
    finally:
        engine.close()


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
        current = effects.load(path) or base
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
    now_refs = effects.read_refs(layout.common_dir)
    legit = {str(r.extra.get(k)) for r in rows.values() for k in ("merged_sha", "squash_sha")}
    moved_refs: dict[str, tuple[str | None, str | None]] = {}
    for name, old in base["refs"].items():
        new = now_refs.get(name)
        if new == old or old is None:
            continue  # unchanged, or created since (another session's new task)
        owner = _owner(name, rows, effects.main_branch(layout.common_dir))
        if owner == "main" and new not in legit:
            moved_refs[name] = (old, new)
        elif owner and owner != "main" and new is None and rows[owner].state not in FINISHING:
            moved_refs[name] = (old, new)  # a task's branch deleted behind its back
    worktree = effects.worktree_of(layout, task)
    tree = effects.worktree_print(worktree)
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
    try:
        if worktree_changed and tree is not None:
            _quarantine_worktree(worktree, base, tree, ref, task, changes)
            _restore_worktree(worktree, base, tree)
            switched = tree["branch"]
            if switched != base["tree"]["branch"] and switched not in ("", "(detached)"):
                known = _owner(switched, rows, effects.main_branch(layout.common_dir))
                if not known:  # a branch made by the change: kept beside the quarantine
                    sha = now_refs.get(switched)
                    if sha:
                        _git(["update-ref", f"{ref}/refs/heads/{switched}", sha], layout.repo)
                        _git(["update-ref", "-d", f"refs/heads/{switched}", sha], layout.repo)
        for name, (old, new) in moved_refs.items():
            _restore_ref(layout, name, old, new, ref)
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
    shown = f"{ref}/worktree" if worktree_changed else ref
    return (
        f"[{rule}] taskgate: a change the main agent may not make in {actor.task.state} was "
        f"found after this call (task '{task}'): {listed}. It was moved aside under {ref} "
        f"(nothing is lost: git log {shown}; git for-each-ref {ref}) and the worktree and "
        f"refs were put back as they were.{failed} Delegate changes to a stakeholder agent "
        f"(or use 'taskgate merge {task}'). 'taskgate audit {task}' fails until the person "
        f"resolves it with 'taskgate violations {task} --resolve {qid}'."
    )


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


# -- git: move aside, put back ----------------------------------------------------------------


def _quarantine_worktree(
    wt: str, base: dict[str, Any], tree: dict[str, Any], ref: str, task: str, changes: list[str]
) -> None:
    """A commit of the worktree as found (parent: its HEAD; second parent: the baseline's)."""
    gitdir = _git(["rev-parse", "--absolute-git-dir"], wt).decode().strip()
    index = os.path.join(gitdir, "taskgate-quarantine-index")
    env = {"GIT_INDEX_FILE": index}
    try:
        if tree["head"] and tree["head"] != "(initial)":
            _git(["read-tree", tree["head"]], wt, env=env)
        _git(["add", "-A", "--", "."], wt, env=env)
        tree_id = _git(["write-tree"], wt, env=env).decode().strip()
    finally:
        with contextlib.suppress(OSError):
            os.unlink(index)
    parents: list[str] = []
    for head in (tree["head"], base["tree"]["head"]):
        if head and head != "(initial)" and head not in parents:
            parents += [head]
    message = (f"taskgate quarantine: task {task}\n\n" + "\n".join(changes[:200]) + "\n").encode()
    args = ["commit-tree", tree_id, *[a for p in parents for a in ("-p", p)], "-F", "-"]
    sha = _git(args, wt, stdin=message).decode().strip()
    _git(["update-ref", "-m", "taskgate quarantine", f"{ref}/worktree", sha, ""], wt)


def _restore_worktree(wt: str, base: dict[str, Any], tree: dict[str, Any]) -> None:
    """Put HEAD, the index and the files back as the baseline had them."""
    old = base["tree"]
    head, branch = old["head"], old["branch"]
    if branch and branch != "(detached)":
        if tree["branch"] != branch:
            _git(["symbolic-ref", "HEAD", f"refs/heads/{branch}"], wt)
        if tree["head"] != head or tree["branch"] != branch:
            _git(["update-ref", "-m", "taskgate restore", f"refs/heads/{branch}", head], wt)
    elif head and head != "(initial)":
        _git(["update-ref", "--no-deref", "HEAD", head], wt)
    if head and head != "(initial)":
        _git(["read-tree", "--reset", "-u", head], wt)
    kept = {effects._path(e) for e in old["entries"] if e[0] == "?"}
    now = effects.worktree_print(wt) or {"entries": []}
    for entry in now["entries"]:
        path = effects._path(entry)
        if entry[0] == "?" and path not in kept:
            _remove(wt, path)
    info: list[str] = []
    for entry in old["entries"]:
        if entry[0] not in "12":
            continue
        fields = entry.split(" ")
        xy, mode, sha = fields[1], fields[4], fields[7]
        path = effects._path(entry)
        if xy[0] == "D":
            info.append(f"0 {'0' * 40}\t{path}")
        elif xy[0] != ".":
            info.append(f"{mode} {sha}\t{path}")
    if info:
        _git(["update-index", "--index-info"], wt, stdin=("\n".join(info) + "\n").encode())
    for path, blob in old["hashes"].items():
        full = os.path.join(wt, path)
        if blob == "-":
            _remove(wt, path)
        elif len(blob) == 40:
            content = _git(["cat-file", "blob", blob], wt)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            if os.path.islink(full) or os.path.exists(full):
                os.unlink(full)
            with open(full, "wb") as handle:
                handle.write(content)


def _remove(wt: str, path: str) -> None:
    full = os.path.join(wt, path)
    try:
        os.unlink(full)
    except OSError:
        return
    parent = os.path.dirname(full)
    while parent.startswith(wt + os.sep):
        try:
            os.rmdir(parent)  # only empty directories the change created
        except OSError:
            break
        parent = os.path.dirname(parent)


def _restore_ref(layout: Layout, name: str, old: str | None, new: str | None, ref: str) -> None:
    """Keep the moved value beside the quarantine, put the branch back."""
    repo = layout.repo
    if new is not None:
        _git(["update-ref", f"{ref}/refs/heads/{name}", new], repo)
    if old is None:
        return
    _git(["update-ref", "-m", "taskgate restore", f"refs/heads/{name}", old], repo)
    if name == effects.main_branch(layout.common_dir) and new is not None:
        # the main worktree has main checked out: bring its files back too (keeps local edits)
        effects.run_git(["read-tree", "-m", "-u", new, old], repo)


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
