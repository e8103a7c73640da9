"""`taskgate complete T`: archival commit, squash, fast-forward merge to main → COMPLETE (§13).

The steps run in the order of R-CMP-01 and each is journaled in the task row's `pending`
(`{"op": "complete", ...}`): the intent is committed to the store before the git work and the
result after it, and every git step first checks whether it already happened. A `kill -9`
between any two steps is resumed by running `taskgate complete T` again (R-CMP-09, C-36).
Nothing is ever forced and no merge commit is ever made on main (R-CMP-06).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from taskgate import failpoints
from taskgate.engine import journal_work, remote_sync
from taskgate.engine.complete_archive import archive
from taskgate.engine.core import Engine, current_state
from taskgate.engine.facts import gather
from taskgate.engine.flow import apply_transition, refuse_if
from taskgate.engine.merge import record_commits
from taskgate.errors import Refused, UsageError
from taskgate.git import ops
from taskgate.git import repo as gitrepo
from taskgate.git.cmd import git, raise_if_busy
from taskgate.protocol import transitions
from taskgate.protocol.states import State
from taskgate.protocol.violations import Violation
from taskgate.store.base import Tx
from taskgate.store.records import TaskSnapshot

OP = "complete"
# What `complete` itself produces; the preflight ignores these parts of the COMPLETE guard.
_OWN_RULES = {"R-CMP-02", "R-CMP-06"}


@dataclass(frozen=True)
class CompleteResult:
    """What `complete` did (or found already done)."""

    task: str
    state: str
    main_branch: str
    approved_sha: str
    archival_sha: str
    squash_sha: str
    merged_sha: str
    already_complete: bool = False
    unblocked: list[str] = field(default_factory=list)


def refuse_while_completing(snap: TaskSnapshot, what: str) -> None:
    """R-CMP-09: no checkpoint while `complete` is journaled (issue 16, found by torture).

    After the archival commit T's HEAD is taskgate's own commit: a presentation would bind to
    it and revoke the person's approval of the real change. Resuming is the way on.
    """
    if (snap.task.pending or {}).get("op") != OP:
        return
    name = snap.task.name
    approved = str((snap.task.pending or {}).get("approved_sha") or "")[:12]
    raise Refused(
        f"cannot {what} '{name}': its completion of the approved commit {approved} was "
        "interrupted and is still journaled (the task branch holds taskgate's archival commit)",
        [Violation("R-CMP-09", "an interrupted completion is resumed, not presented again")],
        hint=f"resume it: taskgate complete {name} (or taskgate run {name}); the approval "
        "given stays valid",
    )


def _recovery_hint(engine: Engine, task: str, main: str) -> str:
    """R-CMP-06 / C-36: rebase, validate again, present again — never a merge commit or force."""
    wt = engine.ws.task_worktree(task)
    return (
        f"main moved past the task branch; rebase it: taskgate transition {task} IMPLEMENTATION "
        f"--reason 'rebase onto {main}'; cd {wt} && git rebase {main}; then validate, review "
        f"and present again, approve, and run 'taskgate complete {task}'"
    )


def _non_ff(engine: Engine, task: str, main: str) -> Refused:
    return Refused(
        f"'{task}' cannot be fast-forwarded into '{main}': {main} has commits the task branch "
        "does not contain (no merge commit was made, nothing was forced)",
        [Violation("R-CMP-06", "the merge into main is fast-forward only", "")],
        hint=_recovery_hint(engine, task, main),
    )


def check_main_worktree(engine: Engine, main: str) -> None:
    """The main worktree must be on the main branch, clean and between operations (R-CMP-07)."""
    repo = engine.ws.repo
    busy = gitrepo.in_progress(repo)  # first: a rebase detaches HEAD (issue 16)
    if busy:
        raise Refused(
            f"the main worktree {repo} has an unfinished {busy}",
            [Violation("R-CMP-07", "the main worktree must be between operations")],
            hint=f"finish or abort it (cd {repo} && git {busy} --abort), then run it again",
        )
    branch = gitrepo.head_ref(repo)
    if branch != main:
        where = "a detached HEAD" if branch is None else f"branch '{branch}'"
        raise Refused(
            f"the main worktree {repo} is on {where}, not on '{main}'",
            [Violation("R-CMP-07", "the merge happens in the main worktree on the main branch")],
            hint=f"cd {repo} && git switch {main}, then run the command again",
        )
    dirty = gitrepo.tracked_changes(repo)
    if dirty:
        raise Refused(
            f"the main worktree {repo} has uncommitted changes: {', '.join(sorted(dirty)[:10])}",
            [Violation("R-CMP-07", "the main worktree must be clean for the merge")],
            hint="commit or stash them (git stash), then run the command again; "
            "nothing was changed",
        )


def _check_task_worktree(engine: Engine, task: str, *, allow_dirty: bool = False) -> Path:
    wt = engine.ws.task_worktree(task)
    if not gitrepo.is_worktree(wt):
        raise Refused(
            f"the task worktree {wt} is missing",
            [Violation("R-WTB-01", "the task worktree is on branch T")],
            hint=f"run 'taskgate recover {task} --repair' (recreates it from branch '{task}'), "
            "then run the command again",
        )
    branch = gitrepo.head_ref(wt)
    if branch != task:  # each case its own way out (issue 16), not a circular 'recover'
        where = "a detached HEAD" if branch is None else f"branch '{branch}'"
        raise Refused(
            f"the task worktree {wt} is on {where}, not on '{task}'",
            [Violation("R-WTB-01", "the task worktree is on branch T")],
            hint=f"cd {wt} && git branch keep-{task} HEAD (keeps any commit made there) && "
            f"git switch {task}, then run the command again",
        )
    busy = gitrepo.in_progress(wt)
    if busy:
        raise Refused(
            f"the task worktree {wt} has an unfinished {busy} (left by someone else)",
            [Violation("R-WTB-09", "worktrees must be intact before completion")],
            hint=f"cd {wt} && git {busy} --continue (or --abort), then run the command again",
        )
    dirty = [] if allow_dirty else gitrepo.tracked_changes(wt)
    if dirty:
        raise Refused(
            f"the task worktree has uncommitted changes: {', '.join(sorted(dirty)[:10])}",
            [Violation("R-CKP-13", "only the approved commit is completed")],
            hint="commit them and present the change again, or discard them (git restore)",
        )
    return wt


def _preflight(engine: Engine, snap: TaskSnapshot) -> str:
    """Everything that would refuse later, checked before anything changes; returns main's tip."""
    t = snap.task
    _check_task_worktree(engine, t.name)  # first: a missing worktree is not a moved branch
    facts = gather(engine, snap)
    refuse_if(
        [v for v in transitions.check(facts, State.COMPLETE) if v.rule not in _OWN_RULES],
        "complete",
    )
    check_main_worktree(engine, t.base_branch)
    main_sha = gitrepo.rev_parse(engine.ws.repo, f"refs/heads/{t.base_branch}")
    head = gitrepo.head_sha(engine.ws.task_worktree(t.name)) or ""  # the real HEAD, not facts
    if main_sha is None or not ops.is_ancestor(engine.ws.repo, main_sha, head):
        raise _non_ff(engine, t.name, t.base_branch)
    colliding = _collisions(engine, main_sha, head)
    if colliding:
        raise Refused(
            f"untracked files in the main worktree would be overwritten: {', '.join(colliding)}",
            [Violation("R-CMP-07", "the merge never overwrites files in the main worktree")],
            hint=f"move them out of {engine.ws.repo} (or commit them), then run the command "
            "again; nothing was changed",
        )
    return main_sha


def _collisions(engine: Engine, main_sha: str, head: str) -> list[str]:
    """Untracked files in the main worktree that the merge would overwrite with other text."""
    repo = engine.ws.repo
    changelog = engine.ws.config.workspace.changelog
    found = []
    for path in ops.changed_paths(repo, main_sha, head):
        local = repo / path
        if not local.is_file() or ops.is_tracked(repo, path):
            continue
        incoming = git("show", f"{head}:{path}", cwd=repo, check=False).stdout
        text = local.read_text(encoding="utf-8", errors="replace")
        if text == incoming or (path == changelog and incoming.startswith(text.rstrip("\n"))):
            continue  # the merge brings this text back: replacing the file loses nothing
        found.append(path)
    return found


def _clear_replaced(engine: Engine, main_sha: str, squash: str) -> None:
    """Remove untracked copies whose whole text the fast-forward brings back (see _collisions)."""
    repo = engine.ws.repo
    colliding = set(_collisions(engine, main_sha, squash))
    for path in ops.changed_paths(repo, main_sha, squash):
        local = repo / path
        if path not in colliding and local.is_file() and not ops.is_tracked(repo, path):
            local.unlink()


def _squash(engine: Engine, snap: TaskSnapshot, archival: str, main_sha: str) -> str:
    """R-CMP-04: T becomes exactly one commit on top of main with the archival commit's tree."""
    task = snap.task.name
    repo = engine.ws.repo
    tip = gitrepo.rev_parse(repo, f"refs/heads/{task}") or ""
    tree = ops.tree_of(repo, archival)
    if tip != archival:
        info = ops.commit(repo, tip)
        if info.parents == (main_sha,) and ops.tree_of(repo, tip) == tree:
            return tip  # squashed before a crash
        raise Refused(
            f"the task branch moved during completion (expected {archival[:12]})",
            [Violation("R-CMP-01", "completion steps run in order on the approved commit")],
            hint=f"run 'taskgate recover {task}'",
        )
    if ops.commit(repo, archival).parents == (main_sha,):
        return archival  # already one commit ahead of main
    if not ops.is_ancestor(repo, main_sha, archival):
        raise _non_ff(engine, task, snap.task.base_branch)
    body = "\n".join(
        f"- {subject}"
        for _, subject in ops.subjects(repo, "--no-merges", f"{main_sha}..{archival}")
    )
    message = (
        f"{task}: {_title(engine, task) or 'completed'}\n\n{body}\n\n"
        f"Task: {task}\nApproved-commit: {snap.task.extra.get('approved_sha', '')}\n"
    )
    squash = ops.commit_tree(repo, tree, [main_sha], message, date=engine.now())
    failpoints.hit("complete:squash-created")
    if not ops.update_ref(repo, f"refs/heads/{task}", squash, archival):
        raise Refused(
            f"the task branch moved during completion (expected {archival[:12]})",
            [Violation("R-CMP-01", "completion steps run in order on the approved commit")],
            hint=f"run 'taskgate recover {task}'",
        )
    # The worktree's files already hold this tree; refresh its index so `git status` is clean.
    git("update-index", "-q", "--refresh", cwd=engine.ws.task_worktree(task), check=False)
    return squash


def _title(engine: Engine, task: str) -> str:
    try:
        entry = engine.todo().get(task)
    except UsageError:
        return ""  # a todo.md the user broke meanwhile must not stop a half-done completion
    return entry.title if entry else ""


def _merge(engine: Engine, task: str, main: str, squash: str) -> str:
    """R-CMP-06/07, C-34: `git merge --ff-only` in the main worktree under the repository lock."""
    repo = engine.ws.repo
    with gitrepo.repo_lock(engine.ws.common_dir):
        main_sha = gitrepo.rev_parse(repo, f"refs/heads/{main}") or ""
        if main_sha == squash or ops.is_ancestor(repo, squash, main_sha):
            return squash  # merged before a crash
        check_main_worktree(engine, main)
        if not ops.is_ancestor(repo, main_sha, squash):
            raise _non_ff(engine, task, main)
        _clear_replaced(engine, main_sha, squash)
        result = git("merge", "--ff-only", "--no-edit", "-q", squash, cwd=repo, check=False)
        if not result.ok:
            raise_if_busy(("git", "merge", "--ff-only", squash), result, repo)  # issue 16
            raise Refused(
                f"git refused the fast-forward of '{main}': "
                f"{(result.stderr.strip() or result.stdout.strip())[-400:]}",
                [Violation("R-CMP-07", "the merge never overwrites files in the main worktree")],
                hint="move the files git names out of the main worktree, then run "
                f"'taskgate complete {task}' again",
            )
    return squash


def _journal(engine: Engine, task: str, **facts: str) -> dict[str, Any]:
    """Record completed steps in `pending` and `extra` (one store transaction)."""

    def body(tx: Tx, snap: TaskSnapshot) -> dict[str, Any]:
        pending = dict(snap.task.pending or {})
        pending.update(facts)
        extra = {**snap.task.extra, **facts}
        engine.touch(tx, snap, pending=pending, extra=extra)
        return pending

    return engine.step(task, body)


def _commit_events(engine: Engine, tx: Tx, snap: TaskSnapshot, pending: dict[str, Any]) -> None:
    """The delivered commits (agents' and the archival) on T, then the squash on main."""
    approved, archival = str(pending["approved_sha"]), str(pending["archival_sha"])
    start = str(pending.get("main_sha") or snap.task.base_sha)
    shas = ops.rev_list(engine.ws.repo, "--no-merges", f"{start}..{approved}")
    record_commits(engine, tx, snap, shas, branch=snap.task.name)
    if archival != approved:
        record_commits(engine, tx, snap, [archival], branch=snap.task.name, archival=True)
    squash = str(pending["squash_sha"])
    if squash != archival:
        record_commits(engine, tx, snap, [squash], branch=snap.task.base_branch, squash_of=archival)


def complete(engine: Engine, task: str) -> CompleteResult:
    """Run (or resume) the post-approval sequence of R-CMP-01 and enter COMPLETE."""
    with journal_work.running(engine, task):  # the effect check tells a killed one by it
        return _complete(engine, task)


def _complete(engine: Engine, task: str) -> CompleteResult:
    snap = engine.require_snapshot(task)
    t = snap.task
    main = t.base_branch
    state = current_state(t)
    if state in (State.COMPLETE, State.CLEANUP):  # R-CMP-10: verify and report, change nothing
        return _result(engine, snap, already=True)
    engine.require_owner(t)
    if state is not State.AWAITING_USER_APPROVAL:
        raise Refused(
            f"complete runs after the change approval, the task is in {state}",
            [Violation("R-CMP-01", "archival, squash and merge follow the change approval")],
            hint=f"see 'taskgate status {task}'",
        )
    pending = dict(t.pending) if t.pending and t.pending.get("op") == OP else None
    checkpoint = t.checkpoint or {}
    if pending is not None and pending.get("checkpoint_sha") != checkpoint.get("commit_sha"):
        pending = None  # a journal from before a rebase and a new presentation (R-CMP-06)
    if pending is None:
        remote_sync.before_complete(engine, main)  # a team's machine fetches first (issue 20)
        main_sha = _preflight(engine, snap)
        approved = str(checkpoint.get("commit_sha") or "")

        def begin(tx: Tx, current: TaskSnapshot) -> dict[str, Any]:
            journal = {
                "op": OP,
                "checkpoint_sha": approved,
                "approved_sha": approved,
                "main_sha": main_sha,
            }
            extra = {
                k: v
                for k, v in current.task.extra.items()
                if k not in ("archival_sha", "squash_sha", "merged_sha")
            }
            engine.touch(tx, current, pending=journal, extra={**extra, "approved_sha": approved})
            engine.event(tx, task, "complete_started", {"approved_sha": approved})
            return journal

        pending = engine.step(task, begin)
        failpoints.hit("complete:after-begin")
    else:
        # Resumed: compare before redoing git work, as the un-crashed run's first step does;
        # the commits the journal explains join a guarded session's baseline (issue 15).
        journal_work.compare_first(engine, task)
        # R-CMP-09: resuming; the task worktree may hold a half-written archival edit.
        _check_task_worktree(engine, task, allow_dirty=True)
        pending = remote_sync.resume_journal(engine, task, pending)  # issue 20: a hand-over
    try:
        pending = _run_steps(engine, task, pending)
    except Refused as exc:
        if any(v.rule == "R-CMP-06" for v in exc.violations):
            _stop(engine, task, exc.message, engine.require_snapshot(task).task.pending or {})
        raise

    def finish(tx: Tx, current: TaskSnapshot) -> None:
        facts = gather(engine, current)
        refuse_if(transitions.check(facts, State.COMPLETE), "AWAITING_USER_APPROVAL -> COMPLETE")
        _commit_events(engine, tx, current, pending)
        apply_transition(
            engine,
            tx,
            current,
            State.COMPLETE,
            reason="archived, squashed and merged --ff-only into " + main,
            evidence={k: pending[k] for k in ("approved_sha", "archival_sha", "merged_sha")},
            pending=None,
        )

    engine.step(task, finish)
    return _result(engine, engine.require_snapshot(task), already=False)


def _stop(engine: Engine, task: str, why: str, journal: dict[str, Any]) -> None:
    """Main moved past T (R-CMP-06): end the journal so the task can go back and be rebased.

    When T already points at taskgate's own archival or squash commit, it goes back to the
    approved commit (both stay in T's reflog): rebasing the squash would replay its todo.md
    and changelog.md edits onto main's and conflict, a dead end the hint cannot get out of
    (issue 16). The facts in `extra` stay so the guards still see the approval.
    """
    approved = str(journal.get("approved_sha") or "")
    ours = {str(journal.get(k)) for k in ("archival_sha", "squash_sha") if journal.get(k)}
    wt = engine.ws.task_worktree(task)
    if approved and gitrepo.head_sha(wt) in ours:
        git("reset", "-q", "--hard", approved, cwd=wt)

    def body(tx: Tx, snap: TaskSnapshot) -> None:
        engine.event(tx, task, "complete_stopped", {"reason": why})
        engine.touch(tx, snap, pending=None)

    engine.step(task, body)


def _run_steps(engine: Engine, task: str, pending: dict[str, Any]) -> dict[str, Any]:
    """Archival, squash and merge, each skipped when the journal says it is done."""
    snap = engine.require_snapshot(task)
    main = snap.task.base_branch
    if "archival_sha" not in pending:
        archival = archive(engine, snap, str(pending["approved_sha"]))
        failpoints.hit("complete:archival-committed")
        pending = _journal(engine, task, archival_sha=archival)
        failpoints.hit("complete:after-archival")
    if "squash_sha" not in pending:
        squash = _squash(engine, snap, str(pending["archival_sha"]), str(pending["main_sha"]))
        failpoints.hit("complete:squash-ref-moved")
        pending = _journal(engine, task, squash_sha=squash)
        failpoints.hit("complete:after-squash")
    if "merged_sha" not in pending:
        pending = remote_sync.publish_main(engine, task, pending, main)  # issue 20: remote first
        merged = _merge(engine, task, main, str(pending["squash_sha"]))
        failpoints.hit("complete:main-merged")
        pending = _journal(engine, task, merged_sha=merged)
        failpoints.hit("complete:after-merge")
    return pending


def _result(engine: Engine, snap: TaskSnapshot, *, already: bool) -> CompleteResult:
    t = snap.task
    extra = t.extra
    merged = str(extra.get("merged_sha") or "")
    if already and not (
        merged and ops.is_ancestor(engine.ws.repo, merged, f"refs/heads/{t.base_branch}")
    ):
        raise Refused(
            f"'{t.name}' is COMPLETE but {t.base_branch} does not contain {merged[:12] or '?'}",
            [Violation("R-CMP-10", "a task resuming in COMPLETE verifies the merge")],
            hint=f"run 'taskgate recover {t.name}'",
        )
    return CompleteResult(
        task=t.name,
        state=t.state,
        main_branch=t.base_branch,
        approved_sha=str(extra.get("approved_sha") or ""),
        archival_sha=str(extra.get("archival_sha") or ""),
        squash_sha=str(extra.get("squash_sha") or ""),
        merged_sha=merged,
        already_complete=already,
        unblocked=_unblocked(engine, t.name),
    )


def _unblocked(engine: Engine, task: str) -> list[str]:
    """Tasks in todo.md that depended on `task` and are now available."""
    from taskgate.engine.lifecycle import availability
    from taskgate.protocol.selection import Availability

    try:
        dependents = {d.name for d in engine.todo().tasks if task in d.depends}
        items = availability(engine) if dependents else []
    except UsageError:
        return []  # informational only; the completion itself is done
    return [
        item.name
        for item in items
        if item.name in dependents and item.availability is Availability.AVAILABLE
    ]
