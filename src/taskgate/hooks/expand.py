"""Word expansion for the Bash analyser (issue 15): what one raw word is worth before the line
runs. Quotes, escapes, ANSI-C `$'\x2e'`, backslash-newline, `~`, `~-`, `~+`, variables
assigned earlier on the line; a word that depends on run-time values is marked unknown, and the
commands inside `$(...)`, backticks and process substitutions are handed to the analyser."""

from __future__ import annotations

from itertools import pairwise

from taskgate.hooks.lexer import (
    Budget,
    OverBudget,
    Word,
    _ansi_end,
    _backtick_end,
    _brace_end,
    arith_substitution,
    balanced,
    plausible_arithmetic,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


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
        dynamic: Callable[[], None] | None = None,
    ) -> None:
        self.lookup = lookup  # a variable's value, None when unknown
        self.substitute = substitute  # analyse the commands of $(...) / `...` / <(...)
        self.home = home
        self.budget = budget
        self.dynamic = dynamic  # arithmetic evaluates a value known only at run time
        self.assoc: set[str] = set()  # `declare -A` names: their subscripts are strings

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

    def arithmetic(self, text: str, depth: int = 0) -> None:
        """An arithmetic expression (`$((text))`, `((text))`): the substitutions inside it
        run. It reads as if double-quoted, except that `"` is not special there (so a `"`
        cannot open a quote that hides a `$(...)` from this scan). Text that cannot be
        arithmetic (`$(( echo x > f ))`) is walked as commands as well."""
        if "$(" in text or "`" in text:
            self._dquoted(text, 0, [], Word(), closer="")
        if not plausible_arithmetic(text, self.budget):
            self.substitute(text)  # bash fails on it; judged as commands too, in case
        self._evaluated_names(text, depth)

    def arith_word(self, word: Word) -> None:
        """An expanded word bash evaluates as arithmetic (`[[ $x -eq 1 ]]`, `let x`, `declare
        -i y=x`): its value is judged as an expression; one known only at run time is
        reported through `dynamic`."""
        if not word.known:
            if self.dynamic is not None:
                self.dynamic()
        elif any(ch.isalpha() or ch in "_$`[" for ch in word.text):
            self.arithmetic(word.text)

    def name_operand(self, word: Word) -> None:
        """An expanded word bash takes as a variable name (`read`, `unset`, `test -v`,
        `printf -v`, `declare -n`): a subscript in it is evaluated as arithmetic."""
        if not word.known:
            if self.dynamic is not None:
                self.dynamic()
            return
        start = word.text.find("[")
        if start > 0 and word.text.endswith("]"):
            self.subscript(word.text[:start], word.text[start + 1 : -1])

    def subscript(self, name: str, sub: str) -> None:
        """`name[sub]`: an indexed array's subscript is arithmetic; an associative one's
        (`declare -A` on the line) is a string, whose substitutions run."""
        if name in self.assoc:
            if "$(" in sub or "`" in sub:
                self.expand(f'"{sub}"')
        elif sub not in ("@", "*"):
            self.arithmetic(sub)

    def _parameter(self, body: str) -> None:
        """`${a[x]}`, `${#a[x]}`, `${!a[x]}`, `${v:x}`, `${v:x:y}`: the subscript, offset and
        length are arithmetic; `${!ref}` takes ref's value as a name (checked with bash 5.2)."""
        j = 1 if body[:1] in "#!" and len(body) > 1 else 0
        k = j
        while k < len(body) and (body[k].isalnum() or body[k] == "_"):
            k += 1
        if k == j and body[j : j + 1] in ("@", "*"):
            k += 1
        rest = body[k:]
        if j == 1 and body[0] == "!" and not rest.startswith(("[", "*", "@")):
            value = self.lookup(body[j:k])  # ${!ref}: ref's value is a name, subscript and all
            self.name_operand(Word(value or "", value is not None))
        if rest.startswith("["):
            end = balanced(rest, 0, self.budget, "[]")
            self.subscript(body[j:k], rest[1:end])
            rest = rest[end + 1 :]
        if rest.startswith(":") and rest[1:2] not in ("-", "=", "?", "+"):
            expr = rest[1:]
            self.arithmetic(expr if "?" in expr else expr.replace(":", ",", 1))

    def _evaluated_names(self, text: str, depth: int) -> None:
        """Bash evaluates a variable's value named in arithmetic as an expression, and a
        subscript in it expands (`x='a[$(touch f)]'; echo $((x))` runs touch): a value known
        here is judged as arithmetic in turn; one known only at run time (or nested too deep)
        is reported through `dynamic`, so PostToolUse compares effects after the line."""
        i, n = 0, len(text)
        numbers: set[str] = set()  # names this expression set with `=`: numbers from then on
        while i < n:
            self.budget.spend()
            c = text[i]
            if text.startswith("$(", i):
                i = balanced(text, i + 1, self.budget) + 1
            elif c == "`":
                i = _backtick_end(text, i + 1) + 1
            elif (c.isalpha() or c == "_") and (i == 0 or not _glued(text[i - 1])):
                j = i + 1
                while j < n and (text[j].isalnum() or text[j] == "_"):
                    j += 1
                name, after = text[i:j], text[j:].lstrip(" \t")
                if after.startswith("=") and not after.startswith("=="):
                    numbers.add(name)  # `i=0` does not evaluate i's old value
                    i = j
                    continue
                value = "0" if name in numbers else self.lookup(name)
                if value is None or depth >= 4:
                    if self.dynamic is not None:
                        self.dynamic()
                elif any(ch.isalpha() or ch in "_$`[" for ch in value):
                    self.arithmetic(value, depth + 1)
                i = j
            else:
                i += 1

    def _dquoted(self, s: str, i: int, out: list[str], word: Word, closer: str = '"') -> int:
        n = len(s)
        while i < n and s[i] != closer:
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
        if s.startswith("$(", i):
            end = balanced(s, i + 1, self.budget)
            inner = s[i + 2 : end]
            if arith_substitution(inner, self.budget):  # $((...)), by bash's own rule
                self.arithmetic(inner[1:-1])
            else:
                self.substitute(inner)
            word.known = False
            return end + 1
        if s.startswith("$[", i):  # $[ x ]: bash's old arithmetic expansion
            end = balanced(s, i + 1, self.budget, "[]")
            self.arithmetic(s[i + 2 : end])
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
                if "[" in body or ":" in body or body.startswith("!"):
                    self._parameter(body)
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


def _glued(c: str) -> bool:
    """A name right after `c` is part of a number (`16#ff`, `0x1f`), not a variable."""
    return c.isalnum() or c in "_#@"


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
