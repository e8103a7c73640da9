"""Stakeholder agents: names, task traits, selection, verification, dynamic addition (RULES §4)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

from taskgate.protocol.filekinds import file_kind as file_kind
from taskgate.protocol.filekinds import is_style_config
from taskgate.protocol.filekinds import is_test_path as is_test_path
from taskgate.protocol.states import ChangeType, RiskLevel, State
from taskgate.protocol.violations import Violation

# R-AGT-01: the canonical stakeholders in 002 §Agent Classification order, which is also the
# deterministic output order of every selection (R-AGT-10).
STAKEHOLDERS: tuple[str, ...] = (
    "architect", "style", "quality", "test", "build", "security", "performance", "usability",
)  # fmt: skip
# D-AGT-1 (C-11): the decision tree's names map onto the canonical ones.
AGENT_ALIASES = MappingProxyType(
    {**{name: name for name in STAKEHOLDERS},
     "formatter": "style", "engineer": "quality", "tester": "test", "builder": "build"}
)  # fmt: skip
# R-AGT-02, C-12: audit and config agents exist but never review or implement a task.
NON_STAKEHOLDERS = frozenset({
    "config", "parse-conversation-timeline", "audit-protocol-compliance",
    "audit-protocol-efficiency", "efficiency-optimizer", "documentation-auditor",
})  # fmt: skip

# Task traits (R-AGT-07/08/09/11). SOURCE_CODE, REFACTORING and CONFIG_FILES are ours: the
# checklist and the MEDIUM table speak of them, so they need a name to be checked.
NEW_CODE = "NEW_CODE"
IMPLEMENTATION = "IMPLEMENTATION"
MAJOR_FEATURE = "MAJOR_FEATURE"
FORMATTING_RULES = "FORMATTING_RULES"
AST_TRANSFORMATION = "AST_TRANSFORMATION"
PARSER_LOGIC = "PARSER_LOGIC"
SECURITY = "SECURITY"
AUTH = "AUTH"
PERFORMANCE = "PERFORMANCE"
USER_FACING = "USER_FACING"
CONFIG_ONLY = "CONFIG_ONLY"
DOCS_ONLY = "DOCS_ONLY"
RENAME_ONLY = "RENAME_ONLY"
SOURCE_CODE = "SOURCE_CODE"
REFACTORING = "REFACTORING"
CONFIG_FILES = "CONFIG_FILES"
TRAITS = frozenset({
    NEW_CODE, IMPLEMENTATION, MAJOR_FEATURE, FORMATTING_RULES, AST_TRANSFORMATION, PARSER_LOGIC,
    SECURITY, AUTH, PERFORMANCE, USER_FACING, CONFIG_ONLY, DOCS_ONLY, RENAME_ONLY, SOURCE_CODE,
    REFACTORING, CONFIG_FILES,
})  # fmt: skip


class UnknownAgentError(ValueError):
    """An agent name that is not a stakeholder or an alias of one (R-AGT-01)."""

    rule = "R-AGT-01"

    def __init__(self, message: str, *, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class NonStakeholderAgentError(UnknownAgentError):
    """A known non-stakeholder agent, which may never be selected or added (R-AGT-02, C-12)."""

    rule = "R-AGT-02"


_VALID_HINT = (
    f"valid agents: {', '.join(STAKEHOLDERS)} "
    "(aliases: formatter→style, engineer→quality, tester→test, builder→build)"
)


def canonical_agent(name: str) -> str:
    """The canonical stakeholder name for `name` or an alias (R-AGT-01, D-AGT-1)."""
    key = name.strip().lower()
    if key in NON_STAKEHOLDERS:
        raise NonStakeholderAgentError(
            f"agent {name!r} is not a stakeholder agent and is never selected or added "
            "(R-AGT-02, C-12)",
            hint=f"choose a stakeholder agent: {', '.join(STAKEHOLDERS)}",
        )
    canonical = AGENT_ALIASES.get(key)
    if canonical is None:
        raise UnknownAgentError(f"unknown agent {name!r} (R-AGT-01)", hint=_VALID_HINT)
    return canonical


def canonical_agents(names: Iterable[str]) -> tuple[str, ...]:
    """Canonical, de-duplicated names in STAKEHOLDERS order (R-AGT-10); raises on bad names."""
    wanted = {canonical_agent(name) for name in names}
    return tuple(agent for agent in STAKEHOLDERS if agent in wanted)


# ---------------------------------------------------------------------------------------------
# Security paths and change types; file kinds themselves live in filekinds.py.

_CAMEL_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_WORD_RE = re.compile(r"[a-z0-9]+")


def _tokens(text: str) -> frozenset[str]:
    """Lower-case words, also split at camelCase, so 'OAuthClient' yields 'auth' (whole words)."""
    words = set(_WORD_RE.findall(text.lower()))
    words.update(piece.lower() for piece in _CAMEL_RE.findall(text))
    return frozenset(words)


_AUTH_WORDS = frozenset({
    "auth", "authn", "authz", "authentication", "authenticate", "authorization",
    "authorisation", "authorize", "authorise", "oauth", "oidc", "saml", "sso", "login", "logout",
    "signin", "signup", "password", "passwords", "passwd", "credential", "credentials", "jwt",
    "rbac", "acl", "permission", "permissions",
})  # fmt: skip
_SECURITY_WORDS = _AUTH_WORDS | {
    "security", "secure", "encrypt", "encrypted", "encryption", "decrypt", "decryption", "crypto",
    "cryptography", "cryptographic", "cipher", "tls", "ssl", "certificate", "certificates",
    "secret", "secrets", "sanitize", "sanitise", "sanitization", "sanitisation", "sanitizer",
    "xss", "csrf", "vulnerability", "vulnerabilities", "cve", "keystore", "webhook",
}  # fmt: skip


def is_security_path(path: str) -> bool:
    """True when a path names security material: auth, crypto, secrets… ('content:security')."""
    return bool(_SECURITY_WORDS & _tokens(path))


def skip_problem(path: str, change_type: ChangeType) -> str | None:
    """Why `path` cannot be part of a change of `change_type` (D-WFV-2, R-WFV-09, C-39)."""
    kind = file_kind(path)
    if change_type == ChangeType.CODE:
        return None
    if kind in ("build", "ci"):
        return f"{path} is a {kind} file: build and CI changes always get the full path (C-39)"
    if kind == "code":
        return f"{path} is source code: full validation required (D-WFV-2)"
    if change_type == ChangeType.DOCUMENTATION_ONLY and kind != "doc":
        return f"{path} is not documentation"
    if kind not in ("doc", "config"):
        return f"{path} is neither configuration nor documentation"
    if kind == "config" and is_security_path(path):
        return f"{path} is security-sensitive configuration: full validation required (D-WFV-2)"
    return None


def paths_change_type(paths: Sequence[str]) -> ChangeType:
    """documentation_only / config_only / code judged by file kinds alone; empty → code."""
    for candidate in (ChangeType.DOCUMENTATION_ONLY, ChangeType.CONFIG_ONLY):
        if paths and all(skip_problem(p, candidate) is None for p in paths):
            return candidate
    return ChangeType.CODE


# ---------------------------------------------------------------------------------------------
# Traits (R-AGT-07/08), detected from paths and from whole words of the task text.

_NEW_WORDS = frozenset({
    "new", "add", "adds", "adding", "create", "creates", "creating", "implement", "implements",
    "implementing", "introduce", "introduces", "introducing", "write", "writes", "scaffold",
    "feature", "features",
})  # fmt: skip
_IMPL_WORDS = _NEW_WORDS | {"fix", "fixes", "fixing", "bug", "bugfix", "refactor", "refactoring",
                            "code", "function", "class", "method", "endpoint", "logic"}  # fmt: skip
_WORK_WORDS = _NEW_WORDS | {"fix", "fixes", "fixing", "bug", "optimize", "optimise", "refactor",
                            "refactoring", "rewrite", "rewrites"}  # fmt: skip
_RENAME_WORDS = frozenset({"rename", "renames", "renamed", "renaming", "move", "moves", "moving",
                           "relocate", "relocates"})  # fmt: skip
_REFACTOR_WORDS = frozenset({"refactor", "refactors", "refactoring", "refactored", "restructure",
                             "restructuring", "cleanup", "simplify"})  # fmt: skip
_FORMAT_WORDS = frozenset({"formatting", "formatter", "checkstyle", "lint", "linter", "linting",
                           "prettier", "eslint", "ruff", "gofmt", "rustfmt", "pmd"})  # fmt: skip
_AST_WORDS = frozenset({"ast", "codemod", "codemods", "transformer", "transformers"})
_PARSER_WORDS = frozenset({"parser", "parsers", "parsing", "lexer", "lexers", "tokenizer",
                           "tokenizers", "grammar", "grammars"})  # fmt: skip
_PERF_WORDS = frozenset({
    "performance", "perf", "optimize", "optimise", "optimization", "optimisation", "optimizing",
    "latency", "throughput", "benchmark", "benchmarks", "benchmarking", "bench", "benches",
    "profiling", "profiler", "memory", "cpu", "cache", "caching", "algorithm", "algorithmic",
    "faster", "speedup", "jmh",
})  # fmt: skip
_UI_WORDS = frozenset({
    "ui", "ux", "gui", "frontend", "cli", "usability", "accessibility", "a11y", "screen",
    "screens", "page", "pages", "dialog", "button", "buttons", "menu", "form", "forms",
    "dashboard", "layout", "css", "html", "widget", "widgets", "templates", "components", "views",
})  # fmt: skip
_UI_EXTENSIONS = (".html", ".htm", ".css", ".scss", ".sass", ".less", ".vue", ".svelte", ".jsx",
                  ".tsx")  # fmt: skip
_PHRASES: tuple[tuple[str, str], ...] = (
    ("major feature", MAJOR_FEATURE), ("new feature", MAJOR_FEATURE), ("epic", MAJOR_FEATURE),
    ("style guide", FORMATTING_RULES), ("code style", FORMATTING_RULES),
    ("style rule", FORMATTING_RULES), ("formatting rule", FORMATTING_RULES),
    ("syntax tree", AST_TRANSFORMATION), ("input validation", SECURITY),
    ("external api", SECURITY), ("third party api", SECURITY), ("data integration", SECURITY),
    ("speed up", PERFORMANCE), ("query optimization", PERFORMANCE), ("slow query", PERFORMANCE),
    ("user interface", USER_FACING), ("user facing", USER_FACING), ("front end", USER_FACING),
    ("command line", USER_FACING), ("error message", USER_FACING), ("help text", USER_FACING),
    ("sql injection", SECURITY), ("command injection", SECURITY), ("sign in", AUTH),
    ("clean up", REFACTORING),
)  # fmt: skip
# Word set → trait, applied to the task text and to every path's tokens alike.
_WORD_TRAITS: tuple[tuple[frozenset[str], str], ...] = (
    (_AUTH_WORDS, AUTH), (_SECURITY_WORDS, SECURITY), (_PERF_WORDS, PERFORMANCE),
    (_UI_WORDS, USER_FACING), (_PARSER_WORDS, PARSER_LOGIC), (_AST_WORDS, AST_TRANSFORMATION),
    (_FORMAT_WORDS, FORMATTING_RULES), (_REFACTOR_WORDS, REFACTORING),
)  # fmt: skip


def detect_traits(paths: Sequence[str], text: str = "") -> frozenset[str]:
    """Task traits from file paths and whole words of the task text (R-AGT-07, R-AGT-08)."""
    words = _tokens(text)
    joined = " " + " ".join(_WORD_RE.findall(text.lower())) + " "
    traits = {trait for phrase, trait in _PHRASES if f" {phrase} " in joined}
    path_words = frozenset().union(*(_tokens(p) for p in paths))
    for vocabulary, trait in _WORD_TRAITS:
        if (words | path_words) & vocabulary:
            traits.add(trait)
    kinds = {file_kind(p) for p in paths}
    if "code" in kinds:
        traits.add(SOURCE_CODE)
    if "config" in kinds or any("resources" in p.split("/")[:-1] for p in paths):
        traits.add(CONFIG_FILES)
    if any(p.lower().endswith(_UI_EXTENSIONS) for p in paths):
        traits.add(USER_FACING)
    if any(is_style_config(p) or p.startswith("docs/code-style/") for p in paths):
        traits.add(FORMATTING_RULES)
    if SOURCE_CODE in traits or (not paths and words & _IMPL_WORDS):
        traits.add(IMPLEMENTATION)
    if (SOURCE_CODE in traits or not paths) and words & _NEW_WORDS:
        traits.add(NEW_CODE)
    if words & _RENAME_WORDS and not words & _WORK_WORDS:
        traits.add(RENAME_ONLY)
    if paths:
        change = paths_change_type(paths)
        if change is ChangeType.DOCUMENTATION_ONLY:
            traits.add(DOCS_ONLY)
        elif change is ChangeType.CONFIG_ONLY:
            traits.add(CONFIG_ONLY)
    if AUTH in traits:
        traits.add(SECURITY)  # authentication is security-sensitive (R-AGT-08)
    return frozenset(traits)


def effective_traits(
    traits: Iterable[str], risk: RiskLevel | None = None, change_type: ChangeType | None = None
) -> frozenset[str]:
    """The traits that count after the negative rules (R-AGT-09, R-WFV-07, C-38)."""
    result = set(traits)
    if AUTH in result:
        result.add(SECURITY)
    if change_type is not None:  # the change type decided by classification wins over paths
        result -= {DOCS_ONLY, CONFIG_ONLY}
        if change_type == ChangeType.DOCUMENTATION_ONLY:
            result.add(DOCS_ONLY)
        elif change_type == ChangeType.CONFIG_ONLY:
            result.add(CONFIG_ONLY)
    if risk == RiskLevel.HIGH:
        result -= {DOCS_ONLY, CONFIG_ONLY}  # R-WFV-07: a HIGH task has no shortcuts
    if DOCS_ONLY in result:  # R-AGT-09; style docs stay the style agent's domain (R-AGT-05)
        return frozenset(result & {DOCS_ONLY, FORMATTING_RULES, RENAME_ONLY})
    if CONFIG_ONLY in result:  # "IMPLEMENTATION (not config-only)": no code traits
        result -= {NEW_CODE, IMPLEMENTATION, AST_TRANSFORMATION, PARSER_LOGIC, SOURCE_CODE}
    if risk == RiskLevel.LOW and AUTH not in result:
        result.discard(SECURITY)  # R-AGT-09: LOW adds security only for authentication
    if RENAME_ONLY in result:  # R-AGT-09: a rename on its own never adds performance
        result -= {PERFORMANCE, PARSER_LOGIC, AST_TRANSFORMATION}
    return frozenset(result)


# ---------------------------------------------------------------------------------------------
# Selection (R-AGT-03..10) and the verification checklist (R-AGT-11).

# The seeds' base sets are floors: [risk.agents] in taskgate.toml may add to them, never remove.
BASE_SETS = MappingProxyType({
    RiskLevel.HIGH: (("architect", "style", "quality", "build"), "R-AGT-04: HIGH base set"),
    RiskLevel.MEDIUM: (("architect", "quality"), "R-AGT-05: MEDIUM base set"),
    RiskLevel.LOW: (("architect",), "R-AGT-06: LOW set"),
})  # fmt: skip
_TRAIT_RULES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    (NEW_CODE, ("style", "quality", "build"), "R-AGT-07: new code"),
    (IMPLEMENTATION, ("test",), "R-AGT-07: implementation (not config-only)"),
    (MAJOR_FEATURE, ("usability",), "R-AGT-07: major feature"),
    (FORMATTING_RULES, ("style",), "R-AGT-07/05: formatting rules or style files"),
    (AST_TRANSFORMATION, ("quality", "test"), "R-AGT-07: AST transformation"),
    (PARSER_LOGIC, ("performance", "security"), "R-AGT-07: parser logic"),
    (SECURITY, ("security",), "R-AGT-08: security-sensitive work"),
    (PERFORMANCE, ("performance",), "R-AGT-08: performance-critical work"),
    (USER_FACING, ("usability",), "R-AGT-04: user-facing work"),
)  # fmt: skip
# R-AGT-11: (traits that demand the agent, agent, what the checklist asks).
CHECKLIST: tuple[tuple[frozenset[str], str, str], ...] = (
    (frozenset({NEW_CODE}), "style", "a NEW_CODE task needs style"),
    (frozenset({SOURCE_CODE}), "build", "source files created or modified need build"),
    (frozenset({PERFORMANCE}), "performance", "performance-critical work needs performance"),
    (frozenset({SECURITY}), "security", "security-sensitive work needs security"),
    (frozenset({USER_FACING, MAJOR_FEATURE}), "usability", "user-facing work needs usability"),
    (frozenset({REFACTORING}), "quality", "post-implementation refactoring needs quality"),
    (frozenset({AST_TRANSFORMATION, PARSER_LOGIC}), "performance",
     "AST parsing or code formatting logic needs performance"),
)  # fmt: skip


def base_set_problem(level: RiskLevel, agents: Iterable[str]) -> str | None:
    """Why canonical `agents` cannot be `level`'s base set: it drops the seed's, or None."""
    floor, rule = BASE_SETS[level]
    if not (missing := [a for a in floor if a not in agents]):
        return None
    why = (
        " (architect is required for every task, R-AGT-03, C-10)" if "architect" in missing else ""
    )
    return f"drops {', '.join(missing)} from the {rule.split(':')[0]} base set{why}"


@dataclass(frozen=True)
class AgentSets:
    """[risk.agents]: a base set per risk level and extra agents per trait; adds, never drops."""

    high: tuple[str, ...] = BASE_SETS[RiskLevel.HIGH][0]
    medium: tuple[str, ...] = BASE_SETS[RiskLevel.MEDIUM][0]
    low: tuple[str, ...] = BASE_SETS[RiskLevel.LOW][0]
    traits: tuple[tuple[str, tuple[str, ...]], ...] = ()  # rules like R-AGT-07/08, after R-AGT-09

    def __post_init__(self) -> None:
        for level in BASE_SETS:  # names become canonical; R-AGT-01/02 raise on bad ones
            agents = canonical_agents(getattr(self, level.lower()))
            if problem := base_set_problem(level, agents):
                raise ValueError(f"{level.lower()} {problem}")
            object.__setattr__(self, level.lower(), agents)
        for trait, _ in self.traits:
            if trait.upper() not in TRAITS:
                raise ValueError(f"unknown trait {trait!r}; traits: {', '.join(sorted(TRAITS))}")
        rules = tuple((t.upper(), canonical_agents(a)) for t, a in self.traits)
        object.__setattr__(self, "traits", rules)

    def base(self, level: RiskLevel) -> tuple[str, ...]:
        """The base set for `level`: the seed's, plus what taskgate.toml adds."""
        return tuple(getattr(self, level.lower()))


DEFAULT_AGENT_SETS = AgentSets()


class HasPath(Protocol):
    """Anything with a repo-relative `path` (risk.FileRisk)."""

    @property
    def path(self) -> str: ...


def select_agents(
    risk: RiskLevel,
    change_type: ChangeType,
    traits: Iterable[str],
    files: Iterable[str | HasPath] = (),
    *,
    agent_sets: AgentSets = DEFAULT_AGENT_SETS,
) -> tuple[tuple[str, ...], dict[str, str]]:
    """Required agents in canonical order and why each was chosen (R-AGT-03..R-AGT-10)."""
    paths = [f if isinstance(f, str) else f.path for f in files]
    level = RiskLevel(risk) if risk in BASE_SETS else RiskLevel.HIGH  # R-WFV-05: unknown → HIGH
    eff = effective_traits(set(traits) | detect_traits(paths), level, change_type)
    reasons: dict[str, list[str]] = {"architect": ["R-AGT-03: required for every task (C-10)"]}

    def add(agents: Iterable[str], reason: str) -> None:
        for agent in agents:
            reasons.setdefault(agent, []).append(reason)

    if DOCS_ONLY in eff:
        add(["architect"], "R-AGT-09: documentation-only change")
    else:
        floor, rule = BASE_SETS[level]
        add(floor, rule)
        extra = [a for a in agent_sets.base(level) if a not in floor]
        add(extra, f"taskgate.toml [risk.agents] {level.lower()}")
        if level is RiskLevel.MEDIUM and CONFIG_FILES in eff:
            add(["security"], "R-AGT-05, C-38: configuration or resource files at MEDIUM")
    # R-AGT-09: at LOW only authentication brings security, whichever rule asks for it.
    barred = {"security"} if level == RiskLevel.LOW and AUTH not in eff else set()
    configured = [(t, a, f"taskgate.toml [risk.agents.traits] {t}") for t, a in agent_sets.traits]
    for trait, agents, reason in (*_TRAIT_RULES, *configured):
        if trait in eff:
            add([a for a in agents if a not in barred], reason)
    for needed_by, agent, question in CHECKLIST:
        if needed_by & eff and agent not in reasons:
            add([agent], f"R-AGT-11 checklist: {question}")
    ordered = tuple(a for a in STAKEHOLDERS if a in reasons)
    return ordered, {a: "; ".join(dict.fromkeys(reasons[a])) for a in ordered}


def verify_selection(
    agents: Sequence[str],
    traits: Iterable[str],
    *,
    risk: RiskLevel | None = None,
    change_type: ChangeType | None = None,
) -> list[Violation]:
    """The agent selection verification checklist and name checks (R-AGT-01/02/03/10/11)."""
    violations: list[Violation] = []
    canonical: list[str] = []
    for name in agents:
        try:
            canonical.append(canonical_agent(name))
        except UnknownAgentError as error:
            violations.append(Violation(error.rule, error.message, error.hint))
    if not agents:
        violations.append(Violation("R-AGT-10", "the agent selection is empty", "add architect"))
    if len(set(canonical)) != len(canonical):
        violations.append(Violation(
            "R-AGT-10", f"duplicate agents in selection {list(agents)} (aliases count as one)",
            "list each stakeholder once under its canonical name",
        ))  # fmt: skip
    chosen = set(canonical)
    if "architect" not in chosen:
        violations.append(Violation(
            "R-AGT-03", "architect is missing; it is required for every task (C-10)",
            "add architect to required_agents",
        ))  # fmt: skip
    eff = effective_traits(traits, risk, change_type)
    for needed_by, agent, question in CHECKLIST:
        present = sorted(needed_by & eff)
        if present and agent not in chosen:
            violations.append(Violation(
                "R-AGT-11", f"{question}: traits {', '.join(present)} but {agent} not selected",
                f"add {agent}: taskgate agent add TASK {agent} --why '...'",
            ))  # fmt: skip
    return violations


# ---------------------------------------------------------------------------------------------
# Dynamic addition (R-AGT-14..R-AGT-21), the pure part: may this agent be added now?

ADDITION_STATES = frozenset({State.REQUIREMENTS, State.SYNTHESIS, State.IMPLEMENTATION})
_TOO_LATE_STATES = frozenset({State.VALIDATION, State.REVIEW})


def check_agent_addition(
    *,
    state: State,
    agent: str,
    required_agents: Sequence[str],
    justification: str,
    rejected_agents: Sequence[str] = (),
) -> list[Violation]:
    """Violations that refuse adding `agent` to a task in `state` (R-AGT-01/02/14/15/21)."""
    violations: list[Violation] = []
    name: str | None = None
    try:
        name = canonical_agent(agent)
    except UnknownAgentError as error:
        violations.append(Violation(error.rule, error.message, error.hint))
    rejected = {AGENT_ALIASES.get(a.strip().lower(), a) for a in rejected_agents}
    if state in _TOO_LATE_STATES:
        outvote = f"; adding never outvotes the REJECTED decision of {', '.join(sorted(rejected))}"
        violations.append(Violation(
            "R-AGT-14", f"agents cannot be added in {state}: implementation is already complete",
            "return to REQUIREMENTS first: taskgate transition TASK REQUIREMENTS --reason '...'"
            + (f" (R-AGT-21{outvote})" if rejected else ""),
        ))  # fmt: skip
    elif state not in ADDITION_STATES:
        violations.append(Violation(
            "R-AGT-14", f"agents cannot be added in {state}",
            "agents may be added only in REQUIREMENTS, SYNTHESIS or IMPLEMENTATION",
        ))  # fmt: skip
    if not justification.strip():
        violations.append(Violation(
            "R-AGT-15", "adding an agent requires a justification",
            "say what expertise is missing and why now: --why '...'",
        ))  # fmt: skip
    required = {AGENT_ALIASES.get(a.strip().lower(), a) for a in required_agents}
    if name is not None and name in rejected:
        violations.append(Violation(
            "R-AGT-21", f"{name} has an outstanding REJECTED decision; re-adding cannot reset it",
            "address the rejection in IMPLEMENTATION, then review again",
        ))  # fmt: skip
    elif name is not None and name in required:
        violations.append(Violation(
            "R-AGT-15", f"{name} is already a required agent (C-78)",
            "nothing to add; agents are never added twice or removed",
        ))  # fmt: skip
    return violations


def addition_effects(state: State) -> frozenset[str]:
    """What the engine must do when an agent is added in `state` (R-AGT-16..R-AGT-20)."""
    if state not in ADDITION_STATES:
        return frozenset()
    common = {"create_worktree", "record_addition", "update_task_md"}  # R-AGT-16/17/22
    per_state = {
        State.REQUIREMENTS: {"require_requirements_report"},  # R-AGT-18
        State.SYNTHESIS: {"revoke_plan_approval", "require_synthesis_input"},  # R-AGT-19
        State.IMPLEMENTATION: {"require_implementation_complete"},  # R-AGT-20
    }
    return frozenset(common | per_state[state])
