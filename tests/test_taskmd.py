"""task.md document rules (RULES §7): sections, plan hash, reports, stakeholder list."""

from __future__ import annotations

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
