"""Shell tokens for the Bash analyser (taskgate.hooks.shell), issue 15.

`tokenize(text, budget)` splits a command line into words (kept raw, exactly as written),
operators and redirections, with here-document bodies attached to their redirection; the
grammar (hooks/grammar.py) builds commands from them and hooks/expand.py gives each raw word
its value when it is walked. Everything is bounded by a `Budget`: a command that would cost
more than the budget is not judged piecemeal, it is reported as over budget.
"""

from __future__ import annotations

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
            close = arith_command_end(s, i, budget) if _command_start(out) else None
            if close is None and out[-1:] == [("word", "for")] and _command_start(out[:-1]):
                close = arith_command_end(s, i, budget)  # for (( init; cond; step ))
                if close is not None:
                    out.append(("word", "(("))
                    out.append(("word", s[i + 2 : close]))
                    i = close + 2
                    continue
            if close is not None:
                out.append(("word", "(("))
                out.append(("word", s[i + 2 : close]))
                out.append(("op", ";"))
                i = close + 2
                continue
            out.append(("op", op))
            i += len(op)
        elif c in "<>":
            i = _redirect(s, i, "", out, pending, budget)
        else:
            end = word_end(s, i, budget)
            raw = s[i:end]
            if end < n and s[end] == "(" and _array_assignment(raw):
                end = balanced(s, end, budget) + 1  # a=(1 2), a+=([k]=v): one word
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


def _array_assignment(raw: str) -> bool:
    """`NAME=`, `NAME+=`, `NAME[sub]=` right before `(`: a compound array assignment."""
    if not raw.endswith("="):
        return False
    base = raw[:-1].removesuffix("+").partition("[")[0]
    return base.isidentifier() and base.isascii()


# Reserved words after which a command starts, when they are themselves at a command's start
# (bash recognises them only there: `echo if ((` is three words).
_OPENERS = frozenset({"if", "then", "else", "elif", "do", "while", "until", "time", "!", "{"})


def _command_start(out: list[Token]) -> bool:
    """The next token starts a command: at the start, after an operator, or after a reserved
    word that opens one (`if (( n > 3 ))` is arithmetic, as at the start of a line)."""
    at = len(out)
    while at and out[at - 1][0] == "word" and out[at - 1][1] in _OPENERS:
        at -= 1
    return at == 0 or out[at - 1][0] == "op"


def arith_command_end(s: str, i: int, budget: Budget) -> int | None:
    """Where the arithmetic command `(( ... ))` starting at `i` ends (the index of its first
    closing `)`), or None when `((` at `i` is not one. Bash's rule (parse.y parse_arith_cmd):
    `((` is arithmetic only when the `)` closing its second `(` is followed at once by `)`;
    otherwise it is a subshell inside a subshell, whose commands run: `(( 1 ) ; touch f)`,
    `((echo a) )`, `((( 1 )) && touch f)` (whose inner `(( 1 ))` is arithmetic again)."""
    if not s.startswith("((", i):
        return None
    close = balanced(s, i + 1, budget)
    return close if s.startswith(")", close + 1) else None


def arith_substitution(inner: str, budget: Budget) -> bool:
    """True when `$(inner)` is an arithmetic expansion `$((...))`, False when it is a command
    substitution whose commands run. Bash's rule (subst.c chk_arithsub): `inner` starts with
    `(` and ends with `)`, and the text between has balanced parentheses (quotes respected).
    So `$((( 1 )) && touch f)` and `$(( (1) ) ; touch f)` run commands, `$(( (1+2) * 3 ))`
    does not. Anything else (unbalanced, unterminated) is a command substitution: when in
    doubt the commands are judged, never hidden."""
    if len(inner) < 2 or inner[0] != "(" or inner[-1] != ")":
        return False
    body, depth, i = inner[1:-1], 0, 0
    while i < len(body):
        budget.spend()
        c = body[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            end = body.find("'", i + 1)
            if end < 0:
                return False
            i = end + 1
            continue
        if c == '"':
            i = _dquote_end(body, i + 1, budget)
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth < 0:
                return False
        i += 1
    return depth == 0


_ARITH_OPERATORS = frozenset("+-*/%<>=!~&|^?:,")


def plausible_arithmetic(text: str, budget: Budget) -> bool:
    """False when `text` cannot be a bash arithmetic expression: a character arithmetic has no
    use for (`;`, `.`, `'`, `>` after nothing ...) or two operands side by side (`echo x > f`).
    Bash fails on such an expression without running it; the analyser then walks the text as
    commands as well, in case a shell reads it so (when in doubt, judge the commands).
    Lenient the other way: an expression accepted here may still be one bash rejects."""
    i, n, operand = 0, len(text), False
    while i < n:
        budget.spend()
        c = text[i]
        if c in " \t\n" or c == '"':  # bash ignores double quotes in arithmetic
            i += 1
        elif text.startswith("\\\n", i):
            i += 2
        elif c in _ARITH_OPERATORS:
            operand = False
            i += 1
        elif c.isalnum() or c in "_$`(":
            i = -1 if operand else _arith_operand(text, i, budget)
            if i < 0:
                return False
            operand = True
        else:
            return False
    return True


def _arith_operand(text: str, i: int, budget: Budget) -> int:
    """Where the operand at `i` ends: a number (`16#ff`, `64#@_`), a name with a subscript, an
    expansion or a parenthesised expression, or several of them glued (`$a$b`, `1$x`); -1
    when it cannot be one."""
    n = len(text)
    while i < n:
        c = text[i]
        if c == "(":
            end = balanced(text, i, budget)
            if end >= n or not plausible_arithmetic(text[i + 1 : end], budget):
                return -1
            i = end + 1
        elif text.startswith("$(", i):
            i = balanced(text, i + 1, budget) + 1
        elif text.startswith("${", i):
            i = _brace_end(text, i + 1, budget) + 1
        elif c == "$":
            i += 2 if i + 1 < n and not (text[i + 1].isalnum() or text[i + 1] == "_") else 1
        elif c == "`":
            i = _backtick_end(text, i + 1) + 1
        elif c.isalnum() or c in "_#@":
            i += 1
        elif c == "[":
            i = balanced(text, i, budget, "[]") + 1
        else:
            break
    return i


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
        elif c == "$" and s.startswith("$[", i):  # $[ x ]: bash's old arithmetic expansion
            i = balanced(s, i + 1, budget, "[]") + 1
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
    """Index of the brace closing `${` at `open_at` (quotes and nesting respected)."""
    return balanced(s, open_at, budget, "{}")


def balanced(s: str, open_at: int, budget: Budget, pair: str = "()") -> int:
    """Index of the parenthesis (or `pair`) closing the one at `open_at` (quotes, command
    substitutions and nesting respected)."""
    opener, closer = pair[0], pair[1]
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
        if s.startswith("$(", i):
            i = balanced(s, i + 1, budget) + 1
            continue
        if c == opener:
            depth += 1
        elif c == closer:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return len(s)


# -- expansion -------------------------------------------------------------------------------


def words(text: str) -> frozenset[str]:
    """A set of names written as a whitespace-separated block (the analyser's tables)."""
    return frozenset(text.split())
