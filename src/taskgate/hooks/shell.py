"""What a Bash command line may write: a bounded shell analyser, not a grep (issues 7, 15).

`analyse(command, cwd)` parses the line with a real shell grammar (hooks/grammar.py), walks it
with what can be known before it runs (the directories each command may run in, variables,
functions, symlinks it creates) and returns every path it may write, the simple commands it
runs (for the git and taskgate rules), and what it could not bound:

- `unbounded`: programs that may write anything (unknown programs, interpreters whose code is
  not provably read-only, `make`, scripts). The policy denies them where the actor may not
  write (the main agent in IMPLEMENTATION, ...) and allows them elsewhere.
- `problems` (`complete=False`): a path or a program name known only at run time.
- `budget`: the analysis stopped at its budget (hooks/lexer.py Budget): the line is judged as
  not analysable at all.

Programs are judged by hooks/programs.py: read-only only when known to be.
Imports stay minimal (no re, typing or dataclasses): this runs on every Bash tool call.
"""

from __future__ import annotations

import os

from taskgate.hooks.expand import Expander, brace_expand
from taskgate.hooks.grammar import Node, Parser
from taskgate.hooks.lexer import Budget, OverBudget, Redir, Word, tokenize

MAX_COMMAND = 256 * 1024  # characters; longer lines are over budget, never judged piecemeal
MAX_CWDS = 16  # possible directories of one command (failing `cd`s add possibilities)
MAX_DEPTH = 8  # nested shells, substitutions, sourced scripts and function calls
_SPECIAL_FILES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/zero"})


class Command:
    """A simple command after wrappers were stripped, with the directories it may run in."""

    __slots__ = ("argv", "cwds", "env", "known")

    def __init__(
        self,
        argv: list[str],
        cwds: tuple[str, ...],
        known: bool,
        env: dict[str, str | None] | None = None,
    ) -> None:
        self.argv = argv
        self.cwds = cwds
        self.known = known
        self.env = env or {}  # assignments in front of it (GIT_DIR=...): None when unknown

    def __repr__(self) -> str:
        return f"Command({self.argv!r}, {self.cwds!r})"


class Analysis:
    """Everything one command line may write, and what it runs."""

    __slots__ = (
        "budget",
        "commands",
        "complete",
        "dir_writes",
        "link_targets",
        "opaque",
        "problems",
        "runs_code",
        "scripts",
        "tree_writes",
        "unbounded",
        "writes",
    )

    def __init__(self) -> None:
        self.writes: set[str] = set()  # absolute paths, symlinks resolved
        self.link_targets: set[str] = set()  # what new links point at (writes go through)
        self.dir_writes: set[str] = set()  # "something below this directory"
        self.tree_writes: set[str] = set()  # git changing the tracked files of this worktree
        self.commands: list[Command] = []
        self.opaque: list[str] = []  # interpreter code, for the protected-name check
        self.scripts: list[tuple[str, str]] = []  # (path, source) of interpreter scripts
        self.unbounded: list[str] = []  # why some program may write anything
        self.problems: list[str] = []  # why the analysis is incomplete
        self.complete = True
        self.budget = ""  # set when the analysis ran out of budget
        self.runs_code = False  # a program beyond the plain read list (test runners ...) ran

    def unknown(self, why: str) -> None:
        """Record that part of the command could not be analysed."""
        self.complete = False
        if len(self.problems) < 20:
            self.problems.append(why)

    def may_write_anything(self, why: str) -> None:
        """Record a program that is not known to write only what we can name."""
        if len(self.unbounded) < 20:
            self.unbounded.append(why)

    @property
    def reads_only(self) -> bool:
        """True when the line provably writes no file at all."""
        touched = self.writes or self.dir_writes or self.tree_writes or self.link_targets
        unsure = self.unbounded or self.opaque or self.scripts or self.budget
        return self.complete and not touched and not unsure


class State:
    """Where the next command runs and what is known, while walking the tree."""

    def __init__(self, result: Analysis, cwds: tuple[str, ...], home: str, budget: Budget) -> None:
        self.result = result
        self.cwds = cwds
        self.home = home
        self.budget = budget
        self.vars: dict[str, str] = {}
        self.unknown_vars: set[str] = set()
        self.functions: dict[str, Node] = {}
        self.integers: set[str] = set()  # `declare -i` names: what is assigned is arithmetic
        self.links: dict[str, str] = {}  # link created in this line -> what it points at
        self.dirstack: list[tuple[str, ...]] | None = []
        self.oldpwd: tuple[str, ...] | None = None
        self.depth = 0
        self.source = ""  # the line being walked: code an interpreter may read from stdin
        self.stdin_code = ""  # a here-document or here-string feeding the current command
        self.last_success: tuple[str, ...] | None = None  # where a `cd` leads when it succeeds
        self.expander = Expander(self.lookup, self.substitution, home, budget, self.dynamic)

    def copy(self) -> State:
        """A subshell's view: changes inside do not leak out."""
        new = State.__new__(State)
        new.__dict__.update(self.__dict__)
        new.vars, new.unknown_vars = dict(self.vars), set(self.unknown_vars)
        new.functions = dict(self.functions)
        new.integers = set(self.integers)
        new.dirstack = None if self.dirstack is None else list(self.dirstack)
        new.stdin_code = ""
        new.last_success = None
        new.expander = Expander(new.lookup, new.substitution, new.home, new.budget, new.dynamic)
        new.expander.assoc = set(self.expander.assoc)
        return new

    def lookup(self, name: str) -> str | None:
        """A variable's value when known before the line runs."""
        if name in self.vars:
            return self.vars[name]
        if name in self.unknown_vars:
            return None
        if name == "PWD" and len(self.cwds) == 1:
            return self.cwds[0]
        if name == "OLDPWD" and self.oldpwd is not None and len(self.oldpwd) == 1:
            return self.oldpwd[0]
        if name == "HOME":
            return self.home
        return None

    def assign(self, name: str, word: Word) -> None:
        """A shell variable set by the line."""
        if word.known:
            self.vars[name] = word.text
            self.unknown_vars.discard(name)
        else:
            self.vars.pop(name, None)
            self.unknown_vars.add(name)

    def dynamic(self) -> None:
        """Arithmetic evaluates a value known only at run time (hooks/expand.py): it may run
        commands, so PostToolUse compares effects after the line."""
        self.result.runs_code = True

    def substitution(self, inner: str) -> None:
        """Commands inside $(...), backticks and <(...) run too: analyse them in a subshell."""
        walk_text(inner, self.copy())

    def expand(self, raw: str) -> list[Word]:
        """The words one raw word becomes (brace expansion may make several)."""
        word = self.expander.expand(raw)
        if word.glob and "{" in word.text and word.known:
            texts = brace_expand(word.text)
            if len(texts) > 1:
                return [Word(t, True, any(c in t for c in "*?[")) for t in texts]
        return [word]

    # -- paths ------------------------------------------------------------------------------

    def paths(self, word: Word) -> list[str]:
        """Absolute physical paths a word may name (globs expanded, every possible cwd)."""
        if not word.known:
            self.result.unknown(f"a path depends on runtime values: {word.text!r}")
            return []
        if word.text in _SPECIAL_FILES or _fd(word.text):
            return []
        found: list[str] = []
        for cwd in self.cwds:
            self.budget.spend(4)
            joined = os.path.join(cwd, word.text)
            if _process_relative(joined):
                self.result.may_write_anything(
                    f"{joined}: /proc and /dev/fd paths name what the process that opens them sees"
                )
                continue
            found.append(self.physical(joined))
            if word.glob:
                found.extend(self.physical(p) for p in _glob(joined))
        return found

    def physical(self, path: str) -> str:
        """Symlinks resolved, including links this very line creates before the write."""
        real = os.path.realpath(path)
        for link, target in self.links.items():
            if real == link or real.startswith(link + os.sep):
                return os.path.realpath(target + real[len(link) :])
        return real

    def write(self, word: Word) -> None:
        """The command writes the file `word` names."""
        self.result.writes.update(self.paths(word))

    def write_below(self, word: Word) -> None:
        """The command may write anything below the directory `word` names."""
        self.result.dir_writes.update(self.paths(word))


def _process_relative(path: str) -> bool:
    """policy.process_relative, loaded with the first write's path (PostToolUse analyses a
    Bash line without the policy module)."""
    from taskgate.hooks.policy import process_relative

    return process_relative(path)


def _fd(path: str) -> bool:
    """/dev/fd/N itself: the descriptor (stdout, a pipe, a file a redirection already named)."""
    return path.startswith("/dev/fd/") and path[8:].isdigit()


def _glob(pattern: str) -> list[str]:
    import glob

    found = glob.glob(pattern, include_hidden=True)
    return found[:256]


def analyse(
    command: str, cwd: str, *, home: str | None = None, budget: Budget | None = None
) -> Analysis:
    """Every path `command` may write when run in `cwd`, and the commands it runs."""
    result = Analysis()
    budget = budget or Budget()
    if len(command) > MAX_COMMAND:
        result.budget = f"the command is {len(command) // 1024} KiB, beyond the analyser's budget"
        return result
    st = State(result, (cwd,), home or os.path.expanduser("~"), budget)
    try:
        walk_text(command, st)
    except OverBudget as exc:
        result.budget = str(exc)
    except RecursionError:
        result.budget = "the command nests too deeply to analyse within the hook's budget"
    return result


def walk_text(text: str, st: State) -> None:
    """Parse and walk one piece of shell code in the state `st` (which it updates)."""
    if st.depth > MAX_DEPTH:
        st.result.unknown(f"shell nesting deeper than {MAX_DEPTH} levels")
        return
    parser = Parser(tokenize(text, st.budget), st.budget)
    tree = parser.parse()
    for problem in parser.problems[:3]:
        st.result.unknown(f"the shell would not parse this line ({problem})")
    saved = st.source
    st.source = text
    st.depth += 1
    try:
        walk(tree, st)
    finally:
        st.depth -= 1
        st.source = saved


def walk(node: Node, st: State) -> None:
    """Walk one syntax tree node, updating `st` as the shell would."""
    st.budget.spend()
    kind = node.kind
    if kind == "list":
        for and_or, sep in node.parts:
            if sep == "&":
                walk(and_or, st.copy())  # a background job runs in a subshell
            else:
                walk(and_or, st)
    elif kind == "and_or":
        _and_or(node, st)
    elif kind == "pipeline":
        commands = node.parts[1:]
        if len(commands) == 1:
            walk(commands[0], st)
        else:
            for part in commands:
                walk(part, st.copy())  # each side: a subshell
    elif kind == "simple":
        from taskgate.hooks.commands import simple

        simple(node, st)
    else:
        _compound(node, st)


def _and_or(node: Node, st: State) -> None:
    st.last_success = None
    walk(node.parts[0], st)
    ends = [st.cwds]
    for op, pipeline in node.parts[1:]:
        if op == "&&" and st.last_success is not None:
            st.cwds = st.last_success  # `cd x && cmd`: cmd runs only where the cd led
        st.last_success = None
        walk(pipeline, st)
        ends.append(st.cwds)
    for end in ends:  # what follows runs wherever the list stopped
        merge_cwds(st, end)


def merge_cwds(st: State, other: tuple[str, ...]) -> None:
    """The next command may run in either set of directories."""
    st.cwds = tuple(dict.fromkeys(st.cwds + other))
    if len(st.cwds) > MAX_CWDS:
        raise OverBudget(
            "the command's working directory has too many possible values to analyse "
            "within the hook's budget"
        )


def _compound(node: Node, st: State) -> None:
    kind = node.kind
    for redir in node.redirs:
        from taskgate.hooks.commands import redirect

        redirect(redir, st)
    if kind == "group":
        walk(node.parts[0], st)
    elif kind == "subshell":
        walk(node.parts[0], st.copy())
    elif kind == "if":
        *clauses, otherwise = node.parts
        start = st.cwds
        ends: list[tuple[str, ...]] = []
        for cond, body in clauses:
            walk(cond, st)
            branch = st.copy()
            walk(body, branch)
            _absorb(st, branch)
            ends.append(branch.cwds)
        if otherwise is not None:
            branch = st.copy()
            walk(otherwise, branch)
            _absorb(st, branch)
            ends.append(branch.cwds)
        for end in ends:
            merge_cwds(st, end)
        if st.cwds != start:
            merge_cwds(st, start)
    elif kind == "loop":
        _, cond, body = node.parts
        for _ in range(2):  # twice: a cd in the body moves the next iteration too
            before = st.cwds
            walk(cond, st)
            branch = st.copy()
            walk(body, branch)
            _absorb(st, branch)
            merge_cwds(st, branch.cwds)
            if st.cwds == before:
                break
    elif kind == "for":
        name, words, body = node.parts
        for raw in words or ():
            if name == "((":
                st.expander.arithmetic(str(raw).replace(";", ","))
            else:
                st.expand(str(raw))
        if name and name != "((":
            st.assign(str(name), Word("", known=False))
        for _ in range(2):
            before = st.cwds
            branch = st.copy()
            walk(body, branch)
            _absorb(st, branch)
            merge_cwds(st, branch.cwds)
            if st.cwds == before:
                break
    elif kind == "case":
        subject, *arms = node.parts
        st.expand(str(subject))
        start = st.cwds
        for patterns, body in arms:
            for raw in patterns:
                st.expand(str(raw))
            branch = st.copy()
            walk(body, branch)
            _absorb(st, branch)
            merge_cwds(st, branch.cwds)
        merge_cwds(st, start)
    elif kind == "function":
        name, body = node.parts
        st.functions[str(name)] = body
    elif kind == "arith":
        st.expander.arithmetic(str(node.parts[0]))


def _absorb(st: State, branch: State) -> None:
    """What a branch that may or may not run leaves behind: functions it defined, and
    variables only where both agree."""
    st.functions.update(branch.functions)
    for name in set(branch.vars) | branch.unknown_vars:
        if st.vars.get(name) != branch.vars.get(name) or name in branch.unknown_vars:
            st.vars.pop(name, None)
            st.unknown_vars.add(name)


def redirect_target(redir: Redir, st: State) -> list[Word]:
    """The words a redirection's target expands to."""
    return st.expand(redir.target)
