"""What a git invocation may write (hooks/programs.py, issue 15): the worktree it runs in,
the paths it names, its output files, or anything at all (aliases, -c settings that run
commands, --git-dir/--work-tree elsewhere). Option prefixes count as git parses them: `reset
--har` is `reset --hard`, `push --forc` reaches `--force`. The protocol rules on git commands
(merges, pushes, branch deletion) are in hooks/gitrules.py."""

from __future__ import annotations

import os

from taskgate.hooks.policy import split_git

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence


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


# Subcommands that always run an external program (the configured diff or merge tool, a web
# server and browser, sendmail).
_RUNS_TOOLS = frozenset({"difftool", "mergetool", "instaweb", "send-email", "web--browse"})


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
    if env or any(
        k.startswith("GIT_") or k in ("HOME", "XDG_CONFIG_HOME", "SSH_ASKPASS") for k in st.vars
    ):
        from taskgate.hooks.gitrun import environment

        environment(st, env)
    if sub_at < len(argv) and argv[sub_at] in _RUNS_TOOLS:
        result.may_write_anything(f"git {argv[sub_at]} runs an external tool")
    if (
        sub_at < len(argv)
        and argv[sub_at] == "grep"
        and any_option(argv[sub_at + 1 :], "-O", "--open-files-in-pager")
    ):
        result.may_write_anything("git grep -O runs the pager it is given on the files found")
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
    if sub in ("clone", "init") or (sub == "worktree" and rest[:1] == ["add"]):
        from taskgate.hooks.gitrun import creates

        creates(st, sub, rest[1:] if sub == "worktree" else rest)
        return
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
