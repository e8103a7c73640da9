"""`taskgate merge T`: agent branches T-A into the task branch T in IMPLEMENTATION rounds.

Each agent branch is merged in the task worktree; a conflict is reported with its files and
the agents whose commits touched them, and the merge is aborted so that nothing half-merged
remains (C-50 leaves merge-conflict handling to the project: stop, report, let the agents
resolve it in their worktrees). Then every clean agent worktree is rebased onto the updated
task branch for the next round. Journaled: a crash mid-merge is undone and redone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from taskgate import failpoints
from taskgate.engine import journal_work
from taskgate.engine.core import Engine, current_state
from taskgate.engine.facts import task_path
from taskgate.errors import Refused, UsageError
from taskgate.git import ops
from taskgate.git import repo as gitrepo
from taskgate.git.cmd import git
from taskgate.protocol.states import State
from taskgate.protocol.violations import Violation
from taskgate.store.base import Tx
from taskgate.store.records import TaskSnapshot

OP = "merge"


@dataclass(frozen=True)
class Conflict:
    """A merge of one agent branch that stopped on conflicting files."""

    agent: str
    files: dict[str, list[str]]  # path -> agents whose commits touched it

    def to_json(self) -> dict[str, Any]:
        """JSON shape for --json."""
        return {"agent": self.agent, "files": [{"path": p, "agents": a}
                                               for p, a in self.files.items()]}  # fmt: skip


@dataclass(frozen=True)
class MergeResult:
    """What a merge round did."""

    task: str
    head: str
    merged: list[dict[str, Any]] = field(default_factory=list)  # {"agent", "commits"}
    up_to_date: list[str] = field(default_factory=list)
    conflict: Conflict | None = None
    rebased: list[str] = field(default_factory=list)
    not_rebased: dict[str, str] = field(default_factory=dict)  # agent -> why

    def to_json(self) -> dict[str, Any]:
        """JSON shape for --json."""
        return {
            "task": self.task,
            "head": self.head,
            "merged": self.merged,
            "up_to_date": self.up_to_date,
            "conflict": self.conflict.to_json() if self.conflict else None,
            "rebased": self.rebased,
            "not_rebased": self.not_rebased,
        }


def record_commits(
    engine: Engine,
    tx: Tx,
    snap: TaskSnapshot,
    shas: Sequence[str],
    *,
    branch: str,
    **extra: object,
) -> None:
    """R-AUD-03 / R-WTB-06: a `commit` event per commit not yet recorded, attributed to the
    agent named by its `[agent:A]` tag ("main" for taskgate's own and untagged commits)."""
    seen = {str(e.payload.get("sha")) for e in snap.events if e.kind == "commit"}
    for sha in shas:
        if sha in seen:
            continue
        info = ops.commit(engine.ws.repo, sha)
        engine.event(
            tx,
            snap.task.name,
            "commit",
            {
                "sha": sha,
                "agent": ops.agent_of(info.subject) or "main",
                "branch": branch,
                "files_created": list(info.created),
                "files_modified": list(info.modified + info.deleted),
                "message": info.subject,
                **extra,
            },
        )


def _refuse_busy(path: Path, what: str) -> None:
    busy = gitrepo.in_progress(path)
    if busy:
        raise Refused(
            f"{what} {path} has an unfinished {busy} that taskgate did not start",
            [Violation("R-WTB-09", "worktrees are left intact; taskgate never discards them")],
            hint=f"cd {path} && git {busy} --continue (or git {busy} --abort), then rerun",
        )


def _untagged(repo: Path, task: str, agent: str) -> list[str]:
    """R-WTB-06: commits on T-A not yet in T whose message lacks the `[agent:A]` tag."""
    return [
        f"{sha[:12]} {subject}"
        for sha, subject in ops.subjects(
            repo, "--no-merges", f"refs/heads/{task}..refs/heads/{task}-{agent}"
        )
        if ops.agent_of(subject) != agent
    ]


def _merging_ours(engine: Engine, task: str, journal: dict[str, Any]) -> bool:
    """Whether the merge in progress in the task worktree is of a journaled agent's branch
    tip (ours, killed mid-merge); another one is left for the effect check to move aside."""
    wt = engine.ws.task_worktree(task)
    merging = gitrepo.rev_parse(wt, "MERGE_HEAD")
    tips = gitrepo.branch_tips(engine.ws.repo)
    return merging is not None and any(
        tips.get(f"{task}-{a}") == merging for a in journal.get("agents") or []
    )


def _drop_stale_copies(engine: Engine, task: str, agent: str) -> None:
    """Issue 16 (found by the torture): after T was rebased (onto a moved main, R-CMP-06), an
    agent branch still holds the old copies of T's commits; they look like untagged agent
    work (R-WTB-06) and the merge refused for ever. When every such commit has its
    patch-identical copy on T, the agent's clean worktree is rebased onto T, which drops them
    and keeps the agent's own commits; anything else (a conflict, a dirty or busy worktree)
    is left for the tag check to report."""
    repo, branch = engine.ws.repo, f"refs/heads/{task}-{agent}"
    ahead = ops.subjects(repo, "--no-merges", f"refs/heads/{task}..{branch}")
    own = ops.subjects(repo, "--no-merges", "--cherry-pick", "--right-only",
                       f"refs/heads/{task}...{branch}")  # fmt: skip
    if len(own) == len(ahead):
        return  # nothing on T-A that T already has under another name
    wt = engine.ws.agent_worktree(task, agent)
    if not gitrepo.is_worktree(wt) or gitrepo.head_ref(wt) != f"{task}-{agent}":
        return
    if gitrepo.in_progress(wt) or gitrepo.tracked_changes(wt):
        return
    result = git("rebase", "-q", f"refs/heads/{task}", cwd=wt, check=False)
    if not result.ok and gitrepo.in_progress(wt) == "rebase":
        git("rebase", "--abort", cwd=wt)  # the branch is as it was


def _preflight(engine: Engine, snap: TaskSnapshot, agents: Sequence[str]) -> None:
    t = snap.task
    repo = engine.ws.repo
    state = current_state(t)
    # The skip path (D-WFV-3: no IMPLEMENTATION) makes its change in SYNTHESIS.
    skip_path = state is State.SYNTHESIS and State.IMPLEMENTATION not in task_path(snap)
    if state is not State.IMPLEMENTATION and not skip_path:
        raise Refused(
            f"agent branches are merged in IMPLEMENTATION, the task is in {t.state}",
            [Violation("R-AST-20", "agents implement, rebase and merge in IMPLEMENTATION rounds")],
            hint=f"see 'taskgate status {t.name}'",
        )
    wt = engine.ws.task_worktree(t.name)
    if not gitrepo.is_worktree(wt) or gitrepo.head_ref(wt) != t.name:
        raise Refused(
            f"the task worktree {wt} is missing or not on branch '{t.name}' (detached HEAD?)",
            [Violation("R-WTB-01", "the task worktree is on branch T")],
            hint=f"cd {wt} && git switch {t.name}, or run 'taskgate recover {t.name}'",
        )
    _refuse_busy(wt, "the task worktree")
    dirty = gitrepo.tracked_changes(wt)
    if dirty:
        raise Refused(
            f"the task worktree has uncommitted changes: {', '.join(sorted(dirty)[:10])}",
            [Violation("R-WTB-08", "agents' work reaches T only through their branches")],
            hint="commit them with an [agent:A] tag on an agent branch, or discard them",
        )
    tips = gitrepo.branch_tips(repo)
    for agent in agents:
        if f"{t.name}-{agent}" not in tips:
            raise UsageError(
                f"agent branch '{t.name}-{agent}' does not exist (R-WTB-02)",
                hint=f"run 'taskgate recover {t.name}' to recreate the agent worktrees",
            )
        _drop_stale_copies(engine, t.name, agent)
        untagged = _untagged(repo, t.name, agent)
        if untagged:
            raise Refused(
                f"commits on '{t.name}-{agent}' lack the [agent:{agent}] tag: "
                + "; ".join(untagged[:5]),
                [Violation("R-WTB-06", f"agent commit messages start with [agent:{agent}]")],
                hint=f"reword them in {engine.ws.agent_worktree(t.name, agent)} (git rebase -i "
                f"{t.name}, 'reword'), then rerun",
            )


def _touched_by(engine: Engine, snap: TaskSnapshot, agent: str, path: str) -> list[str]:
    """Agents whose commits on T (since the task began) or on T-A touched `path`."""
    t = snap.task
    repo = engine.ws.repo
    names = {agent}
    base = t.base_sha or f"refs/heads/{t.base_branch}"
    for _, subject in ops.subjects(
        repo, "--no-merges", f"{base}..refs/heads/{t.name}", paths=(path,)
    ):
        names.add(ops.agent_of(subject) or "main")
    return sorted(names)


def _merge_one(engine: Engine, snap: TaskSnapshot, agent: str) -> Conflict | None:
    t = snap.task
    wt = engine.ws.task_worktree(t.name)
    branch = f"{t.name}-{agent}"
    result = git(
        "merge", "--no-verify", "--no-edit", "-q", "-m", f"taskgate: merge {branch} into {t.name}",
        f"refs/heads/{branch}", cwd=wt, check=False,
    )  # fmt: skip
    if result.ok:
        return None
    files = ops.conflicted_files(wt)
    if gitrepo.in_progress(wt) == "merge":
        git("merge", "--abort", cwd=wt)  # nothing half-merged is left behind
    if not files:
        raise Refused(
            f"git could not merge '{branch}': {(result.stderr or result.stdout).strip()[-400:]}",
            [Violation("C-50", "a failed merge is stopped and reported")],
            hint=f"cd {wt} and inspect; nothing was merged",
        )
    return Conflict(agent, {f: _touched_by(engine, snap, agent, f) for f in files})


def _rebase_agents(engine: Engine, snap: TaskSnapshot) -> tuple[list[str], dict[str, str]]:
    """Bring every clean agent worktree onto the updated T for the next round."""
    t = snap.task
    rebased: list[str] = []
    skipped: dict[str, str] = {}
    for agent in t.required_agents:
        wt = engine.ws.agent_worktree(t.name, agent)
        branch = f"{t.name}-{agent}"
        if not gitrepo.is_worktree(wt) or gitrepo.head_ref(wt) != branch:
            skipped[agent] = f"worktree missing or not on {branch}"
            continue
        busy = gitrepo.in_progress(wt)
        if busy or gitrepo.tracked_changes(wt):
            skipped[agent] = f"unfinished {busy}" if busy else "uncommitted changes"
            continue
        if ops.is_ancestor(wt, f"refs/heads/{t.name}", "HEAD"):
            continue  # already contains T
        if ops.is_ancestor(wt, "HEAD", f"refs/heads/{t.name}"):
            git("merge", "--ff-only", "-q", f"refs/heads/{t.name}", cwd=wt)
        else:
            result = git("rebase", "-q", f"refs/heads/{t.name}", cwd=wt, check=False)
            if not result.ok:
                if gitrepo.in_progress(wt) == "rebase":
                    git("rebase", "--abort", cwd=wt)
                skipped[agent] = f"rebase onto {t.name} conflicts; the agent resolves it"
                continue
        rebased.append(agent)
    return rebased, skipped


def merge_agents(engine: Engine, task: str, agents: Sequence[str] = ()) -> MergeResult:
    """Merge the agents' branches into T (all required agents by default), then rebase them."""
    with journal_work.running(engine, task):  # the effect check tells a killed merge by it
        return _merge_agents(engine, task, agents)


def _merge_agents(engine: Engine, task: str, agents: Sequence[str]) -> MergeResult:
    snap = engine.require_snapshot(task)
    engine.require_owner(snap.task)
    t = snap.task
    wanted = list(dict.fromkeys(agents)) or list(t.required_agents)
    unknown = [a for a in wanted if a not in t.required_agents]
    if unknown:
        raise UsageError(
            f"not a required agent of '{task}': {', '.join(unknown)}",
            hint=f"agents: {', '.join(t.required_agents)}",
        )
    wt = engine.ws.task_worktree(task)
    journal = t.pending if t.pending and t.pending.get("op") == OP else None
    if journal is not None:
        if gitrepo.in_progress(wt) == "merge" and _merging_ours(engine, task, journal):
            git("merge", "--abort", cwd=wt)  # our own merge, interrupted by a crash: redo it
        # Resumed: compare before redoing git work, as the first step of an un-crashed run
        # does. The merges the journal explains join the baseline; anything else the guarded
        # session's agent changed meanwhile is moved aside and recorded (issue 15).
        journal_work.compare_first(engine, task)
    _preflight(engine, snap, wanted)
    before = str(journal["before"]) if journal else (gitrepo.head_sha(wt) or "")
    # Branches already in T stay in it (HEAD only moves forward): each is asked once, and the
    # first that is not needs no second asking either (nothing is merged before it).
    contained: set[str] = set()
    first_out = None
    for agent in wanted:
        if not ops.is_ancestor(wt, f"refs/heads/{task}-{agent}", "HEAD"):
            first_out = agent
            break
        contained.add(agent)
    if journal is None and first_out is not None:  # else no git merge runs: nothing to journal

        def begin(tx: Tx, current: TaskSnapshot) -> None:
            engine.touch(tx, current, pending={"op": OP, "agents": wanted, "before": before})

        engine.step(task, begin)
    merged: list[dict[str, Any]] = []
    up_to_date: list[str] = []
    conflict = None
    failure: Refused | None = None
    for agent in wanted:
        branch = f"refs/heads/{task}-{agent}"
        if agent in contained or (agent != first_out and ops.is_ancestor(wt, branch, "HEAD")):
            up_to_date.append(agent)
            continue
        count = len(ops.rev_list(wt, "--no-merges", branch, "--not", "HEAD"))
        try:
            conflict = _merge_one(engine, snap, agent)
        except Refused as exc:
            failure = exc  # git refused before merging: close the journal, then report
            break
        failpoints.hit("merge:after-git")
        if conflict is not None:
            break
        merged.append({"agent": agent, "commits": count})
    head = gitrepo.head_sha(wt) or ""

    def done(tx: Tx, current: TaskSnapshot) -> None:
        shas = ops.rev_list(engine.ws.repo, "--no-merges", f"{before}..{head}")
        record_commits(engine, tx, current, shas, branch=task)
        engine.event(
            tx,
            task,
            "agent_merge",
            {"merged": merged, "head": head, "conflict": conflict.to_json() if conflict else None},
        )
        engine.touch(tx, current, pending=None)

    engine.step(task, done)
    if failure is not None:
        raise failure
    rebased, skipped = _rebase_agents(engine, engine.require_snapshot(task))
    return MergeResult(task, head, merged, up_to_date, conflict, rebased, skipped)
