"""The git rules of the PreToolUse policy: merges, pushes, branch deletion, destructive git.

Pure except `worktree remove --force`, the one rare case that asks git whether work would be
lost (DESIGN.md: decisions need no git subprocess in the common case).
"""

from __future__ import annotations

import os

from taskgate.hooks.policy import (
    ALLOW,
    FINISHING,
    Actor,
    Layout,
    Verdict,
    check_write,
    deny,
    place,
    split_git,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from taskgate.hooks.shell import Command

_FORCE = ("-f", "--force", "--mirror")


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
    if (
        sub == "clean"
        and in_main
        and any(a.startswith("-") and ("x" in a or "X" in a) for a in args)
    ):
        return deny(
            "R-LCK-09",
            "git clean -x in the main worktree deletes taskgate's state "
            "directory; clean inside your task worktree instead",
        )
    if sub == "reset" and "--hard" in args and in_main:
        return deny(
            "R-LCK-15",
            "reset --hard on the main worktree discards main's work; reset "
            "only inside your task worktree",
        )
    if sub == "push":
        return _push(args, in_main, finishing, actor, layout)
    if sub == "branch":
        return _branch(args, finishing, actor, layout)
    if sub == "merge" and in_main and actor.task is not None and not finishing:
        return deny(
            "R-CMP-07",
            "merging into main happens only in the completion sequence; "
            f"get the change approved and run 'taskgate complete {actor.task.name}'",
        )
    if sub == "worktree" and args[:1] == ["remove"] and any(a in _FORCE for a in args):
        return _worktree_remove(args, cwds, layout)
    if sub == "stash" and any(a in ("-a", "--all") for a in args):
        return deny(
            "R-LCK-09",
            "git stash --all also stashes ignored files, taskgate's state directory among "
            "them; use 'git stash' or 'git stash -u'",
        )
    for path in worktree_writes(sub, args, cwds):
        verdict = check_write(path, layout, actor)
        if not verdict.allow:
            return verdict
    return ALLOW


# Options that take a value, per subcommand that rewrites worktree files.
_VALUED = {
    "checkout": frozenset({"-b", "-B", "--orphan", "--conflict", "--pathspec-from-file"}),
    "switch": frozenset({"-c", "-C", "--create", "--force-create", "--orphan", "--conflict"}),
    "restore": frozenset({"-s", "--source", "--conflict", "--pathspec-from-file"}),
}
_STASH_WRITERS = frozenset({"push", "save", "pop", "apply", "branch"})


def worktree_writes(sub: str, args: list[str], cwds: tuple[str, ...]) -> list[str]:
    """The files a git subcommand rewrites in the worktree it runs in: the paths it names, or
    the directory itself when it may change any tracked file there (a branch switch, a stash,
    `reset --hard`, `clean -f`). Merges are integration, not edits, and are judged above."""
    if sub in _VALUED:
        valued = _VALUED[sub]
        operands: list[str] = []
        i = 0
        while i < len(args):
            if args[i] == "--":
                paths = args[i + 1 :]
                return [os.path.normpath(os.path.join(c, p)) for c in cwds for p in paths]
            if args[i] in valued:
                i += 2
                continue
            if not args[i].startswith("-") or args[i] == "-":  # `-` is the previous branch
                operands.append(args[i])
            i += 1
        if sub == "restore":
            staged_only = any(a in ("-S", "--staged") for a in args) and not any(
                a in ("-W", "--worktree") for a in args
            )
            named = [os.path.normpath(os.path.join(c, p)) for c in cwds for p in operands]
            return [] if staged_only else named
        return list(cwds) if operands else []  # a branch, a commit or paths: the worktree
    if sub == "stash":
        first = next((a for a in args if not a.startswith("-")), "push")
        return list(cwds) if first in _STASH_WRITERS else []
    if sub == "reset" and any(a in ("--hard", "--merge", "--keep") for a in args):
        return list(cwds)
    if sub == "clean":
        forced = any(a == "--force" or (a[:1] == "-" and a[1:2] != "-" and "f" in a) for a in args)
        dry = any(a in ("-n", "--dry-run") for a in args)
        return list(cwds) if forced and not dry else []
    return []


def _main_branch(layout: Layout) -> str:
    from pathlib import Path

    from taskgate.git.repo import head_ref

    return head_ref(Path(layout.repo)) or "main"


def _push(args: list[str], in_main: bool, finishing: bool, actor: Actor, layout: Layout) -> Verdict:
    refspecs = [a for a in args if not a.startswith("-")][1:]
    if any(a in _FORCE or a.startswith("--force") for a in args) or any(
        r.startswith("+") for r in refspecs
    ):
        return deny(
            "R-CMP-06",
            "force-pushing rewrites published history; merges are "
            "fast-forward only: rebase, validate and present again instead",
        )
    deleting = "--delete" in args or "-d" in args
    targets = [r.rsplit(":", 1)[-1].removeprefix("refs/heads/") for r in refspecs]
    if deleting or any(r.startswith(":") for r in refspecs):
        return _delete_branches(targets, finishing, actor, layout)
    main = _main_branch(layout)
    to_main = main in targets or (not refspecs and in_main)
    if to_main and actor.task is not None and not finishing:
        return deny(
            "R-CMP-01",
            f"pushing to {main} happens only after the person approved the "
            f"change, via 'taskgate complete {actor.task.name}'",
        )
    return ALLOW


def _branch(args: list[str], finishing: bool, actor: Actor, layout: Layout) -> Verdict:
    short = [a for a in args if a.startswith("-") and not a.startswith("--")]
    if "--delete" not in args and not any("d" in a or "D" in a for a in short):
        return ALLOW
    names = [a for a in args if not a.startswith("-")]
    return _delete_branches(names, finishing, actor, layout)


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
    for task, agents in tasks.items():
        if any(name == f"{task}-{agent}" for agent in agents):
            return task
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
