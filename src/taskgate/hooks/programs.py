"""Which programs write what: read-only only when known to be (issue 15).

`judge(st, name, args)` records a program's effects in the analysis state: the files it
writes (with each program's writing options modelled: `sed -i`/`w`, `sort -o`, `find -fprint`,
`tar -x -C`, `cp --target-directory=` ...), the commands it runs (wrappers, `xargs`, `find
-exec`), or that it may write anything (unknown programs, interpreters whose code is not
provably read-only, `make` without `-n`). Test runners and linters count as read-only: they
are what agents run most, and the effect check (hooks/effects.py) catches what they write.
"""

from __future__ import annotations

from taskgate.hooks.commands import _SHELLS, run, script
from taskgate.hooks.lexer import Word, words
from taskgate.hooks.shell import State, walk_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

READ_ONLY = words("""
cat tac head tail less more most ls dir vdir pwd echo printf true false test [ wc grep egrep
fgrep rg ag ack diff diff3 cmp comm cut tr nl od hexdump strings file stat du df which whereis
whoami id groups uname arch date printenv basename dirname realpath readlink sleep seq yes jq
yq column fold fmt paste join expand unexpand rev sha1sum sha224sum sha256sum sha384sum
sha512sum md5sum cksum b2sum sum base64 base32 ps pgrep pstree free uptime hostname bat batcat
exa eza lsof nproc getconf locale tty stty numfmt factor expr bc cal look zcat zgrep zless
bzcat xzcat lz4cat zstdcat gzcat type shellcheck hadolint actionlint yamllint markdownlint
taplo hexyl glow delta difft colordiff wdiff pytest py.test mypy pyright pyflakes flake8
pylint pycodestyle pydocstyle bandit vulture radon xenon jest vitest mocha ava karma tap
jasmine eslint tslint stylelint rspec phpunit phpstan psalm ctest nosetests ward behave tox
nox golangci-lint staticcheck govulncheck cppcheck clang-tidy splint tflint kube-linter
kubeval checkov trivy semgrep gitleaks detect-secrets licensee reuse lsb_release sw_vers ldd
nm objdump readelf size addr2line c++filt otool getent dig host nslookup ping locate mlocate
apropos man info whatis tldr cheat lscpu lsblk lsusb lspci dmesg journalctl last w who users
finger pinky logname tput clear watch- once
""")
# Read-only by what they are for, but they run project code (tests, plugins, configuration
# written in code): PostToolUse compares effects after them (hooks/effects.py).
RUNS_CODE = words("""
pytest py.test mypy pyright pyflakes flake8 pylint pycodestyle pydocstyle bandit vulture radon
xenon jest vitest mocha ava karma tap jasmine eslint tslint stylelint rspec phpunit phpstan psalm
ctest nosetests ward behave tox nox golangci-lint staticcheck govulncheck cppcheck clang-tidy
splint tflint kube-linter kubeval checkov trivy semgrep gitleaks detect-secrets licensee reuse
""")
# Writers whose operands are the files they write.
_OPERAND_WRITERS = frozenset(
    {"rm", "rmdir", "unlink", "shred", "touch", "mkdir", "mkfifo", "mknod", "tee", "truncate"}
)
_MODE_FIRST = frozenset({"chmod", "chown", "chgrp", "chattr", "setfacl"})
_COPIERS = frozenset({"cp", "mv", "ln", "install", "rsync", "link"})
_WRAPPERS = {  # wrapper -> options that take a value
    "sudo": words("""
-u -g -C -D -h -p -r -t -U --user --group --chdir --host --prompt
"""),
    "doas": frozenset({"-u", "-C"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "-n", "-p", "--class", "--classdata"}),
    "stdbuf": frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}),
    "timeout": frozenset({"-s", "-k", "--signal", "--kill-after"}),
    "setsid": frozenset(),
    "chrt": frozenset(),
    "taskset": frozenset({"-c", "--cpu-list"}),
    "unbuffer": frozenset(),
    "nohup": frozenset(),
    "time": frozenset({"-f", "-o", "--format", "--output"}),
    "xvfb-run": frozenset({"-a", "-n", "-s", "-f", "-e", "--server-args", "--server-num"}),
    "dbus-run-session": frozenset(),
    "caffeinate": frozenset(),
    "cgexec": frozenset({"-g"}),
    "firejail": frozenset(),
    "catchsegv": frozenset(),
    "strace": frozenset({"-e", "-p", "-s", "-u", "-E", "-a", "-o", "-P"}),
    "ltrace": frozenset({"-e", "-p", "-s", "-u", "-o", "-n", "-a"}),
}
_INTERPRETERS = frozenset(
    {
        "python",
        "pypy",
        "node",
        "nodejs",
        "bun",
        "deno",
        "perl",
        "ruby",
        "php",
        "lua",
        "luajit",
        "Rscript",
        "julia",
        "tclsh",
        "wish",
        "expect",
        "osascript",
        "java",
        "groovy",
        "scala",
        "kotlin",
        "jshell",
        "irb",
        "ghci",
        "runghc",
        "elixir",
        "erl",
        "escript",
        "swift",
        "dotnet-script",
        "ts-node",
        "tsx",
        "pwsh",
        "powershell",
        "R",
        "guile",
        "racket",
        "sbcl",
        "clojure",
        "awk",
        "gawk",
        "mawk",
        "nawk",
        "busybox",
    }
)


# Programs on the read list with options that run a program or write a file, or change the
# system (each checked against the program's manual): judged unbounded when one is given.
_RISKY: dict[str, tuple[str, ...]] = {
    "rg": ("--pre", "--hostname-bin"),  # a preprocessor run on every file searched
    "less": ("-o", "-O", "--log-file", "--LOG-FILE"),
    "file": ("-C", "--compile"),  # writes the compiled magic file
    "date": ("-s", "--set"),
    "hostname": ("-F", "--file", "-b", "--boot"),
    "dmesg": ("-c", "-C", "--clear", "--read-clear", "-n", "--console-level", "-D", "-E"),
    "journalctl": ("--vacuum-size", "--vacuum-time", "--vacuum-files", "--rotate", "--flush",
                   "--sync", "--relinquish-var", "--setup-keys", "--update-catalog"),
}  # fmt: skip


def _risky(args: list[Word], options: tuple[str, ...]) -> bool:
    """One of `options` among `args`: a long one alone or with `=value`, a short one alone,
    with its value joined, or in a short cluster of flags (`-Ro`)."""
    for w in args:
        text = w.text
        if not w.known:
            continue  # judge() compares after the line instead
        for option in options:
            if option.startswith("--"):
                if text == option or text.startswith(option + "="):
                    return True
            elif (
                text.startswith(option)
                or (  # `-o x`, `-ox`, or a short cluster `-Ro`
                    len(text) <= 4 and text[0] == "-" and text[1:].isalpha() and option[1] in text
                )
            ):
                return True
    return False


def known(name: str) -> bool:
    """Whether `name` is judged by its name (so a path to it is never read as a script)."""
    base = name.rstrip("0123456789.") or name
    if name in READ_ONLY or name in ("git", "taskgate", "env", "make") or base in _INTERPRETERS:
        return True
    if name in _OPERAND_WRITERS or name in _MODE_FIRST or name in _COPIERS:
        return True
    if name in _WRAPPERS or name in _SHELLS:
        return True
    handlers, tools, _ = _tables()
    return name in handlers or name in tools


def _tables() -> tuple[dict[str, Any], frozenset[str], Any]:
    """The option-aware handlers (hooks/tools.py, devtools.py), loaded only when a line runs
    something beyond the plain read list: `git status && ls` never pays for them."""
    from taskgate.hooks.devtools import _TOOLS, _tool
    from taskgate.hooks.tools import _HANDLERS

    return _HANDLERS, _TOOLS, _tool


_WRITER_OPTIONS = frozenset(
    {"-m", "--mode", "-s", "--size", "-r", "--reference", "-n", "--iterations", "--context", "-Z"}
)


def judge(st: State, name: str, args: list[Word], env: dict[str, str | None]) -> None:
    """Record what the program `name` run with `args` may write. Anything beyond the plain
    read list and git may run project code (`runs_code`): PostToolUse then compares effects."""
    base = name.rstrip("0123456789.") or name
    if name.startswith("python") or name.startswith("pypy"):
        base = "python"
    if name in READ_ONLY:
        risky = _RISKY.get(name)
        if name == "hostname" and any(not w.text.startswith("-") for w in args):
            st.result.may_write_anything("hostname NAME sets the host's name")
            return
        if risky is not None and _risky(args, risky):
            st.result.may_write_anything(f"{name} with {' or '.join(risky)} runs or writes")
            return
        if risky is not None and not all(w.known for w in args):
            st.result.runs_code = True  # a word known only at run time may be such an option
        if name in RUNS_CODE:
            st.result.runs_code = True  # a test runner or linter: project code, compared after
        return
    if name == "git":
        from taskgate.hooks.giteffects import git_effects

        git_effects(st, args, env)
        return
    if name == "taskgate":
        return  # its own rules (policy.check_taskgate); its steps check effects themselves
    st.result.runs_code = True
    if name in _WRAPPERS:
        _wrapper(st, name, args, env)
    elif name in _OPERAND_WRITERS:
        for w in operands(args, _WRITER_OPTIONS):
            st.write(w)
    elif name in _MODE_FIRST:
        ops = operands(args, frozenset({"--reference", "-m", "-M", "-x", "-X"}))
        for w in ops[0 if any(a.text.startswith("--reference") for a in args) else 1 :]:
            st.write(w)
    elif name in _COPIERS:
        _copy(st, name, args)
    elif name in _SHELLS:
        _shell(st, name, args)
    else:
        _judge_more(st, name, base, args)


def _judge_more(st: State, name: str, base: str, args: list[Word]) -> None:
    handlers, tools, tool = _tables()
    if name in handlers:
        handlers[name](st, args)
    elif name in tools and name not in ("node", "perl", "ruby"):
        tool(st, name, args)
    elif base in ("python", "pypy"):
        from taskgate.hooks.interp import python

        python(st, args)
    elif base in _INTERPRETERS:
        from taskgate.hooks.interp import interpreter

        interpreter(st, base, name, args)
    else:
        st.result.may_write_anything(f"`{name}` is not known to be read-only")


def operands(args: list[Word], with_value: frozenset[str] = frozenset()) -> list[Word]:
    """The non-option arguments (after `--`, everything)."""
    out: list[Word] = []
    skip = only = False
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


def option_value(args: list[Word], short: str, long: str) -> list[Word]:
    """Values of `-o X`, `-oX`, `--output X`, `--output=X` and unique prefixes `--out=X`."""
    found: list[Word] = []
    for i, w in enumerate(args):
        t = w.text
        if t == "--":
            break
        nxt = args[i + 1] if i + 1 < len(args) else None
        if short and t == short and nxt is not None:
            found.append(nxt)
        elif short and t.startswith(short) and not t.startswith("--") and len(t) > 2:
            found.append(Word(t[2:], w.known))
        elif long and t.startswith("--"):
            key, eq, value = t.partition("=")
            if len(key) > 3 and long.startswith(key):
                if eq:
                    found.append(Word(value, w.known))
                elif nxt is not None:
                    found.append(nxt)
    return found


def has_flag(args: list[Word], short: str, long: str = "") -> bool:
    """`-x` alone or inside a cluster (`-Ei`), or `--long` / a unique prefix of it."""
    for w in args:
        t = w.text
        if t == "--":
            return False
        if t.startswith("--"):
            key = t.partition("=")[0]
            if long and len(key) > 3 and long.startswith(key):
                return True
        elif short and t.startswith("-") and short in t[1:]:
            return True
    return False


def _wrapper(st: State, name: str, args: list[Word], env: dict[str, str | None]) -> None:
    takes = _WRAPPERS[name]
    i = 0
    while i < len(args) and args[i].text.startswith("-"):
        t = args[i].text
        if name in ("strace", "ltrace", "time"):  # -o FILE, -oFILE, --output=FILE: a write
            if t in ("-o", "--output") and i + 1 < len(args):
                st.write(args[i + 1])
            elif t.startswith("--output="):
                st.write(Word(t[len("--output=") :], args[i].known))
            elif t.startswith("-o") and len(t) > 2:
                st.write(Word(t[2:], args[i].known))
        i += 2 if t in takes else 1
    if name == "timeout" and i < len(args):
        i += 1  # the duration
    if name in ("chrt", "taskset") and i < len(args) and not args[i].text.startswith("/"):
        i += 1  # priority / mask
    if i < len(args):
        run(args[i:], st, env)


def _shell(st: State, name: str, args: list[Word]) -> None:
    i = 0
    if name == "busybox" and args:
        run(args, st)
        return
    while i < len(args):
        t = args[i].text
        if t.startswith("-") and not t.startswith("--") and "c" in t[1:]:
            if i + 1 < len(args):
                code = args[i + 1]
                if not code.known:
                    st.result.unknown(f"{name} -c runs code built at run time")
                    st.result.may_write_anything(f"{name} -c with code built at run time")
                walk_text(code.text, st.copy())
            return
        if t in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            i += 2
            continue
        if not t.startswith(("-", "+")) or t == "-":
            break
        i += 1
    if i < len(args) and args[i].text != "-":
        script(st, args[i], True, args[i + 1 :])
    else:
        _stdin_code(st, name)


def _stdin_code(st: State, name: str) -> None:
    """A shell without a script reads its code from stdin: a here-document we can read, or a
    pipe from earlier on the line (the whole line then counts as that code)."""
    if st.stdin_code:
        walk_text(st.stdin_code, st.copy())
    else:
        st.result.opaque.append(st.source)
        st.result.may_write_anything(f"{name} reading code from stdin")


def _copy(st: State, name: str, args: list[Word]) -> None:
    valued = frozenset(
        {
            "-t",
            "--target-directory",
            "-S",
            "--suffix",
            "-m",
            "--mode",
            "-o",
            "-g",
            "--owner",
            "--group",
            "-e",
            "--rsh",
            "--exclude",
            "--include",
            "--filter",
            "-f",
            "--backup-dir",
            "--chmod",
            "--log-file",
        }
    )
    ops = operands(args, valued)
    if name == "rsync":
        ops = [w for w in ops if ":" not in w.text or w.text.startswith("/")]
    targets = option_value(args, "-t", "--target-directory")
    if name == "install" and has_flag(args, "d", "--directory"):
        for w in ops:
            st.write(w)
        return
    if name == "link" and len(ops) == 2:
        _link(st, ops[0], ops[1], hard=True)
        st.write(ops[1])
        return
    if targets:
        dest, sources = targets[0], ops
    elif len(ops) >= 2 or (name == "ln" and ops):
        dest, sources = (ops[-1], ops[:-1]) if len(ops) >= 2 else (Word("."), ops)
    else:
        return
    found = [dest]
    found += [
        Word(
            dest.text.rstrip("/") + "/" + s.text.rstrip("/").rsplit("/", 1)[-1],
            dest.known and s.known,
        )
        for s in sources
    ]
    if name == "mv":
        found += sources
    for w in found:
        st.write(w)
    if name == "ln":
        symbolic = has_flag(args, "s", "--symbolic")
        for source in sources:
            _link(st, source, dest, hard=not symbolic, relative=symbolic)


def _link(st: State, source: Word, dest: Word, hard: bool, relative: bool = False) -> None:
    """A new link: what it points at is reachable through it; later paths that go through a
    symlink this line created resolve to its target."""
    import os

    if not source.known or not dest.known:
        st.result.unknown("a link whose name or target is known only at run time")
        return
    for cwd in st.cwds:
        link = os.path.join(cwd, dest.text)
        if os.path.isdir(link) and not os.path.islink(link):
            link = os.path.join(link, os.path.basename(source.text.rstrip("/")))
        base = os.path.dirname(link) if relative else cwd
        target = st.physical(os.path.join(base, source.text))
        st.result.link_targets.add(target)
        if hard:
            st.result.link_targets.add(st.physical(os.path.join(cwd, source.text)))
        else:
            st.links[os.path.realpath(link)] = target
