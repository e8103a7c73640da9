"""A quick look at todo.md for `taskgate todo` (issue 18): the tasks' names and titles, and
proof that `todo.parse_todo` accepts the text, from a few regex scans over the whole text
instead of a pass of Python over every line.

`headings(text)` returns [(name, title)] only when the scans prove that `parse_todo(text)`
raises nothing and lists exactly those tasks; None whenever they cannot (an error somewhere, a
Depends or Risk field to check, a carriage return, ...): the caller then parses with
`parse_todo`, which finds the error and its line. tests/test_todo_scan.py checks with
Hypothesis that a non-None answer always equals parse_todo's, and that the usual files get one.
Nothing here imports dataclasses or enums (the quick `todo` path in engine/todo_fast.py).
"""

from __future__ import annotations

import re

from taskgate.protocol.names import RESERVED_TASK_NAMES

BOM = "\ufeff"
_FALSE_BREAKS = ("\u2028", "\u2029", "\x85")  # todo.py refuses them (with the line)
_RISK_LEVELS = frozenset(("HIGH", "MEDIUM", "LOW"))  # states.RiskLevel
_SPLIT = re.compile(r"[,\s]+")  # todo._SPLIT

# Every scan runs over "\n" + body: a literal "\n" first lets the regex engine skip to line
# starts instead of trying every position.

# A line that parse_todo reads neither as a field of FIELDS (todo._FIELD on the stripped line,
# keys ASCII case-insensitive as `[A-Za-z]+` then lower()) nor as a heading of level 1 or 2.
_OTHER = (
    r"\n(?:(?=\n)|(?![^\S\n]*(?:[-*][ \t]+)?(?ai:purpose|scope|components|depends|files|risk)"
    r"[ \t]*:|#{1,2}[ \t]).*+)"
)
# The documented layout (docs/todo-format.md): after each heading, the fields it has written
# `- Key: value` in the order Purpose, Scope, Components, Depends, Files, Risk, then any lines
# that are not fields. Each key at most once per entry, so no field is repeated.
_LAYOUT = re.compile(
    rf"(?:{_OTHER})*+(?:\n#{{1,2}}[ \t].*+(?:\n- Purpose: .*+)?+(?:\n- Scope: .*+)?+"
    r"(?:\n- Components: .*+)?+(?:\n- Depends: .*+)?+(?:\n- Files: .*+)?+(?:\n- Risk: .*+)?+"
    rf"(?:{_OTHER})*+)*+"
)
# In that layout: each task with the fields the listing reads (todo._TASK_HEADING).
_ENTRIES = re.compile(
    r"\n##[ \t]+(\S+?):(?:[ \t]+(.*))?$(?:\n- Purpose: (.*))?(?:\n- Scope: (.*))?"
    r"(?:\n- Components: (.*))?(?:\n- Depends: (.*))?",
    re.MULTILINE,
)
_RISKS = re.compile(r"\n- Risk: (.*)")
# Any layout: task headings, and one token per field line of FIELDS (its key) or heading of
# level 1 or 2 ('#', the end of an entry).
_TASK_HEADINGS = re.compile(r"\n##[ \t]+(\S+?):(?:[ \t]+(.*))?$", re.MULTILINE)
_TOKENS = re.compile(
    r"\n[^\S\n]*(?:[-*][ \t]+)?"
    r"((?ai:purpose|scope|components|depends|files|risk)(?=[ \t]*:)|(?<=\n)#(?=#?[ \t]))"
)
# Every name at once: names.task_name_problem's pattern, one name a line.
_NAMES = re.compile(r"(?:[a-z0-9][a-z0-9._-]{0,63}\n)*")


class Quick:
    """What the scans proved: the tasks in file order, and where the text has the documented
    layout (`has_fields`; else ask parse_todo) each one's missing feasibility fields and the
    Depends of those that have one."""

    __slots__ = ("_entries", "depends", "names", "titles")

    def __init__(
        self,
        names: list[str],
        titles: list[str],
        entries: list[tuple[str, ...]] | str | None,
        depends: dict[str, tuple[str, ...]],
    ) -> None:
        self.names = names
        self.titles = titles
        self._entries = entries  # _ENTRIES' rows, or the text to find them in when asked
        self.depends = depends

    @property
    def has_fields(self) -> bool:
        """The text has the documented layout: missing_fields and depends are known."""
        return self._entries is not None

    def missing_fields(self, index: int) -> tuple[str, ...]:
        """TodoTask.missing_fields of the index-th task (only when has_fields)."""
        if isinstance(self._entries, str):
            self._entries = _ENTRIES.findall(self._entries)
        assert self._entries is not None
        _, _, purpose, scope, components, _ = self._entries[index]
        return tuple(
            key
            for key, value in (("Purpose", purpose), ("Scope", scope), ("Components", components))
            if not value.strip()
        )


def headings(text: str) -> list[tuple[str, str]] | None:
    """[(name, title)] of todo.md's tasks in file order when parse_todo(text) provably accepts
    the text; else None."""
    found = scan(text)
    return None if found is None else list(zip(found.names, found.titles, strict=True))


def scan(text: str) -> Quick | None:
    """The tasks of todo.md when parse_todo(text) provably accepts the text; else None."""
    body = text.removeprefix(BOM)
    if "\r" in body or any(char in body for char in _FALSE_BREAKS):
        return None
    lines = "\n" + body
    if _LAYOUT.fullmatch(lines) is not None:
        for risk in set(_RISKS.findall(lines)):
            if risk.strip() and risk.strip().upper() not in _RISK_LEVELS:
                return None  # RiskLevel.parse raises: parse_todo names the line
        if "\n- Depends: " not in lines:  # the fields are read when a task needs them
            heads = _headings(lines)
            return None if heads is None else Quick(*heads, lines, {})
        entries: list[tuple[str, ...]] = _ENTRIES.findall(lines)
        names = [e[0] for e in entries]
        titles = [e[1].strip() for e in entries]
        if not _names_ok(names, titles) or len(set(names)) != len(names):
            return None
        depends: dict[str, tuple[str, ...]] = {}
        for entry in entries:
            if entry[5].strip():
                names_of = tuple(
                    n for n in _SPLIT.split(entry[5].strip()) if n and n.lower() != "none"
                )
                if entry[0] in names_of:
                    return None  # depends on itself
                depends[entry[0]] = names_of
        listed = [n for names_of in depends.values() for n in names_of]
        if listed and not _names_ok(listed, ["-"]):
            return None
        return Quick(names, titles, entries, depends)
    heads = _headings(lines)
    if heads is None:
        return None
    # Fields: each entry's keys once (a repeat is an error). Entries with the same keys in
    # the same order share one signature, so only a few distinct ones are checked.
    signature = "\n".join(_TOKENS.findall(lines)).lower()
    if "depends" in signature or "risk" in signature:
        return None  # their values must be checked: parse_todo does it
    for entry_keys in set(signature.split("#")):
        keys = entry_keys.split()
        if len(set(keys)) != len(keys):
            return None
    return Quick(*heads, None, {})


def _headings(lines: str) -> tuple[list[str], list[str]] | None:
    """Names and titles of the task headings; None unless all are valid and unique."""
    found = _TASK_HEADINGS.findall(lines)
    names = [name for name, _ in found]
    titles = [title.strip() for _, title in found]
    if not _names_ok(names, titles) or len(set(names)) != len(names):
        return None
    return names, titles


def _names_ok(names: list[str], titles: list[str]) -> bool:
    """Every name valid (names.task_name_problem is None) and no title empty."""
    if "" in titles or RESERVED_TASK_NAMES.intersection(names):
        return False
    joined = "\n".join(names) + "\n" if names else ""
    if _NAMES.fullmatch(joined) is None or ".." in joined or ".\n" in joined:
        return False
    return ".lock\n" not in joined
