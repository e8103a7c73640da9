"""Agent backends: the interface, the scripted agents and every fault, in real git worktrees.

The fixture builds the protocol's layout with git directly (task worktree on T, one worktree per
agent on T-A) so that these tests do not depend on the engine's commands.
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import git
from taskgate.agents.base import (
    AgentRequest,
    AgentResult,
    Mode,
    ResultStatus,
    TaskBrief,
    get_backend,
    parse_result,
    parse_result_text,
)
from taskgate.agents.config import AgentsConfig, parse_agents_config
from taskgate.agents.invoke import build_request, invoke
from taskgate.agents.scripted import Fault, ScriptedBackend
from taskgate.engine.workspace import Workspace, find_workspace
from taskgate.errors import Refused, UsageError
from taskgate.protocol import taskmd
from taskgate.protocol.states import Decision

TASK = "add-login"
TEAM = ("architect", "quality", "test")
BRIEF = TaskBrief(
    name=TASK,
    title="Add a login page",
    purpose="users cannot sign in yet",
    scope="the login form in src/auth",
    components="form, tests",
    files=("src/auth/login.py", "tests/test_login.py"),
    risk="HIGH",
)


@dataclass
class TaskEnv:
    """A repository with a task worktree and one worktree per agent."""

    ws: Workspace
    agents: AgentsConfig

    def request(self, agent: str, mode: Mode, **kw: Any) -> AgentRequest:
        """A request built the way the orchestrator builds it."""
        return build_request(self.ws, self.agents, BRIEF, agent, mode, team=TEAM, **kw)

    def worktree(self, agent: str | None = None) -> Path:
        """An agent's worktree, or the task worktree."""
        return self.ws.agent_worktree(TASK, agent) if agent else self.ws.task_worktree(TASK)

    def merge(self, *agents: str) -> subprocess.CompletedProcess[str]:
        """Merge agent branches into the task branch (what the orchestrator does per round)."""
        branches = [f"{TASK}-{a}" for a in agents]
        return subprocess.run(
            ["git", "merge", "--no-edit", "-q", *branches],
            cwd=self.worktree(),
            capture_output=True,
            text=True,
            check=False,
        )


def make_task_env(root: Path, config: dict[str, Any] | None = None) -> TaskEnv:
    """Repository + task worktree + agent worktrees + a task.md skeleton."""
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("sample\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "initial")
    ws = find_workspace(repo)
    git(repo, "worktree", "add", "-q", "-b", TASK, str(ws.task_worktree(TASK)), "main")
    for agent in TEAM:
        path = ws.agent_worktree(TASK, agent)
        git(repo, "worktree", "add", "-q", "-b", f"{TASK}-{agent}", str(path), TASK)
    ws.task_md(TASK).write_text(
        f"# {TASK}\n\n## Task Objective\n\nx\n\n## Scope Definition\n\ny\n\n"
        "## Stakeholder Agent Reports\n\n"
        + "".join(f"### {a}\n\n_pending: {TASK}-{a}-requirements.md_\n\n" for a in TEAM)
    )
    return TaskEnv(ws, parse_agents_config(config or {}, repo))


@pytest.fixture
def env(tmp_path: Path) -> TaskEnv:
    """A fresh task environment with the default ([agents] empty) configuration."""
    return make_task_env(tmp_path)


def run(env: TaskEnv, agent: str, mode: Mode, backend: Any = None, **kw: Any) -> AgentResult:
    """build_request + invoke."""
    return invoke(env.request(agent, mode, **kw), backend)


def log(worktree: Path) -> list[str]:
    """Commit subjects on the worktree's branch, newest first."""
    return git(worktree, "log", "--format=%s").splitlines()


# --- happy path per mode -------------------------------------------------------------------


def test_requirements_writes_a_valid_report_and_records_the_invocation(env: TaskEnv) -> None:
    result = run(env, "quality", Mode.REQUIREMENTS)
    report = env.ws.report_path(TASK, "quality")
    assert result.status is ResultStatus.COMPLETE, result.reason
    assert result.report_path == report
    assert report.stat().st_size >= 100  # R-DOC-04
    agent_dir = env.ws.agent_dir(TASK, "quality")
    assert "REQUIREMENTS" in (agent_dir / "requirements-r1-a1.prompt.md").read_text()
    record = json.loads((agent_dir / "requirements-r1-a1.result.json").read_text())
    assert record["result"]["status"] == "COMPLETE"
    assert record["request"]["prompt_file"].endswith("requirements-r1-a1.prompt.md")


def test_synthesis_writes_the_plan_with_every_required_component(env: TaskEnv) -> None:
    for agent in TEAM:
        run(env, agent, Mode.REQUIREMENTS)
    result = run(env, "architect", Mode.SYNTHESIS)
    assert result.ok, result.reason
    text = env.ws.task_md(TASK).read_text()
    section = taskmd.plan_section(text)
    assert section is not None
    assert taskmd.missing_plan_components(section) == []  # R-DOC-11
    for heading in ("Purpose", "Approach", "Benefits", "Risks and Mitigations"):
        assert f"### {heading}" in section
    assert "main agent implements" not in section.lower()  # R-DOC-14
    assert "`src/auth/login.py`" in section and "(Agent: quality)" in section
    assert "_pending:" not in text  # the report placeholders now point at the reports
    assert "## Task Objective" in text  # the other sections are kept
    run(env, "architect", Mode.SYNTHESIS, attempt=2)  # idempotent: same plan, same hash
    assert env.ws.task_md(TASK).read_text() == text


def test_implementation_commits_real_code_and_tests_that_pass(env: TaskEnv) -> None:
    quality = run(env, "quality", Mode.IMPLEMENTATION)
    test = run(env, "test", Mode.IMPLEMENTATION)
    architect = run(env, "architect", Mode.IMPLEMENTATION)
    assert quality.ok and test.ok and architect.ok
    assert [c.subject.startswith("[agent:quality]") for c in quality.commits] == [True]
    assert log(env.worktree("test"))[0].startswith("[agent:test] implement tests/test_login.py")
    assert architect.commits == () and not architect.work_remaining
    assert env.merge("quality", "test").returncode == 0
    proc = subprocess.run(
        [sys.executable, "tests/test_login.py"],
        cwd=env.worktree(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_work_is_spread_over_the_configured_rounds(tmp_path: Path) -> None:
    env = make_task_env(tmp_path, {"scripted": {"rounds": 2}})
    first = run(env, "quality", Mode.IMPLEMENTATION, round=1)
    assert first.ok and first.work_remaining and len(first.commits) == 1
    second = run(env, "quality", Mode.IMPLEMENTATION, round=2)
    assert second.ok and not second.work_remaining and second.commits == ()


def test_feedback_in_a_later_round_produces_a_new_commit(env: TaskEnv) -> None:
    run(env, "quality", Mode.IMPLEMENTATION)
    again = run(env, "quality", Mode.IMPLEMENTATION, round=2, feedback=("handle empty input",))
    assert again.ok and len(again.commits) == 1
    assert "address review feedback" in again.commits[0].subject
    text = (env.worktree("quality") / "src/auth/login.py").read_text()
    assert "# feedback (round 2): handle empty input" in text


def test_review_approves_the_merged_branch_and_rejects_missing_files(env: TaskEnv) -> None:
    early = run(env, "architect", Mode.REVIEW)
    assert early.verdict is Decision.REJECTED and "src/auth/login.py" in early.reason
    run(env, "quality", Mode.IMPLEMENTATION)
    run(env, "test", Mode.IMPLEMENTATION)
    env.merge("quality", "test")
    result = run(env, "architect", Mode.REVIEW, round=2)
    assert result.ok and result.verdict is Decision.APPROVED


# --- faults --------------------------------------------------------------------------------


def faulty(kind: str, **kw: Any) -> ScriptedBackend:
    """A scripted backend with one fault for every agent."""
    return ScriptedBackend(faults=(Fault(kind, **kw),), hang_seconds=0.01)


@pytest.mark.parametrize(
    ("kind", "mode", "status", "words"),
    [
        ("fail", Mode.REQUIREMENTS, ResultStatus.ERROR, "failed (scripted fault)"),
        ("hang", Mode.IMPLEMENTATION, ResultStatus.TIMEOUT, "no result within"),
        ("crash", Mode.REQUIREMENTS, ResultStatus.ERROR, "exited with code 1"),
        ("nothing", Mode.REQUIREMENTS, ResultStatus.ERROR, "R-DOC-04"),
        ("nothing", Mode.SYNTHESIS, ResultStatus.ERROR, "R-DOC-10"),
        ("nothing", Mode.REVIEW, ResultStatus.ERROR, "verdict"),
        ("short-report", Mode.REQUIREMENTS, ResultStatus.ERROR, "R-DOC-04"),
        ("garbage", Mode.REVIEW, ResultStatus.ERROR, "no JSON result object"),
        ("blocked", Mode.IMPLEMENTATION, ResultStatus.BLOCKED, "human decision"),
        ("escape", Mode.REVIEW, ResultStatus.ERROR, "outside its worktree"),
    ],
)
def test_fault_becomes_a_result_the_orchestrator_can_act_on(
    env: TaskEnv, kind: str, mode: Mode, status: ResultStatus, words: str
) -> None:
    result = run(env, "quality", mode, faulty(kind))
    assert result.status is status
    assert words in result.message or words in result.reason, result


def test_short_report_is_twenty_bytes_and_refused(env: TaskEnv) -> None:
    result = run(env, "test", Mode.REQUIREMENTS, faulty("short-report"))
    assert env.ws.report_path(TASK, "test").stat().st_size == 20
    assert result.status is ResultStatus.ERROR and "R-DOC-04" in result.reason


def test_crash_leaves_partial_work_that_the_retry_completes(env: TaskEnv) -> None:
    backend = ScriptedBackend(faults=(Fault("crash", attempt=1),))
    crashed = run(env, "quality", Mode.IMPLEMENTATION, backend)
    assert crashed.status is ResultStatus.ERROR and crashed.exit_code == 1
    leftover = env.worktree("quality") / "src/auth/login.py"
    assert leftover.exists() and git(env.worktree("quality"), "status", "--porcelain")
    retried = run(env, "quality", Mode.IMPLEMENTATION, backend, attempt=2)
    assert retried.ok and len(retried.commits) == 1, retried.reason
    assert "return value.strip().lower()" in leftover.read_text()
    assert git(env.worktree("quality"), "status", "--porcelain") == ""


def test_review_rejection_and_scope_concern(env: TaskEnv) -> None:
    rejected = run(env, "quality", Mode.REVIEW, faulty("reject"))
    assert rejected.verdict is Decision.REJECTED and "scripted rejection" in rejected.reason
    assert rejected.scope is None
    scoped = run(env, "test", Mode.REVIEW, faulty("scope"))
    assert scoped.verdict is Decision.REJECTED and scoped.scope is not None
    assert scoped.scope.exceeds_scope  # 3x > 2x (R-REV-04)
    assert scoped.scope.deferred and scoped.scope.deferred[0].startswith(f"{TASK}-test-followup")


def test_conflict_fault_makes_the_merge_conflict(env: TaskEnv) -> None:
    run(env, "quality", Mode.IMPLEMENTATION)
    run(env, "test", Mode.IMPLEMENTATION, ScriptedBackend(faults=(Fault("conflict"),)))
    merged = env.merge("quality", "test")
    assert merged.returncode != 0


def test_faults_match_on_agent_mode_round_and_attempt(env: TaskEnv) -> None:
    backend = ScriptedBackend(faults=(Fault("fail", agent="test", mode=Mode.REVIEW, round=2),))
    req = env.request("test", Mode.REVIEW, round=2)
    assert backend.fault_for(req) == "fail"
    assert backend.fault_for(replace(req, round=1)) is None
    assert backend.fault_for(replace(req, agent="quality")) is None
    assert backend.fault_for(env.request("test", Mode.IMPLEMENTATION, round=2)) is None


def test_faults_come_from_taskgate_toml(tmp_path: Path) -> None:
    config = {
        "scripted": {"faults": [{"agent": "tester", "mode": "requirements", "fault": "fail"}]}
    }
    env = make_task_env(tmp_path, config)
    assert run(env, "test", Mode.REQUIREMENTS).status is ResultStatus.ERROR
    assert run(env, "quality", Mode.REQUIREMENTS).ok


# --- invoke checks the evidence, not the claim ---------------------------------------------


@dataclass
class Fake:
    """A backend that does `action` in the request and claims COMPLETE."""

    action: Any
    name: str = "fake"

    def run(self, request: AgentRequest) -> AgentResult:
        self.action(request)
        return AgentResult(ResultStatus.COMPLETE, verdict=Decision.APPROVED)


def _commit(request: AgentRequest, subject: str) -> None:
    (request.worktree / "x.txt").write_text(subject)
    git(request.worktree, "add", "x.txt")
    git(request.worktree, "commit", "-q", "-m", subject)


def test_untagged_commit_is_an_error(env: TaskEnv) -> None:
    result = run(env, "quality", Mode.IMPLEMENTATION, Fake(lambda r: _commit(r, "no tag")))
    assert result.status is ResultStatus.ERROR and "R-WTB-06" in result.reason
    assert len(result.commits) == 1


def test_tagged_commit_is_reported(env: TaskEnv) -> None:
    result = run(
        env, "quality", Mode.IMPLEMENTATION, Fake(lambda r: _commit(r, "[agent:quality] x"))
    )
    assert result.ok and result.commits[0].subject == "[agent:quality] x"


def test_uncommitted_changes_are_an_error(env: TaskEnv) -> None:
    def edit(request: AgentRequest) -> None:
        (request.worktree / "README.md").write_text("changed\n")

    result = run(env, "quality", Mode.IMPLEMENTATION, Fake(edit))
    assert result.status is ResultStatus.ERROR and "uncommitted" in result.reason


def test_editing_the_task_worktree_is_an_error(env: TaskEnv) -> None:
    def escape(request: AgentRequest) -> None:
        assert request.task_worktree is not None
        (request.task_worktree / "README.md").write_text("escaped\n")

    result = run(env, "quality", Mode.IMPLEMENTATION, Fake(escape))
    assert result.status is ResultStatus.ERROR and "outside its worktree" in result.reason


def test_a_backend_exception_is_an_error_not_a_crash(env: TaskEnv) -> None:
    def boom(request: AgentRequest) -> None:
        raise RuntimeError("bug")

    result = run(env, "quality", Mode.REVIEW, Fake(boom))
    assert result.status is ResultStatus.ERROR and "bug" in result.reason


def test_invoking_without_the_agent_worktree_is_refused(env: TaskEnv) -> None:
    git(env.ws.repo, "worktree", "remove", "--force", str(env.worktree("test")))
    with pytest.raises(Refused) as caught:
        run(env, "test", Mode.REQUIREMENTS)
    assert caught.value.violations[0].rule == "R-WTB-04"


# --- the result contract -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ([], "no result object"),
        ({"status": "DONE"}, "invalid status"),
        ({"status": "COMPLETE", "work_remaining": "yes"}, "work_remaining"),
        ({"status": "COMPLETE", "verdict": "MAYBE"}, "R-REV-01"),
        ({"status": "COMPLETE", "verdict": "REJECTED"}, "needs a reason"),
        ({"status": "COMPLETE", "verdict": "APPROVED", "scope": {}}, "only with a REJECTED"),
        (
            {"status": "COMPLETE", "verdict": "REJECTED", "reason": "r", "scope": {"x": 1}},
            "R-REV-04",
        ),
        ({"status": "COMPLETE", "message": 3}, "must be strings"),
    ],
)
def test_garbage_results_become_errors_with_the_reason(data: object, words: str) -> None:
    result = parse_result(data, Mode.REVIEW)
    assert result.status is ResultStatus.ERROR and words in result.reason


def test_scope_exactly_twice_is_not_enough() -> None:  # C-61: strict comparison
    data = {"status": "COMPLETE", "verdict": "REJECTED", "reason": "big",
            "scope": {"effort_estimate": 4, "task_scope": 2}}  # fmt: skip
    result = parse_result(data, Mode.REVIEW)
    assert result.scope is not None and not result.scope.exceeds_scope


def test_result_object_is_found_in_prose_and_fences() -> None:
    text = 'I did it.\n```json\n{"status": "COMPLETE", "verdict": "APPROVED"}\n```\nBye'
    assert parse_result_text(text, Mode.REVIEW).verdict is Decision.APPROVED
    line = 'log line\n{"status": "BLOCKED", "message": "need a key"}\n'
    assert parse_result_text(line, Mode.IMPLEMENTATION).status is ResultStatus.BLOCKED


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(
                        st.sampled_from(["status", "verdict", "reason", "message", "scope",
                                         "work_remaining", "effort_estimate", "task_scope"]),
                        kids, max_size=5), max_leaves=12))  # fmt: skip
def test_parse_result_never_raises(data: object) -> None:
    for mode in Mode:
        result = parse_result(data, mode)
        assert result.status in ResultStatus
        assert result.status is not ResultStatus.TIMEOUT  # only taskgate says TIMEOUT


# --- configuration and prompts -------------------------------------------------------------


def test_agent_settings_merge_backend_and_agent_tables(tmp_path: Path) -> None:
    config = parse_agents_config(
        {"backend": "scripted", "claude": {"model": "sonnet", "max_turns": 5},
         "engineer": {"backend": "claude", "model": "opus", "timeout_minutes": 90,
                      "env": {"X": "1"}}},
        tmp_path,
    )  # fmt: skip
    quality = config.settings("quality")  # "engineer" is quality's alias (D-AGT-1)
    assert quality.backend == "claude" and quality.timeout_minutes == 90
    assert dict(quality.options) == {"model": "opus", "max_turns": 5} and quality.env == {"X": "1"}
    assert config.settings("test").backend == "scripted"


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ({"backend": "gpt"}, "backend must be one of"),
        ({"nosuch": {"backend": "command"}}, "unknown agent"),
        (
            {"quality": {"backend": "command", "comand": ["x"]}},
            "[agents.quality]: unknown key 'comand'",
        ),
        ({"quality": {"backend": "command", "command": [1]}}, "command must be a list of strings"),
        ({"claude": {"max_turns": "5"}}, "max_turns must be of type int"),
        ({"scripted": {"faults": [{"fault": "explode"}]}}, "faults[0]: fault must be one of"),
        ({"scripted": {"faults": [{"fault": "fail", "mode": "x"}]}}, "unknown agent mode"),
        ({"prompts": {"review": "missing.md"}}, "does not exist"),
        ({"prompts": {"planning": "x.md"}}, "unknown agent mode 'planning'"),
        ({"max_parallel": 0}, "max_parallel"),
        ({"timeout": 5}, "unknown key 'timeout'"),
    ],
)
def test_config_errors_name_the_key(tmp_path: Path, raw: dict[str, Any], words: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_agents_config(raw, tmp_path)
    assert words in caught.value.message, caught.value.message
    assert caught.value.hint


def test_command_string_is_split_without_a_shell(tmp_path: Path) -> None:
    config = parse_agents_config({"command": {"command": "bin/agent --fast 'a b'"}}, tmp_path)
    assert config.settings("quality").backend == "scripted"
    assert config.backend_options["command"]["command"] == ["bin/agent", "--fast", "a b"]


def test_unknown_backend_name_is_refused() -> None:
    with pytest.raises(ValueError, match="valid backends"):
        get_backend("gpt")


def test_user_prompt_templates_override_the_built_ins(tmp_path: Path) -> None:
    env = make_task_env(tmp_path)
    prompts = env.ws.repo / "prompts"
    prompts.mkdir()
    (prompts / "review.md").write_text("Review {task} as {agent} against {base_ref}.\n")
    env.agents = parse_agents_config({"prompts_dir": "prompts"}, env.ws.repo)
    assert env.request("test", Mode.REVIEW).prompt == "Review add-login as test against main.\n"
    assert "REQUIREMENTS" in env.request("test", Mode.REQUIREMENTS).prompt  # built-in kept
    (prompts / "review.md").write_text("Review {tsak} {\n")
    with pytest.raises(UsageError, match=r"review.md: unknown placeholder \{tsak\}"):
        env.request("test", Mode.REVIEW)


def test_default_prompts_carry_the_contract(env: TaskEnv) -> None:
    for mode in Mode:
        prompt = env.request("quality", mode, feedback=("fix the build",)).prompt
        assert '"status": "COMPLETE"' in prompt and "fix the build" in prompt
    assert "[agent:quality]" in env.request("quality", Mode.IMPLEMENTATION).prompt
    assert "git diff main...add-login" in env.request("quality", Mode.REVIEW).prompt


def test_agents_run_in_parallel_threads(env: TaskEnv) -> None:
    for mode in (Mode.REQUIREMENTS, Mode.IMPLEMENTATION):
        with ThreadPoolExecutor(max_workers=3) as pool:
            results = list(pool.map(run, [env] * 3, TEAM, [mode] * 3))
        assert all(r.ok for r in results), [r.reason for r in results]
    assert env.merge("quality", "test").returncode == 0
