"""Risk classification and workflow variants: files and task text → risk, path, agents (§2, §3)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from taskgate.protocol import agents as agt
from taskgate.protocol import filekinds as fk
from taskgate.protocol.globs import compile_glob as compile_glob
from taskgate.protocol.globs import keyed_regex, normalize_path
from taskgate.protocol.globs import pattern_problem as pattern_problem
from taskgate.protocol.states import ChangeType, RiskLevel, State
from taskgate.protocol.violations import Violation
from taskgate.protocol.workflow import FULL_PATH as FULL_PATH
from taskgate.protocol.workflow import SKIP_PATH as SKIP_PATH
from taskgate.protocol.workflow import VARIANTS as VARIANTS
from taskgate.protocol.workflow import state_path as state_path

# D-RSK-1: the 9 escalation keywords (the 3 of §Manual Overrides are a subset, C-40).
ESCALATION_KEYWORDS: tuple[str, ...] = (
    "security", "architecture", "breaking", "performance", "concurrent", "database", "api",
    "state", "dependency",
)  # fmt: skip
METHOD_PATTERN = "pattern match"
METHOD_KEYWORD = "keyword trigger"
METHOD_OVERRIDE = "manual override"


class RiskConfigError(ValueError):
    """An invalid [risk] table in taskgate.toml; the message names the line when known."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


# ---------------------------------------------------------------------------------------------
# Patterns and configuration.


@dataclass(frozen=True)
class RiskPattern:
    """A risk pattern; `exclude` globs disqualify a match (the '*.md except CLAUDE.md' rule)."""

    pattern: str
    level: RiskLevel
    note: str
    exclude: tuple[str, ...] = ()


def _tier(
    level: RiskLevel, *entries: tuple[str, str], exclude: tuple[str, ...] = ()
) -> tuple[RiskPattern, ...]:
    return tuple(RiskPattern(p, level, note, exclude) for p, note in entries)


_H, _M, _L = RiskLevel.HIGH, RiskLevel.MEDIUM, RiskLevel.LOW
_PROTECTED_DOCS = ("CLAUDE.md", "task-protocol.md", "critical-rules.md")  # R-RSK-05
SEED_HIGH = _tier(  # D-RSK-1, exact
    _H, ("pom.xml", "build configuration"), ("**/pom.xml", "build configuration"),
    (".github/**", "CI/CD workflows"), ("**/security/**", "security components"),
    ("checkstyle.xml", "style enforcement"), ("**/checkstyle*.xml", "style enforcement"),
    ("CLAUDE.md", "critical configuration"),
    ("docs/project/task-protocol.md", "protocol documentation"),
    ("docs/project/critical-rules.md", "protocol documentation"),
)  # fmt: skip
SEED_MEDIUM = _tier(
    _M, ("src/test/**/*.java", "test files"), ("docs/code-style/**", "style documentation"),
    ("**/resources/**/*.properties", "configuration"), ("**/*Test.java", "test classes"),
    ("**/*Tests.java", "test classes"),
)  # fmt: skip
SEED_SOURCE = _tier(_H, ("src/**/*.java", "core implementation"))
SEED_LOW = _tier(
    _L, ("*.md", "documentation"), ("docs/**/*.md", "general documentation"),
    ("todo.md", "task tracking"), ("*.txt", "text files"), ("*.log", "text files"),
    ("**/README*", "readme files"), exclude=_PROTECTED_DOCS,
)  # fmt: skip


def _neutral(globs: Iterable[str], note: str) -> tuple[RiskPattern, ...]:
    """Language-neutral HIGH patterns, minus what the seed table already says."""
    return _tier(_H, *((g, note) for g in globs if g not in ("pom.xml", "checkstyle*.xml")))


# Language-neutral defaults so Python, TypeScript, Go… repositories classify sensibly.
NEUTRAL_HIGH = (
    *_neutral(fk.BUILD_FILE_GLOBS, "build configuration"),
    *_neutral(fk.CI_FILE_GLOBS, "CI configuration"),
    *_neutral((f"{d}/**" for d in fk.CI_DIRS if d != ".github"), "CI configuration"),
    *_neutral(fk.STYLE_CONFIG_GLOBS, "style enforcement"),
    *_tier(_H, ("**/auth/**", "authentication components"), ("AGENTS.md", "agent instructions"),
           ("taskgate.toml", "protocol configuration")),
)  # fmt: skip
NEUTRAL_MEDIUM = _tier(
    _M, ("**/tests/**", "tests"), ("**/test/**", "tests"), ("**/__tests__/**", "tests"),
    ("**/testdata/**", "test data"), ("test_*.py", "tests"), ("*_test.py", "tests"),
    ("conftest.py", "test fixtures"), ("*_test.go", "tests"), ("*.test.[cm]js", "tests"),
    ("*.test.[jt]s", "tests"), ("*.test.[jt]sx", "tests"), ("*.spec.[jt]s", "tests"),
    ("*.spec.[jt]sx", "tests"),
)  # fmt: skip
NEUTRAL_SOURCE = _tier(_H, *((f"**/*{ext}", "source code") for ext in fk.CODE_EXTENSIONS))
NEUTRAL_LOW = _tier(
    _L, ("*.rst", "documentation"), ("*.adoc", "documentation"), ("docs/**", "documentation"),
    ("LICENSE*", "legal"), ("CHANGELOG*", "changelog"), exclude=_PROTECTED_DOCS,
)  # fmt: skip


@dataclass(frozen=True)
class FileRisk:
    """One file's risk and the pattern that decided it."""

    path: str
    level: RiskLevel
    pattern: str | None  # None = unmatched → HIGH (C-37)


@dataclass(frozen=True)
class RiskConfig:
    """Pattern tiers in R-RSK-06 order (high, medium, source, low), keywords and agent sets."""

    high: tuple[RiskPattern, ...] = SEED_HIGH + NEUTRAL_HIGH  # 1. specific HIGH
    medium: tuple[RiskPattern, ...] = SEED_MEDIUM + NEUTRAL_MEDIUM  # 2. MEDIUM
    source: tuple[RiskPattern, ...] = SEED_SOURCE + NEUTRAL_SOURCE  # 3. general HIGH
    low: tuple[RiskPattern, ...] = SEED_LOW + NEUTRAL_LOW  # 4. LOW; 5. no match → HIGH
    keywords: tuple[str, ...] = ESCALATION_KEYWORDS
    agents: agt.AgentSets = agt.DEFAULT_AGENT_SETS  # [risk.agents]: adds to the seeds' sets
    _matcher: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _keyword_res: tuple[tuple[str, re.Pattern[str]], ...] = field(
        init=False, repr=False, compare=False
    )
    _patterns: tuple[RiskPattern, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name, level in (("high", _H), ("medium", _M), ("source", _H), ("low", _L)):
            for entry in getattr(self, name):
                if entry.level != level:
                    raise ValueError(f"{entry.pattern!r} is {entry.level} in the {name} tier")
        # One alternation for all tiers: the regex engine tries alternatives in order, so the
        # first group that matches is the first pattern in precedence order — one call per file.
        object.__setattr__(self, "_patterns", self.high + self.medium + self.source + self.low)
        alternatives = []
        for entry in self._patterns:
            try:
                exclusions = "".join(f"(?!{keyed_regex(x)})" for x in entry.exclude)
                alternatives.append(f"({exclusions}{keyed_regex(entry.pattern)})")
            except ValueError as error:
                raise RiskConfigError(f"risk pattern {entry.pattern!r} {error}") from None
        matcher = re.compile("|".join(alternatives) or "(?!)", re.DOTALL)
        object.__setattr__(self, "_matcher", matcher)
        object.__setattr__(self, "_keyword_res", _keyword_regexes(self.keywords))

    @property
    def patterns(self) -> tuple[RiskPattern, ...]:
        """All patterns in precedence order (R-RSK-06)."""
        return self._patterns

    def match(self, path: str) -> RiskPattern | None:
        """The first pattern in precedence order matching a normalised path."""
        found = self._matcher.match(f"{path.rsplit('/', 1)[-1]}\x00{path}")
        return None if found is None or not found.lastindex else self._patterns[found.lastindex - 1]

    def classify_file(self, path: str) -> FileRisk:
        """One file's risk; unmatched or outside-the-repository paths are HIGH (C-37)."""
        normal = normalize_path(path)
        entry = None if normal is None or "\x00" in normal else self.match(normal)
        if entry is None:
            return FileRisk(normal or path, RiskLevel.HIGH, None)
        return FileRisk(normal or path, entry.level, entry.pattern)

    def keyword_hits(self, text: str) -> tuple[str, ...]:
        """The configured escalation keywords in `text`, whole-word, case-insensitive (C-40)."""
        return tuple(keyword for keyword, regex in self._keyword_res if regex.search(text))


def normalize_keywords(keywords: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(" ".join(k.lower().split()) for k in keywords if k.strip()))


def _keyword_regexes(keywords: Iterable[str]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    # Whole words (C-40): no word character may touch the keyword, so "api" misses "apiary".
    return tuple(
        (kw, re.compile(r"(?<!\w)" + r"\s+".join(map(re.escape, kw.split())) + r"(?!\w)", re.I))
        for kw in normalize_keywords(keywords)
    )


def escalation_keywords(
    text: str, keywords: Iterable[str] = ESCALATION_KEYWORDS
) -> tuple[str, ...]:
    """Escalation keywords found in `text` as whole words, case-insensitive (R-RSK-10, C-40)."""
    return tuple(keyword for keyword, regex in _keyword_regexes(keywords) if regex.search(text))


DEFAULT_RISK_CONFIG = RiskConfig()

# ---------------------------------------------------------------------------------------------
# Classification.


def detect_change_type(files: Sequence[FileRisk]) -> ChangeType:
    """documentation_only / config_only / code from classified files (R-WFV-09, C-39)."""
    for candidate in (ChangeType.DOCUMENTATION_ONLY, ChangeType.CONFIG_ONLY):
        if files and not any(_skip_problems(files, candidate)):
            return candidate
    return ChangeType.CODE


def _skip_problems(files: Sequence[FileRisk], claimed: ChangeType) -> list[str]:
    problems = []
    for f in files:
        if f.level == RiskLevel.HIGH:  # C-39: the skip list applies only to LOW/MEDIUM files
            problems.append(f"{f.path} is HIGH risk")
        elif (problem := agt.skip_problem(f.path, claimed)) is not None:
            problems.append(problem)
    return problems


def check_change_type_claim(claimed: ChangeType, files: Sequence[FileRisk]) -> list[Violation]:
    """Reject a documentation_only/config_only claim that a file contradicts (R-WFV-07/09)."""
    if claimed == ChangeType.CODE:
        return []
    problems = _skip_problems(files, claimed) if files else ["no files are declared"]
    return [
        Violation("R-WFV-09", f"change type {claimed} does not hold: {problem}", "use code")
        for problem in problems
    ]


_SOURCE_ROOTS = frozenset({"src", "lib", "libs", "pkg", "packages", "modules", "apps", "crates"})


def _module_of(path: str) -> str:
    """Top-level source module: first directory, or the first two under a source root."""
    segments = path.split("/")
    if len(segments) == 1:
        return "."
    if segments[0] in _SOURCE_ROOTS and len(segments) > 2:
        return "/".join(segments[:2])
    return segments[0]


def content_signals(files: Sequence[FileRisk]) -> tuple[str, ...]:
    """Content-analysis triggers from the file set (R-RSK-09: cross-module, security)."""
    inside = [f.path for f in files if normalize_path(f.path) == f.path]
    sources = [p for p in inside if fk.file_kind(p) == "code" and not fk.is_test_path(p)]
    signals = []
    if len({_module_of(p) for p in sources}) >= 2:
        signals.append("content:cross-module")
    if any(agt.is_security_path(p) for p in inside):
        signals.append("content:security")
    return tuple(signals)


@dataclass(frozen=True)
class Classification:
    """A risk classification and its reasoning, as logged (R-RSK-13, R-RSK-14)."""

    risk_level: RiskLevel
    method: str
    triggers: tuple[str, ...]
    files: tuple[FileRisk, ...]
    change_type: ChangeType
    variant: str
    path: tuple[State, ...]
    agents: tuple[str, ...]
    agent_reasons: Mapping[str, str] = field(hash=False)
    computed_level: RiskLevel | None = None  # from patterns and triggers, before any override
    traits: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        """Stable JSON shape for the audit trail and `--json` output."""
        return {
            "risk_level": str(self.risk_level),
            "method": self.method,
            "triggers": list(self.triggers),
            "files": [
                {"path": f.path, "level": str(f.level), "pattern": f.pattern} for f in self.files
            ],
            "change_type": str(self.change_type),
            "variant": self.variant,
            "path": [str(s) for s in self.path],
            "agents": list(self.agents),
            "agent_reasons": dict(self.agent_reasons),
            "computed_level": None if self.computed_level is None else str(self.computed_level),
            "traits": list(self.traits),
        }

    def explain(self) -> list[str]:
        """Human lines: per file the deciding pattern, the risk reasoning, per agent why."""
        width = max((len(f.path) for f in self.files), default=0)
        lines = [
            f"{f.path:<{width}}  {f.level}  "
            + (f"(pattern {f.pattern})" if f.pattern else "(no pattern matched → HIGH, C-37)")
            for f in self.files
        ] or ["no files declared → HIGH (default to HIGH if uncertain, R-RSK-08, C-37)"]
        base = max((f.level for f in self.files), key=lambda r: r.rank, default=RiskLevel.HIGH)
        fired = [t for t in self.triggers if not t.startswith("override:")]
        if fired:
            lines.append(
                f"escalation triggers: {', '.join(fired)}; {base} → {self.computed_level} "
                "(one level at most, R-RSK-09)"
            )
        if self.method == METHOD_OVERRIDE:
            how = ", ".join(t.removeprefix("override:") for t in self.triggers if "override:" in t)
            lines.append(
                f"manual override ({how}): {self.computed_level} → {self.risk_level} "
                "(R-RSK-11/12; a lowered risk is logged, R-WFV-11)"
            )
        lines.append(f"risk {self.risk_level} by {self.method}; change type {self.change_type}")
        lines.append(f"variant {self.variant}: {' → '.join(str(s) for s in self.path)}")
        if self.traits:  # the keys [risk.agents.traits] in taskgate.toml can add agents for
            lines.append(f"traits {', '.join(self.traits)}")
        width = max((len(a) for a in self.agents), default=0)
        lines += [f"agent {a:<{width}}  {self.agent_reasons.get(a, '')}" for a in self.agents]
        return lines


def classify(
    paths: Sequence[str],
    text: str = "",
    *,
    config: RiskConfig = DEFAULT_RISK_CONFIG,
    risk_override: RiskLevel | str | None = None,
    force_full_protocol: bool = False,
) -> Classification:
    """Risk level, method, triggers, change type, path and agents for a task (R-RSK-01..14)."""
    # R-RSK-11: an invalid override is an error and produces no classification.
    override = RiskLevel.parse(str(risk_override)) if risk_override is not None else None
    seen = dict.fromkeys(normalize_path(p) or p.strip() for p in paths if p.strip())
    files = tuple(sorted((config.classify_file(p) for p in seen), key=lambda f: f.path))
    base = max((f.level for f in files), key=lambda r: r.rank, default=RiskLevel.HIGH)  # R-RSK-08
    triggers = [f"keyword:{k}" for k in config.keyword_hits(text)] + list(content_signals(files))
    # R-RSK-09: one level up however many triggers fire (C-40).
    computed = (RiskLevel.MEDIUM if base == RiskLevel.LOW else RiskLevel.HIGH) if triggers else base
    method = METHOD_KEYWORD if computed != base else METHOD_PATTERN
    level = computed
    if force_full_protocol:  # R-RSK-12; it wins over --risk-level, being the safer of the two
        level, method = RiskLevel.HIGH, METHOD_OVERRIDE
        triggers.append("override:force-full-protocol")
    elif override is not None:
        level, method = override, METHOD_OVERRIDE
        triggers.append(f"override:risk-level={override}")
    change_type = detect_change_type(files)
    traits = agt.detect_traits([f.path for f in files], text)
    # The traits hold the paths'; the configured sets only ever add agents ([risk.agents]).
    agents, reasons = agt.select_agents(level, change_type, traits, agent_sets=config.agents)
    return Classification(
        risk_level=level,
        method=method,
        triggers=tuple(triggers),
        files=files,
        change_type=change_type,
        variant=VARIANTS[level],
        path=state_path(level, change_type),
        agents=agents,
        agent_reasons=MappingProxyType(reasons),
        computed_level=computed,
        traits=tuple(sorted(traits)),
    )
