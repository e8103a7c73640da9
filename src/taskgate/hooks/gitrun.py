"""What makes one git invocation run a program or create a repository (issue 15): settings
read from its environment (GIT_CONFIG_*, GIT_EXTERNAL_DIFF, HOME's .gitconfig ...), trace
files, and the new repository or worktree of `clone`, `init`, `worktree add`.
hooks/giteffects.py loads this module only for such an invocation."""

from __future__ import annotations

# Environment variables through which git reads settings that run commands, runs a program
# itself, or writes a file of its own (git(1) ENVIRONMENT VARIABLES, git-config(1)): on any
# subcommand, as `-c` does. `GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor ... git status`,
# `GIT_EXTERNAL_DIFF=cmd git diff`, `HOME=dir git status` (dir/.gitconfig) each run a command.
_COMMAND_ENV = ("GIT_CONFIG", "GIT_EXTERNAL_DIFF", "GIT_EXEC_PATH", "GIT_SSH", "GIT_ASKPASS",
                "GIT_PROXY_COMMAND", "GIT_SEQUENCE_EDITOR", "GIT_TEMPLATE_DIR")  # fmt: skip
_COMMAND_NAMES = frozenset({"HOME", "XDG_CONFIG_HOME", "SSH_ASKPASS"})


def environment(st: object, env: dict[str, str | None]) -> None:
    """The environment a git invocation is given (its assignments, and the line's own
    variables): what runs a command is unbounded; GIT_TRACE* set to a path writes that file."""
    from taskgate.hooks.lexer import Word
    from taskgate.hooks.shell import State

    assert isinstance(st, State)
    names = {**{k: v for k, v in st.vars.items() if k.startswith("GIT_") or k in _COMMAND_NAMES},
             **env}  # fmt: skip
    for key, value in names.items():
        if key.startswith(_COMMAND_ENV) or key in _COMMAND_NAMES:
            st.result.may_write_anything(f"git with {key} set may run a command")
        elif key.startswith("GIT_TRACE"):
            if value is None:
                st.result.may_write_anything(f"git with {key} set at run time may write a file")
            elif value.startswith("/"):
                st.write(Word(value))  # git appends its trace to that file
            elif value.lower() not in ("", "0", "1", "2", "true", "false", "yes", "no"):
                st.result.may_write_anything(f"git with {key}={value} may write a file")


# Options of clone, init and `worktree add` that take a value (the next word when not joined).
_CREATE_VALUED = frozenset({
    "-o", "--origin", "-b", "--branch", "-B", "-u", "--upload-pack", "--reference",
    "--reference-if-able", "--separate-git-dir", "--depth", "--shallow-since",
    "--shallow-exclude", "-c", "--config", "--filter", "-j", "--jobs", "--server-option",
    "--bundle-uri", "--template", "--ref-format", "--object-format", "--reason",
    "--initial-branch", "--shared",
})  # fmt: skip


def creates(st: object, sub: str, args: list[str]) -> None:
    """`git clone`, `git init`, `git worktree add`: a new repository or worktree, written below
    the directory it is made in (the current one when none is named); an upload-pack command
    or a template (whose hooks a clone's checkout runs) is unbounded."""
    from taskgate.hooks.lexer import Word
    from taskgate.hooks.shell import State

    assert isinstance(st, State)
    operands: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a.split("=", 1)[0] in ("-u", "--upload-pack", "--template") or a.startswith("-u"):
            st.result.may_write_anything(f"git {sub} {a.split('=', 1)[0]} runs what it names")
        if a == "--":
            operands.extend(args[i + 1 :])
            break
        if a.startswith("-"):
            i += 2 if a in _CREATE_VALUED else 1
            continue
        operands.append(a)
        i += 1
    if sub == "clone":
        operands = operands[1:]  # the repository cloned; then the directory, if named
    elif sub == "worktree":
        operands = operands[:1]  # the path; then the commit checked out there
    for target in operands or ["."]:
        st.write_below(Word(target))
