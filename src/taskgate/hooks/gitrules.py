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
    deny,
    forbids_main_writes,
    place,
    split_git,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

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


# Options that take a value, per subcommand that rewrites worktree files.
_VALUED = {
    "checkout": frozenset({"-b", "-B", "--orphan", "--conflict", "--pathspec-from-file"}),
    "switch": frozenset({"-c", "-C", "--create", "--force-create", "--orphan", "--conflict"}),
    "restore": frozenset({"-s", "--source", "--conflict", "--pathspec-from-file"}),
}
_STASH_READERS = frozenset({"list", "show", "create"})
# Subcommands that change the worktree, the index or HEAD of the worktree they run in.
_WORKTREE_WRITERS = frozenset(
    {
        "am",
        "apply",
        "checkout",
        "checkout-index",
        "cherry-pick",
        "clean",
        "commit",
        "merge",
        "mv",
        "pull",
        "read-tree",
        "rebase",
        "reset",
        "restore",
        "revert",
        "rm",
        "stash",
        "switch",
        "add",
        "update-index",
        "sparse-checkout",
        "submodule",
        "bisect",
        "filter-branch",
        "filter-repo",
        "commit-tree-never",
        "notes-never",
        "merge-file",
        "mergetool",
        "citool",
        "gui",
        "commit-graph-never",
    }
)
# Subcommands that only read the repository (with their writing options handled below).
_READERS = frozenset(
    {
        "status",
        "log",
        "show",
        "diff",
        "blame",
        "annotate",
        "grep",
        "ls-files",
        "ls-tree",
        "ls-remote",
        "rev-parse",
        "rev-list",
        "describe",
        "cat-file",
        "shortlog",
        "whatchanged",
        "for-each-ref",
        "name-rev",
        "merge-base",
        "show-ref",
        "var",
        "version",
        "help",
        "check-ignore",
        "check-attr",
        "check-ref-format",
        "count-objects",
        "fsck",
        "range-diff",
        "cherry",
        "diff-tree",
        "diff-files",
        "diff-index",
        "verify-commit",
        "verify-tag",
        "show-branch",
        "get-tar-commit-id",
        "column",
        "patch-id",
        "hash-object",
        "fetch",
        "push",
        "branch",
        "tag",
        "remote",
        "config",
        "worktree",
        "reflog",
        "archive",
        "format-patch",
        "update-ref",
        "symbolic-ref",
        "notes",
        "gc",
        "prune",
        "repack",
        "maintenance",
        "mktree",
        "mktag",
        "commit-tree",
        "unpack-objects",
        "pack-objects",
        "index-pack",
        "verify-pack",
        "bundle",
        "interpret-trailers",
        "send-email",
        "request-pull",
        "rerere",
        "clone",
        "init",
        "replace",
        "difftool",
        "instaweb",
        "fast-export",
        "fast-import",
        "bugreport",
    }
)
# -c keys (or key prefixes) whose value git runs as a command.
_COMMAND_CONFIG = (
    "alias.",
    "core.fsmonitor",
    "core.hookspath",
    "core.pager",
    "core.editor",
    "core.sshcommand",
    "core.askpass",
    "core.gitproxy",
    "diff.external",
    "sequence.editor",
    "gpg.program",
    "gpg.ssh.program",
    "credential.helper",
    "uploadpack.packobjectshook",
    "pager.",
    "filter.",
    "diff.",
    "merge.",
    "interactive.difffilter",
    "include.",
    "includeif.",
    "core.worktree",
    "core.attributesfile",
    "protocol.ext",
    "remote.",
    "url.",
    "sendemail.",
    "web.browser",
    "browser.",
    "man.",
    "difftool.",
    "mergetool.",
    "core.excludesfile",
    "init.templatedir",
    "submodule.",
)


def long_option(arg: str, full: str) -> bool:
    """`arg` names git's long option `full`: exactly, or as a prefix git would accept
    (`--har` is `--hard`; `--forc` reaches `--force`)."""
    key = arg.partition("=")[0]
    return key.startswith("--") and len(key) >= 3 and full.startswith(key)


def short_flag(args: list[str], letter: str) -> bool:
    """`-x` alone or in a cluster (`-qf`)."""
    return any(a.startswith("-") and not a.startswith("--") and letter in a[1:] for a in args)


def any_option(args: list[str], *names: str) -> bool:
    """One of the options `names` (short letters as `-x`, long ones by git's prefixes)."""
    for name in names:
        if name.startswith("--"):
            if any(long_option(a, name) for a in args if a != "--"):
                return True
        elif short_flag([a for a in args if a != "--"], name[1:]):
            return True
    return False


def global_options(argv: list[str]) -> tuple[int, list[str], list[str]]:
    """(index of the subcommand, -c settings, --git-dir/--work-tree/... values) of a git argv."""
    i = 1
    configs: list[str] = []
    elsewhere: list[str] = []
    while i < len(argv) and argv[i].startswith("-"):
        a = argv[i]
        if a == "-c" and i + 1 < len(argv):
            configs.append(argv[i + 1])
            i += 2
            continue
        if a.startswith("--config-env"):
            configs.append(a.partition("=")[2] or (argv[i + 1] if i + 1 < len(argv) else ""))
        for opt in ("--git-dir", "--work-tree", "--exec-path", "--namespace"):
            if a == opt or a.startswith(opt + "="):
                elsewhere.append(opt)
        i += 2 if a in ("-C", "--git-dir", "--work-tree", "--namespace", "--config-env") else 1
    return i, configs, elsewhere


def git_effects(st: object, args: Sequence[object], env: dict[str, str | None]) -> None:
    """What one git invocation may write, recorded in the analysis state (hooks/shell.py):
    the worktree it runs in (or named paths), its output files, or anything at all (aliases,
    -c settings that run commands, --git-dir/--work-tree pointing elsewhere)."""
    from taskgate.hooks.lexer import Word
    from taskgate.hooks.shell import State

    assert isinstance(st, State)
    words = [w for w in args if isinstance(w, Word)]
    argv = ["git", *[w.text for w in words]]
    result = st.result
    sub_at, configs, elsewhere = global_options(argv)
    sub = argv[sub_at] if sub_at < len(argv) else ""
    rest = argv[sub_at + 1 :]
    cwds = split_git(argv, st.cwds)[2]
    for setting in configs:
        if setting.lower().startswith(_COMMAND_CONFIG):
            result.may_write_anything(f"git -c {setting.partition('=')[0]} runs a command")
    redirected = [
        k
        for k, v in env.items()
        if k.startswith("GIT_")
        and k
        not in (
            "GIT_PAGER",
            "GIT_TERMINAL_PROMPT",
            "GIT_OPTIONAL_LOCKS",
            "GIT_TRACE",
            "GIT_AUTHOR_NAME",
            "GIT_AUTHOR_EMAIL",
            "GIT_COMMITTER_NAME",
            "GIT_COMMITTER_EMAIL",
            "GIT_AUTHOR_DATE",
            "GIT_COMMITTER_DATE",
            "GIT_EDITOR",
        )
    ]
    if not sub:
        return
    if sub not in _READERS and sub not in _WORKTREE_WRITERS:
        result.may_write_anything(f"git {sub} is an alias or an external command")
        return
    if sub == "config" and _config_writes(rest):
        for i, a in enumerate(rest):
            if a in ("-f", "--file") and i + 1 < len(rest):
                st.write(Word(rest[i + 1]))
        result.may_write_anything("git config changes what git runs (aliases, hooks, pagers)")
        return
    writes = worktree_writes(sub, rest, cwds)
    if (elsewhere or redirected) and (
        writes
        or sub in _WORKTREE_WRITERS
        or sub
        not in (
            "status",
            "log",
            "show",
            "diff",
            "rev-parse",
            "ls-files",
            "ls-tree",
            "cat-file",
            "grep",
            "blame",
            "describe",
            "for-each-ref",
            "show-ref",
            "rev-list",
            "shortlog",
        )
    ):
        what = ", ".join(elsewhere + redirected)
        result.may_write_anything(f"git {sub} with {what} may write another worktree")
        return
    for path in writes:
        if path in cwds:
            st.result.tree_writes.add(os.path.realpath(path))  # the worktree's tracked files
        else:
            st.result.writes.add(st.physical(path))
    for d in (
        cwds if sub in _WORKTREE_WRITERS and not writes and _changes_worktree(sub, rest) else ()
    ):
        st.result.tree_writes.add(os.path.realpath(d))
    _output_files(st, sub, rest, cwds)


def _config_writes(rest: list[str]) -> bool:
    """Whether `git config ARGS` changes a configuration file."""
    reads = (
        "--get",
        "--get-all",
        "--get-regexp",
        "--get-urlmatch",
        "--list",
        "--get-color",
        "--get-colorbool",
        "--show-origin",
        "--show-scope",
        "--name-only",
    )
    if any(any(long_option(a, r) for r in reads) for a in rest) or "-l" in rest:
        return False
    valued = ("-f", "--file", "--blob", "--type", "--default")
    ops: list[str] = []
    skip = False
    for a in rest:
        if skip:
            skip = False
        elif a in valued:
            skip = True
        elif not a.startswith("-"):
            ops.append(a)
        elif not any(
            long_option(a, k)
            for k in ("--global", "--system", "--local", "--worktree", "--includes", "--null", "-z")
        ):
            return True  # --unset, --add, --replace-all, --edit, --rename-section ...
    if ops[:1] in (["get"], ["list"]):
        return False
    return len(ops) >= 2 or ops[:1] in (
        ["set"],
        ["unset"],
        ["edit"],
        ["rename-section"],
        ["remove-section"],
    )


def _changes_worktree(sub: str, rest: list[str]) -> bool:
    if sub == "stash":
        first = next((a for a in rest if not a.startswith("-")), "push")
        return first not in _STASH_READERS
    if sub == "apply":
        return not any_option(rest, "--check", "--stat", "--numstat", "--summary")
    if sub == "clean":
        return worktree_writes("clean", rest, ("x",)) != []
    if sub == "bisect":
        first = next((a for a in rest if not a.startswith("-")), "")
        return first not in ("log", "view", "visualize", "terms", "")
    if sub == "submodule":
        first = next((a for a in rest if not a.startswith("-")), "status")
        return first not in ("status", "summary", "foreach-never")
    if sub in ("checkout", "switch"):
        return bool(rest)
    return True


def _output_files(st: object, sub: str, rest: list[str], cwds: tuple[str, ...]) -> None:
    from taskgate.hooks.lexer import Word
    from taskgate.hooks.shell import State

    assert isinstance(st, State)
    values: list[str] = []
    for i, a in enumerate(rest):
        for opt in ("--output", "--output-directory") if sub != "archive" else ("--output",):
            if long_option(a, opt) and len(a.partition("=")[0]) > 4:
                values.append(
                    a.partition("=")[2] if "=" in a else (rest[i + 1] if i + 1 < len(rest) else "")
                )
        if a == "-o" and sub in ("format-patch", "archive") and i + 1 < len(rest):
            values.append(rest[i + 1])
    if sub == "format-patch":
        if not values and not any_option(rest, "--stdout"):
            values.append(".")
        for v in values:
            st.write_below(Word(v))
        return
    if sub == "bundle" and rest[:1] == ["create"] and len(rest) > 1:
        values.append(rest[1])
    if sub == "bugreport":
        values.append(".")
    for v in values:
        st.write(Word(v))
    del cwds


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
                return list(cwds)  # a new branch: HEAD changes
            if not args[i].startswith("-") or args[i] == "-":  # `-` is the previous branch
                operands.append(args[i])
            i += 1
        if sub == "restore":
            return [os.path.normpath(os.path.join(c, p)) for c in cwds for p in operands]
        return list(cwds) if operands else []  # a branch, a commit or paths: the worktree
    if sub == "stash":
        first = next((a for a in args if not a.startswith("-")), "push")
        return [] if first in _STASH_READERS else list(cwds)
    if sub == "reset":
        return list(cwds)  # HEAD, the index or the files: all of them are the worktree's
    if sub == "clean":
        forced = any_option(args, "-f", "--force")
        dry = any_option(args, "-n", "--dry-run")
        return list(cwds) if forced and not dry else []
    if sub == "rm" or sub == "mv":
        ops = [a for a in args if not a.startswith("-")]
        return [os.path.normpath(os.path.join(c, p)) for c in cwds for p in ops] or list(cwds)
    return []


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
