"""taskgate.toml's [risk] table → a RiskConfig (D-RSK-1 tiers, keywords, [risk.agents] sets).

Errors name the line of the offending value (`RiskConfigError`), so a typo in a pattern or an
agent set is reported where it is, before any task is classified.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType

from taskgate.protocol import agents as agt
from taskgate.protocol.globs import normalize_pattern, pattern_problem
from taskgate.protocol.risk import (
    DEFAULT_RISK_CONFIG,
    ESCALATION_KEYWORDS,
    RiskConfig,
    RiskConfigError,
    RiskPattern,
    normalize_keywords,
)
from taskgate.protocol.states import RiskLevel

_H, _M, _L = RiskLevel.HIGH, RiskLevel.MEDIUM, RiskLevel.LOW

_TIER_KEYS = MappingProxyType({"high": _H, "medium": _M, "source": _H, "low": _L})
_CONFIG_KEYS = (*_TIER_KEYS, "keywords", "replace_defaults", "replace_default_keywords", "agents")
_AGENT_KEYS = ("high", "medium", "low", "traits")
# A table header ([a.b] or [[a.b]]) or the dotted key at the start of a `key = value` line.
_HEADER_RE = re.compile(r"\s*(\[\[?)([^\[\]]+)\]\]?\s*(?:#.*)?")
_KEY_RE = re.compile(
    r"""\s*((?:[\w-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[\w-]+|"[^"]*"|'[^']*'))*)\s*="""
)


def _dotted(text: str) -> tuple[str, ...]:
    return tuple(part.strip().strip("\"'") for part in text.split("."))


def _find_line(source_text: str, path: tuple[str, ...], value: object = None) -> int | None:
    """The 1-based line of `value` under the [risk] key `path`, else of the key or its table."""
    target, lines = ("risk", *path), source_text.splitlines()
    table: tuple[str, ...] = ()
    found, depth = None, 0
    for number, line in enumerate(lines):
        if header := _HEADER_RE.fullmatch(line):
            table = full = _dotted(header[2]) + (("[]",) if header[1] == "[[" else ())
        elif key := _KEY_RE.match(line):
            full = table + _dotted(key[1])
        else:
            continue
        if depth < len(full) <= len(target) and full == target[: len(full)]:
            found, depth = number, len(full)
            if full == target:
                break
    if found is None:
        return None
    if isinstance(value, str):  # as a TOML basic or literal string, before the next table
        basic = value.replace("\\", "\\\\").replace('"', '\\"').replace("\x00", "\\u0000")
        for number in range(found, len(lines)):
            if number > found and _HEADER_RE.fullmatch(lines[number]):
                break
            if f'"{basic}"' in lines[number] or f"'{value}'" in lines[number]:
                return number + 1
    return found + 1


def _config_error(
    source_text: str, path: tuple[str, ...], value: object, message: str
) -> RiskConfigError:
    line = _find_line(source_text, path, value)
    where = f"taskgate.toml line {line}" if line else "taskgate.toml"
    return RiskConfigError(f"{where}: [{'.'.join(('risk', *path[:-1]))}] {message}", line)


def _known_keys(
    table: Mapping[str, object], path: tuple[str, ...], valid: Sequence[str], source_text: str
) -> None:
    for key in table:
        if key not in valid:
            raise _config_error(
                source_text, (*path, str(key)), None,
                f"unknown key {key!r}; valid keys: {', '.join(valid)}",
            )  # fmt: skip


def _string_list(table: Mapping[str, object], path: tuple[str, ...], source_text: str) -> list[str]:
    key = path[-1]
    value = table.get(key, [])
    if not isinstance(value, list | tuple):
        raise _config_error(
            source_text, path, None, f"{key} must be a list of strings, got {type(value).__name__}"
        )
    for index, item in enumerate(value, 1):
        if not isinstance(item, str):
            raise _config_error(
                source_text, path, item,
                f"{key}: entry {index} must be a string, got {type(item).__name__}",
            )  # fmt: skip
    return list(value)


def _flag(table: Mapping[str, object], key: str, source_text: str) -> bool:
    value = table.get(key, False)
    if not isinstance(value, bool):
        raise _config_error(source_text, (key,), None, f"{key} must be true or false")
    return value


def parse_risk_config(table: Mapping[str, object], source_text: str = "") -> RiskConfig:
    """Build a RiskConfig from taskgate.toml's [risk] table; user patterns go first in a tier."""
    if not isinstance(table, Mapping):
        raise RiskConfigError("taskgate.toml: [risk] must be a table")
    _known_keys(table, (), _CONFIG_KEYS, source_text)
    replace_defaults = _flag(table, "replace_defaults", source_text)
    tiers: dict[str, tuple[RiskPattern, ...]] = {}
    for key, level in _TIER_KEYS.items():
        entries = []
        for pattern in _string_list(table, (key,), source_text):
            problem = pattern_problem(pattern)
            if problem:
                raise _config_error(source_text, (key,), pattern, f"{key}: {pattern!r} {problem}")
            entries.append(RiskPattern(normalize_pattern(pattern), level, f"taskgate.toml {key}"))
        defaults: tuple[RiskPattern, ...] = (
            () if replace_defaults else getattr(DEFAULT_RISK_CONFIG, key)
        )
        tiers[key] = tuple(entries) + defaults
    keywords = _string_list(table, ("keywords",), source_text)
    for keyword in keywords:
        if not re.search(r"\w", keyword):
            raise _config_error(
                source_text, ("keywords",), keyword, f"keywords: {keyword!r} has no word characters"
            )
    if not _flag(table, "replace_default_keywords", source_text):
        keywords = [*keywords, *ESCALATION_KEYWORDS]
    agents = _agent_sets(table, source_text)
    return RiskConfig(**tiers, keywords=normalize_keywords(keywords), agents=agents)


def _table(
    table: Mapping[str, object], path: tuple[str, ...], source_text: str
) -> Mapping[str, object]:
    value = table.get(path[-1], {})
    if not isinstance(value, Mapping):
        raise _config_error(
            source_text, path, None, f"{path[-1]} must be a table, got {type(value).__name__}"
        )
    return value


def _agent_list(
    table: Mapping[str, object], path: tuple[str, ...], source_text: str
) -> tuple[str, ...]:
    """Canonical names (C-11); an unknown or non-stakeholder name is an error (R-AGT-01/02)."""
    names = []
    for name in _string_list(table, path, source_text):
        try:
            names.append(agt.canonical_agent(name))
        except agt.UnknownAgentError as error:
            message = f"{path[-1]}: {error.message}; {error.hint}"
            raise _config_error(source_text, path, name, message) from None
    return agt.canonical_agents(names)


def _agent_sets(table: Mapping[str, object], source_text: str) -> agt.AgentSets:
    """[risk.agents]: base sets per level and per-trait additions; they add, never remove."""
    agents = _table(table, ("agents",), source_text)
    _known_keys(agents, ("agents",), _AGENT_KEYS, source_text)
    default, levels = agt.DEFAULT_AGENT_SETS, dict[str, tuple[str, ...]]()
    for level in (_H, _M, _L):
        if (key := level.lower()) in agents:
            names = _agent_list(agents, ("agents", key), source_text)
            if problem := agt.base_set_problem(level, names):
                message = f"{key} {problem}; configured sets can add agents, never remove them"
                raise _config_error(source_text, ("agents", key), None, message)
            levels[key] = names
    traits = _table(agents, ("agents", "traits"), source_text)
    rules = []
    for trait in traits:
        path = ("agents", "traits", str(trait))
        if str(trait).upper() not in agt.TRAITS:
            valid = ", ".join(sorted(agt.TRAITS))
            raise _config_error(
                source_text, path, None, f"unknown trait {trait!r}; traits: {valid}"
            )
        rules.append((str(trait).upper(), _agent_list(traits, path, source_text)))
    return agt.AgentSets(
        high=levels.get("high", default.high), medium=levels.get("medium", default.medium),
        low=levels.get("low", default.low), traits=tuple(rules),
    )  # fmt: skip
