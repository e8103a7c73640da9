"""git across machines (issue 20): the shared remote carries a team's tasks and main.

A team's machines share one PostgreSQL store and one git remote (`[workspace] remote`,
default `origin`); worktrees stay machine-local. On such a workspace (the store is a database
server and the remote exists) taskgate:

- shares a task at every checkpoint and at a release: branch T and its agent branches T-A
  (`--force-with-lease` on the remote-tracking refs: a rebased branch replaces its own earlier
  push, never another machine's), the task's documents (task.md, the agents' reports: files
  under `.taskgate/tasks/T/`, outside git) as a commit on `refs/taskgate/docs/T`, and the
  audit anchor `refs/taskgate/audit/T`;
- fetches before a task's worktree is made on this machine (a claim, an adoption, a
  take-over): main is fast-forwarded when it is behind, T and T-A come from the remote, the
  documents are restored; a branch that diverged here and there is refused, never overwritten;
- fetches before `complete` and publishes its squash on the remote's main first, with
  `--force-with-lease=main:<expected>` (journaled as `pushed_main`), then fast-forwards this
  machine's main. A push rejected because main moved is `main-moved` (exit 1, R-CMP-06): the
  journal ends, nothing was merged anywhere, and the task is rebased through the protocol.

With an embedded store (one machine) nothing here runs: the change checkpoint's push of T
(engine/checkpoint_push.py) is all.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from taskgate import failpoints
from taskgate.engine.core import Engine
from taskgate.errors import EnvironmentFault, Refused
from taskgate.fsutil import atomic_write
from taskgate.git import ops
from taskgate.git import repo as gitrepo
from taskgate.git.cmd import again_while, git
from taskgate.process import Result
from taskgate.protocol.violations import Violation
from taskgate.store.base import Tx
from taskgate.store.records import TaskSnapshot

NETWORK_TIMEOUT_S = 300.0  # a fetch or push that hangs is an error, not a wait
DOCS_PREFIX = "refs/taskgate/docs/"
AUDIT_PREFIX = "refs/taskgate/audit/"
ARCHIVAL_PREFIX = "refs/taskgate/archival/"  # complete's archival commit, for a hand-over
ZERO = "0" * 40
# Files in the task directory that are views of the store (re-rendered on every machine).
_VIEWS = {"task.json", "audit-trail.json", "store-record.jsonl"}
_IDENTITY = {
    "GIT_AUTHOR_NAME": "taskgate", "GIT_AUTHOR_EMAIL": "taskgate@localhost",
    "GIT_COMMITTER_NAME": "taskgate", "GIT_COMMITTER_EMAIL": "taskgate@localhost",
}  # fmt: skip


class RemoteUnreachable(EnvironmentFault):
    """The shared git remote did not answer (exit 6): fix the network or credentials, rerun."""

    kind = "remote-unreachable"


class MainMoved(Refused):
    """Main on the shared remote moved past the task (exit 1, R-CMP-06): rebase the task."""

    kind = "main-moved"


class BranchDiverged(Refused):
    """A task branch differs here and on the remote, each with its own commits (exit 1)."""

    kind = "branch-diverged"


def team_remote(engine: Engine) -> str | None:
    """The shared remote's name when this workspace is a team's (database store + remote)."""
    name = engine.ws.config.workspace.remote
    if not name or not engine.ws.uses_database_server:
        return None
    return name if name in ops.remotes(engine.ws.repo) else None


@contextmanager
def _network_lock(engine: Engine) -> Iterator[None]:
    """One fetch or push at a time per clone: concurrent ones race on the same remote-tracking
    refs ("cannot lock ref"). Not the repository lock: a slow remote must not hold up
    worktree work, and the callers take that one after the network step."""
    fd = os.open(engine.ws.common_dir / "taskgate-remote.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


# `git fetch` checks what it fetched against every ref, each linked worktree's HEAD included,
# and `git worktree add` writes a null HEAD for a moment: a fetch beside another session's
# claim fails with "fatal: bad object worktrees/code/HEAD ... did not send all necessary
# objects" although the remote is fine. Taskgate adds worktrees under the repository lock, so
# the fetch is run again under it (no add in flight), after these pauses (a person's own add).
HALF_ADDED_WORKTREE = "bad object worktrees/"
LOCAL_RETRY_PAUSES_S = (0.05, 0.2, 0.5)


def _under_repo_lock(engine: Engine, *args: str) -> Result:
    """The network git command again, with no worktree add in flight (taskgate adds them under
    repo_lock, which _network's callers never hold)."""
    with gitrepo.repo_lock(engine.ws.common_dir):
        return git(*args, cwd=engine.ws.repo, check=False, timeout=NETWORK_TIMEOUT_S)


def _network(engine: Engine, remote: str, *args: str) -> Result:
    """A git command that talks to `remote`; a failure other than a rejection is exit 6."""
    with _network_lock(engine):
        result = again_while(
            git(*args, cwd=engine.ws.repo, check=False, timeout=NETWORK_TIMEOUT_S),
            lambda failed: HALF_ADDED_WORKTREE in failed.stderr,
            lambda: _under_repo_lock(engine, *args),
            LOCAL_RETRY_PAUSES_S,
            "remote:local-retry",  # tests: the half-added worktree is done
        )
    if result.ok or "rejected" in result.stdout + result.stderr:
        return result
    detail = (result.stderr.strip() or result.stdout.strip() or "no output").splitlines()[-1]
    raise RemoteUnreachable(
        f"the shared remote '{remote}' did not answer 'git {args[0]}': {detail}; nothing was "
        "changed in the store",
        hint=f"check the network and credentials (try: git fetch {remote}), then run the same "
        "command again",
    )


def _remote_refs(engine: Engine, remote: str, refs: list[str]) -> dict[str, str]:
    """The remote's values of `refs` (absent ones left out): one round trip."""
    out = _network(engine, remote, "ls-remote", remote, *refs).stdout
    found = {}
    for line in out.splitlines():
        sha, _, name = line.partition("\t")
        if name in refs:
            found[name] = sha
    return found


def _fetch(engine: Engine, remote: str, refspecs: list[str]) -> None:
    if refspecs:
        _network(engine, remote, "fetch", "-q", "--no-tags", "--no-write-fetch-head", remote,
                 *refspecs)  # fmt: skip


def _branch_there(engine: Engine, remote: str, branch: str) -> bool:
    return bool(_remote_refs(engine, remote, [f"refs/heads/{branch}"]))


def _tracking(remote: str, branch: str) -> str:
    return f"refs/remotes/{remote}/{branch}"


def _checked_out(engine: Engine, branch: str) -> Path | None:
    for path, name in gitrepo.worktree_paths(engine.ws.repo).items():
        if name == branch:
            return path
    return None


def _fast_forward(engine: Engine, branch: str, target: str) -> bool:
    """Move local `branch` forward to `target` (never backwards or sideways): update-ref when
    no worktree has it checked out, `git merge --ff-only` in the one that has. False when the
    branch has commits `target` lacks (the caller decides)."""
    repo = engine.ws.repo
    local = gitrepo.rev_parse(repo, f"refs/heads/{branch}")
    if local is None:
        return ops.update_ref(repo, f"refs/heads/{branch}", target, ZERO)
    if local == target or ops.is_ancestor(repo, target, local):
        return True  # up to date, or ahead (its own commits, pushed later)
    if not ops.is_ancestor(repo, local, target):
        return False
    with gitrepo.repo_lock(engine.ws.common_dir):
        where = _checked_out(engine, branch)
        if where is None:
            return ops.update_ref(repo, f"refs/heads/{branch}", target, local)
        done = git("merge", "--ff-only", "-q", target, cwd=where, check=False)
    if not done.ok:
        raise Refused(
            f"'{branch}' is behind the shared remote and cannot be fast-forwarded in {where}: "
            f"{(done.stderr.strip() or done.stdout.strip())[-300:]}",
            [Violation("R-CMP-07", "the main worktree must be clean for the merge")],
            hint=f"commit or stash the changes there (cd {where} && git stash), then run the "
            "command again; nothing was changed",
        )
    return True


def catch_up_main(engine: Engine, main: str) -> str | None:
    """Fetch main and fast-forward this machine's main when it is behind; the remote's main."""
    remote = team_remote(engine)
    if remote is None:
        return None
    spec = f"+refs/heads/{main}:{_tracking(remote, main)}"
    try:
        _fetch(engine, remote, [spec])
    except RemoteUnreachable:
        if _branch_there(engine, remote, main):
            raise
        return None  # a remote without main yet (a new, empty repository): the first push
    theirs = gitrepo.rev_parse(engine.ws.repo, _tracking(remote, main))
    if theirs is not None:
        _fast_forward(engine, main, theirs)  # diverged: complete's preflight refuses it
    return theirs


def before_complete(engine: Engine, main: str) -> None:
    """`complete` on a team starts from the remote's main: fetched, this machine's main
    fast-forwarded to it, and refused when main here has commits the remote lacks (they
    would be published by the push without anyone deciding to)."""
    theirs = catch_up_main(engine, main)
    if theirs is None:
        return
    repo = engine.ws.repo
    ours = gitrepo.rev_parse(repo, f"refs/heads/{main}") or ""
    if ours != theirs:
        remote = team_remote(engine)
        count = len(ops.rev_list(repo, f"{theirs}..{ours}"))
        raise Refused(
            f"'{main}' on this machine has {count} commit(s) that '{remote}/{main}' lacks; "
            f"complete publishes main through the shared remote and would push them too",
            [Violation("R-CMP-06", "the merge into main is fast-forward only", "")],
            hint=f"publish them (git push {remote} {main}) or move them to a branch, then run "
            "the command again; nothing was changed",
        )


# -- sharing a task ----------------------------------------------------------------------------


def _docs_commit(engine: Engine, task: str) -> str | None:
    """A commit of the task directory's own documents (no views, no worktrees), parented on
    the previous one; None when there is nothing to share or nothing changed."""
    repo, folder = engine.ws.repo, engine.ws.task_dir(task)
    entries = []
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        if not path.is_file() or path.is_symlink() or path.name in _VIEWS:
            continue
        if path.name.endswith(".flag") or path.name.startswith("."):
            continue  # flags are views; dot files are atomic_write's temps
        blob = git("hash-object", "-w", "--", str(path), cwd=repo).stdout.strip()
        entries.append(f"100644 blob {blob}\t{path.name}")
    if not entries:
        return None
    tree = git("mktree", cwd=repo, stdin="\n".join(entries) + "\n").stdout.strip()
    parent = gitrepo.rev_parse(repo, DOCS_PREFIX + task)
    if parent is not None and ops.tree_of(repo, parent) == tree:
        return parent
    cmd = ["commit-tree", tree, "-m", f"taskgate: documents of {task} from {engine.host}"]
    commit = git(*cmd, *(["-p", parent] if parent else []), cwd=repo, env=_IDENTITY)
    sha = commit.stdout.strip()
    ops.update_ref(repo, DOCS_PREFIX + task, sha, parent or ZERO)
    return sha


def _task_branches(task: str, agents: tuple[str, ...]) -> list[str]:
    return [task, *(f"{task}-{agent}" for agent in agents)]


def share_task(engine: Engine, task: str, agents: tuple[str, ...]) -> dict[str, Any]:
    """Push T, its agent branches, its documents and its audit anchor to the shared remote
    (at a checkpoint or a release). Returns what was pushed, {} outside a team."""
    remote = team_remote(engine)
    if remote is None:
        return {}
    repo = engine.ws.repo
    specs, leases = [], []
    for branch in _task_branches(task, agents):
        if gitrepo.branch_exists(repo, branch):
            ref = f"refs/heads/{branch}"
            specs.append(f"{ref}:{ref}")
            leases.append(f"--force-with-lease={ref}")
    if _docs_commit(engine, task) is not None:
        specs.append(f"+{DOCS_PREFIX}{task}:{DOCS_PREFIX}{task}")  # only the owner writes it
    if gitrepo.rev_parse(repo, AUDIT_PREFIX + task) is not None:
        specs.append(f"{AUDIT_PREFIX}{task}:{AUDIT_PREFIX}{task}")  # fast-forward only
    if not specs:
        return {}
    done = _network(engine, remote, "push", "--porcelain", *leases, remote, *specs)
    rejected = [line.split("\t")[1].split(":")[0] for line in done.stdout.splitlines()
                if line.startswith("!") and "\t" in line]  # fmt: skip
    if rejected:
        raise BranchDiverged(
            f"the shared remote '{remote}' refused {', '.join(rejected)}: another machine "
            "pushed commits this machine does not have",
            [Violation("R-LCK-01", "one owner's work is never overwritten by another's")],
            hint=f"git fetch {remote} and merge or rebase onto {remote}/{task} in the task "
            "worktree, then repeat the command",
        )
    return {"shared_to": remote, "shared": [s.split(":")[-1] for s in specs]}


def share_quietly(engine: Engine, task: str, agents: tuple[str, ...]) -> dict[str, Any]:
    """share_task for a person's release: a failure is recorded, never stops the release."""
    try:
        return share_task(engine, task, agents)
    except (RemoteUnreachable, Refused) as exc:
        return {"share_failed": exc.message}


def fetch_task(engine: Engine, task: str, agents: tuple[str, ...], main: str) -> None:
    """Before a task's worktree is made here: main caught up, T and T-A fetched (created or
    fast-forwarded here), the task's documents and audit anchor restored."""
    remote = team_remote(engine)
    if remote is None:
        return
    branches = _task_branches(task, agents)
    extras = [DOCS_PREFIX + task, AUDIT_PREFIX + task, ARCHIVAL_PREFIX + task]
    wanted = [f"refs/heads/{b}" for b in branches] + extras
    there = _remote_refs(engine, remote, [f"refs/heads/{main}", *wanted])
    specs = [f"+refs/heads/{b}:{_tracking(remote, b)}" for b in [main, *branches]
             if f"refs/heads/{b}" in there]  # fmt: skip
    specs += [f"+{ref}:refs/taskgate/fetched/{ref.removeprefix('refs/taskgate/')}"
              for ref in extras if ref in there]  # fmt: skip
    _fetch(engine, remote, specs)
    repo = engine.ws.repo
    for branch in [main, *branches]:
        theirs = gitrepo.rev_parse(repo, _tracking(remote, branch))
        if f"refs/heads/{branch}" not in there or theirs is None:
            continue
        if not _fast_forward(engine, branch, theirs) and branch != main:
            raise BranchDiverged(
                f"branch '{branch}' has commits here that {remote}/{branch} lacks and the "
                "other way round (the task was worked on in two places)",
                [Violation("R-LCK-01", "one owner's work is never overwritten by another's")],
                hint=f"keep one: git branch -f {branch} {remote}/{branch} (theirs), or merge "
                f"them; then run 'taskgate start {task}' again",
            )
    _restore_docs(engine, task)
    fetched_anchor = gitrepo.rev_parse(repo, "refs/taskgate/fetched/audit/" + task)
    if fetched_anchor is not None:
        _fast_forward_ref(engine, AUDIT_PREFIX + task, fetched_anchor)


def fetch_documents(engine: Engine, task: str) -> str | None:
    """For `audit` on a machine where the task never ran (its directory is not here): the
    task's documents and audit anchor fetched from the shared remote, refs only (no file is
    written), the anchor fast-forwarded; the documents commit, None when there is none (or
    this is not a team's workspace)."""
    remote = team_remote(engine)
    if remote is None:
        return None
    extras = [DOCS_PREFIX + task, AUDIT_PREFIX + task]
    there = _remote_refs(engine, remote, extras)
    _fetch(engine, remote, [f"+{ref}:refs/taskgate/fetched/{ref.removeprefix('refs/taskgate/')}"
                            for ref in extras if ref in there])  # fmt: skip
    repo = engine.ws.repo
    fetched_anchor = gitrepo.rev_parse(repo, "refs/taskgate/fetched/audit/" + task)
    if fetched_anchor is not None:
        _fast_forward_ref(engine, AUDIT_PREFIX + task, fetched_anchor)
    return gitrepo.rev_parse(repo, "refs/taskgate/fetched/docs/" + task)


def agent_worktrees(engine: Engine, task: str, agents: tuple[str, ...], state: str) -> None:
    """After a hand-over: the agent worktrees of a task past INIT, recreated on this machine
    from their fetched branches (never a branch created here: that is classify's job)."""
    if team_remote(engine) is None or state == "INIT" or not agents:
        return
    ws = engine.ws
    made = []
    with gitrepo.repo_lock(ws.common_dir):
        for agent in agents:
            path, branch = ws.agent_worktree(task, agent), f"{task}-{agent}"
            if gitrepo.is_worktree(path) or not gitrepo.branch_exists(ws.repo, branch):
                continue
            gitrepo.ensure_worktree(ws.repo, path, branch, branch)
            made.append(agent)
    if made:
        from taskgate.engine.worktree_setup import prepare  # issue 21: .env, links, setup

        prepare(engine, task, made, retry=f"taskgate start {task}")


def _fast_forward_ref(engine: Engine, ref: str, target: str) -> None:
    repo = engine.ws.repo
    local = gitrepo.rev_parse(repo, ref)
    if local is None:
        ops.update_ref(repo, ref, target, ZERO)
    elif local != target and ops.is_ancestor(repo, local, target):
        ops.update_ref(repo, ref, target, local)


def _restore_docs(engine: Engine, task: str) -> None:
    """Write the fetched documents into the task directory; a different local copy is kept
    next to it as NAME.local (nothing a person wrote here is lost)."""
    repo = engine.ws.repo
    fetched = gitrepo.rev_parse(repo, "refs/taskgate/fetched/docs/" + task)
    if fetched is None:
        return
    folder = engine.ws.task_dir(task)
    folder.mkdir(parents=True, exist_ok=True)
    listing = git("ls-tree", "-z", fetched, cwd=repo).stdout
    for entry in filter(None, listing.split("\0")):
        meta, _, name = entry.partition("\t")
        mode, kind = meta.split()[:2]
        if kind != "blob" or mode != "100644" or "/" in name or name.startswith("."):
            continue  # only plain files this code wrote (no links, no dot names)
        if name in _VIEWS:
            continue
        text = git("cat-file", "blob", meta.split()[2], cwd=repo).stdout
        target = folder / name
        if target.is_file():
            current = target.read_text(encoding="utf-8", errors="replace")
            if current == text:
                continue
            os.replace(target, folder / f"{name}.local")
        atomic_write(target, text)
    _fast_forward_ref(engine, DOCS_PREFIX + task, fetched)


def forget_branches(engine: Engine, tips: dict[str, str]) -> list[str]:
    """After cleanup deleted T and T-A here: delete them on the shared remote too, each only
    while it still holds the tip cleanup inspected (a branch someone pushed to since stays).
    Best effort: the task is done, so a remote that does not answer only keeps the branches."""
    remote = team_remote(engine)
    if remote is None or not tips:
        return []
    try:
        there = _remote_refs(engine, remote, [f"refs/heads/{b}" for b in tips])
        gone = [b for b, tip in tips.items() if there.get(f"refs/heads/{b}") == tip]
        if not gone:
            return []
        leases = [f"--force-with-lease=refs/heads/{b}:{tips[b]}" for b in gone]
        done = _network(engine, remote, "push", "--porcelain", *leases, remote,
                        *(f":refs/heads/{b}" for b in gone))  # fmt: skip
    except RemoteUnreachable:
        return []
    refused = {line.split("\t")[1].split(":")[-1] for line in done.stdout.splitlines()
               if line.startswith("!") and "\t" in line}  # fmt: skip
    return [b for b in gone if f"refs/heads/{b}" not in refused]


# -- complete on a team ------------------------------------------------------------------------


def _journal(engine: Engine, task: str, pending: dict[str, Any], event: str,
             payload: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    def body(tx: Tx, snap: TaskSnapshot) -> dict[str, Any]:
        extra = {**snap.task.extra, **{k: v for k, v in pending.items() if k.endswith("_sha")}}
        for gone in set(snap.task.extra) - set(pending):
            if gone in ("archival_sha", "squash_sha"):
                extra.pop(gone, None)
        engine.touch(tx, snap, pending=pending, extra=extra)
        engine.event(tx, task, event, payload)
        return pending

    return engine.step(task, body)


def resume_journal(engine: Engine, task: str, pending: dict[str, Any]) -> dict[str, Any]:
    """A complete resumed on another machine (a hand-over after a crash): the archival and
    squash commits the first machine made but never published are not here. They were never
    on main, so the journal goes back to the approved commit and they are made again."""
    remote = team_remote(engine)
    if remote is None or "pushed_main" in pending:
        return pending
    repo = engine.ws.repo
    made = [k for k in ("archival_sha", "squash_sha") if k in pending]
    if all(gitrepo.rev_parse(repo, f"{pending[k]}^{{commit}}") for k in made):
        return pending
    redo = {k: v for k, v in pending.items() if k not in made}
    return _journal(engine, task, redo, "complete_restarted", {
        "reason": "the archival/squash commits of an earlier attempt are not on this machine "
        "and were never published", "dropped": {k: pending[k] for k in made},
    })  # fmt: skip


def publish_main(engine: Engine, task: str, pending: dict[str, Any], main: str) -> dict[str, Any]:
    """Put the squash on the shared remote's main (a fast-forward guarded by a lease on the
    main this complete started from) before this machine's main; journaled, idempotent."""
    remote = team_remote(engine)
    if remote is None or "pushed_main" in pending:
        return pending
    repo, squash = engine.ws.repo, str(pending["squash_sha"])
    expected = str(pending.get("main_sha") or "")
    theirs = catch_up_main(engine, main)
    if theirs is not None and (theirs == squash or ops.is_ancestor(repo, squash, theirs)):
        return _journal(engine, task, {**pending, "pushed_main": squash}, "main_pushed",
                        {"remote": remote, "sha": squash, "already": True})  # fmt: skip
    if theirs is not None and theirs != expected:
        raise _moved(engine, task, main, remote, theirs)
    ref = f"refs/heads/{main}"
    specs = [f"{squash}:{ref}"]
    archival = str(pending.get("archival_sha") or "")
    if archival and gitrepo.rev_parse(repo, f"refs/heads/{task}") == squash:
        # T as this machine has it (the squash) and the archival commit the audit records
        # travel too, so another machine resuming this journal after a hand-over has both.
        specs += [f"+{squash}:refs/heads/{task}", f"+{archival}:{ARCHIVAL_PREFIX}{task}"]
    lease = f"--force-with-lease={ref}:{expected if theirs else ''}"
    failpoints.wait("complete:before-push")  # tests: another machine's push wins the race
    done = _network(engine, remote, "push", "--porcelain", "--atomic", lease, remote, *specs)
    if not done.ok:  # rejected: someone else's push won the race for main
        theirs = catch_up_main(engine, main) or ""
        if theirs != squash and not ops.is_ancestor(repo, squash, theirs):
            raise _moved(engine, task, main, remote, theirs)
    failpoints.hit("complete:main-pushed")
    failpoints.wait("complete:main-pushed")  # tests: the database goes down right here
    return _journal(engine, task, {**pending, "pushed_main": squash}, "main_pushed",
                    {"remote": remote, "sha": squash})  # fmt: skip


def _moved(engine: Engine, task: str, main: str, remote: str, theirs: str) -> MainMoved:
    wt = engine.ws.task_worktree(task)
    return MainMoved(
        f"'{main}' on the shared remote '{remote}' moved to {theirs[:12]} since this complete "
        f"began: '{task}' no longer fast-forwards it (nothing was pushed or merged; "
        f"this machine's {main} was brought up to date)",
        [Violation("R-CMP-06", "the merge into main is fast-forward only", "")],
        hint=f"rebase the task through the protocol: taskgate transition {task} "
        f"IMPLEMENTATION --reason 'rebase onto {main}'; cd {wt} && git rebase {main}; then "
        f"validate, review and present again, approve, and run 'taskgate complete {task}'",
    )
