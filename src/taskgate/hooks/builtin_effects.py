"""What bash's wrappers and a few builtins run or write beyond their own words (issue 15): the
command a wrapper runs with all its options (`command sed -i ...`), the file `history -w`
writes, the command text `mapfile -C` and `compgen -C` run. hooks/commands.py loads this
module only for a line that uses one of them."""

from __future__ import annotations

from taskgate.hooks.lexer import Word
from taskgate.hooks.shell import State, walk_text

# The options of bash's own wrappers (5.2): only these come before the wrapped command, and
# every word after it is the command's own (`command find . -delete` runs `find . -delete`).
# coreutils' `nohup` and GNU `time` are programs: hooks/programs.py's wrappers.
_WRAPPER_FLAGS = {"command": "pvV", "exec": "cla", "builtin": ""}


def wrapped(name: str, args: list[Word], st: State) -> list[Word]:
    """The command a wrapper runs, with its arguments ([] when it runs none)."""
    at = 0
    describe = False
    while at < len(args):
        w = args[at]
        text = w.text
        if not w.known or not text.startswith("-") or text == "-":
            break  # the command (a word known only at run time: judged as the program)
        at += 1
        if text == "--":
            break
        flags = _WRAPPER_FLAGS[name]
        if not text[1:] or any(c not in flags for c in text[1:].lstrip("-")):
            st.result.may_write_anything(f"{name} {text}: an option this analyser does not know")
            return []
        if name == "command" and ("v" in text or "V" in text):
            describe = True  # `command -v NAME` prints how NAME would be found: runs nothing
        if name == "exec" and text.endswith("a"):
            at += 1  # -a NAME: the name given to the command
    return [] if describe else args[at:]


def option_values(args: list[Word], letter: str, valued: str) -> list[Word]:
    """The values a builtin's option `-letter` is given, read as bash's getopt reads them:
    options cluster (`-tC cb`), those in `valued` take the rest of their word or the next one,
    and `--` or the first operand ends them."""
    found: list[Word] = []
    at = 0
    while at < len(args):
        w = args[at]
        if w.text == "--" or not w.known or not w.text.startswith("-") or w.text == "-":
            break
        at += 1
        for i, c in enumerate(w.text[1:], 1):
            if c not in valued:
                continue
            if w.text[i + 1 :]:
                value = Word(w.text[i + 1 :], w.known)
            elif at < len(args):
                value, at = args[at], at + 1
            else:
                value = Word("", known=False)
            if c == letter:
                found.append(value)
            break
    return found


def callbacks(st: State, name: str, commands: list[Word]) -> None:
    """Command text a builtin runs (`mapfile -C`, `compgen -C`), with arguments bash adds
    from its input (the line read, the word completed): what the text names is judged like
    the line, and the rest cannot be bounded (`mapfile -C 'rm -rf' <<< /` removes /)."""
    for command in commands:
        if command.known:
            walk_text(command.text, st)
        st.result.may_write_anything(f"{name} runs {command.text or 'a command'!r} with "
                                     "arguments from its input")  # fmt: skip


def history(st: State, args: list[Word]) -> None:
    """`history -w FILE`, `-a FILE` write the history list (which `-s` fills with any text)
    to FILE; without one, to $HISTFILE."""
    writes = False
    operands: list[Word] = []
    for w in args:
        if w.text.startswith("-") and w.known and not operands:
            writes = writes or "w" in w.text or "a" in w.text
        else:
            operands.append(w)
    if not writes:
        return
    if operands:
        st.write(operands[0])
    else:
        st.result.may_write_anything("history -w/-a writes the history file")
