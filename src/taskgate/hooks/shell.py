"""What a Bash command line may write: a small POSIX shell parser, not a grep (issue 7).

`analyse(command, cwd)` tokenises with shell quoting, splits on `&&`, `||`, `;`, `|`, `&` and
newlines, follows `cd`, subshells, variable assignments, `bash -c`/`eval` strings and command
substitutions, and returns every path the command may write (redirections, tee, cp/mv/rm/...,
`sed -i`, `dd of=`), the simple commands it runs (for the git and taskgate rules), and whether
the analysis was complete. Interpreter one-liners (`python -c`, `perl -e`, `node -e`) are
returned as opaque code: the policy treats them as writes when they mention protected paths.

Imports stay minimal (no re, typing or dataclasses): this runs on every Bash tool call.
"""

from __future__ import annotations

import os

from taskgate.hooks.lexer import Lexer, Word

SEPARATORS = frozenset({"&&", "||", ";", "|", "|&", "&", "\n", "(", ")"})
_WRAPPERS_WITH_ARG = {
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "--user", "--group"}),
    "doas": frozenset({"-u", "-C"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "-n", "-p"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "timeout": frozenset({"-s", "-k", "--signal", "--kill-after"}),
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-S"}),
    "time": frozenset({"-f", "-o"}),
}
_PLAIN_WRAPPERS = frozenset({"nohup", "command", "builtin", "exec", "then", "do", "else", "!"})
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash"})
_INTERPRETER_FLAGS = {
    "python": ("-c",),
    "perl": ("-e", "-E"),
    "node": ("-e", "-p", "--eval"),
    "ruby": ("-e",),
    "php": ("-r",),
    "deno": ("eval",),
}
_REMOVERS = frozenset({"rm", "rmdir", "unlink", "shred", "touch", "mkdir", "mkfifo", "mknod"})
_MODE_FIRST = frozenset({"chmod", "chown", "chgrp"})
_SPECIAL_FILES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
SCRIPT_LIMIT = 256 * 1024  # larger scripts are not read: the analysis is then incomplete


class Command:
    """A simple command after wrappers were stripped, with the directories it may run in."""

    __slots__ = ("argv", "cwds", "known")

    def __init__(self, argv: list[str], cwds: tuple[str, ...], known: bool) -> None:
        self.argv = argv
        self.cwds = cwds
        self.known = known

    def __repr__(self) -> str:
        return f"Command({self.argv!r}, {self.cwds!r})"


class Analysis:
    """Everything one command line may write, and what it runs."""

    __slots__ = (
        "commands",
        "complete",
        "dir_writes",
        "link_targets",
        "opaque",
        "problems",
        "scripts",
        "writes",
    )

    def __init__(self) -> None:
        self.writes: set[str] = set()  # absolute paths (normalised, symlinks not resolved)
        self.link_targets: set[str] = set()  # what new symlinks point at (writes go through)
        self.dir_writes: set[str] = set()  # "something below this directory"
        self.commands: list[Command] = []
        self.opaque: list[str] = []  # interpreter code we cannot analyse
        self.scripts: list[tuple[str, str]] = []  # (path, source) of interpreter scripts run
        self.problems: list[str] = []  # why the analysis is incomplete
        self.complete = True

    def unknown(self, why: str) -> None:
        """Record that part of the command could not be analysed."""
        self.complete = False
        self.problems.append(why)


class _State:
    """Where the next command runs and which variables we know, while walking a line."""

    def __init__(self, result: Analysis, cwds: tuple[str, ...], home: str, depth: int) -> None:
        self.result = result
        self.cwds = cwds
        self.home = home
        self.vars: dict[str, str] = {}
        self.depth = depth
        self.text = ""  # the line being walked: the code an interpreter reads from stdin

    def substitution(self, inner: str) -> None:
        """Commands inside $(...) or backticks run too: analyse them in place."""
        _walk(inner, self.result, self.cwds, self.home, self.depth + 1, dict(self.vars))

    def paths(self, word: Word) -> list[str]:
        """Absolute paths a word may name (globs expanded against the disk, every cwd)."""
        if not word.known:
            self.result.unknown(f"a path depends on runtime values: {word.text!r}")
            return []
        found: list[str] = []
        for cwd in self.cwds:
            path = os.path.normpath(os.path.join(cwd, word.text))
            found.append(path)
            if word.glob:
                found.extend(_expand(path))
        return found


def _expand(pattern: str) -> list[str]:
    """Glob and one-level brace expansion; dotfiles included, to fail closed."""
    import glob

    variants = [pattern]
    if "{" in pattern and "}" in pattern:
        head, _, rest = pattern.partition("{")
        body, _, tail = rest.partition("}")
        variants = [head + part + tail for part in body.split(",")]
    found: list[str] = []
    for variant in variants:
        found.append(variant)
        found.extend(glob.glob(variant, include_hidden=True))
    return found


def analyse(command: str, cwd: str, *, home: str | None = None) -> Analysis:
    """Every path `command` may write when run in `cwd`, and the commands it runs."""
    result = Analysis()
    _walk(command, result, (cwd,), home or os.path.expanduser("~"), 0, {})
    return result


def _walk(
    text: str,
    result: Analysis,
    cwds: tuple[str, ...],
    home: str,
    depth: int,
    variables: dict[str, str],
) -> None:
    if depth > 8:
        result.unknown("shell nesting deeper than 8 levels")
        return
    st = _State(result, cwds, home, depth)
    st.vars = variables
    st.text = text
    stack: list[tuple[tuple[str, ...], dict[str, str]]] = []
    words: list[Word] = []
    redirs: list[tuple[str, Word]] = []
    for kind, value in Lexer(text, st).tokens():
        if kind == "word":
            assert isinstance(value, Word)
            words.append(value)
        elif kind == "redir":
            assert isinstance(value, tuple)
            redirs.append(value)
        else:
            op = str(value)
            before = st.cwds
            _simple(st, words, redirs, op)
            words, redirs = [], []
            if op == "(":
                stack.append((before, dict(st.vars)))
            elif op == ")" and stack:
                st.cwds, st.vars = stack.pop()
            elif op in ("|", "|&", "&"):
                st.cwds = before  # each side of a pipe or & runs in its own subshell
    _simple(st, words, redirs, "\n")


def _simple(st: _State, words: list[Word], redirs: list[tuple[str, Word]], op: str) -> None:
    """Handle one simple command: its redirections, then what its program writes."""
    result = st.result
    for rop, target in redirs:
        if ">" in rop:
            if target.known and (
                target.text in _SPECIAL_FILES
                or (rop.endswith("&") and (target.text.isdigit() or target.text == "-"))
            ):
                continue  # 2>&1, >/dev/null: no file
            result.writes.update(st.paths(target))
    while words and _is_assignment(words[0].text):
        assignment = words.pop(0)
        name, _, value = assignment.text.partition("=")
        if not words:  # a bare assignment sets a shell variable for later commands
            _assign(st, name, value, assignment.known)
    if not words:
        return
    _program(st, words, op)


def _assign(st: _State, name: str, value: str, known: bool) -> None:
    if known:
        st.vars[name] = value
    else:
        st.vars.pop(name, None)  # its value is known only at run time


def _is_assignment(text: str) -> bool:
    name, eq, _ = text.partition("=")
    valid = name.replace("_", "a").isalnum() and not name[:1].isdigit()
    return bool(name and eq) and valid


def _program(st: _State, words: list[Word], op: str) -> None:
    result = st.result
    words = _strip_wrappers(words)
    if not words:
        return
    name = os.path.basename(words[0].text)
    args = words[1:]
    known = all(w.known for w in words)
    result.commands.append(Command([w.text for w in words], st.cwds, known))
    if not words[0].known:
        result.unknown("the program name depends on runtime values")
    if name in ("cd", "pushd"):
        _cd(st, args, op)
    elif name in ("export", "readonly", "declare", "local"):
        for w in args:
            if _is_assignment(w.text):
                key, _, value = w.text.partition("=")
                _assign(st, key, value, w.known)
    elif name in _SHELLS or name == "eval":
        _nested_shell(st, name, args)
    elif name == "xargs":
        rest = [w for w in args if not w.text.startswith("-")]
        if rest and _writes_something(os.path.basename(rest[0].text)):
            result.unknown("xargs passes runtime arguments to a command that writes files")
    elif name == "find":
        _find(st, args)
    elif "/" in words[0].text:  # ./build.sh, tools/gen.py: a file run directly
        _script(st, words[0], None)
        _writer(st, name, args)
    else:
        _writer(st, name, args)


def _strip_wrappers(words: list[Word]) -> list[Word]:
    """`sudo -u x env A=b nice -n 5 cmd ...` -> `cmd ...`."""
    while words:
        name = os.path.basename(words[0].text)
        if name in _PLAIN_WRAPPERS:
            words = words[1:]
        elif name in _WRAPPERS_WITH_ARG:
            takes_arg = _WRAPPERS_WITH_ARG[name]
            i = 1
            while i < len(words):
                t = words[i].text
                if t in takes_arg:
                    i += 2
                elif t.startswith("-") or (name == "env" and _is_assignment(t)):
                    i += 1
                else:
                    break
            if name == "timeout" and i < len(words):
                i += 1  # the duration
            words = words[i:]
        else:
            return words
    return words


def _cd(st: _State, args: list[Word], op: str) -> None:
    target = next((w for w in args if not w.text.startswith("-") or w.text == "-"), None)
    if target is None:
        new: tuple[str, ...] = (st.home,)
    elif not target.known or target.text == "-":
        st.result.unknown("cd to a directory known only at run time")
        return
    else:
        new = tuple(os.path.normpath(os.path.join(c, target.text)) for c in st.cwds)
    # A failing cd leaves the old directory in place unless `&&` stops the chain.
    certain = op == "&&" or all(os.path.isdir(p) for p in new)
    st.cwds = new if certain else tuple(dict.fromkeys(st.cwds + new))


def _nested_shell(st: _State, name: str, args: list[Word]) -> None:
    if name == "eval":
        code = " ".join(w.text for w in args)
        known = all(w.known for w in args)
    else:
        flag = next(
            (
                i
                for i, w in enumerate(args)
                if w.text.startswith("-") and "c" in w.text and not w.text.startswith("--")
            ),
            None,
        )
        if flag is None or flag + 1 >= len(args):
            _stdin_code(st, args, shell=True)  # stdin, or `bash script.sh` from disk
            return
        code, known = args[flag + 1].text, args[flag + 1].known
    if not known:
        st.result.unknown(f"{name} runs code built at run time")
    _walk(code, st.result, st.cwds, st.home, st.depth + 1, dict(st.vars))


def _stdin_code(st: _State, args: list[Word], shell: bool) -> None:
    """An interpreter or shell without a script operand runs code from stdin (a pipe or a
    here-document): the whole line counts as opaque code. With one, the script is read."""
    if any(w.text == "-m" for w in args):
        return  # python -m MODULE runs installed code, not analysed (documented)
    operands = _operands(args, frozenset({"-W", "-X", "-o", "-O"}))
    if not operands or operands[0].text == "-":
        st.result.opaque.append(st.text)
    else:
        _script(st, operands[0], shell)


def _script(st: _State, word: Word, shell: bool | None) -> None:
    """A script file the command runs: a shell script is analysed like the command line
    itself; other interpreters' scripts are kept for the protected-path check. `shell=None`
    decides from the #! line (a file run directly)."""
    if not word.known:
        st.result.unknown(f"the script to run depends on runtime values: {word.text!r}")
        return
    path = os.path.normpath(os.path.join(st.cwds[0], word.text))
    try:
        with open(path, "rb") as handle:
            data = handle.read(SCRIPT_LIMIT + 1)
    except OSError:
        return  # nothing to run (or a program on PATH): the shell fails the same way
    if len(data) > SCRIPT_LIMIT or b"\0" in data:
        st.result.unknown(f"the script {path} is too large or not text")
        return
    text = data.decode("utf-8", "replace")
    if shell is None:
        first = text.split("\n", 1)[0]
        # "#!/bin/bash -e", "#!/usr/bin/env bash", "#!/usr/bin/env -S python3 -u"; none: sh
        names = [os.path.basename(w) for w in first[2:].split() if not w.startswith("-")]
        if names[:1] == ["env"]:
            names = names[1:]
        shell = not first.startswith("#!") or (bool(names) and names[0] in _SHELLS)
    if shell:
        _walk(text, st.result, st.cwds, st.home, st.depth + 1, {})
    else:
        st.result.scripts.append((path, text))


def _find(st: _State, args: list[Word]) -> None:
    roots = [w for w in args if not w.text.startswith(("-", "(", ")", "!"))][:1] or [Word(".")]
    texts = [w.text for w in args]
    writes = "-delete" in texts or any(
        t in ("-exec", "-execdir", "-ok") and i + 1 < len(texts) and _writes_something(texts[i + 1])
        for i, t in enumerate(texts)
    )
    if writes:
        for root in st.paths(roots[0]):
            st.result.dir_writes.add(root)


def _writes_something(name: str) -> bool:
    return (
        name in _REMOVERS
        or name in _MODE_FIRST
        or name
        in (
            "cp",
            "mv",
            "ln",
            "install",
            "tee",
            "truncate",
            "dd",
            "sed",
            "perl",
            "rsync",
            "sh",
            "bash",
        )
    )


def _operands(args: list[Word], with_value: frozenset[str] = frozenset()) -> list[Word]:
    out: list[Word] = []
    skip = False
    only = False
    for w in args:
        if skip:
            skip = False
        elif only or not w.text.startswith("-") or w.text == "-":
            out.append(w)
        elif w.text == "--":
            only = True
        elif w.text in with_value:
            skip = True
    return out


def _writer(st: _State, name: str, args: list[Word]) -> None:
    result = st.result
    base = name.rstrip("0123456789.")
    if base in _INTERPRETER_FLAGS:
        _interpreter(st, base, args)
        return
    targets: list[Word] = []
    if name in _REMOVERS:
        targets = _operands(args, frozenset({"-m", "--mode"}))
    elif name in _MODE_FIRST:
        targets = _operands(args)[1:]
    elif name == "tee":
        targets = _operands(args)
    elif name == "truncate":
        targets = _operands(args, frozenset({"-s", "--size", "-r", "--reference"}))
    elif name in ("cp", "mv", "ln", "install", "rsync"):
        targets = _copy_targets(st, name, args)
        if name == "ln":
            _link_targets(st, args)
    elif name == "dd":
        targets = [Word(w.text[3:], w.known, w.glob) for w in args if w.text.startswith("of=")]
    elif name == "sed" and any(w.text.startswith(("-i", "--in-place")) for w in args):
        ops = _operands(args, frozenset({"-e", "-f", "--expression", "--file"}))
        has_script = any(w.text in ("-e", "-f", "--expression", "--file") for w in args)
        targets = ops if has_script else ops[1:]
    elif name in ("patch", "tar", "unzip", "git-apply"):
        for cwd in st.cwds:
            result.dir_writes.add(cwd)
    for target in targets:
        result.writes.update(st.paths(target))


def _copy_targets(st: _State, name: str, args: list[Word]) -> list[Word]:
    with_value = frozenset({
        "-t", "--target-directory", "-S", "--suffix", "-m", "--mode", "-o", "-g", "--owner",
        "--group",
    })  # fmt: skip
    ops = _operands(args, with_value)
    directory = next(
        (args[i + 1] for i, w in enumerate(args[:-1]) if w.text in ("-t", "--target-directory")),
        None,
    )
    if name == "install" and any(w.text in ("-d", "--directory") for w in args):
        return ops
    if directory is not None:
        dest, sources = directory, ops
    elif len(ops) >= 2 or (name == "ln" and ops):
        dest, sources = (ops[-1], ops[:-1]) if len(ops) >= 2 else (Word("."), ops)
    else:
        return []
    found = [dest]
    # `cp a b dir/` writes dir/a and dir/b; `mv` also removes its sources.
    found += [
        Word(os.path.join(dest.text, os.path.basename(s.text)), dest.known and s.known)
        for s in sources
    ]
    if name == "mv":
        found += sources
    return found


def _link_targets(st: _State, args: list[Word]) -> None:
    # A symlink into taskgate's files would let a later write reach them.
    ops = _operands(args, frozenset({"-t", "--target-directory", "-S", "--suffix"}))
    sources = ops[:-1] if len(ops) >= 2 else ops
    link_dir = os.path.dirname(ops[-1].text) if len(ops) >= 2 else ""
    for source in sources:
        st.result.link_targets.update(st.paths(source))
        if link_dir and source.known:
            st.result.link_targets.update(st.paths(Word(os.path.join(link_dir, source.text))))


def _interpreter(st: _State, base: str, args: list[Word]) -> None:
    texts = [w.text for w in args]
    flags = _INTERPRETER_FLAGS[base]
    code_at = next(
        (
            i
            for i, t in enumerate(texts)
            if t in flags
            or (
                base == "perl"
                and t.startswith("-")
                and t[1:2] != "-"
                and any(f[1] in t for f in flags)
            )
        ),
        None,
    )
    if base == "perl" and any(t.startswith("-") and "i" in t[1:] for t in texts):
        # perl -i / -pi edits the file operands in place
        for w in _operands(args, frozenset({"-e", "-E"}))[0 if code_at is not None else 1 :]:
            st.result.writes.update(st.paths(w))
    if code_at is None or code_at + 1 >= len(args):
        _stdin_code(st, args, shell=False)  # stdin, or `python tool.py` from disk
        return
    st.result.opaque.append(args[code_at + 1].text)
    if not args[code_at + 1].known:
        st.result.unknown(f"{base} code built at run time")
