"""The agent backend interface: one agent, one mode, one worktree → a validated result.

A backend never changes the store. It runs an agent and says what happened; the orchestrator
records it through the engine (`agent set`, `agent verdict`), which applies the protocol rules
again. `taskgate.agents.invoke.invoke` wraps every backend and turns whatever came back into an
`AgentResult` the orchestrator can trust: garbage becomes ERROR with the reason.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from taskgate.protocol.states import SCOPE_NEGOTIATION_FACTOR, Decision

if TYPE_CHECKING:
    from taskgate.agents.config import AgentSettings


class Mode(StrEnum):
    """What the agent is asked to do; one per agent phase of the protocol."""

    REQUIREMENTS = "requirements"
    SYNTHESIS = "synthesis"
    IMPLEMENTATION = "implementation"
    REVIEW = "review"

    @classmethod
    def parse(cls, text: str) -> Mode:
        """Parse a mode name (case-insensitive); ValueError names the valid modes."""
        try:
            return cls(text.strip().lower())
        except ValueError:
            valid = ", ".join(m.value for m in cls)
            raise ValueError(f"unknown agent mode {text!r}; valid modes: {valid}") from None


class ResultStatus(StrEnum):
    """How an invocation ended. TIMEOUT is set by taskgate only, never by an agent."""

    COMPLETE = "COMPLETE"
    ERROR = "ERROR"
    BLOCKED = "BLOCKED"
    TIMEOUT = "TIMEOUT"


@dataclass(frozen=True)
class TaskBrief:
    """What the agent needs to know about the task (its todo.md entry)."""

    name: str
    title: str = ""
    purpose: str = ""
    scope: str = ""
    components: str = ""
    files: tuple[str, ...] = ()
    risk: str = ""


@dataclass(frozen=True)
class AgentRequest:
    """One invocation: agent `agent` works on `brief.name` in `mode`, round `round`.

    Paths are absolute. `worktree` is the agent's own worktree (branch `T-A`, R-WTB-02) and the
    working directory of the agent. `watch` lists worktrees the agent must leave untouched
    (normally the task worktree); `invoke` reports a change to any of them as an ERROR.
    """

    brief: TaskBrief
    agent: str
    mode: Mode
    worktree: Path
    agent_dir: Path  # WS/tasks/T/agents/A: prompt and result files live here, outside the worktree
    task_dir: Path
    report_path: Path  # WS/tasks/T/T-A-requirements.md (R-DOC-03, C-17)
    task_md: Path
    prompt: str
    team: tuple[str, ...] = ()  # every required agent, canonical order
    feedback: tuple[str, ...] = ()  # earlier failures, rejections, change requests, build output
    round: int = 1  # implementation / review round of this task, from 1
    attempt: int = 1  # 1 + retries of this agent in this round (R-AST-07)
    timeout_s: float = 60 * 60.0  # C-02: 60 minutes
    env: Mapping[str, str] = field(default_factory=dict)
    task_worktree: Path | None = None  # branch T: what reviewers review (R-WTB-08)
    base_ref: str = "main"
    watch: tuple[Path, ...] = ()
    settings: AgentSettings | None = None  # the agent's parsed [agents] configuration
    prompt_file: Path | None = None  # written by invoke before the backend runs

    @property
    def task(self) -> str:
        """The task name."""
        return self.brief.name

    @property
    def commit_tag(self) -> str:
        """The tag every agent commit message starts with (R-WTB-06)."""
        return f"[agent:{self.agent}]"

    @property
    def branch(self) -> str:
        """The agent's branch `T-A` (R-WTB-02)."""
        return f"{self.task}-{self.agent}"


@dataclass(frozen=True)
class ScopeConcern:
    """A rejection that cites scope (R-REV-04): estimated effort against the task's scope."""

    effort_estimate: float
    task_scope: float
    reason: str = ""
    deferred: tuple[str, ...] = ()  # work to move to new todo.md tasks (R-REV-05)

    @property
    def exceeds_scope(self) -> bool:
        """True when effort_estimate > 2 × task_scope; exactly 2× is not enough (C-61)."""
        return self.effort_estimate > SCOPE_NEGOTIATION_FACTOR * self.task_scope

    def to_json(self) -> dict[str, Any]:
        """JSON shape, as in the result contract."""
        return {
            "effort_estimate": self.effort_estimate,
            "task_scope": self.task_scope,
            "reason": self.reason,
            "deferred": list(self.deferred),
        }


@dataclass(frozen=True)
class Commit:
    """A commit the agent made on its branch during the invocation."""

    sha: str
    subject: str


@dataclass(frozen=True)
class AgentResult:
    """What one invocation produced, validated by `invoke` (never trusted raw)."""

    status: ResultStatus
    message: str = ""
    work_remaining: bool = False  # implementation: the agent wants another round
    report_path: Path | None = None  # requirements: the report that was verified
    verdict: Decision | None = None  # review only
    reason: str = ""  # review: why; ERROR: what went wrong
    scope: ScopeConcern | None = None  # review: a REJECTED verdict that cites scope
    commits: tuple[Commit, ...] = ()  # filled in by invoke from git, not from the agent
    raw_output: str = ""
    exit_code: int | None = None
    backend: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict)  # session id, cost, usage …
    no_change: str = ""  # implementation: why this agent's part needs no commit (R-TRN-14)

    @property
    def ok(self) -> bool:
        """True for COMPLETE."""
        return self.status is ResultStatus.COMPLETE

    def with_error(self, reason: str) -> AgentResult:
        """This result turned into ERROR because of `reason` (kept next to the agent's text)."""
        message = reason if not self.message else f"{reason} (agent said: {self.message})"
        return replace(
            self,
            status=ResultStatus.ERROR,
            reason=reason,
            message=message,
            verdict=None,
            scope=None,
        )

    def to_json(self) -> dict[str, Any]:
        """Stable JSON shape for the audit trail and `run --json`."""
        return {
            "status": self.status.value,
            "message": self.message,
            "work_remaining": self.work_remaining,
            "report_path": str(self.report_path) if self.report_path else None,
            "verdict": self.verdict.value if self.verdict else None,
            "reason": self.reason,
            "scope": self.scope.to_json() if self.scope else None,
            "commits": [{"sha": c.sha, "subject": c.subject} for c in self.commits],
            "exit_code": self.exit_code,
            "backend": self.backend,
            "meta": dict(self.meta),
            "no_change": self.no_change,
        }


class Backend(Protocol):
    """Runs one agent in one mode; must not raise for agent failures (return ERROR instead)."""

    @property
    def name(self) -> str:
        """The backend's name in taskgate.toml (`scripted`, `command`, `claude`, `codex`)."""
        ...

    def run(self, request: AgentRequest) -> AgentResult:
        """Run the agent described by `request` and report what it said."""
        ...


# --- the result contract -------------------------------------------------------------------

_FENCE = re.compile(r"```(?:json)?[ \t]*\n(.*?)\n[ \t]*```", re.DOTALL)
_AGENT_STATUSES = {"COMPLETE", "ERROR", "BLOCKED"}


def extract_json_object(text: str) -> dict[str, Any] | None:
    """The agent's result object in free text: the whole text, else the last fenced block or
    the last line that is a JSON object (LLM replies wrap it in prose)."""
    candidates = [text.strip()]
    candidates += reversed([m.group(1).strip() for m in _FENCE.finditer(text)])
    candidates += [line.strip() for line in reversed(text.splitlines()) if line.strip()]
    for candidate in candidates:
        if not candidate.startswith("{"):
            continue
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    return None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _scope(data: object) -> ScopeConcern | str:
    """A ScopeConcern, or the reason the `scope` object is invalid."""
    if not isinstance(data, dict):
        return "scope must be an object"
    effort, scope = _number(data.get("effort_estimate")), _number(data.get("task_scope"))
    if effort is None or scope is None or effort < 0 or scope <= 0:
        return "scope needs numbers effort_estimate >= 0 and task_scope > 0 (R-REV-04)"
    deferred = data.get("deferred", [])
    if not isinstance(deferred, list) or not all(isinstance(d, str) for d in deferred):
        return "scope.deferred must be a list of strings"
    reason = data.get("reason", "")
    return ScopeConcern(effort, scope, str(reason), tuple(d.strip() for d in deferred))


def parse_result(data: object, mode: Mode, *, backend: str = "", raw: str = "") -> AgentResult:
    """Validate an agent's result object (the documented contract); garbage → ERROR + reason."""
    base = AgentResult(ResultStatus.ERROR, backend=backend, raw_output=raw)
    if not isinstance(data, dict):
        return base.with_error("no result object: expected a JSON object with a 'status' key")
    status = str(data.get("status", "")).strip().upper()
    if status not in _AGENT_STATUSES:
        return base.with_error(
            f"invalid status {data.get('status')!r}: use COMPLETE, ERROR or BLOCKED"
        )
    message = data.get("message", "")
    reason = data.get("reason", "")
    if not isinstance(message, str) or not isinstance(reason, str):
        return base.with_error("'message' and 'reason' must be strings")
    remaining = data.get("work_remaining", False)
    if not isinstance(remaining, bool):
        return base.with_error(f"work_remaining must be true or false, got {remaining!r}")
    no_change = data.get("no_change") or ""
    if no_change is True:
        no_change = message or "no change needed"
    if not isinstance(no_change, str):
        return base.with_error("no_change must be a string (why nothing needs changing)")
    result = replace(
        base,
        status=ResultStatus(status),
        message=message,
        reason=reason,
        work_remaining=remaining,
        no_change=no_change.strip(),
    )
    if result.status is not ResultStatus.COMPLETE:
        return replace(result, reason=reason or message)
    if mode is not Mode.REVIEW:
        return result
    verdict_text = str(data.get("verdict", "")).strip().upper()
    if verdict_text not in (Decision.APPROVED, Decision.REJECTED):
        return result.with_error(
            f"review needs verdict APPROVED or REJECTED, got {data.get('verdict')!r} (R-REV-01)"
        )
    verdict = Decision(verdict_text)
    if verdict is Decision.REJECTED and not reason.strip():
        return result.with_error("a REJECTED verdict needs a reason the implementers can act on")
    scope: ScopeConcern | None = None
    if data.get("scope") is not None:
        if verdict is not Decision.REJECTED:
            return result.with_error("a scope concern comes only with a REJECTED verdict")
        parsed = _scope(data["scope"])
        if isinstance(parsed, str):
            return result.with_error(parsed)
        scope = parsed
    return replace(result, verdict=verdict, scope=scope)


def parse_result_text(text: str, mode: Mode, *, backend: str = "") -> AgentResult:
    """`parse_result` on the JSON object found in `text` (see `extract_json_object`)."""
    data = extract_json_object(text)
    if data is None:
        snippet = text.strip()[:200] or "(empty)"
        return AgentResult(ResultStatus.ERROR, backend=backend, raw_output=text).with_error(
            f"no JSON result object in the agent's output: {snippet!r}"
        )
    return parse_result(data, mode, backend=backend, raw=text)


# --- registry ------------------------------------------------------------------------------

BACKENDS = ("scripted", "command", "claude", "codex")


def get_backend(name: str, settings: AgentSettings | None = None) -> Backend:
    """The backend called `name`, configured from the agent's settings ([agents] table)."""
    from taskgate.agents.config import AgentSettings

    settings = settings or AgentSettings(backend=name)
    if name == "scripted":
        from taskgate.agents.scripted import ScriptedBackend

        return ScriptedBackend.from_settings(settings)
    if name == "command":
        from taskgate.agents.command import CommandBackend

        return CommandBackend.from_settings(settings)
    if name == "claude":
        from taskgate.agents.claude import ClaudeBackend

        return ClaudeBackend.from_settings(settings)
    if name == "codex":
        from taskgate.agents.codex import CodexBackend

        return CodexBackend.from_settings(settings)
    raise ValueError(f"unknown agent backend {name!r}; valid backends: {', '.join(BACKENDS)}")


def error_result(
    reason: str, *, backend: str, raw: str = "", code: int | None = None
) -> AgentResult:
    """An ERROR result for a failure detected by taskgate (crash, missing output …)."""
    return AgentResult(
        ResultStatus.ERROR,
        message=reason,
        reason=reason,
        backend=backend,
        raw_output=raw,
        exit_code=code,
    )


def tail(text: str, lines: int = 20) -> str:
    """The last `lines` lines of `text` (for error messages about crashed agents)."""
    return "\n".join(text.strip().splitlines()[-lines:])
