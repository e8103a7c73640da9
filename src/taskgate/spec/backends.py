"""The spec roles on the task agents' backends: `command`, `claude`, `codex` (docs/spec.md).

A spec role is one more agent run: the same executables, configured in the same `[agents]`
tables, run through the same door (`taskgate.agents.reply.run_for_reply`: own process group
killed on timeout, GIT_* and the session stripped, TASKGATE_AGENT set so approvals refuse,
each CLI's output read as for a task agent). Only the contract differs: a role returns a
document as a JSON object, not a worktree status. This module builds the role's prompt, runs
it, and turns the reply into that object; `SpecAgents` then checks the object as for every
other backend. Any failure — timeout, crash, no JSON object — is `AgentFailed` with the reason,
raised before the loop saves anything, so `spec resume` retries the step.

Which backend runs the roles is chosen in taskgate.toml:

    [spec]
    backend = "claude"          # scripted (default) | command | claude | codex
    model = "sonnet"            # any option of that backend; over [agents.claude]

Spec roles only read: unless `[spec]` says otherwise, claude gets read-only tools and codex a
read-only sandbox, whatever the task agents are allowed ([agents.<backend>] permissions are for
agents that edit their own worktree). taskgate writes every file from the reply.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from taskgate.agents.base import BACKENDS, extract_json_object
from taskgate.agents.config import (
    AgentsConfig,
    AgentSettings,
    check_backend_options,
    parse_agents_config,
)
from taskgate.agents.reply import CLI_BACKENDS, ReplyJob, run_for_reply
from taskgate.engine.config import Config
from taskgate.errors import UsageError
from taskgate.spec.agents import AgentFailed
from taskgate.spec.state import SpecPaths

# Options that grant an agent write access. Those of [agents.<backend>] are meant for agents
# in their own worktree; spec roles get these read-only defaults unless [spec] sets them.
READ_ONLY: Mapping[str, Mapping[str, Any]] = {
    "claude": {"allowed_tools": ["Read", "Glob", "Grep"], "permission_mode": "default"},
    "codex": {"sandbox": "read-only", "add_git_dir": False},
}
AGENTS_DIR = "agents"  # .workflow/agents/<role>.*: the last run of each role

_TASKS = {
    "spec-writer": (
        "Write the feature specification as Markdown: a title, User Scenarios, Requirements "
        "(one line per functional requirement, numbered **FR-001**, **FR-002**, ...), Key "
        "Entities, Edge Cases and Success Criteria. Apply every clarification answer in the "
        "request; mark what is still unknown as [NEEDS CLARIFICATION: ...]. Describe what "
        "users need, not how to implement it."
    ),
    "validator": (
        "Validate the specification in the request for gaps that would stop someone from "
        "planning the work. Classify each gap: critical (the feature cannot be planned), "
        "important (planning would guess), minor (wording, polish). Give each gap a short key "
        "that stays the same for the same gap in later iterations. Report no gap for something "
        "the spec already answers."
    ),
    "checklist": (
        "Write a requirements checklist as Markdown: one '- [ ] CHK-NNN ... (FR-NNN)' item per "
        "functional requirement of the spec, checking that it is testable and unambiguous, plus "
        "one item that no [NEEDS CLARIFICATION] marker remains."
    ),
    "gap-classifier": (
        "Group the open gaps in the request into at most max_questions clarification questions "
        "for the feature's author, most important first. One question may cover several gaps; "
        "each gap belongs to one question at most. Ask plainly, one short paragraph each."
    ),
}
_REPLIES = {
    "spec-writer": '{"spec": "<the whole spec as Markdown>"}',
    "validator": (
        '{"gaps": [{"key": "short-key", "severity": "critical|important|minor", '
        '"summary": "...", "section": "..."}]}'
    ),
    "checklist": '{"checklist": "<the checklist as Markdown>"}',
    "gap-classifier": '{"questions": [{"summary": "...", "text": "...", "gaps": ["G-001"]}]}',
}


def role_prompt(role: str, feature_id: str, request: Mapping[str, Any]) -> str:
    """The prompt of one role: the task, the request as JSON, and the reply contract."""
    return (
        f"You are the {role} of taskgate's specification workflow, feature {feature_id}.\n"
        f"{_TASKS[role]}\n\n"
        "Do not edit files and do not run taskgate: taskgate writes the documents from your "
        "reply.\n\n"
        f"The request:\n```json\n{json.dumps(request, indent=2, sort_keys=True)}\n```\n\n"
        "End your reply with one JSON object, bare or in a ```json block, nothing after it:\n"
        f"{_REPLIES[role]}\n"
    )


@dataclass(frozen=True)
class SpecConfig:
    """The parsed `[spec]` table and the `[agents]` tables the roles' settings come from."""

    backend: str = "scripted"
    own: Mapping[str, Any] = field(default_factory=dict)  # [spec] options, checked
    agents: AgentsConfig = field(default_factory=AgentsConfig)
    timeout_minutes: int = 60  # [protocol] agent_timeout_minutes (C-02)
    declared: bool = True  # taskgate.toml has a [spec] backend (issue 17: no silent demo)

    def settings(self, backend: str, command: Sequence[str] = ()) -> AgentSettings:
        """A role's settings on `backend`: [spec] over [agents.<backend>] over read-only
        defaults; `command` (from --agent-command) replaces the command."""
        shared = dict(self.agents.backend_options.get(backend, {}))
        for key in READ_ONLY.get(backend, {}):
            shared.pop(key, None)
        own = self.own if backend == self.backend else {}
        options = {**READ_ONLY.get(backend, {}), **shared, **own}
        if command:
            options["command"] = list(command)
        env = {**options.pop("env", {})}
        timeout = options.pop("timeout_minutes", None) or self.timeout_minutes
        where = "[spec]" if own else f"[agents.{backend}]"
        # confined like the task agents ([agents] sandbox, issue 14), read-only: agents/reply.py
        return AgentSettings(backend, options, timeout, {}, env, where, self.agents.sandbox,
                             self.agents.sandbox_readable)  # fmt: skip


def parse_spec_config(config: Config, root: Path) -> SpecConfig:
    """`[spec]` and `[agents]` of taskgate.toml; UsageError names the key."""
    agents = parse_agents_config(config.agents, root)
    raw = dict(config.spec)
    declared = "backend" in raw
    backend = raw.pop("backend", "scripted")
    if backend not in BACKENDS:
        raise UsageError(
            f"taskgate.toml [spec]: backend must be one of {', '.join(BACKENDS)}, got {backend!r}",
            hint="see docs/spec.md, 'Agents'",
        )
    if backend == "scripted" and raw:
        raise UsageError(
            f"taskgate.toml [spec]: the scripted backend takes no options ({', '.join(raw)})",
            hint="pass a scenario with 'taskgate spec new --script FILE'",
        )
    own = check_backend_options(raw, backend, "[spec]") if raw else {}
    return SpecConfig(backend, own, agents, config.protocol.agent_timeout_minutes, declared)


def load_spec_config(repo: Path) -> SpecConfig:
    """The spec configuration of the repository whose main worktree is `repo`."""
    from taskgate.engine.config import load_config

    return parse_spec_config(load_config(repo), repo)


@dataclass(frozen=True)
class SpecPlace:
    """Where a workflow's agents run: the repository (their working directory) and the
    workflow's files; the configuration is read from the repository's taskgate.toml."""

    repo: Path
    paths: SpecPaths
    config: SpecConfig | None = None

    def spec_config(self) -> SpecConfig:
        """The given configuration, else the repository's."""
        return self.config or load_spec_config(self.repo)


class CliSpecBackend:
    """Runs each role on a command, claude or codex backend; the reply is the role's object."""

    def __init__(
        self,
        settings: AgentSettings,
        *,
        cwd: Path,
        files_dir: Path,
        feature_id: str,
        spec_dir: Path | None = None,
        timeout_s: float | None = None,
    ) -> None:
        self.settings = settings
        self.name = settings.backend
        self.cwd = cwd
        self.files_dir = files_dir
        self.feature_id = feature_id
        self.spec_dir = spec_dir or cwd
        self.timeout_s = timeout_s or float(settings.timeout_minutes or 60) * 60.0

    def invoke(self, role: str, request: Mapping[str, Any]) -> Mapping[str, Any]:
        """Run the role; the JSON object at the end of its reply."""
        if role not in _TASKS:
            raise AgentFailed(f"unknown spec role {role!r}")
        job = ReplyJob(
            agent=role,
            prompt=role_prompt(role, self.feature_id, request),
            cwd=self.cwd,
            files_dir=self.files_dir,
            stem=role,
            timeout_s=self.timeout_s,
            env={
                "TASKGATE_SPEC": self.feature_id,
                "TASKGATE_SPEC_ROLE": role,
                "TASKGATE_SPEC_DIR": str(self.spec_dir),
            },
            args=(role,),  # command: `EXE… ROLE` with the request as JSON on stdin
            stdin=json.dumps(request),
        )
        hint = (
            f"see {self.files_dir / role}.output.txt; fix the agent or its configuration, "
            f"then 'taskgate spec resume {self.feature_id}' retries this step"
        )
        reply = run_for_reply(self.settings, job)
        if not reply.ok:
            raise AgentFailed(
                f"spec agent {role} failed on the {self.name} backend: {reply.reason}", hint=hint
            )
        data = extract_json_object(reply.text)
        if data is None:
            snippet = reply.text.strip()[-200:] or "(empty)"
            raise AgentFailed(
                f"spec agent {role} ({self.name}) replied without a JSON object: {snippet!r}",
                hint=hint,
            )
        return data


def cli_backend(config: Mapping[str, Any], place: SpecPlace) -> CliSpecBackend:
    """The backend a workflow's `agents` field names, configured from taskgate.toml."""
    kind = str(config.get("backend"))
    if kind not in CLI_BACKENDS:
        raise UsageError(f"unknown spec agent backend {kind!r}", hint=f"use one of {BACKENDS}")
    command = [str(p) for p in config.get("command", [])]
    return CliSpecBackend(
        place.spec_config().settings(kind, command),
        cwd=place.repo,
        files_dir=place.paths.workflow / AGENTS_DIR,
        feature_id=place.paths.root.name,
        spec_dir=place.paths.root,
    )


def pin_command(command: str) -> str:
    """An --agent-command path made absolute: the roles run in the repository's root."""
    path = Path(command)
    if os.sep in command and path.exists():
        return str(path.resolve())
    return command
