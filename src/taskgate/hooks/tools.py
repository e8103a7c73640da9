"""Programs whose writing depends on their options or subcommands (hooks/programs.py, issue 15):
stream editors, archivers, finders, build tools, package managers, test runners, formatters."""

from __future__ import annotations

import os

from taskgate.hooks.commands import run
from taskgate.hooks.lexer import Word
from taskgate.hooks.programs import has_flag, operands, option_value
from taskgate.hooks.shell import State, walk_text
from taskgate.hooks.streams import _awk, _sed

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

_UNKNOWN = Word("", known=False)
_VERSION = frozenset({"--version", "-V", "-v", "version", "--help", "-h", "help", "-version"})


def _anything(st: State, what: str) -> None:
    st.result.may_write_anything(what)


# -- stream editors --------------------------------------------------------------------------


# -- finders and runners ---------------------------------------------------------------------


def _find(st: State, args: list[Word]) -> None:
    roots = []
    i = 0
    while i < len(args) and not args[i].text.startswith(("-", "(", "!", ")")):
        roots.append(args[i])
        i += 1
    roots = roots or [Word(".")]
    while i < len(args):
        t = args[i].text
        if t == "-delete":
            for root in roots:
                st.write_below(root)
        elif t in ("-fprint", "-fprint0", "-fls", "-fprintf") and i + 1 < len(args):
            st.write(args[i + 1])
        elif t in ("-exec", "-execdir", "-ok", "-okdir"):
            j = i + 1
            while j < len(args) and args[j].text not in (";", "+"):
                j += 1
            for root in roots:  # {} is some file below each root
                below = Word(root.text.rstrip("/") + "/{}", root.known)
                command = [below if "{}" in w.text else w for w in args[i + 1 : j]]
                if command:
                    run(command, st)
            i = j
        i += 1


def _xargs(st: State, args: list[Word]) -> None:
    valued = frozenset(
        {
            "-a",
            "--arg-file",
            "-d",
            "--delimiter",
            "-E",
            "-e",
            "-I",
            "-L",
            "-l",
            "-n",
            "--max-args",
            "-P",
            "--max-procs",
            "-s",
            "--max-chars",
            "--process-slot-var",
        }
    )
    i = 0
    replace = ""
    while i < len(args) and args[i].text.startswith("-"):
        t = args[i].text
        if t == "-I" and i + 1 < len(args):
            replace = args[i + 1].text
        elif t.startswith("-I") and len(t) > 2:
            replace = t[2:]
        elif t.startswith(("-i", "--replace")):
            replace = t.partition("=")[2] or "{}"
        if t == "--":
            i += 1
            break
        i += 2 if t in valued else 1
    command = args[i:] or [Word("echo")]
    if replace:
        command = [_UNKNOWN if replace in w.text else w for w in command]
    run([*command, _UNKNOWN], st)


def _env(st: State, args: list[Word]) -> None:
    env: dict[str, str | None] = {}
    i = 0
    before = st.cwds
    while i < len(args):
        t = args[i].text
        if t in ("-u", "--unset") and i + 1 < len(args):
            i += 2
            continue
        if (t in ("-C", "--chdir") and i + 1 < len(args)) or t.startswith("--chdir="):
            target = args[i + 1] if "=" not in t else Word(t.partition("=")[2], args[i].known)
            if not target.known:
                st.result.unknown("env -C to a directory known only at run time")
            else:
                st.cwds = tuple(os.path.normpath(os.path.join(c, target.text)) for c in st.cwds)
            i += 1 if "=" in t else 2
            continue
        if t in ("-S", "--split-string") or t.startswith(("--split-string=", "-S")):
            code = (
                args[i + 1]
                if t in ("-S", "--split-string") and i + 1 < len(args)
                else Word(t.partition("=")[2] if "=" in t else t[2:], args[i].known)
            )
            rest = " ".join(w.text for w in args[i + 2 :]) if t in ("-S", "--split-string") else ""
            walk_text(f"{code.text} {rest}", st)
            st.cwds = before
            return
        if t.startswith("-") and t != "-":
            i += 1
            continue
        from taskgate.hooks.commands import is_assignment

        if is_assignment(t):
            name, _, value = t.partition("=")
            env[name] = value if args[i].known else None
            i += 1
            continue
        break
    if i < len(args):
        run(args[i:], st, env)
    st.cwds = before


def _flock(st: State, args: list[Word]) -> None:
    valued = frozenset({"-w", "--wait", "--timeout", "-E", "--conflict-exit-code"})
    i = 0
    while i < len(args) and args[i].text.startswith("-"):
        i += 2 if args[i].text in valued else 1
    if i < len(args) and not args[i].text.isdigit():
        st.write(args[i])  # the lock file is created
    rest = args[i + 1 :]
    if rest and rest[0].text in ("-c", "--command") and len(rest) > 1:
        walk_text(rest[1].text, st.copy())
    elif rest:
        run(rest, st)


def _script(st: State, args: list[Word]) -> None:
    code: Word | None = None
    files: list[Word] = []
    i = 0
    while i < len(args):
        t = args[i].text
        short = t.startswith("-") and not t.startswith("--") and t.endswith("c")
        if (t in ("-c", "--command") or short) and i + 1 < len(args):
            code = args[i + 1]
            i += 2
            continue
        if (
            t in ("-T", "--log-timing", "-I", "--log-in", "-O", "--log-out", "-B", "--log-io", "-t")
            and i + 1 < len(args)
            and t != "-t"
        ):
            files.append(args[i + 1])
            i += 2
            continue
        if not t.startswith("-"):
            files.append(args[i])
        i += 1
    for f in files or [Word("typescript")]:
        st.write(f)
    if code is not None:
        if not code.known:
            _anything(st, "script -c with code built at run time")
        walk_text(code.text, st.copy())


def _tar(st: State, args: list[Word]) -> None:
    texts = [w.text for w in args]
    first = texts[0] if texts else ""
    bundle = first if first and not first.startswith("-") else ""
    modes = set(bundle) | {
        c for t in texts if t.startswith("-") and not t.startswith("--") for c in t[1:]
    }
    longs = {t.partition("=")[0] for t in texts if t.startswith("--")}
    dangerous = (
        "--to-command",
        "--checkpoint-action",
        "--use-compress-program",
        "--rsh-command",
        "--info-script",
        "--new-volume-script",
        "--rmt-command",
    )
    if (
        any(any(d.startswith(k) and len(k) > 4 for d in dangerous) for k in longs)
        or "I" in modes
        or "F" in modes
    ):
        _anything(st, "tar running a helper program")
        return
    extract = "x" in modes or any(k in ("--extract", "--get") for k in longs)
    create = modes & set("cruA") or any(
        k in ("--create", "--append", "--update", "--delete", "--catenate", "--concatenate")
        for k in longs
    )
    if extract:
        dirs = option_value(args, "-C", "--directory")
        for d in dirs or [Word(".")]:
            st.write_below(d)
    if create:
        archive = option_value(args, "-f", "--file")
        for i, w in enumerate(args):  # -cf NAME / cf NAME: the archive follows the cluster
            t = w.text
            if "f" in t and not t.startswith("--") and (t.startswith("-") or i == 0):
                archive += args[i + 1 : i + 2]
        for a in archive:
            if a.text != "-":
                st.write(a)


def _unzip(st: State, args: list[Word]) -> None:
    if any(w.text in ("-l", "-t", "-v", "-Z", "-z", "-p", "-c") for w in args):
        return
    dirs = option_value(args, "-d", "")
    for d in dirs or [Word(".")]:
        st.write_below(d)


def _compressor(st: State, args: list[Word]) -> None:
    if (
        has_flag(args, "c", "--stdout")
        or has_flag(args, "t", "--test")
        or has_flag(args, "l", "--list")
    ):
        return
    for w in operands(args, frozenset({"-S", "--suffix", "-o", "-T"})):
        st.write(w)
        st.write(Word(w.text + ".gz", w.known))
        st.write(Word(w.text.rsplit(".", 1)[0], w.known))


def _sort(st: State, args: list[Word]) -> None:
    if option_value(args, "", "--compress-program"):
        _anything(st, "sort --compress-program runs a program")
    for w in option_value(args, "-o", "--output"):
        st.write(w)


def _second_operand(st: State, args: list[Word]) -> None:
    ops = operands(args, frozenset({"-f", "-s", "-w", "-c", "-l", "-g", "-o", "-n", "-u"}))
    for w in ops[1:2]:
        st.write(w)


def _split(st: State, args: list[Word]) -> None:
    ops = operands(
        args,
        frozenset(
            {"-a", "-b", "-C", "-l", "-n", "-t", "--additional-suffix", "-f", "-k", "--prefix"}
        ),
    )
    prefix = ops[1] if len(ops) > 1 else Word("x")
    st.write_below(Word(os.path.dirname(prefix.text) or ".", prefix.known))


def _patch(st: State, args: list[Word]) -> None:
    if has_flag(args, "", "--dry-run") or any(w.text == "-C" for w in args[:0]):
        return
    for w in option_value(args, "-o", "--output"):
        st.write(w)
    dirs = option_value(args, "-d", "--directory")
    for d in dirs or [Word(".")]:
        st.write_below(d)


def _dd(st: State, args: list[Word]) -> None:
    for w in args:
        if w.text.startswith("of="):
            st.write(Word(w.text[3:], w.known, w.glob))


def _curl(st: State, args: list[Word]) -> None:
    for short, long in (
        ("-o", "--output"),
        ("-D", "--dump-header"),
        ("-c", "--cookie-jar"),
        ("", "--trace"),
        ("", "--trace-ascii"),
        ("", "--libcurl"),
        ("", "--etag-save"),
        ("", "--hsts"),
        ("", "--alt-svc"),
    ):
        for w in option_value(args, short, long):
            if w.text != "-":
                st.write(w)
    if (
        has_flag(args, "", "--remote-name")
        or any(
            w.text.startswith("-") and not w.text.startswith("--") and "O" in w.text for w in args
        )
        or option_value(args, "", "--output-dir")
    ):
        for d in option_value(args, "", "--output-dir") or [Word(".")]:
            st.write_below(d)


def _wget(st: State, args: list[Word]) -> None:
    if has_flag(args, "", "--spider"):
        return
    outputs = option_value(args, "-O", "--output-document")
    if outputs:
        for w in outputs:
            if w.text != "-":
                st.write(w)
        return
    for w in option_value(args, "-o", "--output-file") + option_value(
        args, "-a", "--append-output"
    ):
        st.write(w)
    for d in option_value(args, "-P", "--directory-prefix") or [Word(".")]:
        st.write_below(d)


def _make(st: State, args: list[Word]) -> None:
    dry = any(
        w.text in ("-n", "--dry-run", "--just-print", "--recon", "-q", "--question")
        or (
            w.text.startswith("-")
            and not w.text.startswith("--")
            and ("n" in w.text or "q" in w.text)
        )
        for w in args
    )
    if not dry:
        _anything(st, "make runs its recipes (make -n shows them without running)")


def _output_option(st: State, args: list[Word]) -> None:
    for w in option_value(args, "-o", "--output"):
        st.write(w)


def _in_place(st: State, args: list[Word]) -> None:
    if has_flag(args, "i", "--inplace"):
        for w in operands(args)[1:]:
            st.write(w)


def _watch(st: State, args: list[Word]) -> None:
    i = 0
    while i < len(args) and args[i].text.startswith("-"):
        i += 2 if args[i].text in ("-n", "--interval", "-d", "--differences") else 1
    if i < len(args):
        walk_text(" ".join(w.text for w in args[i:]), st.copy())


_HANDLERS: dict[str, Callable[[State, list[Word]], None]] = {
    "sed": _sed,
    "gsed": _sed,
    "awk": _awk,
    "gawk": _awk,
    "mawk": _awk,
    "nawk": _awk,
    "find": _find,
    "gfind": _find,
    "xargs": _xargs,
    "env": _env,
    "flock": _flock,
    "script": _script,
    "tar": _tar,
    "gtar": _tar,
    "bsdtar": _tar,
    "unzip": _unzip,
    "gzip": _compressor,
    "gunzip": _compressor,
    "bzip2": _compressor,
    "bunzip2": _compressor,
    "xz": _compressor,
    "unxz": _compressor,
    "zstd": _compressor,
    "unzstd": _compressor,
    "lz4": _compressor,
    "sort": _sort,
    "uniq": _second_operand,
    "xxd": _second_operand,
    "split": _split,
    "csplit": _split,
    "patch": _patch,
    "dd": _dd,
    "curl": _curl,
    "wget": _wget,
    "make": _make,
    "gmake": _make,
    "watch": _watch,
    "tree": _output_option,
    "yq": _in_place,
}
