"""Interpreters: code is read-only only when a conservative reading proves it (issue 15).

Python one-liners and scripts are parsed with `ast` (imported here, off the hook's fast path)
and allowed only when every call is known not to write: `open` in a read mode, `print`,
`sys.stdout.write`, `json.loads`, `subprocess.run([...])` of a program the analyser judges
read-only, methods such as `.read()` or `.split()`. Anything else (`os.replace`, `os.link`,
`getattr(p, 'wri' + 'te_text')`, `exec(code)`, a module passed around under another name,
unknown imports) makes the code "may write anything". Node, Perl and Ruby one-liners are
judged by the identifiers they use: printing and reading only. Other interpreters may write.
"""

from __future__ import annotations

from taskgate.hooks.lexer import Word, words
from taskgate.hooks.pycheck import python_reason
from taskgate.hooks.shell import State

_CODE_FLAGS = {
    "node": ("-e", "--eval", "-p", "--print"),
    "nodejs": ("-e", "--eval", "-p", "--print"),
    "bun": ("-e", "--eval", "-p", "--print"),
    "deno": ("eval",),
    "perl": ("-e", "-E"),
    "ruby": ("-e",),
    "php": ("-r",),
}
_VERSION = frozenset({"--version", "-V", "-v", "-version", "--help", "-h", "-VV"})
_JS_WORDS = words("""
console log error warn info dir table debug JSON stringify parse process argv version versions
platform arch env cwd stdout stderr write Math Date Number String Array Object Boolean keys
values entries map filter reduce forEach length toString split join slice substring trim
toUpperCase toLowerCase includes indexOf startsWith endsWith replace padStart padEnd floor
ceil round random max min abs now getTime toISOString const let var function return if else
for of in new true false null undefined typeof instanceof while do break continue this uptime
memoryUsage hrtime pid exit exitCode argv0 execPath release os path require sort reverse
concat from isArray assign freeze parseInt parseFloat isNaN Set Map has get size add push pop
shift test match RegExp Symbol iterator BigInt Intl DateTimeFormat resolvedOptions timeZone
title
""")
_JS_REQUIRABLE = ("'os'", '"os"', "'path'", '"path"', "'util'", '"util"', "'url'", '"url"')
_PERL_WORDS = words("""
print say printf sprintf join split map grep sort keys values each length uc lc ucfirst
lcfirst chomp chop chr ord reverse scalar defined exists my our local if unless else elsif for
foreach while until next last return sub shift push pop unshift splice substr index rindex abs
int sqrt hex oct lc join wantarray ref bless die warn time localtime gmtime sprintf STDOUT
STDERR STDIN ARGV ENV _ x eq ne lt gt le ge cmp and or not q qq qw m s tr y BEGIN END pos
quotemeta exit
""")
_RUBY_WORDS = words("""
puts print p pp printf format require JSON parse pretty_generate generate to_json File read
readlines exist exists? file? directory? basename dirname extname join expand_path Dir glob
entries each map select reject sort sort_by reverse first last size length count to_s to_i
to_f to_a to_h keys values inspect split strip chomp gsub sub upcase downcase include?
start_with? end_with? if else elsif end do unless while until return def nil true false and or
not ENV ARGV STDIN STDOUT STDERR yaml YAML load safe_load RUBY_VERSION Time now Integer Float
String Array Hash sum min max uniq flatten compact zip with_index each_with_index lines chars
bytes empty? nil? any? all? none? find detect group_by tally freeze then tap
""")


def _version_only(args: list[Word]) -> bool:
    return bool(args) and all(w.text in _VERSION for w in args)


def python(st: State, args: list[Word]) -> None:
    """`python [options] (-c code | -m module | script | -) [args]`."""
    if _version_only(args):
        return
    i = 0
    while i < len(args):
        t = args[i].text
        if t == "-c" or (
            t.startswith("-")
            and not t.startswith("--")
            and t.endswith("c")
            and len(t) > 2
            and "c" not in t[1:-1]
        ):
            if i + 1 < len(args):
                python_code(st, args[i + 1], "python -c")
            return
        if t == "-m" and i + 1 < len(args):
            _module(st, args[i + 1], args[i + 2 :])
            return
        if t.startswith("-m") and len(t) > 2:
            _module(st, Word(t[2:], args[i].known), args[i + 1 :])
            return
        if t in ("-W", "-X", "--check-hash-based-pycs"):
            i += 2
            continue
        if t == "-" or not t.startswith("-"):
            break
        i += 1
    if i < len(args) and args[i].text != "-":
        script = args[i]
        if not script.known:
            st.result.may_write_anything("a Python script named only at run time")
            return
        import os

        path = os.path.realpath(os.path.join(st.cwds[0], script.text))
        try:
            with open(path, "rb") as handle:
                data = handle.read(256 * 1024 + 1)
        except OSError:
            st.result.may_write_anything(f"the Python script {script.text} (not readable now)")
            return
        python_source(st, path, data.decode("utf-8", "replace"))
    elif st.stdin_code:
        python_code(st, Word(st.stdin_code), "python reading a here-document")
    else:
        st.result.opaque.append(st.source)
        st.result.may_write_anything("python reading code from stdin")


def python_source(st: State, path: str, text: str) -> None:
    """A Python script file: judged like `python -c` code."""
    reason = python_reason(text, st)
    if reason:
        st.result.scripts.append((path, text))
        st.result.may_write_anything(f"the Python script {path} ({reason})")


def python_code(st: State, code: Word, what: str) -> None:
    """`python -c CODE`: read-only only when proven so."""
    if not code.known:
        st.result.opaque.append(code.text)
        st.result.may_write_anything(f"{what} with code built at run time")
        return
    reason = python_reason(code.text, st)
    if reason:
        st.result.opaque.append(code.text)
        st.result.may_write_anything(f"{what} code that may write ({reason})")


_READ_MODULES = {
    "pytest": (),
    "py.test": (),
    "unittest": (),
    "mypy": (),
    "pyflakes": (),
    "flake8": (),
    "pylint": (),
    "pycodestyle": (),
    "pydocstyle": (),
    "bandit": (),
    "doctest": (),
    "pydoc": (),
    "timeit": (),
    "platform": (),
    "sysconfig": (),
    "site": (),
    "tabnanny": (),
    "tox": (),
    "nox": (),
    "http.server": (),
    "pyright": (),
    "taskgate": (),
    "coverage": (),
    "json.tool": (),
}


def _module(st: State, module: Word, rest: list[Word]) -> None:
    from taskgate.hooks.programs import judge

    name = module.text
    if name in ("ruff", "black", "isort", "pip", "pytest", "mypy", "coverage", "tox"):
        judge(st, name, rest, {})
    elif name == "json.tool":
        ops = [w for w in rest if not w.text.startswith("-")]
        for w in ops[1:2]:
            st.write(w)
    elif name not in _READ_MODULES:
        st.result.may_write_anything(f"python -m {name} is not known to be read-only")


def interpreter(st: State, base: str, name: str, args: list[Word]) -> None:
    """node/perl/ruby/php one-liners; every other interpreter run may write anything."""
    if _version_only(args):
        return
    flags = _CODE_FLAGS.get(base, ())
    texts = [w.text for w in args]
    code_at = next(
        (
            i
            for i, t in enumerate(texts)
            if t in flags
            or (
                base == "perl"
                and t.startswith("-")
                and not t.startswith("--")
                and t[-1] in "eE"
                and "i" not in t[1:]
            )
        ),
        None,
    )
    if base == "perl" and any(
        t.startswith("-") and not t.startswith("--") and "i" in t[1:] for t in texts
    ):
        files = [
            w
            for w in args[(code_at + 2 if code_at is not None else 0) :]
            if not w.text.startswith("-")
        ]
        for w in files[0 if code_at is not None else 1 :]:
            st.write(w)  # perl -i / -pi edits its file operands in place
    if code_at is None or code_at + 1 >= len(args):
        if (
            base in _CODE_FLAGS
            and not [t for t in texts if not t.startswith("-")]
            and st.stdin_code
        ) and _identifiers_ok(base, st.stdin_code):
            return
        st.result.may_write_anything(f"{name} running a script or code taskgate cannot read")
        if not [t for t in texts if not t.startswith("-")]:
            st.result.opaque.append(st.source)
        return
    code = args[code_at + 1]
    if not code.known or not _identifiers_ok(base, code.text):
        st.result.opaque.append(code.text)
        st.result.may_write_anything(f"{name} code that may write files")


def _identifiers_ok(base: str, code: str) -> bool:
    """Whether every identifier in the code (strings aside) is on the language's read list."""
    words = {
        "node": _JS_WORDS,
        "nodejs": _JS_WORDS,
        "bun": _JS_WORDS,
        "deno": _JS_WORDS,
        "perl": _PERL_WORDS,
        "ruby": _RUBY_WORDS,
    }.get(base)
    if words is None:
        return False
    if base in ("node", "nodejs", "bun", "deno"):
        if "require" in code:
            rest = code
            for ok in _JS_REQUIRABLE:
                rest = rest.replace(f"require({ok})", "")
            if "require" in rest:
                return False
        if "import" in code or "`" in code:
            return False
    if base == "perl" and any(
        m in code
        for m in ("open", "system", "exec", "`", "qx", "unlink", "rename", "eval", "do ", "require")
    ):
        return False
    text = _strip_perl(code) if base == "perl" else _strip_strings(code)
    ident: list[str] = []
    found: set[str] = set()
    for c in text + " ":
        if c.isalnum() or c == "_" or (base == "ruby" and c in "?!" and ident):
            ident.append(c)
        else:
            if ident:
                found.add("".join(ident))
            ident = []
    declared = _declared(text) if base in ("node", "nodejs", "bun", "deno") else set()
    return all(w in words or w in declared or w[0].isdigit() for w in found)


def _declared(text: str) -> set[str]:
    """Names the code itself binds: `const x`, `let y`, `var z`, arrow parameters `x =>`."""
    tokens = text.replace("=>", " => ").replace("(", " ( ").replace(")", " ) ").split()
    names: set[str] = set()
    for i, tok in enumerate(tokens):
        if tok in ("const", "let", "var", "function") and i + 1 < len(tokens):
            names.add(tokens[i + 1].strip(",;=[]{}"))
        if tok == "=>" and i:
            j = i - 1
            if tokens[j] == ")":
                while j > 0 and tokens[j] != "(":
                    j -= 1
                    names.update(p.strip(",") for p in tokens[j].split(","))
            else:
                names.add(tokens[j])
    return {n for n in names if n.isidentifier()}


def _strip_strings(code: str) -> str:
    out: list[str] = []
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        if c in "'\"":
            j = i + 1
            while j < n and code[j] != c:
                j += 2 if code[j] == "\\" else 1
            out.append(" ")
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


_PAIRS = {"(": ")", "[": "]", "{": "}", "<": ">"}


def _strip_perl(code: str) -> str:
    """Perl code without its quote-like and pattern operators (s///, m//, tr///, q(), /re/)."""
    out: list[str] = []
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        word = ""
        for op in ("qq", "qw", "qr", "tr", "s", "m", "q", "y"):
            nxt = code[i + len(op) : i + len(op) + 1]
            before = code[i - 1] if i else " "
            if (
                code.startswith(op, i)
                and nxt
                and not (nxt.isalnum() or nxt in " _,;)")
                and not (before.isalnum() or before in "_$@%")
            ):
                word = op
                break
        if word or (c == "/" and _regex_position("".join(out))):
            i += len(word)
            parts = 2 if word in ("s", "tr", "y") else 1
            delim = code[i] if i < n else "/"
            for _ in range(parts):
                close = _PAIRS.get(delim, delim)
                i += 1
                while i < n and code[i] != close:
                    i += 2 if code[i] == "\\" else 1
                if delim in _PAIRS and parts == 2:
                    i += 1
                    while i < n and code[i] in " \t":
                        i += 1
                    delim = code[i] if i < n else "/"
            i += 1
            while i < n and code[i].isalpha():
                i += 1  # flags
            out.append(" ")
            continue
        if c in "'\"":
            j = i + 1
            while j < n and code[j] != c:
                j += 2 if code[j] == "\\" else 1
            out.append(" ")
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _regex_position(before: str) -> bool:
    """Whether a `/` after `before` starts a pattern (not a division)."""
    text = before.rstrip()
    last = text.split()[-1] if text.split() else ""
    keywords = ("if", "unless", "and", "or", "not", "split", "grep", "return", "while", "until")
    return text[-1:] in ("", "(", ",", "=", "~", "!", "&", "|", ";", "{") or last in keywords
