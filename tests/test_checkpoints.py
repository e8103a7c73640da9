"""Presentations and approvals bound to what was shown (RULES §9; R-DOC-12, R-CKP-03..18)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import Repo, git, make_repo
from flow import (
    PASSING_BUILD,
    PLAN,
    agents_of,
    approve_plan,
    commit_in,
    to_awaiting,
    to_implementation,
    to_synthesis,
)
from taskgate.engine import checkpoints
from taskgate.engine.core import Engine
from taskgate.engine.workspace import find_workspace
from taskgate.errors import Refused
from taskgate.protocol.presentation import (
    REQUIRED_CRITERIA,
    ChangeView,
    parse_plan,
    render_changes,
    render_plan,
)

FULL_PLAN = """# add-login: Add a login page

## Task Objective

users cannot sign in yet

## Implementation Plan

### Problem Statement
Users cannot sign in, so every page is public.

### Proposed Solution
Add a login form backed by an in-memory session store.

### Benefits
- Pages can be restricted to signed-in users

### Files to Create
- `src/auth/login.py` - the login form handler
- tests/test_login.py: the tests

### Files to Modify
| File Path | Purpose | Changes |
|-----------|---------|---------|
| `src/app.py` | routing | Modify: add /login |

### API Design
`def login(user: str, password: str) -> Session`

### Behavior Specifications
| Scenario | Input | Expected Behavior |
|---|---|---|
| wrong password | bad pw | AuthError |

### Test Cases
- test_login_ok
- test_login_wrong_password

### Implementation Sequence
1. **Phase 1: Form** - build the form (Agent: quality)
2. **Phase 2: Tests** - the test agent writes the tests
3. **Phase 3: Docs** - someone documents it

### Success Criteria
- [ ] A user with the right password gets a session

### Key Design Decisions
| Decision | Choice | Rationale |
|---|---|---|
| Session store | memory | no database yet |

### Risks and Mitigations
| Risk | Likelihood | Mitigation |
|---|---|---|
| brute force | Medium | rate limit later |
"""


def render(text: str = FULL_PLAN) -> str:
    view = parse_plan(text, ("architect", "quality", "test"))
    return render_plan(
        view,
        task="add-login",
        title="Add a login page",
        risk_level="HIGH",
        agents=("architect", "quality", "test"),
        task_md_path="/ws/tasks/add-login/task.md",
    )


# --- pure rendering --------------------------------------------------------------------------


def test_r_doc_12_plan_summary_follows_purpose_approach_benefits() -> None:
    text = render()
    order = [
        "## Implementation Plan Summary",
        "**Task**: add-login - Add a login page",
        "**Risk Level**: HIGH",
        "**Stakeholder Agents**: architect, quality, test",
        "### Problem Statement",
        "Users cannot sign in",
        "### Proposed Solution",
        "in-memory session store",
        "### Benefits",
        "### Scope Summary",
        "### Key Design Decisions",
        "### Files to Create/Modify",
        "### Key API Signatures",
        "def login(user: str, password: str) -> Session",
        "### Behavioral Summary",
        "### Implementation Phases",
        "### Success Criteria",
        "### Risks and Mitigations",
        "**Full implementation details**: See `/ws/tasks/add-login/task.md`",
        '- "approved" / "proceed" to begin implementation',
    ]
    positions = [text.index(part) for part in order]
    assert positions == sorted(positions)


def test_r_doc_12_file_manifest_and_scope_counts() -> None:
    view = parse_plan(FULL_PLAN, ())
    assert [(f.path, f.change) for f in view.files] == [
        ("src/auth/login.py", "Create"),
        ("tests/test_login.py", "Create"),
        ("src/app.py", "Modify: add /login"),
    ]
    text = render()
    assert "| `src/auth/login.py` | the login form handler | Create |" in text
    assert "**Files to create**: 2 files" in text
    assert "**Files to modify**: 1 file" in text
    assert "**Test coverage**: 2 planned tests" in text


def test_r_doc_12_phases_name_their_agents() -> None:
    view = parse_plan(FULL_PLAN, ("architect", "quality", "test"))
    assert [p.agents for p in view.phases] == [("quality",), ("test",), ()]
    assert any("phase 3 names no agent" in w for w in view.warnings)
    assert "(Agent: UNASSIGNED)" in render()


def test_r_doc_13_success_criteria_always_listed() -> None:
    text = render()
    assert "- [ ] A user with the right password gets a session" in text
    for line in REQUIRED_CRITERIA:
        assert f"- [ ] {line}" in text
    # Already present: not repeated.
    twice = FULL_PLAN.replace(
        "- [ ] A user", "- [ ] Build passes with zero test failures\n- [ ] A user"
    )
    assert render(twice).count("Build passes with zero test failures") == 1


def test_flow_plan_without_purpose_uses_task_objective_and_notes_gaps() -> None:
    task_md = "# add-login: Add\n\n## Task Objective\n\nusers cannot sign in yet\n" + PLAN
    view = parse_plan(task_md, ("quality", "test"))
    assert view.parts["purpose"] == "users cannot sign in yet"
    assert [p.agents for p in view.phases] == [("quality",), ("test",)]  # one line, two phases
    assert view.phases[1].text == "test writes the tests."
    assert "the plan has no benefits (R-DOC-12)" in view.warnings
    assert "_(not stated in the plan)_" in render(task_md)


@pytest.mark.parametrize(
    "line",
    [
        "1. I will implement the parser (Agent: quality)",
        "- The main agent implements the form",
        "- I'll implement the glue code myself",
    ],
)
def test_r_doc_14_main_agent_implementing_is_a_problem(line: str) -> None:
    view = parse_plan(FULL_PLAN.replace("### Success Criteria", f"{line}\n\n### Success Criteria"))
    assert [v.rule for v in view.problems] == ["R-DOC-14"]


def test_r_doc_14_other_first_person_lines_are_fine() -> None:
    line = "- I will build on the existing parser; the quality agent implements it"
    view = parse_plan(FULL_PLAN.replace("### Success Criteria", f"{line}\n\n### Success Criteria"))
    assert view.problems == ()


def test_change_review_shows_sha_branch_diff_build_and_reviews() -> None:
    view = ChangeView(
        task="add-login",
        commit_sha="a" * 40,
        branch="add-login",
        base="main",
        diff_stat=" x.py | 2 ++\n 1 file changed, 2 insertions(+)",
        commits=("aaaaaaa login",),
        validation={"success": True, "command": "pytest", "head_sha": "a" * 40},
        verdicts={"quality": "APPROVED", "architect": "APPROVED"},
        feedback=("rename foo",),
        pushed_to="origin/add-login",
    )
    text = render_changes(view)
    for part in (
        f"**Commit**: {'a' * 40}",
        "**Branch**: add-login (merges into main), pushed to origin/add-login",
        "**Validation**: PASSED (pytest)",
        "**Reviews**: architect: APPROVED, quality: APPROVED",
        "1 file changed",
        "- aaaaaaa login",
        "- rename foo",
        '"approved" / "merge it"',
    ):
        assert part in text
    stale = render_changes(ChangeView("t", "b" * 40, "t", "main", "", validation=view.validation))
    assert "not run for this commit" in stale


HEADINGS = (
    "### Problem Statement",
    "### Files to Create",
    "### Implementation Sequence",
    "### Success Criteria",
    "### Risks",
    "| a | b |",
    "- `x.py` - y",
    "1. z (Agent: q)",
)


@given(st.lists(st.sampled_from(HEADINGS) | st.text(max_size=30), max_size=12))
def test_property_any_plan_renders_with_the_required_lines(lines: list[str]) -> None:
    text = render("# t: T\n\n## Implementation Plan\n" + "\n".join(lines))
    assert text.startswith("## Implementation Plan Summary")
    for line in REQUIRED_CRITERIA:  # R-DOC-13
        assert f"- [ ] {line}" in text
    assert text.index("### Problem Statement") < text.index("### Proposed Solution")
    assert text.index("### Proposed Solution") < text.index("### Benefits")  # R-DOC-12
    assert text.endswith("- Or provide feedback for plan revisions")


# --- through the CLI -------------------------------------------------------------------------


@pytest.fixture
def brepo(tmp_path: Path) -> Repo:
    """A repository whose validation command passes."""
    return make_repo(tmp_path / "repo", config=PASSING_BUILD)


def test_present_plan_records_what_was_shown(repo: Repo) -> None:
    to_synthesis(repo, "add-login")
    data = repo.ok("present", "add-login", "--json").json()
    assert data["kind"] == "plan" and len(data["bound_to"]) == 64
    assert data["text"].startswith("## Implementation Plan Summary")
    assert data["plan"]["phases"][0]["agents"] == ["quality"]
    assert "CHECKPOINT RECOVERY: Task waiting for PLAN APPROVAL" in data["recovery"]
    trail = json.loads((repo.task_dir("add-login") / "audit-trail.json").read_text())
    assert trail["events"] > 0
    status = repo.ok("status", "add-login", "--json").json()
    assert "CHECKPOINT RECOVERY: Task waiting for PLAN APPROVAL" in status["recovery"]  # R-CKP-18


def test_r_ckp_01_nothing_to_present_outside_checkpoints(repo: Repo) -> None:
    to_implementation(repo, "add-login")
    result = repo.run("present", "add-login")
    assert result.code == 1 and "R-CKP-01" in result.err and "hint:" in result.err


def test_r_doc_14_plan_with_main_agent_implementing_is_not_presented(repo: Repo) -> None:
    to_synthesis(repo, "add-login")
    task_md = repo.task_dir("add-login") / "task.md"
    task_md.write_text(task_md.read_text() + "\n- I will implement the session store myself\n")
    result = repo.run("present", "add-login")
    assert result.code == 1 and "R-DOC-14" in result.err
    approve = repo.run("approve", "add-login", "plan")
    assert approve.code == 1 and "R-CKP-03" in approve.err  # nothing was recorded


def test_r_ckp_15_plan_edited_after_approval_blocks_implementation(repo: Repo) -> None:
    to_synthesis(repo, "add-login")
    early = repo.run("approve", "add-login", "plan")
    assert early.code == 1 and "R-CKP-03" in early.err
    approve_plan(repo, "add-login")
    task_md = repo.task_dir("add-login") / "task.md"
    task_md.write_text(task_md.read_text() + "\n- one more file, added after approval\n")
    edited = repo.run("transition", "add-login", "IMPLEMENTATION")
    assert edited.code == 1 and "R-CKP-15" in edited.err
    stale = repo.run("approve", "add-login", "plan")  # the old presentation shows another plan
    assert stale.code == 1 and "R-CKP-15" in stale.err
    approve_plan(repo, "add-login")
    repo.ok("transition", "add-login", "IMPLEMENTATION")


def test_r_agt_19_agent_added_in_synthesis_needs_a_new_presentation(repo: Repo) -> None:
    to_synthesis(repo, "add-login")
    approve_plan(repo, "add-login")
    new = next(a for a in ("usability", "performance", "security")
               if a not in agents_of(repo, "add-login"))  # fmt: skip
    repo.ok("agent", "add", "add-login", new, "--why", "user-facing form")
    report = repo.task_dir("add-login") / f"add-login-{new}-requirements.md"
    report.write_text("Requirements report.\n" + "The form must be accessible. " * 6)
    blocked = repo.run("transition", "add-login", "IMPLEMENTATION")
    assert blocked.code == 1 and "R-CKP-03" in blocked.err
    again = repo.run("approve", "add-login", "plan")  # the earlier showing lacked the agent
    assert again.code == 1 and "R-CKP-03" in again.err
    shown = repo.ok("present", "add-login").out
    assert new in shown.split("**Stakeholder Agents**:")[1].splitlines()[0]
    repo.ok("approve", "add-login", "plan")
    repo.ok("transition", "add-login", "IMPLEMENTATION")


@pytest.mark.parametrize("marker", ["CLAUDECODE", "TASKGATE_AGENT"])
def test_r_ckp_02_approve_refused_for_agents(repo: Repo, marker: str) -> None:
    to_synthesis(repo, "add-login")
    repo.ok("present", "add-login")
    result = repo.run("approve", "add-login", "plan", env={marker: "1"})
    assert result.code == 1 and "R-CKP-02" in result.err and marker in result.err
    assert repo.ok("status", "add-login", "--json").json()["approvals"] == []


def test_person_without_session_may_approve_but_foreign_session_may_not(repo: Repo) -> None:
    to_synthesis(repo, "add-login")
    repo.ok("present", "add-login")
    foreign = repo.run("approve", "add-login", "plan", session="other-agent")
    assert foreign.code == 3
    row = repo.ok("approve", "add-login", "plan", "--message", "LGTM", "--json", session=None)
    data = row.json()
    assert data["provenance"] == "non-interactive" and len(data["message_hash"]) == 64
    assert (repo.task_dir("add-login") / "user-plan-approval-obtained.flag").exists()


def test_r_ckp_13_new_commit_after_change_approval_blocks_complete(brepo: Repo) -> None:
    to_awaiting(brepo, "add-login")
    early = brepo.run("approve", "add-login", "changes")
    assert early.code == 1 and "R-CKP-03" in early.err  # not presented in this visit
    shown = brepo.ok("present", "add-login", "--json").json()
    head = git(brepo.worktree("add-login"), "rev-parse", "HEAD")
    assert shown["bound_to"] == head and shown["commit_sha"] == head
    assert f"**Commit**: {head}" in shown["text"] and "login.py" in shown["diff_stat"]
    assert shown["validation"]["success"] is True
    assert set(shown["verdicts"].values()) == {"APPROVED"}
    brepo.ok("approve", "add-login", "changes")
    commit_in(brepo.worktree("add-login"), "late.txt", "late\n", "late change")
    result = brepo.run("transition", "add-login", "COMPLETE")
    assert result.code == 1 and "R-CKP-13" in result.err
    stale = brepo.run("approve", "add-login", "changes")
    assert stale.code == 1 and "R-CKP-13" in stale.err
    again = brepo.ok("present", "add-login", "--json").json()  # re-binds to the new HEAD
    assert again["bound_to"] == git(brepo.worktree("add-login"), "rev-parse", "HEAD")
    assert not (brepo.task_dir("add-login") / "user-approval-obtained.flag").exists()
    status = brepo.ok("status", "add-login", "--json").json()
    assert "CHECKPOINT RECOVERY: Task waiting for CHANGE REVIEW" in status["recovery"]  # R-CKP-18


def test_automated_approval_needs_the_repository_opt_in(repo: Repo) -> None:
    to_synthesis(repo, "add-login")
    repo.ok("present", "add-login")
    engine = Engine(find_workspace(repo.path), session_id="s1", cwd=repo.path)
    try:
        with pytest.raises(Refused) as refused:
            checkpoints.approve(engine, "add-login", "plan", provenance=checkpoints.AUTOMATED)
        assert refused.value.violations[0].rule == "R-CKP-02"
        with pytest.raises(Refused):
            checkpoints.approve(engine, "add-login", "plan", provenance=checkpoints.AGENT_RELAYED)
    finally:
        engine.close()
    toml = repo.path / "taskgate.toml"
    toml.write_text(toml.read_text().replace("# [protocol]\n", "[protocol]\n").replace(
        "# allow_auto_approve = false", "allow_auto_approve = true"))  # fmt: skip
    engine = Engine(find_workspace(repo.path), session_id="s1", cwd=repo.path)
    try:
        row = checkpoints.approve(engine, "add-login", "plan", provenance=checkpoints.AUTOMATED)
    finally:
        engine.close()
    assert row.provenance == "automated --yes"


def test_plans_read_right_for_any_language() -> None:
    """Issue 17: counts and rows from the actual plan, owners in their own column, one agent
    label per phase, success criteria from the configured validation commands (no Java)."""
    from taskgate.agents.artifacts import plan_section
    from taskgate.agents.base import TaskBrief
    from taskgate.protocol.presentation import required_criteria

    brief = TaskBrief("docs-x", "Document x", files=("docs/guide.md",))
    plan = plan_section(brief, ("architect",), "architect", set(), [])
    task_md = "# docs-x: Document x\n\n" + plan
    required = required_criteria([["python", "-m", "pytest", "-q"]])
    view = parse_plan(task_md, ("architect",), required)
    assert [(f.path, f.change, f.owner) for f in view.files] == [
        ("docs/guide.md", "Create", "architect")
    ]
    text = render_plan(view, task="docs-x", title="Document x", risk_level="LOW",
                       agents=("architect",), task_md_path="task.md")  # fmt: skip
    assert "**Files to create**: 1 file" in text and "**Files to modify**: 0 files" in text
    assert "(none)" not in text
    assert "| `docs/guide.md` | implementation | Create | architect |" in text
    assert "(Agent: architect) (Agent: architect)" not in text
    assert text.count("(Agent: architect)") == 1
    assert "Checkstyle" not in text and "PMD" not in text
    assert "- [ ] `python -m pytest -q` passes" in text
