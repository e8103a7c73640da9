"""Agent names, traits, selection, the checklist and dynamic addition (RULES §4 AGT)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskgate.protocol import agents as agt
from taskgate.protocol.agents import (
    ADDITION_STATES,
    BASE_SETS,
    DEFAULT_AGENT_SETS,
    NON_STAKEHOLDERS,
    STAKEHOLDERS,
    AgentSets,
    NonStakeholderAgentError,
    UnknownAgentError,
    addition_effects,
    canonical_agent,
    canonical_agents,
    check_agent_addition,
    detect_traits,
    file_kind,
    select_agents,
    verify_selection,
)
from taskgate.protocol.risk import DEFAULT_RISK_CONFIG, classify
from taskgate.protocol.states import ChangeType, RiskLevel, State

H, M, L = RiskLevel.HIGH, RiskLevel.MEDIUM, RiskLevel.LOW
DOC, CFG, CODE = ChangeType.DOCUMENTATION_ONLY, ChangeType.CONFIG_ONLY, ChangeType.CODE
ALL_TRAITS = sorted(agt.TRAITS)


def chosen(risk: RiskLevel, change: ChangeType, traits: set[str], files: list[str]) -> set[str]:
    return set(select_agents(risk, change, traits, files)[0])


# --- names (R-AGT-01, R-AGT-02, D-AGT-1) ----------------------------------------------------


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [("formatter", "style"), ("engineer", "quality"), ("tester", "test"), ("builder", "build"),
     *((name, name) for name in STAKEHOLDERS), (" Architect ", "architect")],
)  # fmt: skip
def test_D_AGT_1_alias_map(alias: str, canonical: str) -> None:
    assert canonical_agent(alias) == canonical


def test_R_AGT_01_unknown_agent_error_lists_valid_names() -> None:
    with pytest.raises(UnknownAgentError, match="R-AGT-01") as info:
        canonical_agent("reviewer")
    assert "architect" in info.value.hint and "formatter→style" in info.value.hint
    assert not isinstance(info.value, NonStakeholderAgentError)


@pytest.mark.parametrize("name", sorted(NON_STAKEHOLDERS))
def test_R_AGT_02_non_stakeholders_rejected(name: str) -> None:
    with pytest.raises(NonStakeholderAgentError, match=r"R-AGT-02, C-12") as info:
        canonical_agent(name)
    assert info.value.rule == "R-AGT-02" and "not a stakeholder" in str(info.value)


def test_R_AGT_10_canonical_agents_dedupe_and_order() -> None:
    assert canonical_agents(["tester", "architect", "test", "formatter"]) == (
        "architect", "style", "test",
    )  # fmt: skip


# --- base sets (R-AGT-03..R-AGT-06) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("risk", "change", "expected"),
    [(H, CODE, {"architect", "style", "quality", "build"}), (M, CODE, {"architect", "quality"}),
     (L, CODE, {"architect"}), (L, DOC, {"architect"})],
)  # fmt: skip
def test_R_AGT_03_to_06_base_sets(risk: RiskLevel, change: ChangeType, expected: set[str]) -> None:
    assert chosen(risk, change, set(), []) == expected


@pytest.mark.parametrize(
    ("trait", "agent"),
    [(agt.SECURITY, "security"), (agt.PERFORMANCE, "performance"),
     (agt.IMPLEMENTATION, "test"), (agt.USER_FACING, "usability")],
)  # fmt: skip
def test_R_AGT_04_high_additions(trait: str, agent: str) -> None:
    agents, reasons = select_agents(H, CODE, {trait}, [])
    assert agent in agents and reasons[agent]


def test_R_AGT_05_medium_additions() -> None:
    assert "style" in chosen(M, CODE, set(), ["src/test/java/ATest.java", "checkstyle.xml"])
    assert "style" in chosen(M, DOC, set(), ["docs/code-style/java.md"])  # style docs
    assert "performance" in chosen(M, CODE, set(), ["bench/ParserBench.java"])


def test_R_AGT_05_C_38_medium_config_files_add_security() -> None:
    result = classify(["app/src/main/resources/conf/app.properties"])
    assert result.risk_level is M and "security" in result.agents
    assert "C-38" in result.agent_reasons["security"]


def test_R_AGT_06_low_docs_only_architect() -> None:
    assert classify(["notes.md", "docs/guide/intro.md"]).agents == ("architect",)


def test_R_AGT_06_escalation_applies_the_new_levels_rules() -> None:
    result = classify(["tools/FooTests.java"], "database change")
    assert result.risk_level is H and {"style", "quality", "build"} <= set(result.agents)


# --- trait rules (R-AGT-07, R-AGT-08) -------------------------------------------------------


@pytest.mark.parametrize(
    ("trait", "agents"),
    [
        (agt.NEW_CODE, {"style", "quality", "build"}),
        (agt.IMPLEMENTATION, {"test"}),
        (agt.MAJOR_FEATURE, {"usability"}),
        (agt.FORMATTING_RULES, {"style"}),
        (agt.AST_TRANSFORMATION, {"quality", "test"}),
        (agt.PARSER_LOGIC, {"performance", "security"}),
    ],
)
def test_R_AGT_07_trait_rules(trait: str, agents: set[str]) -> None:
    assert agents <= chosen(M, CODE, {trait}, [])


@pytest.mark.parametrize(
    ("text", "agent"),
    [
        ("Add OAuth login", "security"),
        ("integrate the external API for payments", "security"),
        ("encrypt stored tokens", "security"),
        ("input validation for the upload form", "security"),
        ("optimize the sorting algorithm", "performance"),
        ("query optimization for reports", "performance"),
        ("reduce memory usage", "performance"),
    ],
)
def test_R_AGT_08_security_and_performance_triggers(text: str, agent: str) -> None:
    assert agent in classify(["src/app/service.py"], text).agents


@pytest.mark.parametrize(
    ("paths", "text", "expected"),
    [
        (["src/a.py"], "", {agt.SOURCE_CODE, agt.IMPLEMENTATION}),
        (["src/a.py"], "Add a new endpoint", {agt.NEW_CODE}),
        ([], "implement caching", {agt.IMPLEMENTATION, agt.NEW_CODE, agt.PERFORMANCE}),
        (["src/parser/lexer.py"], "", {agt.PARSER_LOGIC}),
        (["src/ast/transformer.ts"], "", {agt.AST_TRANSFORMATION}),
        (["src/OAuthClient.java"], "", {agt.AUTH, agt.SECURITY}),
        (["web/Button.tsx"], "", {agt.USER_FACING}),
        (["docs/a.md", "README"], "", {agt.DOCS_ONLY}),
        (["app/config.yml"], "", {agt.CONFIG_ONLY, agt.CONFIG_FILES}),
        (["ruff.toml"], "", {agt.FORMATTING_RULES}),
        ([], "Rename module foo to bar", {agt.RENAME_ONLY}),
        ([], "a major feature for the CLI", {agt.MAJOR_FEATURE, agt.USER_FACING}),
        ([], "refactor the store", {agt.REFACTORING}),
    ],
)
def test_detect_traits(paths: list[str], text: str, expected: set[str]) -> None:
    assert expected <= detect_traits(paths, text)


@pytest.mark.parametrize(
    ("paths", "text", "absent"),
    [
        (["docs/a.md"], "", agt.IMPLEMENTATION),
        ([], "Rename and add a module", agt.RENAME_ONLY),
        (["src/a.py"], "capital apiary", agt.SECURITY),
        (["src/a.py"], "authorship", agt.AUTH),  # whole words only
        (["changeset.yml"], "", agt.DOCS_ONLY),
    ],
)
def test_detect_traits_negative(paths: list[str], text: str, absent: str) -> None:
    assert absent not in detect_traits(paths, text)


@pytest.mark.parametrize(
    ("path", "kind"),
    [("pom.xml", "build"), ("requirements-dev.txt", "build"), (".github/x.yml", "ci"),
     ("a/b.go", "code"), ("LICENSE", "doc"), ("README.rst", "doc"), ("docs/a.png", "doc"),
     ("app.properties", "config"), (".editorconfig", "config"), ("x.bin", "other")],
)  # fmt: skip
def test_file_kind(path: str, kind: str) -> None:
    assert file_kind(path) == kind


# --- negative rules (R-AGT-09) --------------------------------------------------------------


def test_R_AGT_09_rename_never_adds_performance() -> None:
    result = classify(["core/src/main/java/perf/Bench.java"], "Rename the performance module")
    assert "performance" not in result.agents


def test_R_AGT_09_low_or_config_only_security_only_for_auth() -> None:
    assert "security" not in chosen(L, CODE, {agt.SECURITY}, [])
    assert "security" not in chosen(L, CFG, {agt.SECURITY}, ["app.yml"])
    assert "security" not in chosen(L, CODE, {agt.PARSER_LOGIC}, [])
    assert "security" in chosen(L, CFG, {agt.AUTH}, ["app.yml"])
    assert "security" in chosen(L, CODE, {agt.AUTH}, [])


def test_R_AGT_09_documentation_only_gives_architect() -> None:
    traits = {agt.SECURITY, agt.NEW_CODE, agt.USER_FACING, agt.PERFORMANCE}
    assert chosen(L, DOC, traits, ["docs/a.md"]) == {"architect"}
    assert chosen(M, DOC, traits, ["docs/a.md"]) == {"architect"}
    assert classify(["docs/api.md"], "Update API docs").agents == ("architect",)


def test_R_WFV_07_high_documentation_change_keeps_the_high_rules() -> None:
    assert {"style", "quality", "build"} <= chosen(H, DOC, set(), ["docs/a.md"])


def test_R_AGT_07_config_only_is_not_implementation() -> None:
    assert "test" not in chosen(M, CFG, {agt.IMPLEMENTATION, agt.NEW_CODE}, ["app.yml"])


# --- result shape (R-AGT-10) and the checklist (R-AGT-11) -----------------------------------


def test_R_AGT_10_deterministic_canonical_order_with_reasons() -> None:
    agents, reasons = select_agents(H, CODE, {agt.USER_FACING, agt.SECURITY, agt.NEW_CODE}, [])
    assert agents == tuple(a for a in STAKEHOLDERS if a in agents)
    assert list(reasons) == list(agents) and all(reasons.values())
    assert "R-AGT-03" in reasons["architect"]


@pytest.mark.parametrize(
    ("traits", "missing"),
    [
        ({agt.NEW_CODE}, "style"),
        ({agt.SOURCE_CODE}, "build"),
        ({agt.PERFORMANCE}, "performance"),
        ({agt.SECURITY}, "security"),
        ({agt.USER_FACING}, "usability"),
        ({agt.REFACTORING}, "quality"),
        ({agt.AST_TRANSFORMATION}, "performance"),
        ({agt.PARSER_LOGIC}, "performance"),
    ],
)
def test_R_AGT_11_checklist(traits: set[str], missing: str) -> None:
    violations = verify_selection(["architect"], traits)
    assert [v.rule for v in violations] == ["R-AGT-11"]
    assert missing in violations[0].message and f"agent add TASK {missing}" in violations[0].hint
    assert verify_selection(["architect", missing], traits) == []


def test_R_AGT_11_name_and_shape_checks() -> None:
    rules = {v.rule for v in verify_selection(["style", "formatter", "config", "x"], set())}
    assert rules == {"R-AGT-01", "R-AGT-02", "R-AGT-03", "R-AGT-10"}
    assert [v.rule for v in verify_selection([], set())] == ["R-AGT-10", "R-AGT-03"]


def test_R_AGT_11_respects_negative_rules_when_given_context() -> None:
    assert verify_selection(["architect"], {agt.SECURITY}, risk=L) == []
    assert verify_selection(["architect"], {agt.NEW_CODE}, change_type=DOC) == []


# --- configured agent sets ([risk.agents], issue 3) -----------------------------------------


def test_default_agent_sets_are_the_seed_sets() -> None:
    assert AgentSets() == DEFAULT_AGENT_SETS
    assert [DEFAULT_AGENT_SETS.base(level) for level in (H, M, L)] == [
        BASE_SETS[level][0] for level in (H, M, L)
    ]
    assert select_agents(H, CODE, {agt.NEW_CODE}, []) == select_agents(
        H, CODE, {agt.NEW_CODE}, [], agent_sets=AgentSets()
    )


def test_configured_base_set_adds_agents_with_a_reason() -> None:
    sets = AgentSets(medium=("tester", "engineer", "architect", "performance"))
    assert sets.medium == ("architect", "quality", "test", "performance")  # C-11, R-AGT-10
    agents, reasons = select_agents(M, CFG, set(), ["app.yml"], agent_sets=sets)
    assert agents == ("architect", "quality", "test", "security", "performance")
    assert reasons["performance"] == "taskgate.toml [risk.agents] medium"
    assert reasons["quality"] == "R-AGT-05: MEDIUM base set"


def test_configured_trait_additions_fire_on_the_trait() -> None:
    sets = AgentSets(traits=(("performance", ("test", "builder")),))
    assert sets.traits == (("PERFORMANCE", ("test", "build")),)
    agents, reasons = select_agents(M, CODE, {agt.PERFORMANCE}, [], agent_sets=sets)
    assert {"test", "build", "performance"} <= set(agents)
    assert "taskgate.toml [risk.agents.traits] PERFORMANCE" in reasons["build"]
    assert "build" not in select_agents(M, CFG, set(), ["app.yml"], agent_sets=sets)[0]


def test_configured_sets_keep_the_negative_rules_unless_asked() -> None:
    sets = AgentSets(low=("architect", "test"), traits=(("CONFIG_FILES", ("security",)),))
    # R-AGT-09: documentation-only keeps {architect}; a LOW trait rule never brings security
    assert select_agents(L, DOC, set(), ["docs/a.md"], agent_sets=sets)[0] == ("architect",)
    assert select_agents(L, CFG, set(), ["app.yml"], agent_sets=sets)[0] == ("architect", "test")
    docs = AgentSets(traits=(("DOCS_ONLY", ("usability",)),))
    assert select_agents(L, DOC, set(), ["docs/a.md"], agent_sets=docs)[0] == (
        "architect", "usability",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("kwargs", "error", "fragment"),
    [
        ({"high": ("architect", "style", "quality")}, ValueError, "high drops build"),
        ({"low": ()}, ValueError, "R-AGT-03, C-10"),
        ({"low": ("architect", "reviewer")}, UnknownAgentError, "R-AGT-01"),
        ({"medium": ("architect", "quality", "config")}, NonStakeholderAgentError, "R-AGT-02"),
        ({"traits": (("SECRETS", ("security",)),)}, ValueError, "unknown trait 'SECRETS'"),
        ({"traits": (("AUTH", ("auditor",)),)}, UnknownAgentError, "unknown agent 'auditor'"),
    ],
)
def test_agent_sets_reject_names_drops_and_unknown_traits(
    kwargs: dict[str, Any], error: type[Exception], fragment: str
) -> None:
    with pytest.raises(error, match=re.escape(fragment)):
        AgentSets(**kwargs)


# --- dynamic addition (R-AGT-14..R-AGT-21) --------------------------------------------------


def attempt(state: State, agent: str = "security", why: str = "auth logic found") -> list[str]:
    """Rule ids refusing `agent` for a task that requires architect and quality."""
    violations = check_agent_addition(
        state=state, agent=agent, required_agents=["architect", "quality"], justification=why
    )
    return [v.rule for v in violations]


@pytest.mark.parametrize("state", sorted(ADDITION_STATES))
def test_R_AGT_14_allowed_states(state: State) -> None:
    assert attempt(state) == []


@pytest.mark.parametrize("state", [State.VALIDATION, State.REVIEW])
def test_R_AGT_14_too_late_return_to_requirements(state: State) -> None:
    [violation] = check_agent_addition(
        state=state, agent="security", required_agents=["architect"], justification="late"
    )
    assert violation.rule == "R-AGT-14" and "return to REQUIREMENTS first" in violation.hint


@pytest.mark.parametrize(
    "state", [State.INIT, State.CLASSIFIED, State.AWAITING_USER_APPROVAL, State.COMPLETE,
              State.SCOPE_NEGOTIATION, State.CLEANUP],
)  # fmt: skip
def test_R_AGT_14_other_states_rejected(state: State) -> None:
    assert attempt(state) == ["R-AGT-14"]


@pytest.mark.parametrize("why", ["", "   "])
def test_R_AGT_15_justification_required(why: str) -> None:
    violations = check_agent_addition(
        state=State.REQUIREMENTS, agent="security", required_agents=["architect"], justification=why
    )
    assert [v.rule for v in violations] == ["R-AGT-15"]


@pytest.mark.parametrize("agent", ["quality", "engineer", "Quality"])
def test_R_AGT_15_C_78_already_required_rejected(agent: str) -> None:
    assert attempt(State.IMPLEMENTATION, agent) == ["R-AGT-15"]
    [violation] = check_agent_addition(
        state=State.IMPLEMENTATION, agent=agent, required_agents=["quality"], justification="x"
    )
    assert "C-78" in violation.message


@pytest.mark.parametrize(("agent", "rule"), [("config", "R-AGT-02"), ("helper", "R-AGT-01")])
def test_R_AGT_01_02_addition_name_checks(agent: str, rule: str) -> None:
    assert attempt(State.REQUIREMENTS, agent) == [rule]


def test_R_AGT_21_cannot_re_add_a_rejecting_agent_to_bypass_it() -> None:
    violations = check_agent_addition(
        state=State.IMPLEMENTATION, agent="tester", required_agents=["architect", "test"],
        justification="more tests", rejected_agents=["test"],
    )  # fmt: skip
    assert [v.rule for v in violations] == ["R-AGT-21"]


def test_R_AGT_21_review_hint_says_additions_do_not_outvote() -> None:
    [violation] = check_agent_addition(
        state=State.REVIEW, agent="security", required_agents=["architect", "test"],
        justification="x", rejected_agents=["tester"],
    )  # fmt: skip
    assert "R-AGT-21" in violation.hint and "test" in violation.hint


@pytest.mark.parametrize(
    ("state", "effect"),
    [(State.REQUIREMENTS, "require_requirements_report"),  # R-AGT-18
     (State.SYNTHESIS, "revoke_plan_approval"),  # R-AGT-19
     (State.IMPLEMENTATION, "require_implementation_complete")],  # R-AGT-20
)  # fmt: skip
def test_R_AGT_16_to_20_addition_effects(state: State, effect: str) -> None:
    effects = addition_effects(state)
    assert effect in effects and {"create_worktree", "record_addition"} <= effects


def test_R_AGT_19_only_synthesis_revokes_plan_approval() -> None:
    assert "revoke_plan_approval" not in addition_effects(State.IMPLEMENTATION)
    assert addition_effects(State.REVIEW) == frozenset()


# --- properties -----------------------------------------------------------------------------

RISKS = st.sampled_from([H, M, L])
CHANGES = st.sampled_from([DOC, CFG, CODE])
TRAIT_SETS = st.frozensets(st.sampled_from(ALL_TRAITS))
FILES = st.lists(
    st.sampled_from(["src/a.py", "docs/a.md", "app.yml", "pom.xml", "web/x.tsx", "src/auth/x.go"]),
    max_size=4,
)


@given(RISKS, CHANGES, TRAIT_SETS, FILES)
def test_property_selection_has_architect_only_stakeholders_and_passes_checklist(
    risk: RiskLevel, change: ChangeType, traits: frozenset[str], files: list[str]
) -> None:
    agents, reasons = select_agents(risk, change, traits, files)
    assert agents[0] == "architect"
    assert set(agents) <= set(STAKEHOLDERS) and not set(agents) & NON_STAKEHOLDERS
    assert agents == tuple(a for a in STAKEHOLDERS if a in agents) and set(reasons) == set(agents)
    traits_seen = traits | detect_traits(files, "")
    assert verify_selection(agents, traits_seen, risk=risk, change_type=change) == []


@given(RISKS, CHANGES, TRAIT_SETS, st.sampled_from(ALL_TRAITS))
def test_property_more_traits_never_remove_agents_except_negative_rules(
    risk: RiskLevel, change: ChangeType, traits: frozenset[str], extra: str
) -> None:
    if extra in (agt.DOCS_ONLY, agt.CONFIG_ONLY, agt.RENAME_ONLY):
        return  # the negative rules (R-AGT-09) are the only traits that remove agents
    assert chosen(risk, change, set(traits), []) <= chosen(risk, change, {*traits, extra}, [])


@given(st.text(max_size=20))
def test_property_canonical_agent_accepts_only_stakeholders_and_aliases(name: str) -> None:
    try:
        assert canonical_agent(name) in STAKEHOLDERS
    except UnknownAgentError:
        assert name.strip().lower() not in agt.AGENT_ALIASES


AGENT_NAMES = st.lists(
    st.sampled_from([*STAKEHOLDERS, "formatter", "engineer", "tester", "builder"]), max_size=4
)


@st.composite
def agent_sets(draw: st.DrawFn) -> AgentSets:
    """Any valid configuration: each level's seed set plus extras, and per-trait additions."""
    high, medium, low = ((*draw(AGENT_NAMES), *BASE_SETS[level][0]) for level in (H, M, L))
    rules = st.tuples(st.sampled_from(ALL_TRAITS), AGENT_NAMES.map(tuple))
    return AgentSets(high=high, medium=medium, low=low, traits=tuple(draw(st.lists(rules))))


@given(RISKS, CHANGES, TRAIT_SETS, FILES, agent_sets())
def test_property_configured_sets_only_add_and_keep_every_invariant(
    risk: RiskLevel, change: ChangeType, traits: frozenset[str], files: list[str], sets: AgentSets
) -> None:
    default, _ = select_agents(risk, change, traits, files)
    agents, reasons = select_agents(risk, change, traits, files, agent_sets=sets)
    assert set(default) <= set(agents)  # configuration adds, never makes it more lenient
    assert agents[0] == "architect"  # R-AGT-03, C-10
    assert set(agents) <= set(STAKEHOLDERS)  # R-AGT-01/02
    assert agents == tuple(a for a in STAKEHOLDERS if a in agents) and set(reasons) == set(agents)
    traits_seen = traits | detect_traits(files, "")
    assert verify_selection(agents, traits_seen, risk=risk, change_type=change) == []  # R-AGT-11
    assert select_agents(risk, change, traits, files, agent_sets=sets) == (agents, reasons)


@given(st.lists(st.sampled_from(["src/a.py", "docs/a.md", "app.yml", "web/x.tsx"])), agent_sets())
def test_property_classify_with_configured_sets_contains_the_default_selection(
    paths: list[str], sets: AgentSets
) -> None:
    config = replace(DEFAULT_RISK_CONFIG, agents=sets)
    assert set(classify(paths, "add a parser").agents) <= set(
        classify(paths, "add a parser", config=config).agents
    )
