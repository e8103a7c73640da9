"""Task and agent name validation (DESIGN.md Workspace; R-LCK-18, C-33)."""

from __future__ import annotations

_FIRST = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_REST = _FIRST | frozenset("._-")


def _well_formed(name: str) -> bool:
    """re.fullmatch(r"[a-z0-9][a-z0-9._-]{0,63}", name), without compiling it at import
    (0.09 ms of every command, issue 18): 1 to 64 characters, the first of _FIRST."""
    return 0 < len(name) <= 64 and name[0] in _FIRST and _REST.issuperset(name)


RESERVED_TASK_NAMES = frozenset({"main"})  # R-LCK-18: the main worktree lock's name


def task_name_problem(name: str) -> str | None:
    """Why `name` is not a valid task name, or None when it is."""
    if not name:
        return "task name is empty"
    if not name.isascii():
        return f"task name {name!r} is not ASCII"
    if name in RESERVED_TASK_NAMES:
        return f"task name {name!r} is reserved for the main worktree lock (R-LCK-18, C-33)"
    if ".." in name or name.endswith((".", ".lock")):
        return f"task name {name!r} may not contain '..' or end in '.' or '.lock' (git ref rules)"
    if not _well_formed(name):
        return (
            f"task name {name!r} must match [a-z0-9][a-z0-9._-]{{0,63}}: lowercase letters, "
            "digits, '.', '_' and '-', starting with a letter or digit, at most 64 characters"
        )
    return None


def agent_name_problem(name: str) -> str | None:
    """Why `name` is not a syntactically valid agent name, or None when it is."""
    if not name or not name.isascii() or not _well_formed(name) or ".." in name:
        return (
            f"agent name {name!r} must match [a-z0-9][a-z0-9._-]{{0,63}} "
            "(no path separators, no leading '-')"
        )
    return None
