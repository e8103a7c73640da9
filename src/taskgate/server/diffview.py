"""The change as the person reviews it: a per-file diff of the task branch against its base,
with simple syntax colouring (keywords, strings, comments, numbers). Escaped throughout."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

from taskgate.git.cmd import git

MAX_DIFF_CHARS = 400_000  # beyond this the page says so and points at git
MAX_FILE_LINES = 3_000

_KEYWORDS = {
    "py": "and as assert async await break class continue def del elif else except False "
    "finally for from global if import in is lambda None nonlocal not or pass raise return "
    "True try while with yield match case self",
    "js": "break case catch class const continue default delete do else export extends false "
    "finally for function if import in instanceof let new null return super switch this throw "
    "true try typeof undefined var void while yield async await of",
    "sh": "if then else elif fi for while do done case esac function in return local export "
    "set exit",
    "go": "break case chan const continue default defer else fallthrough for func go goto if "
    "import interface map package range return select struct switch type var nil true false",
    "rs": "as break const continue crate else enum extern false fn for if impl in let loop match "
    "mod move mut pub ref return self Self static struct super trait true type unsafe use where "
    "while async await dyn",
    "c": "auto break case char const continue default do double else enum extern float for goto "
    "if int long register return short signed sizeof static struct switch typedef union "
    "unsigned void volatile while class public private protected new delete this template "
    "namespace true false null",
}
_EXT = {
    ".py": "py",
    ".pyi": "py",
    ".js": "js",
    ".mjs": "js",
    ".ts": "js",
    ".tsx": "js",
    ".jsx": "js",
    ".sh": "sh",
    ".bash": "sh",
    ".go": "go",
    ".rs": "rs",
    ".c": "c",
    ".h": "c",
    ".cc": "c",
    ".cpp": "c",
    ".hpp": "c",
    ".java": "c",
    ".kt": "c",
    ".cs": "c",
}
_HASH_COMMENT = {"py", "sh"}
_TOKEN = re.compile(
    r"(?P<str>\"(?:[^\"\\]|\\.)*\"?|'(?:[^'\\]|\\.)*'?)"
    r"|(?P<num>\b\d[\d_]*(?:\.\d+)?\b)"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_]*)"
)


@dataclass
class DiffLine:
    """One line of a hunk: kind is "add", "del", "ctx" or "hunk"."""

    kind: str
    html: str
    old: int | None = None
    new: int | None = None


@dataclass
class FileDiff:
    """The diff of one file."""

    path: str
    status: str  # "added" | "deleted" | "modified" | "renamed" | "binary"
    added: int = 0
    deleted: int = 0
    lines: list[DiffLine] = field(default_factory=list)
    truncated: bool = False

    def to_json(self) -> dict[str, object]:
        """Export shape (no HTML)."""
        return {
            "path": self.path,
            "status": self.status,
            "added": self.added,
            "deleted": self.deleted,
            "truncated": self.truncated,
        }


def language(path: str) -> str | None:
    """The colouring used for `path`, by extension."""
    return _EXT.get(Path(path).suffix.lower())


def colour(code: str, lang: str | None) -> str:
    """One line of code as escaped HTML with token spans."""
    if lang is None:
        return escape(code)
    comment_at = -1
    if lang in _HASH_COMMENT:
        comment_at = _comment_start(code, "#")
    elif lang != "sh":
        comment_at = _comment_start(code, "//")
    body, comment = (code, "") if comment_at < 0 else (code[:comment_at], code[comment_at:])
    keywords = _KEYWORDS[lang].split()
    out: list[str] = []
    pos = 0
    for m in _TOKEN.finditer(body):
        out.append(escape(body[pos : m.start()]))
        text = escape(m.group(0))
        if m.lastgroup == "str":
            out.append(f'<span class="s">{text}</span>')
        elif m.lastgroup == "num":
            out.append(f'<span class="n">{text}</span>')
        elif m.group(0) in keywords:
            out.append(f'<span class="k">{text}</span>')
        else:
            out.append(text)
        pos = m.end()
    out.append(escape(body[pos:]))
    if comment:
        out.append(f'<span class="c">{escape(comment)}</span>')
    return "".join(out)


def _comment_start(code: str, marker: str) -> int:
    """Where a comment starts outside string literals, or -1."""
    quote = ""
    i = 0
    while i < len(code):
        ch = code[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif code.startswith(marker, i):
            return i
        i += 1
    return -1


def parse(diff: str) -> list[FileDiff]:
    """Unified diff text (git diff) into files with coloured lines."""
    files: list[FileDiff] = []
    current: FileDiff | None = None
    old = new = 0
    lang: str | None = None
    for raw in diff.splitlines():
        if raw.startswith("diff --git "):
            parts = raw[len("diff --git ") :].split(" b/", 1)
            path = parts[1] if len(parts) == 2 else raw
            current = FileDiff(path=path, status="modified")
            files.append(current)
            lang = language(path)
            continue
        if current is None:
            continue
        if raw.startswith("new file mode"):
            current.status = "added"
        elif raw.startswith("deleted file mode"):
            current.status = "deleted"
        elif raw.startswith("rename to "):
            current.status, current.path = "renamed", raw[len("rename to ") :]
        elif raw.startswith("Binary files "):
            current.status = "binary"
        elif raw.startswith("@@"):
            m = re.match(r"@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@(.*)", raw)
            if m:
                old, new = int(m.group(1)), int(m.group(2))
            _add(current, DiffLine("hunk", escape(raw)))
        elif raw.startswith(("+++", "---", "index ", "similarity ", "rename from ")):
            continue
        elif raw.startswith("+"):
            current.added += 1
            _add(current, DiffLine("add", colour(raw[1:], lang), None, new))
            new += 1
        elif raw.startswith("-"):
            current.deleted += 1
            _add(current, DiffLine("del", colour(raw[1:], lang), old, None))
            old += 1
        elif raw.startswith(" "):
            _add(current, DiffLine("ctx", colour(raw[1:], lang), old, new))
            old += 1
            new += 1
    return files


def _add(file: FileDiff, line: DiffLine) -> None:
    if len(file.lines) < MAX_FILE_LINES:
        file.lines.append(line)
    else:
        file.truncated = True


def task_diff(worktree: Path, base: str, head: str) -> tuple[list[FileDiff], bool]:
    """The per-file diff `base..head` in the task worktree, and whether it was cut short."""
    if not base or not head or not worktree.is_dir():
        return [], False
    result = git(
        "diff", "--no-color", "--no-ext-diff", "-M", f"{base}..{head}", cwd=worktree, check=False
    )
    if not result.ok:
        return [], False
    text = result.stdout
    cut = len(text) > MAX_DIFF_CHARS
    return parse(text[:MAX_DIFF_CHARS]), cut
