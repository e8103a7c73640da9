"""Stream editors (hooks/tools.py, issue 15): `sed` writes with -i (any spelling: -Ei, -ni,
-i.bak, --in-pl), the `w`/`W` commands and the `s///w` flag, and runs commands with `e`;
`awk` writes with print redirections, pipes, system() and `-i inplace`."""

from __future__ import annotations

from taskgate.hooks.lexer import Word
from taskgate.hooks.programs import operands
from taskgate.hooks.shell import State


def _anything(st: State, what: str) -> None:
    st.result.may_write_anything(what)


def _sed(st: State, args: list[Word]) -> None:
    scripts: list[Word] = []
    files_from = 0
    for i, w in enumerate(args):
        t = w.text
        if t in ("-e", "--expression") and i + 1 < len(args):
            scripts.append(args[i + 1])
        elif t.startswith("--expression="):
            scripts.append(Word(t.partition("=")[2], w.known))
        elif t.startswith("-e") and len(t) > 2 and not t.startswith("--"):
            scripts.append(Word(t[2:], w.known))
        elif t in ("-f", "--file") or t.startswith("--file="):
            _anything(st, "sed running a script file")
            return
    ops = operands(
        args,
        frozenset({"-e", "--expression", "-f", "--file", "-l", "--line-length", "-s"}) - {"-s"},
    )
    if not scripts and ops:
        scripts, files_from = [ops[0]], 1
    for script in scripts:
        if not script.known:
            _anything(st, "sed with a script built at run time")
            return
        writes, executes = sed_effects(script.text)
        if executes:
            _anything(st, "sed with the e command (it runs shell commands)")
        for target in writes:
            st.write(Word(target))
    in_place = any(
        (w.text.startswith("-") and not w.text.startswith("--") and "i" in w.text[1:].split("e")[0])
        or (
            w.text.startswith("--")
            and len(w.text.partition("=")[0]) > 3
            and "--in-place".startswith(w.text.partition("=")[0])
        )
        for w in args
        if w.text != "--"
    )
    if in_place:
        for w in ops[files_from:]:
            st.write(w)


def sed_effects(script: str) -> tuple[list[str], bool]:
    """Files a sed script writes (`w file`, `s///w file`) and whether it runs commands (`e`)."""
    writes: list[str] = []
    executes = False
    i, n = 0, len(script)
    while i < n:
        c = script[i]
        if c in " \t\n;}{!0123456789,$~+":
            i += 1
        elif c in "/\\":  # an address /re/ or \cREc
            delim = script[i + 1] if c == "\\" and i + 1 < n else "/"
            i = _sed_delimited(script, i + (2 if c == "\\" else 1), delim)
        elif c in "sy" and i + 1 < n:
            delim = script[i + 1]
            i = _sed_delimited(script, i + 2, delim)
            i = _sed_delimited(script, i, delim)
            flags_start = i
            while i < n and script[i] not in ";\n}":
                if c == "s" and script[i] in "wW":
                    writes.append(script[i + 1 :].split("\n", 1)[0].strip())
                    i = n
                    break
                if c == "s" and script[i] == "e":
                    executes = True
                i += 1
            del flags_start
        elif c in "wW":
            writes.append(script[i + 1 :].split("\n", 1)[0].strip())
            i = script.find("\n", i)
            i = n if i < 0 else i
        elif c == "e":
            executes = True
            i += 1
        elif c in "aicrRTbt:#":
            end = script.find("\n", i)
            if c in "btT:":
                semi = script.find(";", i)
                end = semi if 0 <= semi < end or end < 0 <= semi else end
            i = n if end < 0 else end
        else:
            i += 1
    return writes, executes


def _sed_delimited(s: str, i: int, delim: str) -> int:
    while i < len(s) and s[i] != delim:
        i += 2 if s[i] == "\\" else 1
    return i + 1


def _awk(st: State, args: list[Word]) -> None:
    program: Word | None = None
    i = 0
    while i < len(args):
        t = args[i].text
        if t in ("-f", "--file") or t.startswith("--file="):
            _anything(st, "awk running a program file")
            return
        if t in ("-i", "--include") and i + 1 < len(args) and "inplace" in args[i + 1].text:
            _anything(st, "awk -i inplace edits its input files")
            return
        if t.startswith("--include=") and "inplace" in t:
            _anything(st, "awk -i inplace edits its input files")
            return
        if t in ("-v", "-F", "-i", "--include", "-l", "--load", "--assign", "--field-separator"):
            i += 2
            continue
        if t == "--" or not t.startswith("-"):
            j = i + 1 if t == "--" else i
            program = args[j] if j < len(args) else None
            break
        i += 1
    if program is None:
        return
    if not program.known or awk_writes(program.text):
        _anything(st, "an awk program that redirects output or runs commands")


def awk_writes(code: str) -> bool:
    """Whether an awk program may write files or run commands (system, pipes, print >)."""
    stripped: list[str] = []
    i, n = 0, len(code)
    while i < n:  # drop string literals and /regex/ so their | and > do not count
        c = code[i]
        if c == '"':
            i += 1
            while i < n and code[i] != '"':
                i += 2 if code[i] == "\\" else 1
            stripped.append('""')
        elif c == "/" and (
            not stripped
            or stripped[-1].strip()[-1:] in ("", "(", "~", ",", "!", "&", "|", "{", ";")
        ):
            i += 1
            while i < n and code[i] != "/":
                i += 2 if code[i] == "\\" else 1
            stripped.append("//")
        else:
            stripped.append(c)
        i += 1
    text = "".join(stripped)
    if "system" in text or "|" in text.replace("||", "") or "fflush" in text:
        return True
    for keyword in ("printf", "print"):
        start = text.find(keyword)
        while start >= 0:
            depth, j = 0, start + len(keyword)
            while j < len(text) and not (depth == 0 and text[j] in ";}\n"):
                depth += {"(": 1, ")": -1}.get(text[j], 0)
                if depth == 0 and text[j] == ">":
                    return True
                j += 1
            start = text.find(keyword, start + 1)
    return False
