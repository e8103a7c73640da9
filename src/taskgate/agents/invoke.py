"""The one door for running an agent: build the request, run the backend, check the evidence.

The orchestrator calls, per agent and phase:

    request = build_request(ws, agents_cfg, brief, agent, Mode.REQUIREMENTS, team=agents)
    result = invoke(request)          # never raises for agent failures; see AgentResult

`invoke` does not trust what the agent says: a COMPLETE requirements agent without a valid
report, a synthesis without the plan section, an untagged commit, uncommitted edits or a change
to the task worktree all turn the result into ERROR with the rule and the reason.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from taskgate.agents.base import (
    AgentRequest,
    AgentResult,
    Backend,
    Commit,
    Mode,
    TaskBrief,
    error_result,
    get_backend,
)
from taskgate.agents.command import forget_confinement, with_confinement
from taskgate.agents.config import AgentsConfig
from taskgate.agents.prompts import placeholders, render, template_for
from taskgate.engine.workspace import Workspace
from taskgate.engine.worktree_setup import worktree_env
from taskgate.errors import Refused
from taskgate.fsutil import atomic_write, file_size, read_text
from taskgate.git import repo as gitrepo
from taskgate.git.cmd import git, split_z
from taskgate.protocol import taskmd
from taskgate.protocol.substance import is_cache_path
from taskgate.protocol.todo import TodoTask
from taskgate.protocol.violations import Violation


def build_request(
    ws: Workspace,
    agents_config: AgentsConfig,
    brief: TaskBrief,
    agent: str,
    mode: Mode,
    *,
    team: Sequence[str] = (),
    round: int = 1,
    attempt: int = 1,
    feedback: Sequence[str] = (),
    base_ref: str | None = None,
) -> AgentRequest:
    """A request with the workspace's paths, the agent's settings and the rendered prompt."""
    task = brief.name
    settings = agents_config.settings(agent)
    minutes = settings.timeout_minutes or ws.config.protocol.agent_timeout_minutes  # C-02
    base = base_ref or ws.config.workspace.main_branch or gitrepo.current_branch(ws.repo)
    paths = {
        "worktree": ws.agent_worktree(task, agent),
        "task_dir": ws.task_dir(task),
        "task_md": ws.task_md(task),
        "report_path": ws.report_path(task, agent),
    }
    template, source = template_for(mode, settings.prompt_files)
    values = placeholders(
        brief,
        agent=agent,
        mode=mode,
        round=round,
        attempt=attempt,
        team=tuple(team),
        base_ref=base,
        feedback=tuple(feedback),
        **paths,
    )
    return AgentRequest(
        brief=brief,
        agent=agent,
        mode=mode,
        agent_dir=ws.agent_dir(task, agent),
        prompt=render(template, values, source=source),
        team=tuple(team),
        feedback=tuple(feedback),
        round=round,
        attempt=attempt,
        timeout_s=float(minutes) * 60.0,
        env={**settings.env, **worktree_env(ws, task, agent)},  # issue 21: its port block
        task_worktree=ws.task_worktree(task),
        base_ref=base,
        watch=(ws.task_worktree(task),),
        settings=settings,
        **paths,
    )


def _stem(request: AgentRequest) -> str:
    """`MODE-rROUND-aATTEMPT`, with `-2`, `-3` … when that invocation happened before (a plan
    rewritten in one round): the prompt files are the record of every invocation."""
    stem = f"{request.mode.value}-r{request.round}-a{request.attempt}"
    again = 1
    while (request.agent_dir / f"{stem}{f'-{again}' if again > 1 else ''}.prompt.md").exists():
        again += 1
    return f"{stem}-{again}" if again > 1 else stem


def _porcelain(worktree: Path) -> list[str]:
    """`git status` entries; --no-optional-locks because agents run in parallel (index.lock)."""
    out = git(
        "--no-optional-locks", "status", "--porcelain", "-z", "--untracked-files=all", cwd=worktree
    ).stdout
    return split_z(out)


def _snapshot(path: Path) -> tuple[str | None, tuple[str, ...]]:
    """HEAD and `git status` of a worktree the agent must not touch."""
    if not gitrepo.is_worktree(path):
        return None, ()
    return gitrepo.head_sha(path), tuple(_porcelain(path))


def _status(worktree: Path) -> tuple[list[str], list[str]]:
    """(modified tracked paths, untracked paths) of a worktree."""
    tracked: list[str] = []
    untracked: list[str] = []
    for entry in _porcelain(worktree):
        if len(entry) > 3 and entry[2] == " ":
            (untracked if entry.startswith("??") else tracked).append(entry[3:])
    return tracked, untracked


def _commits(worktree: Path, before: str | None) -> tuple[Commit, ...]:
    """Non-merge commits on the agent's branch since `before`, oldest first."""
    after = gitrepo.head_sha(worktree)
    if after is None or after == before:
        return ()
    span = f"{before}..{after}" if before else after
    out = git("log", "--no-merges", "--reverse", "--format=%H%x00%s%x00", span, cwd=worktree).stdout
    fields = out.replace("\n", "").split("\0")
    return tuple(
        Commit(sha, subject) for sha, subject in zip(fields[::2], fields[1::2], strict=False) if sha
    )


def _require_worktree(request: AgentRequest) -> None:
    """R-WTB-04: an agent is invoked only in its own worktree on branch T-A (R-WTB-02)."""
    if gitrepo.head_ref(request.worktree) != request.branch:
        raise Refused(
            f"cannot invoke {request.agent}: {request.worktree} is not a worktree on branch "
            f"{request.branch}",
            [Violation("R-WTB-04", "an agent runs only in its own worktree (R-WTB-02)")],
            hint=f"run 'taskgate recover {request.task}' to recreate the agent worktrees",
        )


def not_started(request: AgentRequest) -> str | None:
    """Why the agent cannot be started in its worktree now, or None when it can.

    Checked before the invocation is recorded (issue 16): a worktree that a killed git command
    left mid-way (a staged commit, an index.lock, a merge or rebase in progress) is a condition
    for the person, not an attempt of the agent, so it uses no retry. Raises Refused (R-WTB-04)
    when the worktree is not on the agent's branch at all.
    """
    from taskgate.agents.codex_sandbox import heal

    heal(request.agent_dir, request.worktree)
    _require_worktree(request)
    worktree = request.worktree
    gitdir = gitrepo.git_dir(worktree)
    if gitdir is not None and (gitdir / "index.lock").exists():
        return f"{gitdir / 'index.lock'} exists: a git command in {worktree} was killed"
    operation = gitrepo.in_progress(worktree)
    if operation:
        return f"a {operation} is in progress in {worktree}"
    staged = [e[3:] for e in _porcelain(worktree) if len(e) > 3 and e[0] not in " ?"]
    if staged:
        return (
            f"staged, uncommitted changes in {worktree} ({', '.join(staged[:5])}): a commit "
            "step was interrupted"
        )
    return None


def _check(request: AgentRequest, result: AgentResult, before: str | None) -> AgentResult:
    """The evidence checks that turn a COMPLETE claim into ERROR when it does not hold."""
    worktree = request.worktree
    if gitrepo.head_ref(worktree) != request.branch:
        return result.with_error(
            f"R-WTB-02: the agent left branch {request.branch} in its worktree; "
            f"check out {request.branch} again"
        )
    commits = _commits(worktree, before)
    result = replace(result, commits=commits)
    untagged = [c for c in commits if not c.subject.startswith(request.commit_tag)]
    if untagged:
        shas = ", ".join(c.sha[:10] for c in untagged)
        return result.with_error(
            f"R-WTB-06: commit message(s) {shas} do not start with '{request.commit_tag}'; "
            "amend them (git commit --amend / rebase) and report again"
        )
    if not result.ok:
        return result
    mode = request.mode
    if mode is Mode.REQUIREMENTS:
        problem = taskmd.report_problem(file_size(request.report_path))
        if problem:  # R-DOC-05: an empty or missing report is a failure, never "none"
            return result.with_error(f"R-DOC-04: {request.report_path.name}: {problem}")
        return replace(result, report_path=request.report_path)
    if mode is Mode.SYNTHESIS:
        section = taskmd.plan_section(read_text(request.task_md) or "")
        if section is None:
            return result.with_error(
                f"R-DOC-10: {request.task_md} has no '## Implementation Plan' section"
            )
        missing = taskmd.missing_plan_components(section)
        if missing:
            return result.with_error(f"R-DOC-11: the plan lacks {', '.join(missing)}")
    if mode is Mode.IMPLEMENTATION:
        tracked, untracked = _status(worktree)
        if tracked:
            return result.with_error(
                f"uncommitted changes to {', '.join(tracked[:5])}: commit them with "
                f"'{request.commit_tag} …' or revert them"
            )
        untracked = [p for p in untracked if not is_cache_path(p)]
        if untracked:  # work left beside the branch never reaches T: not COMPLETE (R-TRN-14)
            return result.with_error(
                f"untracked files {', '.join(untracked[:5])}: commit them with "
                f"'{request.commit_tag} …', delete them, or list them in .gitignore"
            )
        if not result.no_change and not _tagged_commits(request):
            return result.with_error(
                f"R-TRN-14: no commit tagged '{request.commit_tag}' on {request.branch}: commit "
                'your part, or answer "no_change": "<why nothing needs changing>"'
            )
    return result


def _tagged_commits(request: AgentRequest) -> int:
    """Commits of this agent (by tag) on its branch that are not on the base branch."""
    out = git(
        "log", "--no-merges", "--format=%s", f"{request.base_ref}..HEAD",
        cwd=request.worktree, check=False,
    ).stdout  # fmt: skip
    return sum(1 for line in out.splitlines() if line.startswith(request.commit_tag))


def invoke(request: AgentRequest, backend: Backend | None = None) -> AgentResult:
    """Run `request` on its configured backend (or `backend`) and return a checked result.

    Raises Refused only when the request itself is wrong (no agent worktree, R-WTB-04); every
    agent failure — crash, timeout, garbage, missing evidence — is an ERROR/TIMEOUT result.
    """
    # A Codex implementation run killed with taskgate (SIGKILL skips its finally) leaves the
    # worktree on a detached HEAD with the agent's commits: take them onto T-A first (a no-op
    # without codex_sandbox's marker), so the next invocation never starts from a stray HEAD.
    from taskgate.agents.codex_sandbox import heal

    heal(request.agent_dir, request.worktree)
    _require_worktree(request)
    if backend is None:
        settings = request.settings
        backend = get_backend(settings.backend if settings else "scripted", settings)
    request.agent_dir.mkdir(parents=True, exist_ok=True)
    stem = _stem(request)
    prompt_file = request.agent_dir / f"{stem}.prompt.md"
    atomic_write(prompt_file, request.prompt)
    request = replace(request, prompt_file=prompt_file)
    before = gitrepo.head_sha(request.worktree)
    watched = {path: _snapshot(path) for path in request.watch}
    forget_confinement(request)
    try:
        result = backend.run(request)
    except Exception as exc:  # a backend bug must not take the orchestrator down
        result = error_result(f"backend {backend.name} failed: {exc!r}", backend=backend.name)
    result = with_confinement(request, replace(result, backend=backend.name))  # sandbox.py
    for path, snapshot in watched.items():
        if _snapshot(path) != snapshot:
            result = result.with_error(
                f"the agent changed {path}, outside its worktree {request.worktree}; "
                "agents edit only their own worktree (R-WTB-02)"
            )
            # Machine-readable, so the orchestrator stops instead of guessing with the work.
            result = replace(result, meta={**result.meta, "escaped": str(path)})
            break
    else:
        result = _check(request, result, before)
    record = {"request": _request_json(request), "result": result.to_json()}
    atomic_write(
        request.agent_dir / f"{stem}.result.json",
        json.dumps(record, indent=2, sort_keys=True) + "\n",
    )
    if result.raw_output:
        atomic_write(request.agent_dir / f"{stem}.output.txt", result.raw_output)
    return result


def _request_json(request: AgentRequest) -> dict[str, object]:
    return {
        "task": request.task,
        "agent": request.agent,
        "mode": request.mode.value,
        "round": request.round,
        "attempt": request.attempt,
        "worktree": str(request.worktree),
        "report_path": str(request.report_path),
        "prompt_file": str(request.prompt_file),
        "feedback": list(request.feedback),
        "timeout_s": request.timeout_s,
    }


def brief_from_todo(task: TodoTask, risk: str = "") -> TaskBrief:
    """A TaskBrief from the task's todo.md entry; `risk` is the classified level."""
    return TaskBrief(
        name=task.name,
        title=task.title,
        purpose=task.purpose,
        scope=task.scope,
        components=task.components,
        files=task.files,
        risk=risk or (task.risk.value if task.risk else ""),
    )
