"""The shell grammar for the Bash analyser: tokens (hooks/lexer.py) to a small syntax tree.

Covers what bash runs from one command line: lists (`;`, newline, `&`), and-or lists, pipelines
(`!`), simple commands with assignments and redirections, groups `{ ...; }`, subshells, `if`,
`while`/`until`, `for`/`select`, `case`, function definitions (`f() { ...; }`,
`function f { ...; }`), `[[ ... ]]` and `(( ... ))`. A reserved word is one only where bash
takes it as one (at the start of a command), so `{ rm x; }` and `if rm x; then :; fi` are
commands, not programs named `{` or `if`. Input bash would reject yields a tree anyway, with
`problems` set: the analyser then treats the line as not fully analysed.
"""

from __future__ import annotations

from taskgate.hooks.lexer import Budget, Redir, Token

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_OPENERS = frozenset({"{", "if", "while", "until", "for", "select", "case", "function", "!"})
_CLOSERS = frozenset({"}", "then", "elif", "else", "fi", "do", "done", "esac"})
_LIST_ENDS = frozenset({")", ";;", ";&", ";;&"})


class Node:
    """A syntax tree node: `kind` and its parts (see Parser for each kind's fields)."""

    __slots__ = ("kind", "parts", "redirs")

    def __init__(self, kind: str, parts: list[Any], redirs: list[Redir] | None = None) -> None:
        self.kind = kind
        self.parts: list[Any] = parts
        self.redirs = redirs or []

    def __repr__(self) -> str:
        return f"Node({self.kind}, {self.parts!r})"


class Parser:
    """Recursive descent over the token list.

    Node kinds: list [(and_or, terminator)], and_or [first, (op, pipeline)...], pipeline
    [negated, command...], simple [raw words], group/subshell [list], if [(cond, body)...,
    else-or-None], loop [keyword, cond, body], for [name, raw words or None, body], case [raw
    word, (patterns, body)...], function [name, body], arith [raw].
    """

    def __init__(self, tokens: list[Token], budget: Budget) -> None:
        self.toks = tokens
        self.i = 0
        self.budget = budget
        self.problems: list[str] = []

    def parse(self) -> Node:
        """The whole line as a list node."""
        node = self.list_(frozenset())
        while self.i < len(self.toks):  # stray closers: note them and carry on
            self.problems.append(f"unexpected {self.toks[self.i][1]!r}")
            self.i += 1
            more = self.list_(frozenset())
            node.parts.extend(more.parts)
        return node

    # -- helpers ----------------------------------------------------------------------------

    def _peek(self) -> Token | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def _is_word(self, text: str) -> bool:
        tok = self._peek()
        return tok is not None and tok[0] == "word" and tok[1] == text

    def _is_op(self, text: str) -> bool:
        tok = self._peek()
        return tok is not None and tok[0] == "op" and tok[1] == text

    def _skip_newlines(self) -> None:
        while self._is_op("\n") or self._is_op(";"):
            self.i += 1

    def _expect_word(self, text: str) -> None:
        self._skip_newlines()
        if self._is_word(text):
            self.i += 1
        else:
            self.problems.append(f"expected {text!r}")

    # -- grammar ----------------------------------------------------------------------------

    def list_(self, stop: frozenset[str]) -> Node:
        """Commands up to a closing reserved word in `stop` (or `)`/`;;` or the end)."""
        items: list[Any] = []
        while True:
            self.budget.spend()
            tok = self._peek()
            if tok is None:
                break
            kind, value = tok
            if kind == "op" and value in ("\n", ";", "&"):
                self.i += 1
                continue
            if kind == "op" and value in _LIST_ENDS:
                break
            if kind == "word" and value in stop:
                break
            if kind == "word" and value in _CLOSERS:
                break
            and_or = self.and_or()
            term = self._peek()
            sep = "\n"
            if term is not None and term[0] == "op" and term[1] in (";", "&", "\n"):
                sep = str(term[1])
                self.i += 1
            items.append((and_or, sep))
        return Node("list", items)

    def and_or(self) -> Node:
        parts: list[Any] = [self.pipeline()]
        while self._is_op("&&") or self._is_op("||"):
            op = self.toks[self.i][1]
            self.i += 1
            while self._is_op("\n"):
                self.i += 1
            parts.append((op, self.pipeline()))
        return Node("and_or", parts)

    def pipeline(self) -> Node:
        negated = False
        while self._is_word("!") or self._is_word("time"):
            negated = negated or self._is_word("!")
            self.i += 1
            while self._peek() is not None and str(self.toks[self.i][1]).startswith("-p"):
                self.i += 1  # time -p
        parts: list[Any] = [negated, self.command()]
        while self._is_op("|") or self._is_op("|&"):
            self.i += 1
            while self._is_op("\n"):
                self.i += 1
            parts.append(self.command())
        return Node("pipeline", parts)

    def command(self) -> Node:
        self.budget.spend()
        tok = self._peek()
        if tok is None:
            return Node("simple", [])
        kind, value = tok
        node: Node
        if kind == "op" and value == "(":
            self.i += 1
            body = self.list_(frozenset())
            if self._is_op(")"):
                self.i += 1
            else:
                self.problems.append("unclosed '('")
            node = Node("subshell", [body])
        elif kind == "word" and value in _OPENERS - {"!"}:
            node = self._compound(str(value))
        elif kind == "word" and self._is_funcdef():
            name = str(value)
            self.i += 3
            while self._is_op("\n"):
                self.i += 1
            node = Node("function", [name, self.command()])
            return node
        elif kind == "word" and value == "((" and self.i + 1 < len(self.toks):
            self.i += 2
            node = Node("arith", [self.toks[self.i - 1][1]])
        else:
            return self.simple()
        while self._peek() is not None and self.toks[self.i][0] == "redir":
            node.redirs.append(self.toks[self.i][1])  # type: ignore[arg-type]
            self.i += 1
        return node

    def _is_funcdef(self) -> bool:
        t = self.toks
        j = self.i
        return (
            j + 2 < len(t)
            and t[j + 1] == ("op", "(")
            and t[j + 2] == ("op", ")")
            and str(t[j][1]).replace("-", "_").replace(".", "_").replace(":", "_").isidentifier()
        )

    def simple(self) -> Node:
        words: list[Any] = []
        redirs: list[Redir] = []
        while True:
            tok = self._peek()
            if tok is None or tok[0] == "op":
                break
            if tok[0] == "redir":
                redirs.append(tok[1])  # type: ignore[arg-type]
            else:
                words.append(tok[1])
            self.i += 1
        return Node("simple", words, redirs)

    def _compound(self, word: str) -> Node:
        self.i += 1
        if word == "{":
            body = self.list_(frozenset({"}"}))
            self._expect_word("}")
            return Node("group", [body])
        if word == "if":
            clauses: list[Any] = []
            cond = self.list_(frozenset({"then"}))
            self._expect_word("then")
            clauses.append((cond, self.list_(frozenset({"elif", "else", "fi"}))))
            otherwise = None
            while True:
                self._skip_newlines()
                if self._is_word("elif"):
                    self.i += 1
                    cond = self.list_(frozenset({"then"}))
                    self._expect_word("then")
                    clauses.append((cond, self.list_(frozenset({"elif", "else", "fi"}))))
                elif self._is_word("else"):
                    self.i += 1
                    otherwise = self.list_(frozenset({"fi"}))
                else:
                    break
            self._expect_word("fi")
            return Node("if", [*clauses, otherwise])
        if word in ("while", "until"):
            cond = self.list_(frozenset({"do"}))
            self._expect_word("do")
            body = self.list_(frozenset({"done"}))
            self._expect_word("done")
            return Node("loop", [word, cond, body])
        if word in ("for", "select"):
            return self._for()
        if word == "case":
            return self._case()
        # function NAME [()] compound
        tok = self._peek()
        name = str(tok[1]) if tok else ""
        self.i += 1
        if (
            self._is_op("(")
            and self.i + 1 < len(self.toks)
            and self.toks[self.i + 1] == ("op", ")")
        ):
            self.i += 2
        self._skip_newlines()
        return Node("function", [name, self.command()])

    def _for(self) -> Node:
        if self._is_op("(") or self._is_word("(("):
            # for (( init; cond; step )): arithmetic only, kept raw as the words
            name, words = "((", []
            if self._is_word("((") and self.i + 1 < len(self.toks):
                words = [self.toks[self.i + 1][1]]
            while self._peek() is not None and not self._is_word("do") and not self._is_word("{"):
                self.i += 1
        else:
            tok = self._peek()
            name = str(tok[1]) if tok else ""
            self.i += 1
            words = None
            self._skip_only_newlines()
            if self._is_word("in"):
                self.i += 1
                words = []
                while self._peek() is not None and self.toks[self.i][0] == "word":
                    words.append(self.toks[self.i][1])
                    self.i += 1
        self._skip_newlines()
        if self._is_word("{"):
            body = self.command()
        else:
            self._expect_word("do")
            body = self.list_(frozenset({"done"}))
            self._expect_word("done")
        return Node("for", [name, words, body])

    def _skip_only_newlines(self) -> None:
        while self._is_op("\n"):
            self.i += 1

    def _case(self) -> Node:
        tok = self._peek()
        subject = tok[1] if tok else ""
        self.i += 1
        self._skip_only_newlines()
        self._expect_word("in")
        arms: list[Any] = [subject]
        while True:
            self._skip_only_newlines()
            tok = self._peek()
            if tok is None or self._is_word("esac"):
                break
            patterns: list[Any] = []
            if self._is_op("("):
                self.i += 1
            while self._peek() is not None and not self._is_op(")"):
                if self.toks[self.i][0] == "word":
                    patterns.append(self.toks[self.i][1])
                self.i += 1
            self.i += 1  # the ")"
            body = self.list_(frozenset({"esac"}))
            arms.append((patterns, body))
            tok = self._peek()
            if tok is not None and tok[0] == "op" and tok[1] in (";;", ";&", ";;&"):
                self.i += 1
        self._expect_word("esac")
        return Node("case", arms)
