"""Risk classification and workflow variants (RULES §2 WFV, §3 RSK; C-07..C-09, C-37..C-40)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskgate.protocol.risk import (
    DEFAULT_RISK_CONFIG,
    ESCALATION_KEYWORDS,
    FULL_PATH,
    SKIP_PATH,
    Classification,
    FileRisk,
    RiskConfig,
    RiskPattern,
    check_change_type_claim,
    classify,
    compile_glob,
    detect_change_type,
    escalation_keywords,
    state_path,
)
from taskgate.protocol.risk_config import parse_risk_config
from taskgate.protocol.states import ChangeType, RiskLevel, State

H, M, L = RiskLevel.HIGH, RiskLevel.MEDIUM, RiskLevel.LOW
DOC, CFG, CODE = ChangeType.DOCUMENTATION_ONLY, ChangeType.CONFIG_ONLY, ChangeType.CODE


def level(path: str, config: RiskConfig = DEFAULT_RISK_CONFIG) -> RiskLevel:
    return config.classify_file(path).level


def first_match(path: str) -> RiskPattern | None:
    """The slow reference for the combined matcher: try each pattern in precedence order."""
    for entry in DEFAULT_RISK_CONFIG.patterns:
        excluded = any(compile_glob(x).match(path) for x in entry.exclude)
        if compile_glob(entry.pattern).match(path) and not excluded:
            return entry
    return None


# --- per-file tables (R-RSK-02..R-RSK-07) ----------------------------------------------------

R_RSK_02 = [
    "src/main/java/a/B.java", "pom.xml", "core/pom.xml", ".github/workflows/ci.yml",
    "lib/security/Policy.txt", "checkstyle.xml", "config/checkstyle-suppressions.xml",
    "CLAUDE.md", "docs/project/task-protocol.md", "docs/project/critical-rules.md",
]  # fmt: skip
R_RSK_03 = [
    "src/test/java/a/BTest.java", "docs/code-style/java-claude.md",
    "app/src/main/resources/conf/app.properties", "tools/FooTests.java",
]  # fmt: skip
R_RSK_04 = ["notes.md", "docs/guide/intro.md", "todo.md", "out.txt", "build.log", "sub/README",
            "README.rst"]  # fmt: skip


@pytest.mark.parametrize("path", R_RSK_02)
def test_R_RSK_02_high_files(path: str) -> None:
    assert level(path) is H


@pytest.mark.parametrize("path", R_RSK_03)
def test_R_RSK_03_medium_files(path: str) -> None:
    assert level(path) is M


@pytest.mark.parametrize("path", R_RSK_04)
def test_R_RSK_04_low_files(path: str) -> None:
    assert level(path) is L


@pytest.mark.parametrize(
    "path", ["CLAUDE.md", "task-protocol.md", "critical-rules.md", "notes/task-protocol.md",
             "docs/guide/critical-rules.md", "docs/task-protocol.md"],
)  # fmt: skip
def test_R_RSK_05_protected_docs_never_low(path: str) -> None:
    assert level(path) is H


def test_R_RSK_05_copies_outside_docs_project_match_no_pattern() -> None:
    assert DEFAULT_RISK_CONFIG.classify_file("task-protocol.md").pattern is None


@pytest.mark.parametrize(
    ("path", "expected", "pattern"),
    [
        ("src/test/java/security/AuthTest.java", H, "**/security/**"),
        ("src/test/java/util/FooTest.java", M, "src/test/**/*.java"),
        ("docs/code-style/x.md", M, "docs/code-style/**"),
        ("src/main/java/a/B.java", H, "src/**/*.java"),
        ("lib/security/README.md", H, "**/security/**"),
        ("unknown.bin", H, None),
    ],
)
def test_R_RSK_06_precedence(path: str, expected: RiskLevel, pattern: str | None) -> None:
    assert DEFAULT_RISK_CONFIG.classify_file(path) == FileRisk(path, expected, pattern)


@pytest.mark.parametrize(
    ("raw", "normal"), [("./README.md", "README.md"), ("docs//a.md", "docs/a.md"),
                        ("src/./x/../y.py", "src/y.py"), (" notes.md ", "notes.md")],
)  # fmt: skip
def test_R_RSK_07_paths_are_normalised(raw: str, normal: str) -> None:
    assert DEFAULT_RISK_CONFIG.classify_file(raw).path == normal


@pytest.mark.parametrize("path", ["../outside.md", "/etc/notes.md", "a/../../x.md"])
def test_C_37_paths_outside_the_repository_are_high(path: str) -> None:
    assert DEFAULT_RISK_CONFIG.classify_file(path) == FileRisk(path.strip(), H, None)


def test_R_RSK_07_combined_matcher_agrees_with_first_matching_pattern() -> None:
    paths = R_RSK_02 + R_RSK_03 + R_RSK_04 + ["src/app.py", "tests/test_x.py", "a/b/c.go", "x"]
    for path in paths:
        assert DEFAULT_RISK_CONFIG.match(path) == first_match(path), path


# --- language-neutral defaults --------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        # Python
        ("src/pkg/mod.py", H), ("tests/test_mod.py", M), ("pkg/mod_test.py", M),
        ("conftest.py", M), ("pyproject.toml", H), ("setup.py", H), ("requirements-dev.txt", H),
        ("docs/index.rst", L), ("README.md", L), ("src/pkg/auth/login.py", H),
        # TypeScript
        ("src/index.ts", H), ("src/app.test.ts", M), ("web/Button.spec.tsx", M),
        ("src/__tests__/x.ts", M), ("package.json", H), ("tsconfig.json", H),
        # Go
        ("cmd/app/main.go", H), ("internal/x/x_test.go", M), ("go.mod", H), ("go.sum", H),
        # others
        ("Cargo.toml", H), ("Makefile", H), (".gitlab-ci.yml", H), (".circleci/config.yml", H),
        ("app/security/keys.yaml", H), ("LICENSE", L), ("docs/img/arch.png", L),
        ("docs/conf.py", H), ("taskgate.toml", H), ("AGENTS.md", H), ("ruff.toml", H),
    ],
)  # fmt: skip
def test_language_neutral_defaults(path: str, expected: RiskLevel) -> None:
    assert level(path) is expected


# --- task risk (R-RSK-08..R-RSK-12) ---------------------------------------------------------


def test_R_RSK_08_empty_list_is_high() -> None:
    result = classify([])
    assert result.risk_level is H and result.path == FULL_PATH
    assert any("no files" in line for line in result.explain())


@pytest.mark.parametrize(
    ("paths", "expected"),
    [(["notes.md"], L), (["notes.md", "tools/FooTests.java"], M),
     (["notes.md", "tools/FooTests.java", "pom.xml"], H), (["notes.md", "x.unknown"], H)],
)  # fmt: skip
def test_R_RSK_08_task_risk_is_the_maximum(paths: list[str], expected: RiskLevel) -> None:
    result = classify(paths)
    assert result.risk_level is expected and result.method == "pattern match"


@pytest.mark.parametrize(
    ("paths", "text", "expected"),
    [
        (["notes.md"], "Update API docs", M),
        (["notes.md"], "SECURITY review, breaking API, new database state", M),  # one step only
        (["tools/FooTests.java"], "fix a concurrent bug", H),
        (["pom.xml"], "security", H),
        (["notes.md"], "Fix the Architecture overview", M),
    ],
)
def test_R_RSK_09_keywords_escalate_exactly_one_level(
    paths: list[str], text: str, expected: RiskLevel
) -> None:
    result = classify(paths, text)
    assert result.risk_level is expected
    assert any(t.startswith("keyword:") for t in result.triggers)


def test_R_RSK_09_keyword_trigger_method_only_when_the_level_rose() -> None:
    assert classify(["notes.md"], "api").method == "keyword trigger"
    assert classify(["pom.xml"], "api").method == "pattern match"


def test_R_RSK_09_cross_module_counts_toward_the_same_single_step() -> None:
    result = classify(["core/src/main/java/A.java", "api/src/main/java/B.java"])
    assert "content:cross-module" in result.triggers
    low = classify(["tools/FooTests.java", "other/BarTests.java"], "state api")
    assert low.risk_level is H  # MEDIUM + keywords → HIGH, never further


def test_R_RSK_09_one_module_or_tests_are_not_cross_module() -> None:
    assert "content:cross-module" not in classify(["src/pkg/a.py", "src/pkg/b/c.py"]).triggers
    assert "content:cross-module" not in classify(["src/pkg/a.py", "tests/test_a.py"]).triggers


def test_R_RSK_09_security_paths_are_a_content_trigger() -> None:
    result = classify(["docs/password-reset.md"])
    assert result.triggers == ("content:security",) and result.risk_level is M


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Update API docs", ("api",)),
        ("capital statement apiary", ()),
        ("the State-machine", ("state",)),
        ("Security: architecture & DEPENDENCY", ("security", "architecture", "dependency")),
        ("api_key and stateful", ()),
        ("", ()),
    ],
)
def test_R_RSK_10_whole_word_case_insensitive(text: str, found: tuple[str, ...]) -> None:
    assert escalation_keywords(text) == found
    assert (classify(["notes.md"], text).risk_level is M) is bool(found)


def test_C_40_nine_keywords() -> None:
    assert len(ESCALATION_KEYWORDS) == 9
    assert {"security", "architecture", "breaking"} <= set(ESCALATION_KEYWORDS)


@pytest.mark.parametrize("target", [H, M, L])
def test_R_RSK_11_override_sets_exactly_the_level(target: RiskLevel) -> None:
    result = classify(["pom.xml"], "security", risk_override=target)
    assert result.risk_level is target and result.method == "manual override"
    assert result.computed_level is H
    assert f"override:risk-level={target}" in result.triggers
    assert State.SYNTHESIS in result.path and State.AWAITING_USER_APPROVAL in result.path


def test_R_RSK_11_invalid_override_is_an_error() -> None:
    with pytest.raises(ValueError, match="R-RSK-11"):
        classify(["notes.md"], risk_override="EXTREME")


def test_R_RSK_11_lowering_is_explained_as_a_logged_override() -> None:
    lines = classify(["src/a.py"], risk_override=L).explain()
    assert any("HIGH → LOW" in line and "R-WFV-11" in line for line in lines)


def test_R_RSK_12_force_full_protocol() -> None:
    result = classify(["notes.md"], force_full_protocol=True, risk_override=L)
    assert result.risk_level is H and result.path == FULL_PATH and result.variant == "FULL"
    assert result.method == "manual override"
    assert "override:force-full-protocol" in result.triggers


@pytest.mark.parametrize(("risk", "variant"), [(H, "FULL"), (M, "ABBREVIATED"), (L, "STREAMLINED")])
def test_R_RSK_13_variant_and_log_fields(risk: RiskLevel, variant: str) -> None:
    result = classify(["src/a.py"], risk_override=risk)
    assert result.variant == variant
    data = result.to_json()
    assert data["risk_level"] == str(risk) and data["variant"] == variant
    assert data["method"] in ("pattern match", "keyword trigger", "manual override")
    assert {"triggers", "agents", "agent_reasons", "files", "path", "change_type"} <= set(data)


def test_R_RSK_14_explain_names_the_deciding_pattern_per_file_and_agent_reasons() -> None:
    result = classify(["src/app.py", "x.bin"])
    lines = result.explain()
    assert re.fullmatch(r"src/app\.py +HIGH +\(pattern \*\*/\*\.py\)", lines[0])
    assert "no pattern matched" in lines[1] and "C-37" in lines[1]
    assert any(line.startswith("agent architect") and "R-AGT-03" in line for line in lines)


def test_R_RSK_01_agents_are_stakeholders_and_classification_is_deterministic() -> None:
    first = classify(["b.py", "a.md", "./b.py"], "Add a login page")
    second = classify(["a.md", "b.py"], "Add a login page")
    assert first == second and [f.path for f in first.files] == ["a.md", "b.py"]
    assert first.agents[0] == "architect" and set(first.agent_reasons) == set(first.agents)


# --- workflow variants (D-WFV-3, R-WFV-01..R-WFV-09) ------------------------------------------


@pytest.mark.parametrize(
    ("risk", "change_type", "expected"),
    [
        *((H, c, FULL_PATH) for c in (DOC, CFG, CODE, None)),  # R-WFV-01, R-WFV-07
        (M, DOC, SKIP_PATH), (M, CFG, SKIP_PATH),  # R-WFV-02, C-09
        (M, CODE, FULL_PATH), (M, None, FULL_PATH),  # R-WFV-03
        *((L, c, SKIP_PATH) for c in (DOC, CFG, CODE, None)),  # R-WFV-04
        *((None, c, FULL_PATH) for c in (DOC, CFG, CODE, None)),  # R-WFV-05
    ],
)  # fmt: skip
def test_D_WFV_3_resolved_paths(
    risk: RiskLevel | None, change_type: ChangeType | None, expected: tuple[State, ...]
) -> None:
    assert state_path(risk, change_type) == expected


def test_R_WFV_01_full_path_has_the_change_review_between_review_and_complete() -> None:
    assert [s.value for s in FULL_PATH] == [
        "INIT", "CLASSIFIED", "REQUIREMENTS", "SYNTHESIS", "IMPLEMENTATION", "VALIDATION",
        "REVIEW", "AWAITING_USER_APPROVAL", "COMPLETE", "CLEANUP",
    ]  # fmt: skip
    assert [s.value for s in SKIP_PATH] == [
        "INIT", "CLASSIFIED", "REQUIREMENTS", "SYNTHESIS", "AWAITING_USER_APPROVAL", "COMPLETE",
        "CLEANUP",
    ]  # fmt: skip


def test_R_WFV_05_unknown_risk_string_gets_the_high_path() -> None:
    assert state_path("EXTREME", DOC) == FULL_PATH  # type: ignore[arg-type]


def test_R_WFV_07_change_type_claim_cannot_shorten_high() -> None:
    result = classify(["docs/code-style/x.md"], "security architecture")
    assert result.risk_level is H and result.change_type is DOC and result.path == FULL_PATH


@pytest.mark.parametrize(
    ("paths", "expected"),
    [
        (["docs/code-style/a.md"], DOC),
        (["app/src/main/resources/a.properties"], CFG),
        (["app/src/main/resources/a.properties", "docs/code-style/a.md"], CFG),
        (["src/test/java/ATest.java"], CODE),
        (["pom.xml"], CODE),  # C-39: build files never skip
        (["CLAUDE.md"], CODE),  # HIGH files never skip
        (["app/resources/auth/a.properties"], CODE),
        ([], CODE),
    ],
)
def test_R_WFV_09_change_type_detection(paths: list[str], expected: ChangeType) -> None:
    files = [DEFAULT_RISK_CONFIG.classify_file(p) for p in paths]
    assert detect_change_type(files) is expected


def test_R_WFV_09_medium_config_only_gets_the_skip_path() -> None:
    result = classify(["app/src/main/resources/conf/app.properties"])
    assert result.risk_level is M and result.path == SKIP_PATH


def test_R_WFV_09_build_files_with_medium_user_pattern_are_never_config_only() -> None:
    config = parse_risk_config({"medium": ["package.json", "config/**"], "replace_defaults": True})
    files = [config.classify_file("package.json"), config.classify_file("config/app.yml")]
    assert [f.level for f in files] == [M, M]
    assert detect_change_type(files) is CODE
    assert detect_change_type(files[1:]) is CFG


@pytest.mark.parametrize(
    ("claimed", "paths", "rules"),
    [
        (DOC, ["notes.md"], []),
        (DOC, ["notes.md", "src/a.py"], ["R-WFV-09"]),
        (CFG, ["pom.xml"], ["R-WFV-09"]),
        (DOC, [], ["R-WFV-09"]),
        (CODE, ["pom.xml"], []),
    ],
)
def test_R_WFV_09_change_type_claims(
    claimed: ChangeType, paths: list[str], rules: list[str]
) -> None:
    files = [DEFAULT_RISK_CONFIG.classify_file(p) for p in paths]
    assert [v.rule for v in check_change_type_claim(claimed, files)] == rules


# --- properties ----------------------------------------------------------------------------

SEGMENTS = st.sampled_from(
    ["src", "main", "java", "test", "tests", "docs", "security", "resources", "core", "pkg", "a"]
)
NAMES = st.sampled_from(
    ["A.java", "ATest.java", "x.py", "test_x.py", "x_test.go", "a.ts", "a.test.ts", "notes.md",
     "README", "CLAUDE.md", "pom.xml", "app.properties", "out.txt", "build.log", "go.mod",
     "data.bin", "ci.yml", "task-protocol.md"]
)  # fmt: skip
PATHS = st.builds(lambda d, n: "/".join([*d, n]), st.lists(SEGMENTS, max_size=4), NAMES)
TEXT = st.text(alphabet=st.sampled_from(list("abcdeilnoprstuy API-")), max_size=30)


@given(st.lists(PATHS, min_size=1, max_size=6), PATHS, TEXT)
def test_property_adding_a_file_never_lowers_the_risk(
    paths: list[str], extra: str, text: str
) -> None:
    before = classify(paths, text).risk_level
    assert classify([*paths, extra], text).risk_level.rank >= before.rank


@given(st.lists(PATHS, max_size=6), TEXT, st.sampled_from(ESCALATION_KEYWORDS))
def test_property_an_escalation_keyword_never_lowers_the_risk(
    paths: list[str], text: str, keyword: str
) -> None:
    before = classify(paths, text)
    after = classify(paths, f"{text} {keyword.upper()}")
    assert after.risk_level.rank >= before.risk_level.rank
    assert after.risk_level.rank <= max(before.risk_level.rank + 1, 2)


@given(
    st.lists(PATHS, max_size=6),
    TEXT,
    st.sampled_from([None, H, M, L]),
    st.booleans(),
)
def test_property_every_path_keeps_both_checkpoints(
    paths: list[str], text: str, override: RiskLevel | None, force: bool
) -> None:
    result: Classification = classify(
        paths, text, risk_override=override, force_full_protocol=force
    )
    path = result.path
    assert path[:4] == (State.INIT, State.CLASSIFIED, State.REQUIREMENTS, State.SYNTHESIS)
    assert path.index(State.AWAITING_USER_APPROVAL) < path.index(State.COMPLETE)
    assert path[-2:] == (State.COMPLETE, State.CLEANUP)
    assert result.agents[0] == "architect"


@given(st.sampled_from([None, H, M, L]), st.sampled_from([None, DOC, CFG, CODE]))
def test_property_state_path_contains_synthesis_and_change_review(
    risk: RiskLevel | None, change_type: ChangeType | None
) -> None:
    path = state_path(risk, change_type)
    assert path[:4] == (State.INIT, State.CLASSIFIED, State.REQUIREMENTS, State.SYNTHESIS)
    assert State.AWAITING_USER_APPROVAL in path[4:]
    assert path.index(State.AWAITING_USER_APPROVAL) + 1 == path.index(State.COMPLETE)
    assert State.SCOPE_NEGOTIATION not in path  # C-07: off-path state


@given(st.lists(PATHS, min_size=1, max_size=8))
def test_property_combined_matcher_equals_pattern_by_pattern(paths: list[str]) -> None:
    for path in paths:
        assert DEFAULT_RISK_CONFIG.match(path) == first_match(path)
