"""Gitignore-style globs for risk patterns (R-RSK-07): validation, normalisation, regexes."""

from __future__ import annotations

import re


def normalize_pattern(pattern: str) -> str:
    """Drop './' prefixes and empty or '.' segments, keeping a trailing '/' (directory)."""
    trailing = "/" if pattern.endswith("/") else ""
    segments = [s for s in pattern.split("/") if s not in ("", ".")]
    return "/".join(segments) + (trailing if segments else "")


def _segment_regex(segment: str, stop: str = "/") -> str:
    """One path segment: '*' and '?' never cross `stop`, '[...]' is a character class."""
    out: list[str] = []
    i = 0
    while i < len(segment):
        char = segment[i]
        if char == "*":
            while i + 1 < len(segment) and segment[i + 1] == "*":
                i += 1  # gitignore: other consecutive asterisks are plain asterisks
            out.append(f"[^{stop}]*")
        elif char == "?":
            out.append(f"[^{stop}]")
        elif char == "[":
            j = i + 1
            negate = j < len(segment) and segment[j] in "!^"
            j += negate
            start = j
            j += j < len(segment) and segment[j] == "]"  # a leading ']' is literal
            while j < len(segment) and segment[j] != "]":
                j += 1
            if j >= len(segment):
                raise ValueError("has an unbalanced '['")
            body = segment[start:j]
            escaped = "".join(
                c if c == "-" and 0 < k < len(body) - 1 else re.escape(c)
                for k, c in enumerate(body)
            )
            out.append(f"[^{escaped}{stop}]" if negate else f"[{escaped}]")
            i = j
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


_PATTERN_RULES: tuple[tuple[str, str], ...] = (  # (regex that must not match, problem)
    (r"\s*", "is empty"),
    (r"\s.*|.*\s", "has leading or trailing whitespace"),
    (r".*\x00.*", "contains a NUL character"),
    (r".*\\.*", "contains a backslash; use '/' separators (escapes are not supported)"),
    (r"/.*", "is an absolute path; patterns are repository-relative (R-RSK-07)"),
    (r"(.*/)?\.\.(/.*)?", "contains a '..' segment; patterns cannot leave the repository"),
    (r"!.*", "is a negation; '!' is not supported, order the tiers instead"),
)


def _checked(pattern: str) -> str:
    """The normalised pattern; ValueError says what is wrong with it."""
    for regex, problem in _PATTERN_RULES:
        if re.fullmatch(regex, pattern, re.DOTALL):
            raise ValueError(problem)
    normal = normalize_pattern(pattern)
    if not normal:
        raise ValueError("matches nothing after removing './'")
    return normal


def glob_regex(pattern: str) -> str:
    """The regex source for a gitignore-style pattern; ValueError says what is wrong."""
    normal = _checked(pattern)
    directory = normal.endswith("/")  # 'build/' means everything below a directory 'build'
    body = normal.rstrip("/")
    # R-RSK-07: without '/' the pattern matches the basename at any depth.
    out = "" if "/" in body else "(?:.*/)?"
    segments = body.split("/")
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            out += ".+" if last else "(?:.*/)?"  # '**' spans zero or more directories
        else:
            out += _segment_regex(segment) + ("" if last else "/")
    return out + ("/.+" if directory else "")


def keyed_regex(pattern: str) -> str:
    """The regex for `basename NUL path`: basename patterns never scan the directories."""
    normal = _checked(pattern)
    if "/" not in normal and normal != "**":
        return _segment_regex(normal, stop="/\x00") + "\x00"
    return f"[^\x00]*\x00(?:{glob_regex(pattern)})\\Z"


def compile_glob(pattern: str) -> re.Pattern[str]:
    """Compile a gitignore-style pattern to a regex matching whole repo-relative paths."""
    try:
        return re.compile(rf"(?:{glob_regex(pattern)})\Z", re.DOTALL)
    except re.error as error:
        raise ValueError(f"is not a valid glob ({error})") from None


def pattern_problem(pattern: str) -> str | None:
    """Why `pattern` is not a valid risk pattern, or None when it is."""
    try:
        compile_glob(pattern)
    except ValueError as error:
        return str(error)
    return None


def normalize_path(path: str) -> str | None:
    """Repo-relative '/' path without './', '.' or resolved '..'; None when outside the repo."""
    path = path.strip()
    if path.startswith("/"):
        return None
    parts: list[str] = []
    for segment in path.split("/"):
        if segment == "..":
            if not parts:
                return None
            parts.pop()
        elif segment not in ("", "."):
            parts.append(segment)
    return "/".join(parts) or None
