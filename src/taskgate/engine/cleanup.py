"""`taskgate cleanup T`: COMPLETE → CLEANUP, then remove worktrees and branches (RULES §14).

Nothing is deleted unless it is proven delivered: every branch tip must be reachable from main,
or from the approved task history whose squash is on main (the squash rewrote that history, so
merged agent commits are delivered by content, not by ancestry), and every worktree must be
clean. Otherwise cleanup refuses and lists what would be lost, or with `--quarantine` keeps it
under `refs/taskgate/quarantine/<branch>-<timestamp>` first. Branches are deleted by exact
name and only while they still point at the inspected commit (R-CLN-03, C-63). The task
directory with task.md, reports, views and the audit trail stays (R-CLN-06, C-31).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from taskgate import failpoints
from taskgate.engine import worktree_setup
from taskgate.engine.cleanup_build import record, record_body, verify_main_build
from taskgate.engine.core import Engine, current_state
from taskgate.engine.facts import gather
from taskgate.engine.flow import apply_transition, refuse_if
from taskgate.errors import ForeignTask, Refused, TaskgateError
from taskgate.git import ops, preserve
from taskgate.git import repo as gitrepo
from taskgate.git.cmd import git_out
from taskgate.protocol import transitions
from taskgate.protocol.states import State
from taskgate.protocol.violations import Violation
from taskgate.store.base import Tx
from taskgate.store.records import TaskSnapshot

OP = "cleanup"
QUARANTINE_PREFIX = "refs/taskgate/quarantine/"
HISTORY_PREFIX = "refs/taskgate/history/"


@dataclass(frozen=True)
class Item:
    """One branch the task created, with its worktree and what deleting it would lose."""

    branch: str
    worktree: Path
    tip: str | None  # None: the branch is already gone
    lost_commits: tuple[str, ...] = ()  # "sha subject" not delivered to main
    dirty: tuple[str, ...] = ()  # uncommitted or untracked paths, or an unfinished operation
    holds: preserve.Holdings | None = None  # reflogs, detached HEADs, index, ignored, nested

    @property
    def at_risk(self) -> bool:
        """Deleting this item would lose work a person can see (refused without --quarantine)."""
        return bool(self.lost_commits or self.dirty)

    @property
    def keep(self) -> bool:
        """Something must be kept under a quarantine ref before the item goes."""
        return self.at_risk or bool(self.holds and self.holds.silent)

    def to_json(self) -> dict[str, Any]:
        """Stable JSON shape for `--json` and refusals."""
        return {
            "branch": self.branch,
            "worktree": str(self.worktree),
            "tip": self.tip,
            "unmerged_commits": list(self.lost_commits),
            "uncommitted": list(self.dirty),
        }


@dataclass(frozen=True)
class CleanupResult:
    """What cleanup removed, kept and quarantined."""

    task: str
    state: str
    removed_worktrees: list[str] = field(default_factory=list)
    deleted_branches: list[str] = field(default_factory=list)
    quarantined: dict[str, str] = field(default_factory=dict)  # branch -> ref
    main_build: dict[str, Any] = field(default_factory=dict)
    already_clean: bool = False


def _delivered(engine: Engine, snap: TaskSnapshot) -> list[str]:
    """Main, and the archived task history whose squash main contains (delivered by content)."""
    t = snap.task
    repo = engine.ws.repo
    main_ref = f"refs/heads/{t.base_branch}"
    delivered = [main_ref]
    squash = t.extra.get("squash_sha")
    history = t.extra.get("archival_sha") or t.extra.get("approved_sha")
    if (
        history
        and squash
        and ops.is_ancestor(repo, str(squash), main_ref)
        and gitrepo.rev_parse(repo, str(history))
    ):
        delivered.append(str(history))
    return delivered


def _items(engine: Engine, snap: TaskSnapshot) -> list[Item]:
    """R-CLN-03: T and T-A for each required agent, by exact name; agents first."""
    t = snap.task
    ws = engine.ws
    pairs = [(f"{t.name}-{a}", ws.agent_worktree(t.name, a)) for a in t.required_agents]
    pairs.append((t.name, ws.task_worktree(t.name)))
    repo = ws.repo
    tips = gitrepo.branch_tips(repo)
    delivered = _delivered(engine, snap)
    disposable = ws.config.cleanup.disposable
    result = []
    for branch, wt in pairs:
        tip = tips.get(branch)
        # issue 21: the copies, links and setup output taskgate put there are disposable too
        placed = worktree_setup.disposable_paths(ws, wt)
        holds = preserve.holdings(repo, branch, wt, delivered, (*disposable, *placed))
        lost = tuple(
            git_out("log", "--no-walk=sorted", "--format=%h %s", *holds.visible, cwd=repo)
            .splitlines()
        ) if holds.visible else ()  # fmt: skip
        dirty: tuple[str, ...] = ()
        if gitrepo.is_worktree(wt):
            busy = gitrepo.in_progress(wt)
            dirty = tuple(gitrepo.dirty_files(wt)) + ((f"(unfinished {busy})",) if busy else ())
        result.append(Item(branch, wt, tip, lost, dirty, holds))
    return result


def _keep_hint(snap: TaskSnapshot, at_risk: list[Item]) -> str:
    """What to do with work cleanup would lose; commits on T itself came after the merge."""
    task = snap.task.name
    keep = f"taskgate cleanup {task} --quarantine"
    on_t = next((i for i in at_risk if i.branch == task and i.lost_commits), None)
    if on_t is not None:  # issue 16: never 'complete' again, it is done (a circle)
        merged = str(snap.task.extra.get("merged_sha") or "main")[:12]
        return (
            f"{task} has commits made after it was merged into main. Run '{keep}': they are "
            f"kept under {QUARANTINE_PREFIX}{task}-<time> (a new task can start from that "
            f"ref: git branch NEW <ref>) and cleanup finishes. Or move them to a new branch "
            f"first (git branch NEW {task} && git -C {on_t.worktree} reset --hard {merged}), "
            f"then run 'taskgate cleanup {task}'. Nothing was deleted"
        )
    return (
        f"merge or commit the work (taskgate merge / git commit), or rerun with --quarantine "
        f"('{keep}') to keep it under {QUARANTINE_PREFIX}; nothing was deleted"
    )


def _lost_text(items: list[Item]) -> str:
    lines = []
    for item in items:
        for commit in item.lost_commits:
            lines.append(f"  {item.branch}: unmerged commit {commit}")
        for path in item.dirty:
            lines.append(f"  {item.worktree}: uncommitted {path}")
    return "\n".join(lines)


def _quarantine(engine: Engine, task: str, item: Item, stamp: str) -> str | None:
    """Keep everything the item reaches under refs/taskgate/quarantine/<branch>-<stamp> (one
    commit: the worktree's files as its tree, every undelivered root as a parent, a message
    saying what was kept); returns the ref. Idempotent after a crash."""
    repo = engine.ws.repo
    ref = f"{QUARANTINE_PREFIX}{item.branch}-{stamp}"
    if gitrepo.rev_parse(repo, ref):
        return ref  # quarantined before a crash
    holds = item.holds
    assert holds is not None
    wt = item.worktree
    moved: list[str] = []
    if holds.nested:
        kept = engine.ws.task_dir(task) / "kept" / f"{item.branch}-{stamp}"
        moved = preserve.move_nested(wt, holds.nested, kept)
    parents = [holds.head] if holds.head else []
    date = engine.now()
    if holds.staged:
        index_msg = f"taskgate quarantine: the staged index of {wt}\n"
        parents.append(ops.commit_tree(repo, holds.staged, parents[:1], index_msg, date=date))
    parents = preserve.independent(repo, parents + list(holds.roots))
    if gitrepo.is_worktree(wt):
        tree = preserve.snapshot_tree(wt, holds.head, holds.ignored, holds.nested)
    elif parents:
        tree = ops.tree_of(repo, parents[0])
    else:
        return None  # no worktree and no undelivered commit: nothing to keep
    note = [
        f"taskgate quarantine: what removing {item.branch} and {wt} would have lost",
        "",
        f"Unmerged commits: {len(holds.visible)}; only in reflogs or worktree refs: "
        f"{len(holds.hidden)}",
    ]
    note += [f"Uncommitted: {p}" for p in item.dirty[:50]]
    note += [f"Ignored, kept: {p}" for p in holds.ignored[:50]]
    note += [f"Nested repository moved to: {p}" for p in moved]
    if len(parents) == 1 and tree == ops.tree_of(repo, parents[0]) and not moved:
        sha = parents[0]  # a plain unmerged commit: the ref points at it
    else:
        sha = ops.commit_tree(repo, tree, parents, "\n".join(note) + "\n", date=date)
    if not ops.update_ref(repo, ref, sha, ops.ZERO):
        raise Refused(f"could not create {ref}", [], hint="run the command again")
    return ref


def cleanup(engine: Engine, task: str, *, quarantine: bool = False) -> CleanupResult:
    """Enter CLEANUP and remove the task's worktrees and branches; idempotent (R-CLN-07)."""
    snap = engine.require_snapshot(task)
    t = snap.task
    state = current_state(t)
    build: dict[str, Any] = {}
    if state is State.CLEANUP:
        if not t.pending or t.pending.get("op") != OP:
            return _finish(engine, snap, {}, already=True)
        if t.session_id != engine.require_session():  # the lock is released: check by hand
            raise ForeignTask(
                f"the cleanup of '{task}' was started by session {t.session_id}",
                hint=f"finish it as that session (--session {t.session_id})",
            )
    elif state is State.COMPLETE:
        engine.require_owner(t)
        # The guard is judged again in the step; checking it first spares a doomed build.
        refuse_if(transitions.check(gather(engine, snap), State.CLEANUP), "COMPLETE -> CLEANUP")
        items = _items(engine, snap)
        at_risk = [i for i in items if i.at_risk]
        if at_risk and not quarantine:
            raise Refused(
                f"cleanup of '{task}' would lose work:\n{_lost_text(at_risk)}",
                [
                    Violation(
                        "R-CLN-03",
                        "only branches reachable from main and clean worktrees are deleted",
                    )
                ],
                hint=_keep_hint(snap, at_risk),
            )
        build, unrecorded = verify_main_build(engine, engine.require_snapshot(task))
        stamp = engine.now().replace("-", "").replace(":", "")

        def enter(tx: Tx, current: TaskSnapshot) -> None:
            if unrecorded:  # the main build's record and the move: one step (issue 18)
                record_body(engine, task, build)(tx, current)
                current = tx.snapshot(task, since=current) or current
            facts = gather(engine, current)
            refuse_if(transitions.check(facts, State.CLEANUP), "COMPLETE -> CLEANUP")
            apply_transition(
                engine,
                tx,
                current,
                State.CLEANUP,
                reason="merge verified, build on main passed",
                evidence={"main_build": build},
                pending={
                    "op": OP,
                    "quarantine": quarantine,
                    "stamp": stamp,
                    "tips": {i.branch: i.tip for i in items},
                },
            )

        try:
            engine.step(task, enter)
        except TaskgateError:
            if unrecorded:  # refused: the build's record stands on its own, as it did
                with contextlib.suppress(TaskgateError):
                    record(engine, task, build)
            raise
        failpoints.hit("cleanup:after-transition")
    else:
        raise Refused(
            f"cleanup runs after COMPLETE, the task is in {state}",
            [Violation("R-TRN-19", "COMPLETE -> CLEANUP only after the merge")],
            hint=f"run 'taskgate complete {task}' first",
        )
    return _remove(engine, task, quarantine=quarantine, build=build)


def _remove(engine: Engine, task: str, *, quarantine: bool, build: dict[str, Any]) -> CleanupResult:
    """The journaled git work: quarantine, remove worktrees, delete branches (each idempotent)."""
    snap = engine.require_snapshot(task)
    pending = dict(snap.task.pending or {})
    quarantine = quarantine or bool(pending.get("quarantine"))
    repo = engine.ws.repo
    items = _items(engine, snap)  # again: work may have appeared since the check
    at_risk = [i for i in items if i.at_risk]
    if at_risk and not quarantine:
        raise Refused(
            f"cleanup of '{task}' stopped: this work appeared and would be lost:\n"
            f"{_lost_text(at_risk)}",
            [Violation("R-CLN-04", "cleanup never deletes undelivered work")],
            hint=f"merge or commit it, or run 'taskgate cleanup {task} --quarantine'",
        )
    stamp = str(pending["stamp"])
    quarantined = {}
    for item in items:
        if item.keep:
            ref = _quarantine(engine, task, item, stamp)
            if ref:
                quarantined[item.branch] = ref
    _keep_history(engine, snap)
    failpoints.hit("cleanup:after-quarantine")
    removed, deleted = [], []
    with gitrepo.repo_lock(engine.ws.common_dir):
        for item in items:
            if gitrepo.remove_worktree(repo, item.worktree):
                removed.append(str(item.worktree))
            failpoints.hit("cleanup:after-worktree")
        for item in items:
            # Compare-and-swap on the tip inspected above: a branch that moved since is kept,
            # and the final check reports it (R-CLN-04).
            if item.tip and ops.delete_ref(repo, f"refs/heads/{item.branch}", item.tip):
                deleted.append(item.branch)
    failpoints.hit("cleanup:after-branches")
    from taskgate.engine import remote_sync  # issue 20: a team's remote forgets them too

    gone = {i.branch: str(i.tip) for i in items if i.branch in deleted}
    remote_sync.forget_branches(engine, gone)
    return _finish(
        engine,
        engine.require_snapshot(task),
        {"removed": removed, "deleted": deleted, "quarantined": quarantined, "build": build},
    )


def _keep_history(engine: Engine, snap: TaskSnapshot) -> None:
    """The archived task history (agent commits, reviews) whose squash is on main stays
    reachable under refs/taskgate/history/<task> once its branches are gone."""
    delivered = _delivered(engine, snap)
    if len(delivered) > 1:
        ref = f"{HISTORY_PREFIX}{snap.task.name}"
        repo = engine.ws.repo
        if gitrepo.rev_parse(repo, ref) != delivered[1]:
            ops.update_ref(repo, ref, delivered[1], gitrepo.rev_parse(repo, ref) or ops.ZERO)


def _finish(
    engine: Engine, snap: TaskSnapshot, done: dict[str, Any], *, already: bool = False
) -> CleanupResult:
    """R-CLN-04: verify nothing named remains, then clear the journal (lock stays released)."""
    t = snap.task
    repo = engine.ws.repo
    names = {t.name, *(f"{t.name}-{a}" for a in t.required_agents)}
    left_branches = sorted(names & set(gitrepo.branch_tips(repo)))
    wts = {str(p) for p in gitrepo.worktree_paths(repo)}
    wanted = [engine.ws.task_worktree(t.name)] + [
        engine.ws.agent_worktree(t.name, a) for a in t.required_agents
    ]
    left_wts = sorted(str(p) for p in wanted if str(p) in wts or str(p.resolve()) in wts)
    if left_branches or left_wts:
        raise Refused(
            f"cleanup of '{t.name}' is incomplete: branches {left_branches}, worktrees {left_wts}",
            [Violation("R-CLN-04", "no deleted name may remain in git worktree/branch lists")],
            hint=f"run 'taskgate cleanup {t.name}' again (add --quarantine to keep the work)",
        )
    if not already:

        def clear(tx: Tx, current: TaskSnapshot) -> None:
            engine.event(
                tx,
                t.name,
                "cleanup",
                {
                    "removed_worktrees": done.get("removed", []),
                    "deleted_branches": done.get("deleted", []),
                    "quarantined": done.get("quarantined", {}),
                },
            )
            engine.touch(tx, current, pending=None)

        engine.step(t.name, clear, owner=False)  # the lock was released on entering CLEANUP
    quarantined = dict(done.get("quarantined", {}))
    if already:
        for e in snap.events:
            if e.kind == "cleanup":
                quarantined = dict(e.payload.get("quarantined") or {})
    return CleanupResult(
        task=t.name,
        state=State.CLEANUP.value,
        removed_worktrees=list(done.get("removed", [])),
        deleted_branches=list(done.get("deleted", [])),
        quarantined=quarantined,
        main_build=dict(done.get("build", {})),
        already_clean=already,
    )
