"""Python code judged read-only only when a conservative reading proves it (issue 15).

Parsed with `ast` (loaded only here, off the hook's fast path); every call must be known not
to write: `open` in a read mode, `print`, `sys.stdout.write`, `json.loads`, methods such as
`.read()` or `.split()`, `subprocess.run([...])` of a program the analyser judges (it is
judged in place). `os.replace`, `os.link`, `getattr(p, 'wri' + 'te_text')`, `exec(code)`, a
module passed around under another name or an unknown import make the code "may write"."""

from __future__ import annotations

import sys

from taskgate.hooks.commands import run
from taskgate.hooks.lexer import Word, words
from taskgate.hooks.shell import State, walk_text

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
