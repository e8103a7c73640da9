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

# Task headings (todo._TASK_HEADING) at every line start of "\n" + body: a literal "\n"
# first lets the regex engine skip to line starts instead of trying every position.
_TASK_HEADINGS = re.compile(r"\n##[ \t]+(\S+?):(?:[ \t]+(.*))?$", re.MULTILINE)
# One token per line that parse_todo reads as a field of FIELDS (its key) or as a heading of
# level 1 or 2 ('#', the end of an entry): _FIELD on the stripped line, keys matched ASCII
# case-insensitively as `[A-Za-z]+` then lower() does.
_TOKENS = re.compile(
    r"\n[^\S\n]*(?:[-*][ \t]+)?"
    r"((?ai:purpose|scope|components|depends|files|risk)(?=[ \t]*:)|(?<=\n)#(?=#?[ \t]))"
)
# Every name at once: names.task_name_problem's pattern, one name a line.
_NAMES = re.compile(r"(?:[a-z0-9][a-z0-9._-]{0,63}\n)*")


def headings(text: str) -> list[tuple[str, str]] | None:
    """[(name, title)] of todo.md's tasks in file order when parse_todo(text) provably accepts
    the text and needs no field to be checked beyond its key (no Depends, no Risk); else None."""
    body = text.removeprefix(BOM)
    if "\r" in body or any(char in body for char in _FALSE_BREAKS):
        return None
    scan = "\n" + body
    found = _TASK_HEADINGS.findall(scan)
    names = [name for name, _ in found]
    titles = [title.strip() for _, title in found]
    if "" in titles or len(set(names)) != len(names) or RESERVED_TASK_NAMES.intersection(names):
        return None
    joined = "\n".join(names) + "\n" if names else ""
    if _NAMES.fullmatch(joined) is None or ".." in joined or ".\n" in joined:
        return None
    if ".lock\n" in joined:
        return None
    # Fields: each entry's keys once (a repeat is an error). Entries with the same keys in
    # the same order share one signature, so only a few distinct ones are checked.
    signature = "\n".join(_TOKENS.findall(scan)).lower()
    if "depends" in signature or "risk" in signature:
        return None  # their values must be checked: parse_todo does it
    for entry in set(signature.split("#")):
        keys = entry.split()
        if len(set(keys)) != len(keys):
            return None
    return list(zip(names, titles, strict=True))
