"""The audit's questions to git: the task's commits, and whether git matches the record.

Branches, worktrees, recorded and merged commits are compared with the store; git is only
queried (R-AUD-12), what is wrong is reported with its fix (R-REC-11: taskgate never
fabricates a branch). Part of `taskgate audit` (engine/audit.py).
"""

from __future__ import annotations

from taskgate.engine.workspace import Workspace
from taskgate.git import repo as gitrepo
from taskgate.git.cmd import git, ok
from taskgate.protocol import audit_records as ar
from taskgate.protocol.states import State
from taskgate.store.records import TaskSnapshot

_DONE = (State.COMPLETE.value, State.CLEANUP.value)


def task_commits(ws: Workspace, snap: TaskSnapshot) -> tuple[ar.Commit, ...] | None:
    """Commits on branch T since the base (None when the branch or base is gone)."""
    t = snap.task
    if t.extra.get("squash_sha") or t.state in _DONE or not t.base_sha:
        return None  # completion squashed T into one commit: agent tags are gone by design
    if not gitrepo.branch_exists(ws.repo, t.name):
        return None
    result = git(
        "log",
        "--format=%x1e%H%x1f%P%x1f%B%x1f",
        "--name-only",
        f"{t.base_sha}..refs/heads/{t.name}",
        cwd=ws.repo,
        check=False,
    )
    if not result.ok:
        return None
    commits = []
    for record in result.stdout.split("\x1e")[1:]:
        sha, parents, message, files = [*record.split("\x1f"), "", "", ""][:4]
        commits.append(
            ar.Commit(
                sha.strip(),
                message.strip(),
                tuple(line for line in files.splitlines() if line.strip()),
                merge=len(parents.split()) > 1,
            )
        )
    return tuple(commits)


def _is_ancestor(ws: Workspace, sha: str, ref: str) -> bool:
    return ok("merge-base", "--is-ancestor", sha, ref, cwd=ws.repo)


def git_problems(ws: Workspace, snap: TaskSnapshot) -> list[tuple[str, str]]:
    """(evidence, fix) for each way git disagrees with the record."""
    t = snap.task
    name = t.name
    problems: list[tuple[str, str]] = []
    recover = f"run 'taskgate recover {name} --repair'"
    if t.pending:
        problems.append(
            (
                f"the journaled step {t.pending.get('op')!r} was interrupted "
                "(pending in the task row)",
                recover,
            )
        )
    if t.state in _DONE:
        merged = t.extra.get("merged_sha")
        if not merged:
            problems.append(
                (
                    f"the task is {t.state} but no merged commit is recorded (R-CMP-06)",
                    "complete the task with 'taskgate complete'",
                )
            )
        elif not _is_ancestor(ws, str(merged), f"refs/heads/{t.base_branch}"):
            problems.append(
                (
                    f"the merged commit {str(merged)[:12]} is not on "
                    f"{t.base_branch}: the main branch was rewritten",
                    "restore the main branch from its reflog",
                )
            )
        return problems
    branches = [name] + [f"{name}-{a}" for a in t.required_agents]
    agents_ready = t.state != State.INIT.value and (t.pending or {}).get("op") != (
        "create_agent_worktrees"
    )
    if (t.pending or {}).get("op") == "create_task_worktree":
        return problems
    if not agents_ready:
        branches = branches[:1]
    missing = [b for b in branches if not gitrepo.branch_exists(ws.repo, b)]
    for b in missing:
        problems.append(
            (
                f"branch {b} is missing (R-WTB-01, R-WTB-02)",
                "restore it from the reflog (git branch <name> <sha>); taskgate never "
                "fabricates a branch (R-REC-11)",
            )
        )
    if not t.released:
        worktrees = {p.resolve(): b for p, b in gitrepo.worktree_paths(ws.repo).items()}
        expected = [(ws.task_worktree(name), name)]
        if agents_ready:
            expected += [(ws.agent_worktree(name, a), f"{name}-{a}") for a in t.required_agents]
        for path, branch in expected:
            actual = worktrees.get(path.resolve(), "<none>") if path.exists() else "<none>"
            if actual == "<none>":
                problems.append((f"worktree {path} is missing (R-WTB-01)", recover))
            elif actual != branch:
                problems.append(
                    (
                        f"worktree {path} is on {actual or 'a detached HEAD'}, not {branch}",
                        f"git -C {path} checkout {branch}",
                    )
                )
    if name in missing or t.extra.get("squash_sha"):
        return problems  # after the squash (R-CMP-01) the recorded commits are replaced
    recorded: dict[str, str] = {}
    if t.base_sha:
        recorded.setdefault(t.base_sha, "the base commit")
    for v in snap.validations:
        recorded.setdefault(v.head_sha, f"the commit validated at {v.at}")
    for d in snap.verdicts:
        recorded.setdefault(d.head_sha, f"the commit {d.agent} reviewed at {d.at}")
    for a in snap.approvals:
        if a.kind == "changes" and a.revoked_at is None:
            recorded.setdefault(a.bound_to, f"the commit approved at {a.approved_at}")
    sha = (t.checkpoint or {}).get("commit_sha")
    if sha:
        recorded.setdefault(str(sha), "the checkpoint commit")
    for sha, what in recorded.items():
        if sha and not _is_ancestor(ws, sha, f"refs/heads/{name}"):
            problems.append(
                (
                    f"{what} ({sha[:12]}) is no longer on branch {name}: the branch "
                    "was rewritten behind taskgate's back",
                    f"restore branch {name} from its reflog (git -C "
                    f"{ws.task_worktree(name)} reset --hard {sha[:12]}) or validate, "
                    "review and present the new history again",
                )
            )
    return problems


def check_git(ws: Workspace, snap: TaskSnapshot) -> ar.CheckResult:
    """Branches, worktrees and recorded commits agree with the repository."""
    findings = [
        ar.Finding(
            evidence,
            fix,
            "git was changed outside taskgate (reset, rebase, branch or worktree removal) or a "
            "journaled step was interrupted",
        )
        for evidence, fix in git_problems(ws, snap)
    ]
    return ar.CheckResult(
        "git",
        "git matches the record (branches, worktrees, recorded and merged commits)",
        ("R-WTB-01", "R-WTB-02", "R-CMP-06", "R-REC-11"),
        tuple(findings),
    )
