"""Simple commands for the Bash analyser: assignments, redirections, builtins, functions,
wrappers and scripts; programs themselves are judged in hooks/programs.py (issue 15)."""

from __future__ import annotations

import os

from taskgate.hooks.lexer import Redir, Word
from taskgate.hooks.shell import MAX_DEPTH, Command, State, merge_cwds, walk, walk_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from taskgate.hooks.grammar import Node

SCRIPT_LIMIT = 256 * 1024  # larger scripts are not read: the program may then write anything
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "busybox"})
_DECLARE = frozenset({"export", "readonly", "declare", "local", "typeset"})
_NEUTRAL = frozenset(
    {
        ":",
        "true",
        "false",
        "set",
        "shopt",
        "unset",
        "wait",
        "jobs",
        "disown",
        "shift",
        "return",
        "exit",
        "break",
        "continue",
        "ulimit",
        "umask",
        "hash",
        "type",
        "alias",
        "unalias",
        "echo",
        "printf",
        "test",
        "[",
        "[[",
        "((",
        "let",
        "getopts",
        "read",
        "mapfile",
        "readarray",
        "history",
        "help",
        "times",
        "bg",
        "fg",
        "suspend",
        "caller",
        "dirs",
        "enable",
        "kill",
        "logout",
        "complete",
        "compgen",
        "pwd",
    }
)


def is_assignment(text: str) -> bool:
    """`NAME=value` (also `NAME+=value`, `NAME[subscript]=value`)."""
    return split_assignment(text) is not None


def split_assignment(text: str) -> tuple[str, str | None, str] | None:
    """(name, subscript or None, value) of `NAME=value`, `NAME+=value`, `NAME[sub]=value`."""
    start = text.find("[")
    eq = text.find("=")
    if eq < 0:
        return None
    sub: str | None = None
    if 0 < start < eq:
        close = text.find("]=", start)
        if close < 0:
            close = text.find("]+=", start)
        if close < 0:
            return None
        name, sub = text[:start], text[start + 1 : close]
        eq = text.find("=", close)
    else:
        name = text[:eq]
    name = name.removesuffix("+")
    if not (name.isidentifier() and name.isascii()):
        return None
    return name, sub, text[eq + 1 :]


def redirect(redir: Redir, st: State) -> None:
    """A redirection: `>`-family writes its target; here-documents may feed code to stdin."""
    op = redir.op
    if op.endswith("<<<"):  # before `<<`, which it ends with: its word is expanded ($(...) runs)
        st.stdin_code = st.expander.expand(redir.target).text
        return
    if op.endswith(("<<", "<<-")):
        body = redir.body or ""
        quoted = any(q in redir.target for q in "'\"\\")
        if not quoted:
            st.expander.expand('"' + body.replace('"', '\\"') + '"')  # $(...) in the body runs
        st.stdin_code = body
        return
    if ">" not in op:
        st.expand(redir.target)  # an input's name is expanded too: `< $(touch f)` runs touch
        return
    for target in st.expand(redir.target):
        if target.known and op.endswith("&") and (target.text.isdigit() or target.text == "-"):
            continue  # 2>&1: a descriptor, no file
        st.write(target)


def simple(node: Node, st: State) -> None:
    """One simple command: redirections, assignments, then the program."""
    st.stdin_code = ""
    for redir in node.redirs:
        redirect(redir, st)
    words: list[Word] = []
    assigning = True
    env: dict[str, str | None] = {}
    for raw in node.parts:
        text = str(raw)
        parts = split_assignment(text) if assigning else None
        if parts is not None:
            name, sub, value = parts
            if value.startswith("(") and value.endswith(")"):
                array(st, name, value)
                env[name] = None
                continue
            word = st.expander.expand(value)
            if sub is not None:  # a[x]=1: the subscript is arithmetic (checked with bash 5.2)
                st.expander.subscript(name, sub)
                word = Word("", known=False)
            elif name in st.integers:  # declare -i y; y=x evaluates x
                st.expander.arith_word(word)
            env[name] = word.text if word.known else None
            continue
        assigning = False
        words.extend(st.expand(text))
    if not words:
        for key, val in env.items():  # a bare assignment sets shell variables
            st.assign(key, Word(val or "", val is not None))
        return
    run(words, st, env)


def run(words: list[Word], st: State, env: dict[str, str | None] | None = None) -> None:
    """Run a command given as expanded words (also for wrappers, xargs, find -exec ...)."""
    from taskgate.hooks import programs

    st.budget.spend(2)
    env = env or {}
    head = words[0]
    args = words[1:]
    result = st.result
    result.commands.append(
        Command([w.text for w in words], st.cwds, all(w.known for w in words), env)
    )
    if not head.known or (head.glob and head.text not in ("[", "[[")):
        result.unknown("the program name depends on runtime values")
        result.may_write_anything(f"a program named only at run time ({head.text or '$...'})")
        return
    name = head.text
    base = os.path.basename(name)
    if env or st.vars.keys() & _LINE_LOADERS:
        _loaders(st, env)
    if "/" not in name and name in st.functions:
        _call(st, name)
        return
    if "/" not in name and _builtin(st, name, args, env):
        return
    if "/" in name and not programs.known(base):
        script(st, head, None, args)
        return
    programs.judge(st, base, args, env)


# Environment variables that make a program load code they name, whatever the program: the
# dynamic loader's (`LD_PRELOAD=/tmp/x.so true` runs x.so), the interpreters' start-up code and
# options (`NODE_OPTIONS=--require`, `PERL5OPT=-M`, `RUBYOPT=-r`, bash's BASH_ENV, sh's ENV,
# Java agents). And their module search paths, through which project code shadows a module
# the command imports (`PYTHONPATH=. python3 -c 'import json'` runs ./json.py).
_LOADERS = frozenset({
    "LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "BASH_ENV", "ENV", "NODE_OPTIONS", "PERL5OPT",
    "RUBYOPT", "PYTHONSTARTUP", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS",
})  # fmt: skip
_LINE_LOADERS = _LOADERS - {"ENV"}  # assigned earlier on the line: ENV is a common plain name
_SEARCH_PATHS = frozenset({"PYTHONPATH", "PERL5LIB", "PERLLIB", "RUBYLIB", "NODE_PATH"})


def _loaders(st: State, env: dict[str, str | None]) -> None:
    """What the command's environment (its assignments, and the line's own variables) makes
    it load: code named there may write anything; a search path runs project code."""
    for name in sorted(env.keys() & _LOADERS | st.vars.keys() & _LINE_LOADERS):
        st.result.may_write_anything(f"{name} makes the program load code it names")
    if env.keys() & _SEARCH_PATHS:
        st.result.runs_code = True  # a module of the project may shadow one it imports


_STDIN_FILES = frozenset({"/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"})


def _call(st: State, name: str) -> None:
    if st.depth > MAX_DEPTH:
        st.result.unknown(f"function {name} recurses deeper than {MAX_DEPTH} levels")
        return
    st.depth += 1
    try:
        walk(st.functions[name], st)
    finally:
        st.depth -= 1


def _builtin(st: State, name: str, args: list[Word], env: dict[str, str | None]) -> bool:
    """Shell builtins that change what the analyser knows; True when `name` was one."""
    if name in ("cd", "pushd", "popd"):
        _cd(st, name, args)
    elif name in _DECLARE:
        _declare(st, args)
    elif name in ("read", "mapfile", "readarray", "getopts", "printf") and args:
        if name in ("mapfile", "readarray") and any(w.text.startswith("-") for w in args):
            from taskgate.hooks.builtin_effects import callbacks, option_values

            callbacks(st, name, option_values(args, "C", "dnOsuCc"))
        if name != "printf" or args[0].text == "-v":
            for w in _names(name, args):
                st.expander.name_operand(w)
                base = w.text.partition("[")[0]
                if base.isidentifier():
                    st.assign(base, Word("", known=False))
        return name != "printf"
    elif name in ("[[", "test", "[", "let", "unset"):
        _evaluating(st, name, args)
        return True
    elif name in ("source", "."):
        if args and args[0].known and args[0].text in _STDIN_FILES:
            if st.stdin_code:  # `source /dev/stdin <<< '...'`: the here-document is the script
                walk_text(st.stdin_code, st)
            else:
                st.result.may_write_anything(f"{name} {args[0].text}: code read from stdin")
        elif args:
            script(st, args[0], True, args[1:], sourced=True)
    elif name == "hash" and any(w.text.startswith("-") and "p" in w.text for w in args):
        st.result.may_write_anything("hash -p makes a name run another program")
    elif name == "eval":
        code = " ".join(w.text for w in args)
        if not all(w.known for w in args):
            st.result.unknown("eval runs code built at run time")
            st.result.may_write_anything("eval of code built at run time")
        walk_text(code, st)
    elif name in ("exec", "command", "builtin"):
        from taskgate.hooks.builtin_effects import wrapped

        rest = wrapped(name, args, st)
        if rest:  # none: `exec` with only redirections (judged), `command -v` (prints only)
            run(rest, st, env)
    elif name in ("history", "compgen", "enable") and args:
        from taskgate.hooks.builtin_effects import callbacks, history, option_values

        if name == "history":
            history(st, args)
        elif name == "enable" and option_values(args, "f", "f"):
            st.result.may_write_anything("enable -f loads a shared library into the shell")
        elif name == "compgen":
            callbacks(st, name, option_values(args, "C", "AGWXPSCFo"))
            for function in option_values(args, "F", "AGWXPSCFo"):
                if function.known and function.text in st.functions:
                    _call(st, function.text)
                else:
                    st.result.may_write_anything(f"compgen -F runs the function {function.text}")
    elif name == "trap":
        if args and args[0].known and args[0].text not in ("-", "-p", "-l", ""):
            walk_text(args[0].text, st.copy())
        elif args and not args[0].known:
            st.result.may_write_anything("trap with code built at run time")
    elif name not in _NEUTRAL:
        return False
    return True


_ARITH_TESTS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
_OPTION_ARGS = {"read": "adinNptu", "mapfile": "dnOsuCc", "readarray": "dnOsuCc", "printf": "v"}


def _declare(st: State, args: list[Word]) -> None:
    """declare/typeset/local/export/readonly: `-i` values and subscripts are arithmetic,
    `-n` values are names (bash evaluates a subscript in them when the name is used)."""
    flags = "".join(w.text[1:] for w in args if w.text.startswith("-"))
    for w in args:
        parts = split_assignment(w.text)
        if parts is not None:
            key, sub, value = parts
            if "A" in flags:
                st.expander.assoc.add(key)
            if sub is not None and w.known:
                st.expander.subscript(key, sub)
            elif sub is not None:
                st.expander.name_operand(w)  # a subscript known only at run time
            if "i" in flags:
                st.expander.arith_word(Word(value, w.known))
                st.integers.add(key)
            if "n" in flags:
                st.expander.name_operand(Word(value, w.known))
            if value.startswith("(") and value.endswith(")") and w.known:
                array(st, key, value)
            st.assign(key, Word(value, w.known and sub is None))
        elif not w.text.startswith(("-", "+")):
            if "A" in flags:
                st.expander.assoc.add(w.text)
            st.expander.name_operand(w)
            if "i" in flags:
                st.integers.add(w.text)
            st.assign(w.text.partition("[")[0], Word("", known=False))


def array(st: State, name: str, value: str) -> None:
    """`name=(a b [k]=v)`: each element expands; a `[k]=` subscript is arithmetic (a string
    for a `declare -A` array)."""
    from taskgate.hooks.lexer import tokenize

    for kind, raw in tokenize(value[1:-1], st.budget):
        if kind != "word":
            continue
        text = str(raw)
        close = text.find("]=") if text.startswith("[") else -1
        if close > 0:
            st.expander.subscript(name, text[1:close])
            text = text[close + 2 :]
        st.expand(text)


def _names(name: str, args: list[Word]) -> list[Word]:
    """The variable names read, mapfile, getopts and printf -v assign."""
    takes = _OPTION_ARGS.get(name, "")
    found: list[Word] = []
    skip = False
    for i, w in enumerate(args):
        if skip:
            skip = False
            continue
        text = w.text
        if w.known and text.startswith("-") and len(text) > 1 and name != "getopts":
            if text[-1] in takes:
                skip = True
                if text[-1] in "av" and i + 1 < len(args):
                    found.append(args[i + 1])  # read -a NAME, printf -v NAME
            continue
        if name == "printf":
            break
        if name == "getopts" and not found:
            found.append(Word("", known=True))  # the option string is no name
            continue
        found.append(w)
    return [w for w in found if w.text or not w.known]


def _evaluating(st: State, name: str, args: list[Word]) -> None:
    """Builtins that evaluate their operands (checked with bash 5.2): `[[ a -eq b ]]`'s sides
    and `let`'s arguments are arithmetic; the names of `test -v`, `[[ -v ]]` and `unset`
    have subscripts evaluated as arithmetic. `test`/`[` compare integers without evaluating."""
    ex = st.expander
    if name == "let":
        for w in args:
            ex.arith_word(w)
    elif name == "unset":
        if not any(w.text.startswith("-") and "f" in w.text for w in args):
            for w in args:
                if not (w.known and w.text.startswith("-")):
                    ex.name_operand(w)
    else:
        for i, w in enumerate(args[:-1]):
            if not w.known:
                continue
            if w.text == "-v":
                ex.name_operand(args[i + 1])
            elif name == "[[" and w.text in _ARITH_TESTS and i > 0:
                ex.arith_word(args[i - 1])
                ex.arith_word(args[i + 1])


def _cd(st: State, name: str, args: list[Word]) -> None:
    physical = any(w.text == "-P" for w in args)
    operands = [w for w in args if not w.text.startswith("-") or w.text == "-"]
    target = operands[0] if operands else None
    old = st.cwds
    if name == "popd":
        if not st.dirstack:
            st.result.unknown("popd to a directory this line did not push")
            return
        new = st.dirstack.pop()
    elif target is None:
        if name == "pushd":
            st.result.unknown("pushd without a directory swaps to one this line did not push")
            return
        new = (st.home,)
    elif target.text == "-" and target.known:
        if st.oldpwd is None:
            st.result.unknown("cd - to a directory known only at run time")
            return
        new = st.oldpwd
    elif not target.known:
        st.result.unknown("cd to a directory known only at run time")
        return
    else:
        joined = [os.path.join(c, target.text) for c in st.cwds]
        from taskgate.hooks.policy import process_relative  # loaded by a `cd` only

        if any(process_relative(p) for p in joined):
            st.result.may_write_anything(f"cd {target.text}: a directory relative to a process")
        new = tuple(
            dict.fromkeys(os.path.realpath(p) if physical else os.path.normpath(p) for p in joined)
        )
    if name == "pushd" and st.dirstack is not None:
        st.dirstack.append(old)
    st.oldpwd = old
    # A cd that may fail leaves the old directory possible; `cd x && ...` decides it.
    if all(os.path.isdir(p) for p in new):
        st.cwds = new
    else:
        st.cwds = new
        merge_cwds(st, old)
    st.last_success = new


def script(
    st: State, word: Word, shell: bool | None, args: list[Word], sourced: bool = False
) -> None:
    """A script the command runs: shell scripts are walked like the line; Python scripts are
    checked like `python -c` code; anything else may write anything. `shell=None` decides
    from the #! line (a file run directly)."""

    if not word.known:
        st.result.unknown(f"the script to run depends on runtime values: {word.text!r}")
        st.result.may_write_anything("a script named only at run time")
        return
    path = os.path.realpath(os.path.join(st.cwds[0], word.text))
    if not sourced and "/" not in word.text and shell is None:
        path = ""
    try:
        with open(path, "rb") as handle:
            data = handle.read(SCRIPT_LIMIT + 1)
    except OSError:
        st.result.may_write_anything(f"{word.text}, a program taskgate does not know")
        return
    if len(data) > SCRIPT_LIMIT or b"\0" in data:
        st.result.unknown(f"the script {path} is too large or not text")
        st.result.may_write_anything(f"{word.text}, a program taskgate cannot read")
        return
    text = data.decode("utf-8", "replace")
    if shell is None:
        first = text.split("\n", 1)[0]
        names = [os.path.basename(w) for w in first[2:].split() if not w.startswith("-")]
        if names[:1] == ["env"]:
            names = names[1:]
        if first.startswith("#!") and names and names[0] not in _SHELLS:
            interp = names[0].rstrip("0123456789.")
            if interp in ("python", "pypy"):
                from taskgate.hooks.interp import python_source

                python_source(st, path, text)
            else:
                st.result.may_write_anything(f"{word.text}, a {names[0]} script")
                st.result.scripts.append((path, text))
            return
    if st.depth > MAX_DEPTH:
        st.result.unknown(f"scripts nested deeper than {MAX_DEPTH} levels")
        return
    target = st if sourced else st.copy()
    if not sourced:
        target.vars, target.unknown_vars = {}, set()
    walk_text(text, target)
    del args  # positional parameters are runtime values; words using them are unknown
