"""task.md document rules (RULES §7): sections, plan hash, reports, stakeholder list."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from taskgate.protocol import taskmd

DOC = (
    "# t\n\n## Task Objective\nx\n\n## Scope Definition\ny\n\n## Stakeholder Agent Reports\n\n"
    "### architect\n\nreport\n\n## Implementation Plan\n\n### Files to Create\n- a.py\n"
)


def test_R_AGT_22_added_agent_joins_the_stakeholder_list_without_moving_the_plan() -> None:
    out = taskmd.add_stakeholder(DOC, "t", "security")
    assert "### security\n\n_pending: t-security-requirements.md_" in out
    assert out.index("### security") < out.index("## Implementation Plan")
    assert taskmd.plan_hash(out) == taskmd.plan_hash(DOC)
    assert taskmd.add_stakeholder(out, "t", "security") == out  # idempotent
    assert taskmd.missing_sections(out) == []


def test_add_stakeholder_creates_the_section_when_missing() -> None:
    out = taskmd.add_stakeholder("# t\n", "t", "test")
    assert "## Stakeholder Agent Reports" in out and "### test" in out


def test_plan_hash_is_sha256_of_the_normalised_section() -> None:
    import hashlib

    text = "# t\n\n## Implementation Plan \u00e9\nfiles to create  \n\n  steps\n## Next\nx\n"
    section = taskmd.plan_section(text)
    assert section is not None
    normalised = "\n".join(line.rstrip() for line in section.strip().splitlines())
    assert taskmd.plan_hash(text) == hashlib.sha256(normalised.encode("utf-8")).hexdigest()


_PLAN_ATOMS = [
    "#", "##", "## ", "##\t", "###", " ", "\t", "\n", "\r", "\r\n", "x", "\u0130", "\u0131",
    "I", "\u212a", "implementation plan", "Implementation Plan", "IMPLEMENTATION PLAN",
    "IMPLEMENTAT\u0130ON PLAN", "\u0131mplementation plan", "implementation\nplan",
    "implementation  plan", "\u00e9", "\u2028", "\x85",
]  # fmt: skip


def _plan_section_by_regex(text: str) -> str | None:
    """plan_section as it was: the two regexes (issue 18, fifth pass: it reads without `re`)."""
    import re

    heading = re.compile(taskmd.PLAN_HEADING, re.IGNORECASE | re.MULTILINE).search(text)
    if heading is None:
        return None
    following = re.compile(taskmd.LEVEL2, re.MULTILINE).search(text, heading.end())
    return text[heading.start() : following.start() if following else len(text)]


@given(st.lists(st.sampled_from(_PLAN_ATOMS), max_size=16).map("".join))
@settings(max_examples=1500, deadline=None)
def test_plan_section_finds_what_the_regexes_found(text: str) -> None:
    """Headings with tabs, CR, no space, deeper levels, non-ASCII look-alikes of I (which re
    takes for i under IGNORECASE), other line separators re does not break lines at."""
    assert taskmd.plan_section(text) == _plan_section_by_regex(text)


@given(st.text(alphabet=st.sampled_from("#\t \n\rIiPp\u0130\u0131xl"), max_size=40))
@settings(max_examples=1000, deadline=None)
def test_plan_section_finds_what_the_regexes_found_on_any_text(text: str) -> None:
    assert taskmd.plan_section(text) == _plan_section_by_regex(text)


def test_plan_section_cases_that_tell_the_readings_apart() -> None:
    cases = {
        "## Implementation Plan\nA\n## Next\nB": "## Implementation Plan\nA\n",
        "##\tthe implementation plan\r\nA\r\n##\tN": "##\tthe implementation plan\r\nA\r\n",
        "##Implementation Plan\nA": None,
        "### Implementation Plan\nA": None,
        "x ## Implementation Plan": None,
        "## IMPLEMENTAT\u0130ON PLAN\nA\n##x\n## y": "## IMPLEMENTAT\u0130ON PLAN\nA\n##x\n",
        "## \u0131mplementation plan": "## \u0131mplementation plan",
        "## Implementation Plan\n": "## Implementation Plan\n",
        "## Implementation Plan": "## Implementation Plan",
        "## a\n## Implementation Plan\n##  \n": "## Implementation Plan\n",
    }
    for text, section in cases.items():
        assert taskmd.plan_section(text) == section == _plan_section_by_regex(text), text
