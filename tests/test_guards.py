"""Every transition guard, one test (or more) per rule id it enforces."""

from __future__ import annotations

from dataclasses import replace

from taskgate.protocol import checklist, guards, taskmd
from taskgate.protocol.facts import AgentFacts, Approval, LogEntry, TaskFacts, Validation
from taskgate.protocol.states import AgentStatus, ChangeType, Decision, RiskLevel, State
from taskgate.protocol.workflow import state_path

S = State
FULL = state_path(RiskLevel.HIGH, ChangeType.CODE)
SKELETON = "## Task Objective\nx\n## Scope Definition\ny\n## Stakeholder Agent Reports\n"
PLAN = SKELETON + "## Implementation Plan\nsteps\n"
LOG = (
    LogEntry(S.INIT, S.CLASSIFIED, "2026-01-01T00:00:00Z"),
    LogEntry(S.CLASSIFIED, S.REQUIREMENTS, "2026-01-01T00:01:00Z"),
    LogEntry(S.REQUIREMENTS, S.SYNTHESIS, "2026-01-01T00:02:00Z"),
)


def agent(name: str, **kw: object) -> AgentFacts:
    base = {
        "worktree_exists": True,
        "status": AgentStatus.COMPLETE,
        "report_bytes": 200,
        "task_commits": 1,
    }
    base.update(kw)
    return AgentFacts(name=name, **base)  # type: ignore[arg-type]


def facts(state: State, **kw: object) -> TaskFacts:
    base: dict[str, object] = {
        "task": "t",
        "session_id": "s",
        "owner": "s",
        "state": state,
        "path": FULL,
        "required_agents": ("architect", "quality"),
        "agents": {"architect": agent("architect"), "quality": agent("quality")},
        "task_worktree_exists": True,
        "task_worktree_branch": "t",
        "cwd_in_task_worktree": True,
        "task_md": SKELETON,
        "risk_level": RiskLevel.HIGH,
        "log": LOG[:2],
    }
    base.update(kw)
    return TaskFacts(**base)  # type: ignore[arg-type]


def rules(violations: list[guards.Violation]) -> list[str]:
    return [v.rule for v in violations]


def test_R_LCK_22_empty_session() -> None:
    assert rules(guards.ownership(facts(S.INIT, session_id=""))) == ["R-LCK-22"]


def test_R_TRN_07_foreign_owner() -> None:
    v = guards.ownership(facts(S.INIT, owner="other"))
    assert rules(v) == ["R-TRN-07"] and "Cannot update lock owned by other" in v[0].message


def test_R_TRN_09_init_gate() -> None:
    assert guards.init_to_classified(facts(S.INIT)) == []
    assert "R-TRN-09" in rules(guards.init_to_classified(facts(S.INIT, in_todo=False)))
    assert "R-TRN-09" in rules(guards.init_to_classified(facts(S.INIT, cwd_in_task_worktree=False)))
    assert "R-WTB-01" in rules(guards.init_to_classified(facts(S.INIT, task_worktree_branch="x")))
    assert guards.init_to_classified(facts(S.INIT, cwd_in_task_worktree=None)) == []


def test_R_TRN_10_classified_gate() -> None:
    assert guards.classified_to_requirements(facts(S.CLASSIFIED)) == []
    no_risk = guards.classified_to_requirements(facts(S.CLASSIFIED, risk_level=None))
    assert "R-TRN-10" in rules(no_risk)
    missing_wt = facts(S.CLASSIFIED, agents={"architect": agent("architect")})
    assert "R-WTB-03" in rules(guards.classified_to_requirements(missing_wt))
    no_md = guards.classified_to_requirements(facts(S.CLASSIFIED, task_md=None))
    assert "task.md not created by CLASSIFIED state" in no_md[0].message
    section = guards.classified_to_requirements(facts(S.CLASSIFIED, task_md="## Task Objective"))
    assert rules(section) == ["R-DOC-02", "R-DOC-02"]
    cwd = guards.classified_to_requirements(facts(S.CLASSIFIED, cwd_in_task_worktree=False))
    assert cwd[0].message == "CRITICAL ERROR: Not in task worktree!"


def _nine(**kw: object) -> list[guards.Violation]:
    state = kw.pop("state", S.REQUIREMENTS)
    assert isinstance(state, State)
    return checklist.requirements_checklist(facts(state, **kw))


def test_D_DOC_2_nine_checks_in_order() -> None:
    assert _nine() == []
    assert _nine(state=S.SYNTHESIS)[0].message.startswith("[1/9]")
    assert _nine(owner="x")[0].message.startswith("[2/9]")
    assert _nine(cwd_in_task_worktree=False)[0].message.startswith("[3/9]")
    assert _nine(task_md=None)[0].message.startswith("[4/9]")
    assert _nine(required_agents=())[0].message == "[5/9] FAILED: No required_agents in lock file"
    working = {"architect": agent("architect", status=AgentStatus.WORKING),
               "quality": agent("quality")}  # fmt: skip
    six = _nine(agents=working)
    assert six[0].message.startswith("[6/9]") and "GATE FAILED: 1/2 agents complete" in (
        six[0].message
    )  # R-AST-15
    small = {"architect": agent("architect", report_bytes=99), "quality": agent("quality")}
    assert "too small (99 bytes)" in _nine(agents=small)[0].message  # R-DOC-04
    exact = {"architect": agent("architect", report_bytes=100), "quality": agent("quality")}
    assert _nine(agents=exact) == []
    assert (
        _nine(log=LOG[:1])[0].message
        == "[8/9] FAILED: Missing CLASSIFIED -> REQUIREMENTS transition"
    )


def test_R_DOC_06_stops_at_first_failure() -> None:
    v = _nine(task_md=None, required_agents=())
    assert len(v) == 1 and v[0].message.startswith("[4/9]")


def test_R_DOC_04_report_sizes() -> None:
    assert taskmd.report_problem(None) == "report missing"
    assert taskmd.report_problem(0) == "report is empty"
    assert taskmd.report_problem(99) == "too small (99 bytes)"
    assert taskmd.report_problem(100) is None


def _synthesis(**kw: object) -> TaskFacts:
    h = taskmd.plan_hash(PLAN)
    assert h is not None
    base: dict[str, object] = {
        "task_md": PLAN,
        "plan_hash": h,
        "plan_approval": Approval(h, "2026-01-01T00:03:00Z", "2026-01-01T00:04:00Z"),
        "log": LOG,
    }
    base.update(kw)
    return facts(S.SYNTHESIS, **base)


def test_D_DOC_3_entry_guards_pass() -> None:
    assert guards.synthesis_to_implementation(_synthesis()) == []


def test_R_CKP_03_no_approval() -> None:
    v = guards.synthesis_to_implementation(_synthesis(plan_approval=None))
    assert rules(v) == ["R-CKP-03"]
    assert v[0].message == "ENTRY GUARD FAILED: User plan approval not obtained"


def test_R_CKP_15_plan_edited_after_approval() -> None:
    edited = PLAN + "more\n"
    v = guards.synthesis_to_implementation(
        _synthesis(task_md=edited, plan_hash=taskmd.plan_hash(edited))
    )
    assert rules(v) == ["R-CKP-15"]


def test_R_CKP_04_approval_before_presentation() -> None:
    h = taskmd.plan_hash(PLAN)
    assert h
    early = Approval(h, "2026-01-01T00:05:00Z", "2026-01-01T00:04:00Z")
    assert rules(guards.synthesis_to_implementation(_synthesis(plan_approval=early))) == [
        "R-CKP-04"
    ]


def test_R_DOC_09_every_agent_needs_a_report() -> None:
    agents = {"architect": agent("architect"), "quality": agent("quality", report_bytes=None)}
    assert "R-DOC-09" in rules(guards.synthesis_to_implementation(_synthesis(agents=agents)))


def test_R_DOC_10_plan_section_required() -> None:
    v = guards.synthesis_to_implementation(_synthesis(task_md=SKELETON, plan_hash=None))
    assert "R-DOC-10" in rules(v)


def test_R_TRN_13_skipped_state() -> None:
    v = guards.synthesis_to_implementation(_synthesis(log=LOG[:1] + LOG[2:]))
    assert "R-TRN-13" in rules(v)


def test_plan_hash_ignores_other_sections() -> None:
    other = PLAN.replace("## Task Objective\nx", "## Task Objective\nchanged")
    assert taskmd.plan_hash(other) == taskmd.plan_hash(PLAN)
    assert taskmd.plan_hash(PLAN + "x") != taskmd.plan_hash(PLAN)
    assert taskmd.plan_hash(SKELETON) is None


def test_R_DOC_11_plan_components() -> None:
    assert len(taskmd.missing_plan_components("")) == 6
    full = (
        "Files to Create\nAPI Design\nBehavior Specifications\nTest Cases\n"
        "Implementation Sequence\nDecision Log"
    )
    assert taskmd.missing_plan_components(full) == []


def test_R_TRN_14_all_agents_complete() -> None:
    f = facts(S.IMPLEMENTATION)
    assert guards.implementation_to_validation(f) == []
    working = replace(f, agents={**f.agents, "quality": agent("quality", status=None)})
    assert rules(guards.implementation_to_validation(working)) == ["R-TRN-14"]
    more = replace(f, agents={**f.agents, "quality": agent("quality", work_remaining=True)})
    assert rules(guards.implementation_to_validation(more)) == ["R-AST-20"]


def test_R_TRN_14_work_committed_and_merged() -> None:
    f = facts(S.IMPLEMENTATION)
    unmerged = replace(f, agents={**f.agents, "quality": agent("quality", unmerged_commits=2)})
    v = guards.implementation_to_validation(unmerged)
    assert rules(v) == ["R-WTB-06"] and "taskgate merge t quality" in v[0].hint
    idle = replace(f, agents={**f.agents, "quality": agent("quality", task_commits=0)})
    v = guards.implementation_to_validation(idle)
    assert rules(v) == ["R-TRN-14"] and "--no-change" in v[0].hint
    said = replace(
        f, agents={**f.agents, "quality": agent("quality", task_commits=0, no_change=True)}
    )
    assert guards.implementation_to_validation(said) == []


def test_R_CKP_10_empty_change_never_reaches_the_review() -> None:
    approved = {a: agent(a, decision=Decision.APPROVED) for a in ("architect", "quality")}
    f = facts(S.REVIEW, agents=approved, diff_files=())
    assert rules(guards.review_to_awaiting(f)) == ["R-CKP-10"]
    assert guards.review_to_awaiting(replace(f, noop_approved=True)) == []
    assert guards.review_to_awaiting(replace(f, diff_files=("a.py",))) == []


def test_R_WFV_08_skip_path_change_must_be_documentation() -> None:
    docs = facts(S.SYNTHESIS, risk_level=RiskLevel.LOW, diff_files=("README.md", "docs/x.md"))
    assert guards.doc_only_change(docs) == []
    code = replace(docs, diff_files=("README.md", "src/lib.py"))
    v = guards.doc_only_change(code)
    assert rules(v) == ["R-WFV-08"] and "src/lib.py" in v[0].message
    assert "classify t --raise" in v[0].hint


def test_R_TRN_15_no_unvalidated_code_reaches_main() -> None:
    f = facts(S.AWAITING_USER_APPROVAL, head_sha="abc", diff_files=("src/lib.py",))
    assert rules(guards.validated_change(f)) == ["R-TRN-15"]
    assert guards.validated_change(replace(f, validated_heads=frozenset({"abc"}))) == []
    assert guards.validated_change(replace(f, diff_files=("README.md",))) == []


def test_R_TRN_15_fresh_validation_for_head() -> None:
    entered = {S.VALIDATION: "2026-01-01T01:00:00Z"}
    ok = Validation("abc", True, "2026-01-01T01:01:00Z")
    f = facts(S.VALIDATION, head_sha="abc", entered_at=entered, validation=ok)
    assert guards.validation_to_review(f) == []
    stale = replace(f, validation=replace(ok, at="2026-01-01T00:59:00Z"))
    assert rules(guards.validation_to_review(stale)) == ["R-TRN-15"]
    failed = replace(f, validation=replace(ok, success=False))
    assert rules(guards.validation_to_review(failed)) == ["R-TRN-15"]
    moved = replace(f, head_sha="def")
    assert rules(guards.validation_to_review(moved)) == ["R-TRN-15"]
    assert rules(guards.validation_to_review(replace(f, validation=None))) == ["R-TRN-15"]


def test_R_TRN_16_unanimous() -> None:
    approved = {a: agent(a, decision=Decision.APPROVED) for a in ("architect", "quality")}
    assert guards.review_to_awaiting(facts(S.REVIEW, agents=approved)) == []
    pending = {**approved, "quality": agent("quality")}
    assert rules(guards.review_to_awaiting(facts(S.REVIEW, agents=pending))) == ["R-TRN-16"]


def test_R_TRN_22_review_back_needs_a_rejection() -> None:
    approved = {a: agent(a, decision=Decision.APPROVED) for a in ("architect", "quality")}
    assert rules(guards.review_to_implementation(facts(S.REVIEW, agents=approved))) == ["R-TRN-22"]
    rejected = {**approved, "quality": agent("quality", decision=Decision.REJECTED)}
    assert guards.review_to_implementation(facts(S.REVIEW, agents=rejected)) == []


def test_R_TRN_18_awaiting_to_complete() -> None:
    ok = Approval("abc", "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z")
    base = facts(
        S.AWAITING_USER_APPROVAL,
        head_sha="abc",
        checkpoint_sha="abc",
        change_approval=ok,
        archival_committed=True,
        merged_to_main=True,
    )
    assert guards.awaiting_to_complete(base) == []
    none = guards.awaiting_to_complete(replace(base, change_approval=None))
    assert none[0].message == "CHECKPOINT VIOLATION: User approval not obtained"  # R-CKP-12
    moved = guards.awaiting_to_complete(replace(base, head_sha="def"))
    assert rules(moved) == ["R-CKP-13"]
    assert rules(guards.awaiting_to_complete(replace(base, archival_committed=False))) == [
        "R-CMP-02"
    ]
    assert rules(guards.awaiting_to_complete(replace(base, merged_to_main=False))) == ["R-CMP-06"]


def test_R_TRN_19_cleanup_needs_merge_and_complete_audit() -> None:
    f = facts(S.COMPLETE, merged_to_main=True)
    assert guards.complete_to_cleanup(f) == []
    gaps = replace(f, audit_complete_problems=("no commits recorded",))
    assert rules(guards.complete_to_cleanup(gaps)) == ["R-CLN-08"]
    assert rules(guards.complete_to_cleanup(replace(f, merged_to_main=False))) == ["R-CLN-01"]


def test_R_REV_04_and_05_scope_negotiation() -> None:
    assert rules(guards.to_scope_negotiation(facts(S.REVIEW))) == ["R-REV-04"]
    assert guards.to_scope_negotiation(facts(S.REVIEW, scope_negotiation_permitted=True)) == []
    assert rules(guards.scope_to_synthesis(facts(S.SCOPE_NEGOTIATION))) == ["R-REV-05"]
