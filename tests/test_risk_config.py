"""taskgate.toml's [risk] table: patterns, keywords, agent sets; errors name the line (issue 3)."""

from __future__ import annotations

import re
import tomllib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskgate.protocol.agents import (
    BASE_SETS,
    NON_STAKEHOLDERS,
    STAKEHOLDERS,
    TRAITS,
    AgentSets,
    canonical_agents,
)
from taskgate.protocol.risk import (
    DEFAULT_RISK_CONFIG,
    ESCALATION_KEYWORDS,
    RiskConfig,
    RiskConfigError,
    RiskPattern,
    classify,
    pattern_problem,
)
from taskgate.protocol.risk_config import parse_risk_config
from taskgate.protocol.states import RiskLevel

H, M, L = RiskLevel.HIGH, RiskLevel.MEDIUM, RiskLevel.LOW


# --- configuration -------------------------------------------------------------------------

TOML = """\
[tasks]
root = ".taskgate/tasks"

[risk]
high = ["deploy/**"]
medium = [
    "config/**",
]
low = ["scratch/"]
keywords = ["migration"]
"""


def test_config_user_patterns_come_first_in_their_tier() -> None:
    config = parse_risk_config(tomllib.loads(TOML)["risk"], TOML)
    assert config.high[0] == RiskPattern("deploy/**", H, "taskgate.toml high")
    assert config.classify_file("deploy/x.txt").level is H
    assert config.classify_file("config/app.yml").level is M
    assert config.classify_file("a/scratch/x.py").level is H  # general HIGH before LOW
    assert config.classify_file("scratch/x.bin").level is L
    assert config.high[1:] == DEFAULT_RISK_CONFIG.high
    assert config.keywords[0] == "migration" and set(ESCALATION_KEYWORDS) <= set(config.keywords)


def test_config_replace_defaults() -> None:
    table = {"low": ["**"], "keywords": ["x"], "replace_defaults": True,
             "replace_default_keywords": True}  # fmt: skip
    config = parse_risk_config(table)
    assert config.classify_file("pom.xml").level is L and config.keywords == ("x",)
    assert parse_risk_config({}) == DEFAULT_RISK_CONFIG


def test_config_user_medium_cannot_lower_a_default_specific_high_pattern() -> None:
    config = parse_risk_config({"medium": ["package.json"]})
    assert config.classify_file("package.json").level is H  # tier 1 precedes tier 2


def test_config_source_tier_sits_after_medium() -> None:
    config = parse_risk_config({"source": ["lib/**/*.rb"], "medium": ["lib/**/*_spec.rb"]})
    assert config.classify_file("lib/a/x_spec.rb").level is M
    assert config.classify_file("lib/a/x.rb").pattern == "lib/**/*.rb"


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        ("", "empty"),
        ("a\\b", "backslash"),
        ("src/[ab", "unbalanced"),
        ("/abs/**", "absolute"),
        ("../x", "'..'"),
        ("a/../b", "'..'"),
        ("!x", "negation"),
        ("a\x00b", "NUL"),
        (" x", "whitespace"),
    ],
)
def test_config_invalid_pattern_names_the_line(bad: str, fragment: str) -> None:
    escaped = bad.replace("\\", "\\\\").replace("\x00", "\\u0000")
    text = f'[risk]\nmedium = ["ok/**"]\nhigh = [\n  "fine/**",\n  "{escaped}",\n]\n'
    table = tomllib.loads(text)["risk"]
    with pytest.raises(RiskConfigError, match=fragment) as info:
        parse_risk_config(table, text)
    assert str(info.value).startswith("taskgate.toml line 5: [risk] high:")
    assert info.value.line == 5
    assert pattern_problem(bad) is not None


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ('[risk]\nhigh = "x/**"\n', 2, "list of strings"),
        ("[risk]\n\nlow = [1]\n", 3, "must be a string"),
        ("[risk]\nreplace_defaults = 1\n", 2, "true or false"),
        ("[risk]\nhihg = []\n", 2, "unknown key"),
        ('[risk]\nkeywords = ["--"]\n', 2, "word characters"),
    ],
)
def test_config_wrong_types_name_the_line(text: str, line: int, fragment: str) -> None:
    with pytest.raises(RiskConfigError, match=fragment) as info:
        parse_risk_config(tomllib.loads(text)["risk"], text)
    assert info.value.line == line and f"line {line}:" in str(info.value)


def test_config_error_without_source_text_has_no_line() -> None:
    with pytest.raises(RiskConfigError) as info:
        parse_risk_config({"high": ["/x"]})
    assert info.value.line is None and str(info.value).startswith("taskgate.toml: [risk] high")


def test_config_tier_level_mismatch_is_rejected() -> None:
    with pytest.raises(ValueError, match="tier"):
        RiskConfig(high=(RiskPattern("x", L, "wrong"),))


# --- [risk.agents]: configured agent sets (issue 3) ---------------------------------------

AGENTS_TOML = """\
[risk]
keywords = ["migration"]

[risk.agents]  # reviewers on top of the seeds' sets
high = ["Architect", "formatter", "engineer", "builder", "security"]
medium = [
    "architect",
    "quality",
    "tester",
]

[risk.agents.traits]
user_facing = ["usability", "tester"]
"""


def test_config_agent_sets_normalise_aliases_and_keep_unset_levels() -> None:
    config = parse_risk_config(tomllib.loads(AGENTS_TOML)["risk"], AGENTS_TOML)
    assert config.agents == AgentSets(
        high=("architect", "style", "quality", "build", "security"),
        medium=("architect", "quality", "test"),
        traits=(("USER_FACING", ("test", "usability")),),
    )  # C-11: canonical names in STAKEHOLDERS order
    assert config.agents.low == ("architect",) and config.keywords[0] == "migration"
    assert parse_risk_config({"agents": {}}) == DEFAULT_RISK_CONFIG


def test_config_agent_sets_reach_the_selection_through_classify() -> None:
    config = parse_risk_config(tomllib.loads(AGENTS_TOML)["risk"], AGENTS_TOML)
    paths, text = ["app/resources/app.properties"], "tune the timeout"
    assert classify(paths, text).agents == ("architect", "quality", "security")  # default
    result = classify(paths, text, config=config)
    assert result.risk_level is M and result.agents == ("architect", "quality", "test", "security")
    assert result.agent_reasons["test"] == "taskgate.toml [risk.agents] medium"
    assert "traits CONFIG_FILES, CONFIG_ONLY" in result.explain()  # the keys of .traits
    ui = classify(["web/form.tsx"], "", config=config)
    assert ui.agents == (*STAKEHOLDERS[:5], "security", "usability")
    assert ui.agent_reasons["security"] == "taskgate.toml [risk.agents] high"


@pytest.mark.parametrize(
    ("entry", "line", "fragment"),
    [
        ('"reviewer"', 8, "high: unknown agent 'reviewer' (R-AGT-01); valid agents: architect"),
        ('"config"', 8, "high: agent 'config' is not a stakeholder agent"),
        ("'documentation-auditor'", 8, "(R-AGT-02, C-12)"),
        ("3", 6, "high: entry 5 must be a string, got int"),
    ],
)
def test_config_agent_names_are_checked_at_their_line(entry: str, line: int, fragment: str) -> None:
    text = (
        '[risk]\nhigh = ["x/**"]\n\n[risk.agents]\nlow = ["architect"]\n'
        f'high = [\n  "architect", "style", "quality", "build",\n  {entry},\n]\n'
    )
    with pytest.raises(RiskConfigError, match=re.escape(fragment)) as info:
        parse_risk_config(tomllib.loads(text)["risk"], text)
    assert info.value.line == line
    assert str(info.value).startswith(f"taskgate.toml line {line}: [risk.agents] high")


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ('[risk.agents]\nhigh = ["architect", "quality"]\n', 2,
         "high drops style, build from the R-AGT-04 base set; configured sets can add agents, "
         "never remove them"),
        ('[risk.agents]\n\nlow = ["tester"]\n', 3,
         "low drops architect from the R-AGT-06 base set (architect is required for every task, "
         "R-AGT-03, C-10)"),
        ('[risk]\nagents = { medium = ["architect"] }\n', 2, "medium drops quality"),
        ('risk.agents.medium = ["quality"]\n', 1, "medium drops architect"),
        ("[risk.agents]\nhgih = []\n", 2, "[risk.agents] unknown key 'hgih'; valid keys: high"),
        ("[risk]\nagents = 1\n", 2, "[risk] agents must be a table, got int"),
        ('[risk.agents]\ntraits = ["security"]\n', 2, "traits must be a table, got list"),
        ('[risk.agents.traits]\nSECRETS = ["security"]\n', 2,
         "[risk.agents.traits] unknown trait 'SECRETS'; traits: AST_TRANSFORMATION"),
        ('[risk.agents.traits]\nauth = "security"\n', 2, "auth must be a list of strings"),
        ('[risk.agents.traits]\nSECURITY = [\n  "security",\n  "efficiency-optimizer",\n]\n', 4,
         "[risk.agents.traits] SECURITY: agent 'efficiency-optimizer' is not a stakeholder"),
    ],
)  # fmt: skip
def test_config_agent_set_errors_name_the_line(text: str, line: int, fragment: str) -> None:
    with pytest.raises(RiskConfigError, match=re.escape(fragment)) as info:
        parse_risk_config(tomllib.loads(text)["risk"], text)
    assert info.value.line == line and f"line {line}:" in str(info.value)


NAMES_OR_NOT = st.one_of(
    st.sampled_from([*STAKEHOLDERS, "formatter", "engineer", "tester", "builder", " Tester "]),
    st.sampled_from(sorted(NON_STAKEHOLDERS)),
    st.text(max_size=8),
)


@given(st.lists(NAMES_OR_NOT, max_size=5), st.sampled_from(sorted(TRAITS)))
def test_property_configured_names_become_stakeholders_or_an_error(
    names: list[str], trait: str
) -> None:
    table = {"agents": {"high": [*names, *BASE_SETS[H][0]], "traits": {trait.lower(): names}}}
    try:
        config = parse_risk_config(table)
    except RiskConfigError as error:
        assert re.search(r"\(R-AGT-0[12]", str(error))  # R-AGT-01/02
        return
    assert config.agents.high == canonical_agents([*names, *BASE_SETS[H][0]])
    assert config.agents.traits == ((trait, canonical_agents(names)),)
    assert not set(config.agents.high) - set(STAKEHOLDERS)
