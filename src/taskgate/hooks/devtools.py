"""Build tools, package managers, test runners and formatters (hooks/programs.py, issue 15).

A subcommand on the read list runs tests, checks or prints; anything else (install, run,
publish, a fix/format flag) may write. Test runners execute project code, which may write: the
effect check (hooks/effects.py) is what catches that, so judging them read-only costs no
safety and spares the agent a false alarm on every test run.
"""

from __future__ import annotations

from taskgate.hooks.commands import run
from taskgate.hooks.lexer import Word, words
from taskgate.hooks.programs import has_flag
from taskgate.hooks.shell import State

_READ_SCRIPTS = (
    "test",
    "lint",
    "check",
    "typecheck",
    "type-check",
    "types",
    "tsc",
    "verify",
    "validate",
    "spec",
    "e2e",
    "ci",
    "format:check",
    "fmt:check",
    "coverage",
)
# tool -> subcommands that only read (first operand); "" = no subcommand at all
_SUBCOMMANDS: dict[str, frozenset[str]] = {
    "npm": words("""
test t tst ls list ll la view v info show outdated why explain help search doctor root bin
prefix audit fund query pkg-get ping whoami
"""),
    "yarn": words("""
test ls list info why outdated audit help workspaces
"""),
    "pnpm": frozenset(["test", "t", "ls", "list", "why", "outdated", "audit", "help"]),
    "bun": frozenset(["test"]),
    "cargo": words("""
test t check c clippy build b doc bench tree metadata search verify-project locate-project
nextest audit deny outdated pkgid read-manifest help fmt
"""),
    "go": frozenset(["test", "vet", "list", "env", "version", "doc", "help", "build"]),
    "mvn": frozenset(),
    "mvnw": frozenset(),
    "gradle": frozenset(),
    "gradlew": frozenset(),
    "dotnet": frozenset(["test", "build", "--info", "--list-sdks", "--list-runtimes", "list"]),
    "composer": words("""
validate show outdated diagnose audit check-platform-reqs test licenses depends why
prohibits
"""),
    "mix": frozenset(["test", "compile", "credo", "dialyzer", "deps.tree", "help", "format"]),
    "swift": frozenset(["test", "build"]),
    "deno": frozenset(["test", "lint", "check", "info", "doc", "bench", "fmt"]),
    "pip": words("""
list show freeze check config debug inspect index help search
"""),
    "uv": frozenset(["tree"]),
    "poetry": frozenset(["show", "check", "env", "about", "search"]),
    "docker": words("""
ps images logs inspect version info stats top history port diff events search
"""),
    "kubectl": words("""
get describe logs version explain top api-resources api-versions cluster-info diff auth
"""),
    "gh": frozenset(["status", "search", "browse"]),
    "terraform": frozenset(["validate", "version", "providers", "show", "output", "graph", "fmt"]),
    "rustup": frozenset(["show", "which", "component", "target", "toolchain"]),
    "conda": frozenset(["list", "info", "search"]),
    "brew": frozenset(["list", "info", "search", "outdated", "deps", "uses", "config", "doctor"]),
    "apt": frozenset(["list", "show", "search", "policy", "depends", "rdepends"]),
    "apt-cache": words("""
show search policy depends rdepends madison showpkg
"""),
    "dpkg": frozenset(["-l", "-L", "-s", "-S", "--list", "--listfiles", "--status", "--search"]),
    "rake": frozenset(["test", "spec", "-T"]),
    "bundle": frozenset(["list", "show", "outdated", "check", "info"]),
    "hatch": frozenset(["test"]),
    "stack": frozenset(["test", "build"]),
    "cabal": frozenset(["test", "build"]),
    "dune": frozenset(["test", "build"]),
    "zig": frozenset(["test"]),
    "bazel": frozenset(["test", "build", "query", "info"]),
    "tox": frozenset(),
    "nox": frozenset(),
    "coverage": frozenset(["report", "xml", "json", "html", "run", "erase", "combine", "debug"]),
}
# Tools that run another tool: the rest of the line is judged as that tool.
_RUNNERS = {"npx": 0, "bunx": 0, "pipx": 1, "uvx": 0}
_PREFIXED_RUN = {
    "uv": "run",
    "poetry": "run",
    "pipenv": "run",
    "hatch": "run",
    "pdm": "run",
    "bundle": "exec",
    "pnpm": "exec",
    "yarn": "dlx",
    "npm": "exec",
    "conda": "run",
    "rye": "run",
}
# Formatters and fixers: they write unless told to check.
_FORMATTERS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # name -> (flags that make it check only, flags that make it write)
    "black": (("--check", "--diff"), ()),
    "isort": (("--check", "--check-only", "-c", "--diff"), ()),
    "yapf": (("--diff", "-d"), ("-i", "--in-place")),
    "autopep8": (("--diff", "-d"), ("-i", "--in-place")),
    "autoflake": (("--check", "-c"), ("-i", "--in-place")),
    "prettier": ((), ("--write", "-w")),
    "eslint": ((), ("--fix", "--fix-dry-run")),
    "stylelint": ((), ("--fix",)),
    "rubocop": (
        (),
        (
            "-a",
            "-A",
            "--auto-correct",
            "--autocorrect",
            "--auto-correct-all",
            "--autocorrect-all",
            "-x",
            "--fix-layout",
        ),
    ),
    "gofmt": ((), ("-w",)),
    "goimports": ((), ("-w",)),
    "rustfmt": (("--check",), ()),
    "clang-format": ((), ("-i",)),
    "shfmt": ((), ("-w", "--write")),
    "codespell": ((), ("-w", "--write-changes")),
    "typos": ((), ("-w", "--write-changes")),
    "markdownlint-cli2": ((), ("--fix",)),
    "jest": ((), ("-u", "--updateSnapshot", "--update-snapshot")),
    "vitest": ((), ("-u", "--update")),
    "tsc": (("--noEmit", "--version", "-v", "--showConfig", "--help", "-h"), ()),
    "djlint": (("--check", "--lint"), ()),
}
_TOOLS = (
    frozenset(_SUBCOMMANDS)
    | frozenset(_RUNNERS)
    | frozenset(_PREFIXED_RUN)
    | frozenset(_FORMATTERS)
    | frozenset(
        {
            "ruff",
            "java",
            "javac",
            "node_modules",
            "gcc",
            "g++",
            "cc",
            "clang",
            "clang++",
            "rustc",
            "cmake",
        }
    )
)
_MAVEN_GOALS = words("""
validate compile test-compile test verify package clean dependency:tree dependency:list
dependency:analyze help:effective-pom spotless:check checkstyle:check pmd:check
""")
_GRADLE_TASKS = words("""
test check build assemble compileJava compileKotlin compileTestJava lint dependencies tasks
projects properties help ktlintCheck detekt spotlessCheck jacocoTestReport clean
""")


def _anything(st: State, what: str) -> None:
    st.result.may_write_anything(what)


def _tool(st: State, name: str, args: list[Word]) -> None:
    texts = [w.text for w in args]
    if any(t in ("--version", "-V", "--help", "-h") for t in texts[:1]) or texts == ["version"]:
        return
    if name in ("tox", "nox"):
        return  # test environments (.tox/.nox are ignored files)
    if name in _RUNNERS:
        rest = [w for w in args if not w.text.startswith("-")]
        if rest:
            from taskgate.hooks.programs import judge

            judge(st, rest[0].text.rsplit("/", 1)[-1].partition("@")[0], rest[1:], {})
        return
    subs = [w for w in args if not w.text.startswith("-")]
    sub = subs[0].text if subs else ""
    if name in _PREFIXED_RUN and sub == _PREFIXED_RUN[name]:
        i = texts.index(sub) + 1
        while i < len(args) and args[i].text.startswith("-"):
            i += 1
        if i < len(args):
            run(args[i:], st)
        return
    if name in _FORMATTERS:
        checks, writes = _FORMATTERS[name]
        if any(t in writes or t.partition("=")[0] in writes for t in texts):
            _anything(st, f"`{name} {' '.join(texts)}` rewrites files")
        elif not writes and not any(t in checks for t in texts):
            _anything(st, f"`{name}` rewrites files (use {checks[0]} to only check)")
        return
    if name == "ruff":
        fixing = any(t in ("--fix", "--unsafe-fixes", "--fix-only") for t in texts)
        formats = sub == "format" and not any(t in ("--check", "--diff") for t in texts)
        if fixing or formats or sub == "clean":
            _anything(st, "ruff rewrites files here (ruff check / ruff format --check only read)")
        return
    if name in ("mvn", "mvnw"):
        goals = [t for t in texts if not t.startswith("-")]
        if any(g not in _MAVEN_GOALS for g in goals):
            _anything(st, f"maven goals {' '.join(goals)} may write files")
        return
    if name in ("gradle", "gradlew"):
        tasks = [t for t in texts if not t.startswith("-")]
        if any(t.rsplit(":", 1)[-1] not in _GRADLE_TASKS for t in tasks):
            _anything(st, f"gradle tasks {' '.join(tasks)} may write files")
        return
    if name in ("gcc", "g++", "cc", "clang", "clang++", "rustc", "javac", "cmake", "java"):
        if not any(
            t in ("-fsyntax-only", "-E", "--version", "-version", "-dumpversion", "-v")
            for t in texts
        ):
            _anything(st, f"{name} writes its output files")
        return
    if name in ("npm", "yarn", "pnpm", "bun") and sub in ("run", "run-script") and len(subs) > 1:
        script = subs[1].text
        if not script.startswith(_READ_SCRIPTS):
            _anything(st, f"`{name} run {script}` runs a package script that may write")
        return
    if name == "yarn" and sub.startswith(_READ_SCRIPTS):
        return
    if name in ("npm", "pnpm", "yarn") and sub in ("config",) and len(subs) > 1:
        if subs[1].text not in ("get", "list", "ls"):
            _anything(st, f"{name} config {subs[1].text} changes the configuration")
        return
    if name == "go" and sub == "env" and "-w" in texts:
        _anything(st, "go env -w changes the configuration")
        return
    if name == "go" and sub == "build":
        for i, t in enumerate(texts):
            if t == "-o" and i + 1 < len(args):
                st.write(args[i + 1])
        return
    if name == "cargo" and sub in ("clippy", "fmt"):
        if (sub == "clippy" and "--fix" in texts) or (sub == "fmt" and "--check" not in texts):
            _anything(st, f"cargo {sub} rewrites files here")
        return
    if (
        name in ("deno", "terraform")
        and sub == "fmt"
        and not has_flag(args, "", "--check")
        and "-check" not in texts
    ):
        _anything(st, f"{name} fmt rewrites files (use --check)")
        return
    if name == "mix" and sub == "format" and "--check-formatted" not in texts:
        _anything(st, "mix format rewrites files (use --check-formatted)")
        return
    if name in ("gh",):
        second = subs[1].text if len(subs) > 1 else ""
        if sub in ("pr", "issue", "repo", "run", "workflow", "release", "gist", "label"):
            if second in ("view", "list", "status", "diff", "checks", "watch", ""):
                return
        elif sub == "api" or sub in _SUBCOMMANDS["gh"]:
            return
        _anything(st, f"gh {sub} {second} may write files")
        return
    if name == "docker" and sub == "compose":
        second = subs[1].text if len(subs) > 1 else ""
        if second not in ("ps", "logs", "config", "ls", "images", "top", "version"):
            _anything(st, f"docker compose {second} may write files")
        return
    if name in ("kubectl",) and sub == "config":
        return
    allowed = _SUBCOMMANDS.get(name, frozenset())
    if name in ("npm", "yarn", "pnpm", "bun") and not subs and name == "yarn":
        _anything(st, "yarn without a command installs dependencies")
        return
    if (sub and sub not in allowed) or (not sub and name in ("pip", "go", "cargo", "npm")):
        _anything(st, f"`{name} {sub}` may write files")
        return
