"""Prompt templates per mode; users override them with files (docs/agents.md, 'Prompts').

Templates use `str.format` placeholders (write `{{` and `}}` for literal braces):

    {task} {title} {purpose} {scope} {components} {files} {risk}   the todo.md entry
    {agent} {mode} {round} {attempt} {team}                         who, what, which round
    {worktree} {task_dir} {task_md} {report_path}                   absolute paths
    {base_ref} {task_branch} {agent_branch} {commit_tag}            git names
    {feedback}                     earlier errors, rejections, change requests ("none")
    {min_report_bytes}             100 (R-DOC-04)
    {result_contract}              how to report back (the JSON object; always include it)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from taskgate.agents.base import Mode, TaskBrief
from taskgate.errors import UsageError
from taskgate.protocol.states import MIN_REPORT_BYTES

RESULT_CONTRACT = """\
When you are done, end your reply with one JSON object on its own line (nothing after it):
{"status": "COMPLETE", "work_remaining": false, "verdict": null, "reason": "", "message": "..."}
- status: COMPLETE when your part is done, ERROR when you could not do it, BLOCKED when you
  need a human decision (say which in message).
- work_remaining (implementation): true when you need another round to finish your part.
- no_change (implementation): when your part needs no commit at all, say why in a string,
  e.g. "no_change": "the plan gives the security domain nothing to change". Without a commit
  tagged with your agent name or this field, your implementation is not COMPLETE.
  Commit everything you create: untracked or uncommitted files mean you are not done.
- verdict (review): "APPROVED" or "REJECTED"; a rejection needs a reason the implementers can
  act on. If the rejection is about scope, add
  "scope": {"effort_estimate": <hours>, "task_scope": <hours>, "deferred": ["..."]}.
- Never run `taskgate approve`, never edit files outside your worktree, never change the task
  state: taskgate records your result."""

_COMMON = """\
You are the {agent} stakeholder agent on task {task}: {title}
Purpose: {purpose}
Scope: {scope}
Components: {components}
Files: {files}
Risk: {risk}. Team: {team}. Round {round}, attempt {attempt}.
Your worktree (your working directory, branch {agent_branch}): {worktree}
The task document: {task_md}

Feedback from earlier rounds, failures and the user:
{feedback}
"""

DEFAULT_TEMPLATES: Mapping[Mode, str] = {
    Mode.REQUIREMENTS: _COMMON
    + """
Mode: REQUIREMENTS. From your domain ({agent}), write the requirements this task must meet to
{report_path} (Markdown, at least {min_report_bytes} bytes; an empty or short report is a
failure). Cover constraints, risks, acceptance criteria and tests. Do not change code.

{result_contract}
""",
    Mode.SYNTHESIS: _COMMON
    + """
Mode: SYNTHESIS. Read the requirement reports in {task_dir} ({task}-*-requirements.md) and
write the section "## Implementation Plan" into {task_md} (replace it if it exists; keep the
other sections). It must contain, as ### subsections: Purpose, Approach, Benefits,
Files to Create, Files to Modify, API Design, Behavior Specifications, Test Cases,
Implementation Sequence (phases, each naming the stakeholder agent that implements it; never
the main agent), Decision Log, Risks and Mitigations, Success Criteria. Do not change code.

{result_contract}
""",
    Mode.IMPLEMENTATION: _COMMON
    + """
Mode: IMPLEMENTATION. Implement your part of the approved plan in {task_md}, in your worktree
only. Commit your work on {agent_branch}; every commit message starts with "{commit_tag} ".
Deviations from the plan (files, signatures, behaviour, tests) need re-approval: report
BLOCKED instead. Set work_remaining to true if your part needs another round.

{result_contract}
""",
    Mode.REVIEW: _COMMON
    + """
Mode: REVIEW. Review the whole task branch against the plan in {task_md}:
`git diff {base_ref}...{task_branch}` (run it in your worktree). Do not change files.
Return verdict APPROVED or REJECTED with a reason. Reject with a scope concern only when the
remaining work is clearly beyond the task's scope.

{result_contract}
""",
}


def placeholders(
    brief: TaskBrief,
    *,
    agent: str,
    mode: Mode,
    round: int,
    attempt: int,
    team: tuple[str, ...],
    worktree: Path,
    task_dir: Path,
    task_md: Path,
    report_path: Path,
    base_ref: str,
    feedback: tuple[str, ...],
) -> dict[str, str]:
    """The values every template may use."""
    return {
        "task": brief.name,
        "title": brief.title or brief.name,
        "purpose": brief.purpose or "(not given)",
        "scope": brief.scope or "(not given)",
        "components": brief.components or "(not given)",
        "files": ", ".join(brief.files) or "(not listed)",
        "risk": brief.risk or "(not classified)",
        "agent": agent,
        "mode": mode.value,
        "round": str(round),
        "attempt": str(attempt),
        "team": ", ".join(team) or agent,
        "worktree": str(worktree),
        "task_dir": str(task_dir),
        "task_md": str(task_md),
        "report_path": str(report_path),
        "base_ref": base_ref,
        "task_branch": brief.name,
        "agent_branch": f"{brief.name}-{agent}",
        "commit_tag": f"[agent:{agent}]",
        "feedback": "\n\n".join(f"- {item.strip()}" for item in feedback) or "none",
        "min_report_bytes": str(MIN_REPORT_BYTES),
        "result_contract": RESULT_CONTRACT,
    }


def template_for(mode: Mode, files: Mapping[Mode, Path]) -> tuple[str, str]:
    """(template text, where it came from): the user's file for `mode`, else the built-in."""
    path = files.get(mode)
    if path is None:
        return DEFAULT_TEMPLATES[mode], f"built-in {mode.value} template"
    try:
        return path.read_text(encoding="utf-8"), str(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(
            f"cannot read the {mode.value} prompt template {path}: {exc}",
            hint="fix [agents] prompts / prompts_dir in taskgate.toml",
        ) from None


def render(template: str, values: Mapping[str, str], *, source: str) -> str:
    """Fill `template`; an unknown placeholder or a stray brace names the template and key."""
    try:
        return template.format_map(values)
    except KeyError as exc:
        raise UsageError(
            f"{source}: unknown placeholder {{{exc.args[0]}}}",
            hint=f"valid placeholders: {', '.join(sorted(values))}; write {{{{ }}}} for braces",
        ) from None
    except (ValueError, IndexError) as exc:
        raise UsageError(
            f"{source}: {exc}", hint="write {{ and }} for literal braces in a template"
        ) from None
