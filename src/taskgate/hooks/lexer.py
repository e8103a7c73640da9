"""Shell words and tokens with POSIX quoting, for the Bash analyser (taskgate.hooks.shell).

The lexer expands what it can know (quotes, escapes, `~`, variables assigned earlier on the
line) and marks a word unknown when its value exists only at run time; the commands inside
`$(...)`, backticks and process substitutions are handed back to the analyser to walk.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

    from taskgate.hooks.shell import _State


class Word:
    """One shell word: its expanded text, or `known=False` when it depends on runtime values."""

    __slots__ = ("glob", "known", "text")

    def __init__(self, text: str = "", known: bool = True, glob: bool = False) -> None:
        self.text = text
        self.known = known
        self.glob = glob


class Lexer:
    """Splits a command line into words, operators and redirections (POSIX quoting)."""

    def __init__(self, text: str, state: _State) -> None:
        self.s = text
        self.i = 0
        self.st = state
        self.heredocs: list[tuple[str, bool]] = []

    def tokens(self) -> Iterator[tuple[str, object]]:
        """Yield ("op", str), ("redir", (op, Word)), ("word", Word)."""
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c in " \t":
                self.i += 1
            elif c == "\\" and s.startswith("\\\n", self.i):
                self.i += 2
            elif c == "#":
                while self.i < len(s) and s[self.i] != "\n":
                    self.i += 1
            elif c == "\n":
                self.i += 1
                self._skip_heredocs()
                yield "op", "\n"
            elif s.startswith(("<(", ">("), self.i):
                end = balanced(s, self.i + 1)  # process substitution: its commands run
                self.st.substitution(s[self.i + 2 : end])
                self.i = end + 1
                yield "word", Word("", known=False)
            elif s.startswith("&>", self.i):
                self.i += 1
                yield "redir", self._redirect("&")
            elif c in ";&|()":
                yield "op", self._operator()
            elif c in "<>":
                yield "redir", self._redirect("")
            else:
                word = self._word()
                if word.known and word.text.isdigit() and self.i < len(s) and s[self.i] in "<>":
                    yield "redir", self._redirect(word.text)
                else:
                    yield "word", word

    def _operator(self) -> str:
        s, i = self.s, self.i
        for op in ("&&", "||", "|&", ";;"):
            if s.startswith(op, i):
                self.i += len(op)
                return ";" if op == ";;" else op
        self.i += 1
        return s[i]

    def _redirect(self, fd: str) -> tuple[str, Word]:
        s = self.s
        start = self.i
        for op in ("<<<", "<<-", "<<", "<>", ">>", ">|", ">&", "<&", ">", "<"):
            if s.startswith(op, self.i):
                self.i += len(op)
                break
        op = s[start : self.i]
        while self.i < len(s) and s[self.i] in " \t":
            self.i += 1
        target = self._word()
        if op in ("<<", "<<-"):
            self.heredocs.append((target.text, op == "<<-"))
        return fd + op, target

    def _skip_heredocs(self) -> None:
        # Here-document bodies are data, never commands.
        for delim, strip_tabs in self.heredocs:
            while self.i < len(self.s):
                end = self.s.find("\n", self.i)
                end = len(self.s) if end < 0 else end
                line = self.s[self.i : end]
                self.i = end + 1
                if (line.lstrip("\t") if strip_tabs else line) == delim:
                    break
        self.heredocs = []

    def _word(self) -> Word:
        s = self.s
        out: list[str] = []
        word = Word()
        at_start = True
        while self.i < len(s):
            c = s[self.i]
            if c in " \t\n;&|()<>":
                break
            if c == "'":
                end = s.find("'", self.i + 1)
                end = len(s) if end < 0 else end
                out.append(s[self.i + 1 : end])
                self.i = end + 1
            elif c == '"':
                self.i += 1
                self._double_quoted(out, word)
            elif c == "\\":
                out.append(s[self.i + 1 : self.i + 2])
                self.i += 2
            elif c == "$":
                self._dollar(out, word)
            elif c == "`":
                self._backtick(word)
            elif c == "~" and at_start:
                out.append(self.st.home)
                self.i += 1
            else:
                if c in "*?[" or (c == "{" and "," in s[self.i : s.find("}", self.i) + 1]):
                    word.glob = True
                out.append(c)
                self.i += 1
            at_start = False
        word.text = "".join(out)
        return word

    def _backtick(self, word: Word) -> None:
        """A `command substitution`: analysed as a command of its own; the word is unknown."""
        end = self.s.find("`", self.i + 1)
        end = len(self.s) if end < 0 else end
        self.st.substitution(self.s[self.i + 1 : end])
        word.known = False
        self.i = end + 1

    def _double_quoted(self, out: list[str], word: Word) -> None:
        s = self.s
        while self.i < len(s) and s[self.i] != '"':
            c = s[self.i]
            if c == "\\" and self.i + 1 < len(s) and s[self.i + 1] in '"\\$`\n':
                out.append(s[self.i + 1])
                self.i += 2
            elif c == "$":
                self._dollar(out, word)
            elif c == "`":
                self._backtick(word)
            else:
                out.append(c)
                self.i += 1
        self.i += 1

    def _dollar(self, out: list[str], word: Word) -> None:
        s, i = self.s, self.i
        if s.startswith("$(", i):
            end = balanced(s, i + 1)
            inner = s[i + 2 : end]
            if not inner.startswith("("):  # $((arithmetic)) runs nothing
                self.st.substitution(inner)
            word.known = False
            self.i = end + 1
        elif s.startswith("$'", i):
            end = i + 2
            while end < len(s) and s[end] != "'":
                end += 2 if s[end] == "\\" else 1
            out.append(s[i + 2 : end].replace("\\'", "'"))
            self.i = end + 1
        elif s.startswith("${", i):
            end = s.find("}", i)
            end = len(s) if end < 0 else end
            self._variable(s[i + 2 : end], out, word)
            self.i = end + 1
        else:
            j = i + 1
            while j < len(s) and (s[j].isalnum() or s[j] == "_"):
                j += 1
            if j == i + 1:
                if j < len(s) and s[j] in "?#$!@*-0123456789":
                    word.known = False
                    self.i = j + 1
                    return
                out.append("$")
                self.i = j
                return
            self._variable(s[i + 1 : j], out, word)
            self.i = j

    def _variable(self, name: str, out: list[str], word: Word) -> None:
        value = self.st.vars.get(name)
        if value is None:
            word.known = False
        else:
            out.append(value)


def balanced(s: str, open_at: int) -> int:
    """Index of the parenthesis closing the one at `open_at` (quotes respected)."""
    depth = 0
    i = open_at
    while i < len(s):
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            i = s.find("'", i + 1)
            if i < 0:
                return len(s)
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return len(s)
