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

import sys

from taskgate.hooks.commands import run
from taskgate.hooks.lexer import Word, words
from taskgate.hooks.shell import State, walk_text

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
_PY_SAFE_MODULES = words("""
re math itertools functools os.path posixpath platform statistics string operator collections
collections.abc base64 binascii hashlib json datetime fnmatch glob shlex textwrap struct
difflib unicodedata keyword decimal fractions random typing enum dataclasses urllib.parse html
ipaddress calendar sysconfig ast inspect pprint copy heapq bisect array numbers abc warnings
traceback tomllib tomli toml uuid time locale getpass pwd grp zlib colorsys secrets
importlib.metadata platform xml.etree.ElementTree csv yaml io pathlib this sys os subprocess
shutil tempfile importlib importlib.util zipfile tarfile gzip bz2 lzma codecs configparser
argparse socket textwrap token tokenize dis types weakref contextlib pickle marshal packaging
packaging.version
""")
_PY_MODULE_FUNCS = {
    "os": words("""
getcwd getcwdb listdir scandir walk stat lstat getenv environ cpu_count getpid getppid
uname fspath fsencode fsdecode access get_terminal_size readlink getuid geteuid getgid
getlogin getloadavg strerror urandom times isatty sep linesep pathsep name curdir pardir
devnull path getpgrp sched_getaffinity
"""),
    "sys": words("""
exit getsizeof getrecursionlimit getdefaultencoding version version_info
getfilesystemencoding executable path argv platform modules stdout stderr stdin exc_info
intern implementation byteorder maxsize prefix base_prefix flags hexversion api_version
float_info stdlib_module_names builtin_module_names orig_argv
"""),
    "shutil": frozenset(["which", "disk_usage", "get_terminal_size"]),
    "tempfile": frozenset(["gettempdir"]),
    "importlib": frozenset(),
    "importlib.util": frozenset(["find_spec"]),
    "socket": frozenset(["gethostname", "getfqdn", "gethostbyname"]),
    "subprocess": words("""
run call check_call check_output Popen getoutput getstatusoutput PIPE DEVNULL STDOUT
CalledProcessError
"""),
    "pickle": frozenset(["loads", "dumps"]),
    "marshal": frozenset(["loads", "dumps"]),
    "configparser": frozenset(["ConfigParser", "RawConfigParser"]),
}
_PY_BUILTINS = words("""
print len str int float bool list dict set tuple sorted reversed enumerate zip range min max
sum any all abs round repr format isinstance issubclass hasattr type ord chr hex oct bin hash
id iter next map filter input dir frozenset bytes bytearray divmod pow callable slice object
super Exception ValueError KeyError TypeError OSError RuntimeError SystemExit StopIteration
ascii memoryview complex property staticmethod classmethod NotImplementedError IndexError
AttributeError FileNotFoundError ImportError
""")
_PY_METHODS = words("""
read readline readlines read_text read_bytes split rsplit splitlines strip lstrip rstrip join
format format_map items keys values get startswith endswith lower upper title capitalize
casefold swapcase decode encode count index find rfind rindex exists is_file is_dir is_symlink
iterdir glob rglob resolve absolute relative_to with_suffix with_name with_stem joinpath stat
lstat hexdigest digest update group groups groupdict match search findall finditer fullmatch
sub subn append extend insert pop sort copy add discard setdefault most_common total isdigit
isalpha isalnum isspace isidentifier isupper islower isnumeric isdecimal zfill center ljust
rjust partition rpartition expandtabs translate removeprefix removesuffix to_bytes from_bytes
bit_length isoformat strftime timestamp date time total_seconds astimezone as_posix as_uri
is_absolute samefile getvalue tell seek close flush communicate wait poll parse_args
add_argument fromisoformat strptime now today utcnow fromtimestamp most_common elements
intersection union difference issubset issuperset symmetric_difference values_list tolist
is_relative_to expanduser home cwd parent parents mkstemp_never __enter__ __exit__ __len__
__contains__ __getitem__ __iter__ __next__ __str__ __repr__ upper read1 readable peek
""")
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


def python_reason(code: str, st: State) -> str:
    """Why Python code may write ("" when it provably only reads and prints)."""
    import ast

    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return "it does not parse"
    checker = _PyChecker(st)
    checker.visit(tree)
    return checker.reason


class _PyChecker:
    """Walks a Python module; `reason` is set at the first construct that may write."""

    def __init__(self, st: State) -> None:
        import ast

        self.ast = ast
        self.st = st
        self.reason = ""
        self.modules: dict[str, str] = {}  # local name -> module
        self.imported: dict[str, str] = {}  # local name -> module.function
        self.defined: set[str] = set()

    def fail(self, why: str) -> None:
        if not self.reason:
            self.reason = why

    def visit(self, tree: object) -> None:
        ast = self.ast
        nodes = list(ast.walk(tree))
        for node in nodes:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
                if not isinstance(node, ast.Lambda):
                    self.defined.add(node.name)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name) and isinstance(node.value, ast.Lambda):
                        self.defined.add(target.id)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    self._import(
                        alias.name,
                        alias.asname or alias.name.split(".")[0],
                        alias.name if alias.asname else alias.name.split(".")[0],
                    )
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                if node.level:
                    self.fail("a relative import runs local code")
                for alias in node.names:
                    full = f"{mod}.{alias.name}"
                    if full in _PY_SAFE_MODULES:
                        self.modules[alias.asname or alias.name] = full
                    else:
                        self._import(mod, None, mod)
                        self.imported[alias.asname or alias.name] = full
        parents: dict[int, object] = {}
        for node in nodes:
            for child in ast.iter_child_nodes(node):
                parents[id(child)] = node
        for node in nodes:
            if self.reason:
                return
            self.st.budget.spend()
            if isinstance(node, ast.Call):
                self._call(node)
            elif isinstance(node, ast.Name) and node.id in self.modules:
                parent = parents.get(id(node))
                if not isinstance(parent, ast.Attribute):
                    self.fail(f"the module {node.id} is passed around")
            elif isinstance(node, ast.Name) and node.id in (
                "eval",
                "exec",
                "compile",
                "__import__",
                "globals",
                "locals",
                "vars",
                "setattr",
                "delattr",
                "getattr",
                "open",
                "breakpoint",
                "__builtins__",
            ):
                parent = parents.get(id(node))
                if not (isinstance(parent, ast.Call) and parent.func is node):
                    self.fail(f"{node.id} used as a value")
            elif (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("__")
                and (node.attr not in ("__name__", "__doc__", "__file__", "__version__"))
            ):
                self.fail(f"access to {node.attr}")

    def _import(self, name: str, local: str | None, bound: str) -> None:
        top = name.split(".")[0]
        if name not in _PY_SAFE_MODULES and top not in sys.stdlib_module_names:
            self.fail(f"import of {name}, which taskgate does not know")
        elif local:
            self.modules[local] = bound

    def _dotted(self, node: object) -> str:
        ast = self.ast
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name):
            base = self.modules.get(node.id) or self.imported.get(node.id) or ""
            if base:
                parts.append(base)
                return ".".join(reversed(parts))
        return ""

    def _call(self, node: object) -> None:
        ast = self.ast
        assert isinstance(node, ast.Call)
        func = node.func
        if isinstance(func, ast.Name):
            name = func.id
            if name in self.imported:
                self._module_call(self.imported[name], node)
            elif name == "open":
                self._open_mode(node, 1)
            elif name == "getattr":
                attr = node.args[1] if len(node.args) > 1 else None
                if not (isinstance(attr, ast.Constant) and attr.value in _PY_METHODS):
                    self.fail("getattr with a computed attribute")
            elif name not in _PY_BUILTINS and name not in self.defined:
                self.fail(f"a call of {name}")
            return
        if isinstance(func, ast.Attribute):
            dotted = self._dotted(func)
            if dotted:
                self._module_call(dotted, node)
                return
            method = func.attr
            if method == "open":
                self._open_mode(node, 0)
            elif method == "replace" and len(node.args) >= 2:
                pass  # str.replace(old, new); Path.replace(target) takes one
            elif method not in _PY_METHODS:
                self.fail(f"a call of .{method}()")
            return
        if not isinstance(func, ast.Call | ast.Subscript):
            self.fail("a call of a computed function")

    def _module_call(self, dotted: str, node: object) -> None:
        ast = self.ast
        assert isinstance(node, ast.Call)
        module, _, func = dotted.rpartition(".")
        if dotted in (
            "sys.stdout.write",
            "sys.stderr.write",
            "sys.stdout.flush",
            "sys.stderr.flush",
            "sys.stdin.read",
            "sys.stdin.readline",
            "sys.stdin.readlines",
            "os.environ.get",
            "os.environ.items",
            "os.environ.keys",
            "os.environ.copy",
        ):
            return
        if module in ("subprocess", "os") and func in (
            "run",
            "call",
            "check_call",
            "check_output",
            "Popen",
            "getoutput",
            "getstatusoutput",
            "system",
            "popen",
        ):
            self._subprocess(node, func)
            return
        if module in ("zipfile", "tarfile", "gzip", "bz2", "lzma", "codecs", "io") and func in (
            "open",
            "ZipFile",
            "TarFile",
            "GzipFile",
            "BZ2File",
            "LZMAFile",
            "FileIO",
        ):
            self._open_mode(node, 1)
            return
        if module == "importlib" and func == "import_module":
            arg = node.args[0] if node.args else None
            if not (
                isinstance(arg, ast.Constant)
                and str(arg.value).split(".")[0] in sys.stdlib_module_names
            ):
                self.fail("importlib.import_module of code taskgate does not know")
            return
        allowed = _PY_MODULE_FUNCS.get(module)
        top = dotted.split(".")
        if allowed is not None:
            if func not in allowed and not (module == "os" and top[1:2] == ["path"]):
                self.fail(f"{dotted}")
            return
        if module.split(".")[0] in ("os", "sys") and module not in ("os.path",):
            if top[1] not in _PY_MODULE_FUNCS[top[0]]:
                self.fail(f"{dotted}")
            return
        if module in _PY_SAFE_MODULES or module.split(".")[0] in _PY_SAFE_MODULES - {
            "os",
            "sys",
            "subprocess",
            "shutil",
            "tempfile",
            "importlib",
        }:
            if func in ("write", "dump_to", "rmtree", "remove", "unlink", "rename", "replace"):
                self.fail(dotted)
            return
        self.fail(dotted)

    def _open_mode(self, node: object, position: int) -> None:
        ast = self.ast
        assert isinstance(node, ast.Call)
        mode = node.args[position] if len(node.args) > position else None
        for kw in node.keywords:
            if kw.arg == "mode":
                mode = kw.value
        if mode is None:
            return
        if not isinstance(mode, ast.Constant) or not isinstance(mode.value, str):
            self.fail("open with a computed mode")
        elif any(c in mode.value for c in "wax+"):
            self.fail(f"open(..., {mode.value!r}) writes")

    def _subprocess(self, node: object, func: str) -> None:
        ast = self.ast
        assert isinstance(node, ast.Call)
        arg = node.args[0] if node.args else None
        for kw in node.keywords:
            if kw.arg == "args":
                arg = kw.value
        shell = func in ("system", "popen", "getoutput", "getstatusoutput") or any(
            kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and not kw.value.value)
            for kw in node.keywords
        )
        if (
            isinstance(arg, ast.List | ast.Tuple)
            and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in arg.elts)
            and arg.elts
            and not shell
        ):
            run([Word(str(e.value)) for e in arg.elts], self.st)
        elif isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            if shell:
                walk_text(arg.value, self.st.copy())
            else:
                run([Word(arg.value)], self.st)
        else:
            self.fail("a subprocess whose command is built at run time")


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
