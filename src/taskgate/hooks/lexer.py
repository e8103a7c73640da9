"""Shell tokens and word expansion for the Bash analyser (taskgate.hooks.shell), issue 15.

`tokenize(text, budget)` splits a command line into words (kept raw, exactly as written),
operators and redirections, with here-document bodies attached to their redirection; the
grammar (hooks/grammar.py) builds commands from them. `Expander.expand(raw)` turns one raw word
into its value when the shell's value can be known at analysis time (quotes, escapes, ANSI-C
`$'\\x2e'`, backslash-newline, `~`, `~-`, variables assigned earlier on the line), else marks
it unknown; the commands inside `$(...)`, backticks and process substitutions are handed to
the analyser. Everything is bounded by a `Budget`: a command that would cost more than the
budget is not judged piecemeal, it is reported as over budget.
"""

from __future__ import annotations

from itertools import pairwise

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

OPERATORS = ("&&", "||", "|&", ";;&", ";;", ";&", "&", "|", ";", "(", ")")
REDIRECTS = ("<<<", "<<-", "<<", "<>", ">>", ">|", ">&", "<&", "&>>", "&>", ">", "<")
_META = " \t\n;&|()<>"


class OverBudget(Exception):
    """The analysis would cost more than the hook may spend."""


class Budget:
    """Steps and wall time the analysis may spend (far below the hook's timeout)."""

    __slots__ = ("deadline", "steps")

    def __init__(self, steps: int = 200_000, seconds: float = 0.5) -> None:
        import time

        self.steps = steps
        self.deadline = time.monotonic() + seconds

    def spend(self, n: int = 1) -> None:
        """Charge `n` steps; raises OverBudget when the steps or the time run out."""
        self.steps -= n
        if self.steps < 0:
            raise OverBudget("the command is too complex to analyse within the hook's budget")
        if self.steps % 512 < n:
            import time

            if time.monotonic() > self.deadline:
                raise OverBudget("analysing the command took longer than the hook's budget")


class Word:
    """One shell word after expansion: its text, or `known=False` when it depends on runtime
    values; `glob` when unquoted pattern characters remain."""

    __slots__ = ("glob", "known", "text")

    def __init__(self, text: str = "", known: bool = True, glob: bool = False) -> None:
        self.text = text
        self.known = known
        self.glob = glob

    def __repr__(self) -> str:
        return f"Word({self.text!r}{'' if self.known else ', unknown'})"


class Redir:
    """A redirection: operator with its fd (`2>`, `&>`), raw target, here-doc body."""

    __slots__ = ("body", "op", "target")

    def __init__(self, op: str, target: str) -> None:
        self.op = op
        self.target = target
        self.body: str | None = None


Token = tuple[str, object]  # ("word", raw) | ("op", op) | ("redir", Redir)


def tokenize(s: str, budget: Budget) -> list[Token]:
    """Every token of `s`; here-document bodies attached to their redirection."""
    out: list[Token] = []
    pending: list[Redir] = []
    i, n = 0, len(s)
    while i < n:
        budget.spend()
        c = s[i]
        if c in " \t":
            i += 1
        elif c == "\\" and s.startswith("\\\n", i):
            i += 2
        elif c == "#" and (not out or out[-1][0] != "word" or s[i - 1] in " \t\n;&|()"):
            while i < n and s[i] != "\n":
                i += 1
        elif c == "\n":
            i += 1
            for redir in pending:  # here-document bodies are data, read after the newline
                i = _heredoc(s, i, redir)
            pending = []
            out.append(("op", "\n"))
        elif s.startswith(("<(", ">("), i):
            end = balanced(s, i + 1, budget)
            out.append(("word", s[i : end + 1]))
            i = end + 1
        elif s.startswith(("&>", "&>>"), i):
            i = _redirect(s, i, "", out, pending, budget)
        elif c in ";&|()":
            op = next(o for o in OPERATORS if s.startswith(o, i))
            if op == "(" and s.startswith("((", i) and _command_start(out):
                end = _arith_end(s, i, budget)
                out.append(("word", "(("))
                out.append(("word", s[i + 2 : end]))
                out.append(("op", ";"))
                i = end + 2
                continue
            out.append(("op", op))
            i += len(op)
        elif c in "<>":
            i = _redirect(s, i, "", out, pending, budget)
        else:
            end = word_end(s, i, budget)
            raw = s[i:end]
            fd = raw.isdigit() or (raw[:1] == "{" and raw[-1:] == "}" and raw[1:-1].isidentifier())
            if end < n and s[end] in "<>" and fd:
                i = _redirect(s, end, raw, out, pending, budget)
                continue
            out.append(("word", raw))
            i = end
            if raw == "[[" and _command_start(out[:-1]):
                i = _double_bracket(s, i, out, budget)
    return out


def _command_start(out: list[Token]) -> bool:
    return not out or out[-1][0] == "op" or out[-1] in (("word", "!"), ("word", "{"))


def _arith_end(s: str, i: int, budget: Budget) -> int:
    end = balanced(s, i, budget)
    return end - 1 if end > i and s[end - 1 : end + 1] == "))" else end


def _double_bracket(s: str, i: int, out: list[Token], budget: Budget) -> int:
    """`[[ a > b ]]`: inside, < and > compare strings; they are not redirections."""
    n = len(s)
    while i < n:
        budget.spend()
        if s[i] in " \t":
            i += 1
            continue
        if s[i] in "<>":
            out.append(("word", s[i]))
            i += 1
            continue
        if s[i] in "\n;&|()" and not s.startswith(("&&", "||"), i) and s[i] not in "()":
            return i
        if s.startswith(("&&", "||"), i):
            out.append(("word", s[i : i + 2]))
            i += 2
            continue
        if s[i] in "()":
            out.append(("word", s[i]))
            i += 1
            continue
        end = word_end(s, i, budget)
        out.append(("word", s[i:end]))
        i = end
        if s[i - 2 : i] == "]]" and out[-1][1] == "]]":
            return i
    return i


def _redirect(
    s: str, i: int, fd: str, out: list[Token], pending: list[Redir], budget: Budget
) -> int:
    op = next(o for o in REDIRECTS if s.startswith(o, i))
    i += len(op)
    while i < len(s) and s[i] in " \t":
        i += 1
    end = word_end(s, i, budget)
    redir = Redir(fd + op, s[i:end])
    if op in ("<<", "<<-"):
        pending.append(redir)
    out.append(("redir", redir))
    return end


def _heredoc(s: str, i: int, redir: Redir) -> int:
    delim = redir.target.replace("'", "").replace('"', "").replace("\\", "")
    strip = redir.op.endswith("<<-")
    lines: list[str] = []
    while i < len(s):
        end = s.find("\n", i)
        end = len(s) if end < 0 else end
        line = s[i:end]
        i = end + 1
        if (line.lstrip("\t") if strip else line) == delim:
            break
        lines.append(line)
    redir.body = "\n".join(lines)
    return min(i, len(s))


def word_end(s: str, i: int, budget: Budget) -> int:
    """Where the word starting at `i` ends (quotes, substitutions and escapes respected)."""
    n = len(s)
    while i < n:
        budget.spend()
        c = s[i]
        if c in _META:
            if c in "<>" and s.startswith(("<(", ">("), i):
                i = balanced(s, i + 1, budget) + 1
                continue
            return i
        if c == "\\":
            i += 2
        elif c == "'":
            end = s.find("'", i + 1)
            i = n if end < 0 else end + 1
        elif c == '"':
            i = _dquote_end(s, i + 1, budget)
        elif c == "`":
            i = _backtick_end(s, i + 1) + 1
        elif c == "$" and s.startswith("$(", i):
            i = balanced(s, i + 1, budget) + 1
        elif c == "$" and s.startswith("${", i):
            i = _brace_end(s, i + 1, budget) + 1
        elif c == "$" and s.startswith("$'", i):
            i = _ansi_end(s, i + 2) + 1
        else:
            i += 1
    return min(i, n)


def _dquote_end(s: str, i: int, budget: Budget) -> int:
    n = len(s)
    while i < n:
        budget.spend()
        c = s[i]
        if c == "\\":
            i += 2
        elif c == '"':
            return i + 1
        elif c == "`":
            i = _backtick_end(s, i + 1) + 1
        elif s.startswith("$(", i):
            i = balanced(s, i + 1, budget) + 1
        elif s.startswith("${", i):
            i = _brace_end(s, i + 1, budget) + 1
        else:
            i += 1
    return n


def _backtick_end(s: str, i: int) -> int:
    while i < len(s):
        if s[i] == "\\":
            i += 2
            continue
        if s[i] == "`":
            return i
        i += 1
    return len(s)


def _ansi_end(s: str, i: int) -> int:
    while i < len(s) and s[i] != "'":
        i += 2 if s[i] == "\\" else 1
    return min(i, len(s))


def _brace_end(s: str, open_at: int, budget: Budget) -> int:
    depth, i = 0, open_at
    while i < len(s):
        budget.spend()
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            end = s.find("'", i + 1)
            i = len(s) if end < 0 else end + 1
            continue
        if c == '"':
            i = _dquote_end(s, i + 1, budget)
            continue
        if s.startswith("$(", i):
            i = balanced(s, i + 1, budget) + 1
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return len(s)


def balanced(s: str, open_at: int, budget: Budget) -> int:
    """Index of the parenthesis closing the one at `open_at` (quotes and nesting respected)."""
    depth, i = 0, open_at
    while i < len(s):
        budget.spend()
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            end = s.find("'", i + 1)
            i = len(s) if end < 0 else end + 1
            continue
        if c == '"':
            i = _dquote_end(s, i + 1, budget)
            continue
        if c == "`":
            i = _backtick_end(s, i + 1) + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return len(s)


# -- expansion -------------------------------------------------------------------------------

_ANSI = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}


def ansi_c(body: str) -> str:
    """The value of `$'body'` (bash's ANSI-C quoting)."""
    out: list[str] = []
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        e = body[i + 1]
        i += 2
        if e in _ANSI:
            out.append(_ANSI[e])
        elif e in "01234567":
            j = i - 1
            while i < n and i - j < 3 and body[i] in "01234567":
                i += 1
            out.append(chr(int(body[j:i], 8) & 0xFF))
        elif e in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[e]
            j = i
            while i < n and i - j < width and body[i] in "0123456789abcdefABCDEF":
                i += 1
            out.append(chr(int(body[j:i], 16)) if i > j else "\\" + e)
        elif e == "c" and i < n:
            out.append(chr(ord(body[i]) & 0x1F))
            i += 1
        else:
            out.append("\\" + e)
    return "".join(out)


class Expander:
    """Expands raw words with what the analyser knows at this point of the line."""

    def __init__(
        self,
        lookup: Callable[[str], str | None],
        substitute: Callable[[str], None],
        home: str,
        budget: Budget,
    ) -> None:
        self.lookup = lookup  # a variable's value, None when unknown
        self.substitute = substitute  # analyse the commands of $(...) / `...` / <(...)
        self.home = home
        self.budget = budget

    def expand(self, raw: str) -> Word:
        """The word's value; unknown when it depends on runtime values."""
        word = Word()
        out: list[str] = []
        s, i, n = raw, 0, len(raw)
        if s.startswith(("<(", ">(")):
            self.substitute(s[2 : balanced(s, 1, self.budget)])
            return Word("/dev/fd/63")  # a pipe to or from the commands just analysed
        if s.startswith("~"):
            i = self._tilde(s, out, word)
        while i < n:
            self.budget.spend()
            c = s[i]
            if c == "'":
                end = s.find("'", i + 1)
                end = n if end < 0 else end
                out.append(s[i + 1 : end])
                i = end + 1
            elif c == '"':
                i = self._dquoted(s, i + 1, out, word)
            elif c == "\\":
                if s.startswith("\\\n", i):
                    i += 2  # a line continuation joins the two halves
                    continue
                out.append(s[i + 1 : i + 2])
                i += 2
            elif c == "$":
                i = self._dollar(s, i, out, word)
            elif c == "`":
                end = _backtick_end(s, i + 1)
                self.substitute(s[i + 1 : end].replace("\\`", "`"))
                word.known = False
                i = end + 1
            else:
                if c in "*?[" or (c == "{" and ("," in s[i:] or ".." in s[i:]) and "}" in s[i:]):
                    word.glob = True
                out.append(c)
                i += 1
        word.text = "".join(out)
        return word

    def _tilde(self, s: str, out: list[str], word: Word) -> int:
        end = s.find("/")
        end = len(s) if end < 0 else end
        name = s[1:end]
        if name == "":
            out.append(self.home)
        elif name in ("-", "+"):
            value = self.lookup("OLDPWD" if name == "-" else "PWD")
            if value is None:
                word.known = False
            else:
                out.append(value)
        else:
            word.known = False  # ~user: another account's home
        return end

    def _dquoted(self, s: str, i: int, out: list[str], word: Word) -> int:
        n = len(s)
        while i < n and s[i] != '"':
            self.budget.spend()
            c = s[i]
            if c == "\\" and i + 1 < n and s[i + 1] in '"\\$`\n':
                if s[i + 1] != "\n":
                    out.append(s[i + 1])
                i += 2
            elif c == "$":
                i = self._dollar(s, i, out, word, quoted=True)
            elif c == "`":
                end = _backtick_end(s, i + 1)
                self.substitute(s[i + 1 : end])
                word.known = False
                i = end + 1
            else:
                out.append(c)
                i += 1
        return i + 1

    def _dollar(self, s: str, i: int, out: list[str], word: Word, quoted: bool = False) -> int:
        n = len(s)
        if s.startswith("$((", i):
            end = balanced(s, i + 1, self.budget)
            inner = s[i + 3 : end - 1]
            if "$(" in inner or "`" in inner:
                self.expand(f'"{inner}"')  # substitutions inside arithmetic still run
            word.known = False
            return end + 1
        if s.startswith("$(", i):
            end = balanced(s, i + 1, self.budget)
            self.substitute(s[i + 2 : end])
            word.known = False
            return end + 1
        if s.startswith("$'", i) and not quoted:
            end = _ansi_end(s, i + 2)
            out.append(ansi_c(s[i + 2 : end]))
            return end + 1
        if s.startswith('$"', i) and not quoted:
            return self._dquoted(s, i + 2, out, word)
        if s.startswith("${", i):
            end = _brace_end(s, i + 1, self.budget)
            body = s[i + 2 : end]
            if body.isidentifier():
                self._variable(body, out, word)
            else:
                if "$(" in body or "`" in body:
                    self.expand(f'"{body}"')
                word.known = False
            return end + 1
        j = i + 1
        while j < n and (s[j].isalnum() or s[j] == "_"):
            j += 1
        if j == i + 1:
            if j < n and s[j] in "?#$!@*-0123456789":
                word.known = False
                return j + 1
            out.append("$")
            return j
        self._variable(s[i + 1 : j], out, word)
        return j

    def _variable(self, name: str, out: list[str], word: Word) -> None:
        value = self.lookup(name)
        if value is None:
            word.known = False
        else:
            out.append(value)


def brace_expand(text: str, limit: int = 64) -> list[str]:
    """Bash brace expansion of an unquoted word (`{a,b}c`, `x{1..3}`), at most `limit` words."""
    start = text.find("{")
    while start >= 0:
        depth, j = 0, start
        commas: list[int] = []
        while j < len(text):
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            elif text[j] == "," and depth == 1:
                commas.append(j)
            j += 1
        if j >= len(text):
            return [text]
        head, body, tail = text[:start], text[start + 1 : j], text[j + 1 :]
        parts: list[str] = []
        if commas:
            edges = [start, *commas, j]
            parts = [text[a + 1 : b] for a, b in pairwise(edges)]
        elif ".." in body:
            lo, _, hi = body.partition("..")
            if lo.lstrip("-").isdigit() and hi.lstrip("-").isdigit():
                a, b = int(lo), int(hi)
                step = 1 if b >= a else -1
                parts = [str(k) for k in range(a, b + step, step)][: limit + 1]
            elif len(lo) == 1 and len(hi) == 1:
                step = 1 if ord(hi) >= ord(lo) else -1
                parts = [chr(k) for k in range(ord(lo), ord(hi) + step, step)]
        if parts:
            found: list[str] = []
            for part in parts:
                for rest in brace_expand(head + part + tail, limit):
                    found.append(rest)
                    if len(found) > limit:
                        raise OverBudget(
                            "brace expansion yields more words than the analyser's budget"
                        )
            return found
        start = text.find("{", start + 1)
    return [text]


def words(text: str) -> frozenset[str]:
    """A set of names written as a whitespace-separated block (the analyser's tables)."""
    return frozenset(text.split())
