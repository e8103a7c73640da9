"""The git rules of the PreToolUse policy: merges, pushes, branch deletion, destructive git.

Pure except `worktree remove --force`, the one rare case that asks git whether work would be
lost (DESIGN.md: decisions need no git subprocess in the common case).
"""

from __future__ import annotations

import os

from taskgate.hooks.giteffects import any_option
from taskgate.hooks.policy import (
    ALLOW,
    FINISHING,
    Actor,
    Layout,
    Verdict,
    deny,
    forbids_main_writes,
    place,
    split_git,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from taskgate.hooks.shell import Command


def check_git(command: Command, layout: Layout, actor: Actor) -> Verdict:
    """Deny git commands that bypass the completion sequence or destroy work."""
    sub, args, cwds = split_git(command.argv, command.cwds)
    in_main = any(place(os.path.realpath(c), layout)[0] == "main" for c in cwds)
    state = actor.task.state if actor.task else ""
    finishing = state in FINISHING
    if sub == "reflog" and args[:1] in (["expire"], ["delete"]):
        return deny(
            "R-WTB-09",
            "expiring the reflog destroys the history recovery relies on; leave it to git's own gc",
        )
    if sub == "clean" and in_main and (any_option(args, "-x", "-X")):
        return deny(
            "R-LCK-09",
            "git clean -x in the main worktree deletes taskgate's state "
            "directory; clean inside your task worktree instead",
        )
    if sub == "reset" and in_main and any_option(args, "--hard", "--merge", "--keep"):
        return deny(
            "R-LCK-15",
            "reset --hard on the main worktree discards main's work; reset "
            "only inside your task worktree",
        )
    if sub == "push":
        return _push(args, in_main, finishing, actor, layout)
    if sub == "branch":
        return _branch(args, finishing, actor, layout)
    if sub in ("update-ref", "symbolic-ref", "fetch", "tag", "replace"):
        verdict = _ref_writes(sub, args, finishing, actor, layout)
        if not verdict.allow:
            return verdict
    if sub == "merge" and in_main and actor.task is not None and not finishing:
        return deny(
            "R-CMP-07",
            "merging into main happens only in the completion sequence; "
            f"get the change approved and run 'taskgate complete {actor.task.name}'",
        )
    if sub in ("merge", "pull", "cherry-pick", "rebase") and actor.task is not None:
        t = actor.task
        in_task = any(
            place(os.path.realpath(c), layout)[:2] == ("task-worktree", t.name) for c in cwds
        )
        if in_task and not actor.agent and forbids_main_writes(t):
            return deny(
                "R-AGT-12",
                f"the main agent does not change the task branch itself in {t.state}; run "
                f"'taskgate merge {t.name}' to merge the agents' branches (it is recorded and "
                "keeps the effect check's baseline)",
            )
    if sub == "worktree" and args[:1] in (["remove"], ["move"]):
        verdict = _taskgate_worktree(args, cwds, layout, actor)
        if not verdict.allow:
            return verdict
    if sub == "worktree" and args[:1] == ["remove"] and any_option(args, "-f", "--force"):
        return _worktree_remove(args, cwds, layout)
    if sub == "worktree" and args[:1] in (["move"], ["prune"]) and actor.task is not None:
        return deny(
            "R-WTB-09",
            "task and agent worktrees are taskgate's; leave moving and pruning them to "
            "'taskgate cleanup'",
        )
    if sub == "stash" and any_option(args, "-a", "--all"):
        return deny(
            "R-LCK-09",
            "git stash --all also stashes ignored files, taskgate's state directory among "
            "them; use 'git stash' or 'git stash -u'",
        )
    return ALLOW


def _taskgate_worktree(
    args: list[str], cwds: tuple[str, ...], layout: Layout, actor: Actor
) -> Verdict:
    """Task and agent worktrees are removed and moved only by `taskgate cleanup`."""
    if actor.task is None and not actor.tasks:
        return ALLOW  # the first pass knows no tasks: the session's own pass decides
    paths = [a for a in args[1:] if not a.startswith("-")][:1]
    for path in paths:
        target = os.path.realpath(os.path.join(cwds[0], path))
        kind, task, _ = place(os.path.join(target, "-"), layout)
        if kind in ("task-worktree", "agent-worktree"):
            own = actor.task is not None and task == actor.task.name
            if not own or actor.task is None or actor.task.state not in FINISHING:
                return deny(
                    "R-LCK-04" if not own else "R-CLN-03",
                    f"{target} is a worktree of task '{task}'; taskgate removes it in "
                    f"'taskgate cleanup {task}' once nothing would be lost",
                )
    return ALLOW


def _ref_writes(
    sub: str, args: list[str], finishing: bool, actor: Actor, layout: Layout
) -> Verdict:
    """update-ref, symbolic-ref, `fetch . x:main`: refs moved or deleted by name."""
    ops = [a for a in args if not a.startswith("-")]
    if sub == "update-ref":
        if "--stdin" in args:
            return deny(
                "R-LCK-09",
                "git update-ref --stdin moves refs taskgate cannot see in advance; move "
                "your own branch with git commands in your worktree",
            )
        names = ops[:1]
        deleting = "-d" in args or len(ops) >= 1
    elif sub == "symbolic-ref":
        names = ops[:1] if len(ops) >= 2 or "-d" in args or "--delete" in args else []
        deleting = bool(names)
    elif sub == "fetch":
        specs = ops[1:]
        names = [spec.lstrip("+").rsplit(":", 1)[1] for spec in specs if ":" in spec]
        deleting = bool(names)
    else:
        return ALLOW
    targets = [n.removeprefix("refs/heads/") for n in names if n]
    if deleting and targets:
        main = _main_branch(layout)
        if any(t in (main, "HEAD") for t in targets) and not finishing:
            return deny(
                "R-CMP-01",
                f"{main} moves only through 'taskgate complete' after the person approved "
                "the change",
            )
        return _delete_branches(targets, finishing, actor, layout)
    return ALLOW


def _main_branch(layout: Layout) -> str:
    from pathlib import Path

    from taskgate.git.repo import head_ref

    return head_ref(Path(layout.repo)) or "main"


def _push(args: list[str], in_main: bool, finishing: bool, actor: Actor, layout: Layout) -> Verdict:
    refspecs = [a for a in args if not a.startswith("-")][1:]
    if any_option(
        args, "-f", "--force", "--mirror", "--force-with-lease", "--force-if-includes"
    ) or any(r.startswith("+") for r in refspecs):
        return deny(
            "R-CMP-06",
            "force-pushing rewrites published history; merges are "
            "fast-forward only: rebase, validate and present again instead",
        )
    deleting = any_option(args, "-d", "--delete", "--prune")
    targets = [r.rsplit(":", 1)[-1].removeprefix("refs/heads/") for r in refspecs]
    if deleting or any(r.startswith(":") for r in refspecs):
        return _delete_branches(targets, finishing, actor, layout)
    main = _main_branch(layout)
    to_main = main in targets or (not refspecs and in_main) or ("HEAD" in targets and in_main)
    if to_main and actor.task is not None and not finishing:
        return deny(
            "R-CMP-01",
            f"pushing to {main} happens only after the person approved the "
            f"change, via 'taskgate complete {actor.task.name}'",
        )
    if actor.task is not None and not finishing:
        for target in targets:
            owner = _task_of_branch(target, actor.tasks)
            if owner and owner != actor.task.name:
                return deny(
                    "R-LCK-09",
                    f"branch '{target}' belongs to task '{owner}', which this session does "
                    "not own; leave it alone",
                )
    return ALLOW


def _branch(args: list[str], finishing: bool, actor: Actor, layout: Layout) -> Verdict:
    names = [a for a in args if not a.startswith("-")]
    if any_option(args, "-d", "-D", "--delete"):
        return _delete_branches(names, finishing, actor, layout)
    if any_option(args, "-m", "-M", "--move"):
        if len(names) < 2 and actor.task is not None and not finishing:
            return deny(
                "R-CLN-03",
                "renaming the checked-out branch takes it away from taskgate; task branches "
                f"keep their names until 'taskgate cleanup {actor.task.name}'",
            )
        return _delete_branches(names[:2], finishing, actor, layout)
    if any_option(args, "-f", "--force", "-c", "-C", "--copy"):
        return _delete_branches(names[:1], finishing, actor, layout)  # overwritten
    return ALLOW


def _delete_branches(names: list[str], finishing: bool, actor: Actor, layout: Layout) -> Verdict:
    main = _main_branch(layout)
    own = actor.task.name if actor.task else ""
    for name in names:
        if name == main:
            return deny("R-LCK-15", f"deleting {main} is never part of the protocol")
        owner = _task_of_branch(name, actor.tasks)
        if owner and owner != own:
            return deny(
                "R-LCK-09",
                f"branch '{name}' belongs to task '{owner}', which this "
                "session does not own; leave it alone",
            )
        if owner and not finishing:
            return deny(
                "R-CLN-03",
                f"task branches are deleted only by cleanup; run "
                f"'taskgate cleanup {owner}' after the task is COMPLETE",
            )
    return ALLOW


def _task_of_branch(name: str, tasks: dict[str, tuple[str, ...]]) -> str:
    """The task owning branch `name` (T, or T-A for one of its agents, R-WTB-02)."""
    if name in tasks:
        return name
    for at, char in enumerate(name):  # T-A: T ends at a '-' (one lookup each, issue 18)
        if char == "-" and name[at + 1 :] in tasks.get(name[:at], ()):
            return name[:at]
    return ""


def _worktree_remove(args: list[str], cwds: tuple[str, ...], layout: Layout) -> Verdict:
    from pathlib import Path

    from taskgate.git import repo as gitrepo
    from taskgate.git.cmd import git

    paths = [a for a in args[1:] if not a.startswith("-")]
    if not paths:
        return ALLOW
    target = Path(os.path.normpath(os.path.join(cwds[0], paths[0])))
    if not gitrepo.is_worktree(target):
        return ALLOW
    branch = gitrepo.head_ref(target)
    lost = ""
    if gitrepo.dirty_files(target):
        lost = "uncommitted changes"
    elif (
        branch
        and not git(
            "merge-base",
            "--is-ancestor",
            branch,
            _main_branch(layout),
            cwd=layout.repo,
            check=False,
        ).ok
    ):
        lost = f"commits on '{branch}' that are not merged"
    if lost:
        return deny(
            "R-CLN-04",
            f"{target} holds {lost}; removing it with --force would lose "
            "work. Merge or commit first, or let 'taskgate cleanup' remove it",
        )
    return ALLOW
