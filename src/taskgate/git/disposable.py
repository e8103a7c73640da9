"""Which paths are disposable build caches (`[cleanup] disposable`): cleanup drops them with a
worktree instead of keeping them (git/preserve.py, issue 16), and the effect check does not
watch them among the ignored files of a task worktree (hooks/effects.py, issue 15).

Light on purpose, the hook imports it: the usual patterns (`name`, `*.ext`, `prefix*`) are
compared as text; `fnmatch` (with `re` behind it) is loaded only for any other wildcard.
"""

from __future__ import annotations

_WILD = frozenset("*?[")


def is_disposable(path: str, patterns: tuple[str, ...]) -> bool:
    """True when a pattern names the path or one of its directories (`__pycache__`,
    `*.pyc`, `build/`); patterns with a slash inside match the whole relative path."""
    clean = path.rstrip("/")
    parts = clean.split("/")
    for pattern in patterns:
        pat = pattern.rstrip("/")
        if "/" in pat.lstrip("/"):
            pat = pat.lstrip("/")
            if _match(clean, pat) or _match(clean, pat + "/*"):
                return True
        elif any(_match(part, pat.lstrip("/")) for part in parts):
            return True
    return False


def _match(name: str, pat: str) -> bool:
    """fnmatch's case-sensitive match; text comparisons for the usual `x`, `*.x`, `x*`."""
    if _WILD.isdisjoint(pat):
        return name == pat
    if pat[0] == "*" and _WILD.isdisjoint(pat[1:]):
        return name.endswith(pat[1:])
    if pat[-1] == "*" and _WILD.isdisjoint(pat[:-1]):
        return name.startswith(pat[:-1])
    from fnmatch import fnmatchcase

    return fnmatchcase(name, pat)
