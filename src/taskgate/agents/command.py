"""The `command` backend: any executable, with the contract in docs/agents.md.

working directory   the agent's worktree (branch T-A)
stdin               the rendered prompt (also in $TASKGATE_PROMPT_FILE)
environment         TASKGATE_TASK, TASKGATE_AGENT, TASKGATE_MODE, TASKGATE_ROUND,
                    TASKGATE_ATTEMPT, TASKGATE_REPORT_PATH, TASKGATE_PROMPT_FILE,
                    TASKGATE_RESULT_FILE, TASKGATE_TASK_DIR, TASKGATE_TASK_MD,
                    TASKGATE_WORKTREE, TASKGATE_BASE_REF; GIT_* and TASKGATE_SESSION removed
stdout              ends with one JSON object {"status": …} (or write it to
                    $TASKGATE_RESULT_FILE, which wins)
exit code           0: the JSON says how it went; anything else: ERROR
timeout             [protocol] agent_timeout_minutes (C-02): SIGTERM, then SIGKILL, to the
                    whole process group; the result is TIMEOUT
confinement         `[agents] sandbox` (agents/sandbox.py, docs/security.md): inside bubblewrap
                    only the worktree, the agent's own branch and the files above are writable
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from taskgate import process
from taskgate.agents import sandbox
from taskgate.agents.base import (
    AgentRequest,
    AgentResult,
    Mode,
    ResultStatus,
    error_result,
    extract_json_object,
    parse_result_text,
    tail,
)
from taskgate.engine.workspace import find_workspace
from taskgate.errors import TaskgateError, UsageError
from taskgate.fsutil import atomic_write_json
from taskgate.server import peers

if TYPE_CHECKING:
    from taskgate.agents.config import AgentSettings

# Inherited variables an agent must not see: git's (hooks export GIT_DIR …) and the
# orchestrator's session, so that an agent cannot act as the owner of the task (taskgate also
# takes the session from CLAUDE_CODE_SESSION_ID when `run` is started inside Claude Code).
_STRIP_PREFIXES = ("GIT_",)
_STRIP = {"TASKGATE_SESSION", "CLAUDE_CODE_SESSION_ID", "TASKGATE_FAILPOINT"}


def agent_env(request: AgentRequest) -> dict[str, str]:
    """The agent's environment: ours without GIT_*/the session, plus the TASKGATE_* contract."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(_STRIP_PREFIXES) and key not in _STRIP
    }
    env["GIT_TERMINAL_PROMPT"] = "0"
    if request.settings is not None:
        env.update(request.settings.env)
    env.update(request.env)
    env.update(
        {
            # TASKGATE_AGENT is also the marker that makes `taskgate approve` refuse (R-CKP-02).
            "TASKGATE_AGENT": request.agent,
            "TASKGATE_TASK": request.task,
            "TASKGATE_MODE": request.mode.value,
            "TASKGATE_ROUND": str(request.round),
            "TASKGATE_ATTEMPT": str(request.attempt),
            "TASKGATE_REPORT_PATH": str(request.report_path),
            "TASKGATE_PROMPT_FILE": str(request.prompt_file or ""),
            "TASKGATE_RESULT_FILE": str(result_file(request)),
            "TASKGATE_TASK_DIR": str(request.task_dir),
            "TASKGATE_TASK_MD": str(request.task_md),
            "TASKGATE_WORKTREE": str(request.worktree),
            "TASKGATE_BASE_REF": request.base_ref,
        }
    )
    return env


def result_file(request: AgentRequest) -> Path:
    """Where an agent may write its result JSON instead of printing it."""
    return (
        request.agent_dir / f"{request.mode.value}-r{request.round}-a{request.attempt}.answer.json"
    )


def stem(request: AgentRequest) -> str:
    """`<mode>-r<round>-a<attempt>`: the prefix of every file of one invocation."""
    return f"{request.mode.value}-r{request.round}-a{request.attempt}"


def agent_outputs(request: AgentRequest) -> list[Path]:
    """The files outside its worktree the protocol asks the agent to write: its result file,
    codex's last message, the requirement report (REQUIREMENTS) or task.md (SYNTHESIS)."""
    outputs = [result_file(request), request.agent_dir / f"{stem(request)}.last-message.txt"]
    if request.mode is Mode.REQUIREMENTS:
        outputs.append(request.report_path)
    elif request.mode is Mode.SYNTHESIS:
        outputs.append(request.task_md)
    return outputs


def _backend_dirs(request: AgentRequest) -> list[Path]:
    """Directories a backend keeps for the agent to write in place: codex's private dir
    (agents/codex_sandbox.py: its $TMPDIR and the staged report or task.md). Codex runs with
    its own sandbox off inside ours (CodexBackend.inner): bubblewrap cannot nest."""
    if request.settings is not None and request.settings.backend == "codex":
        return [request.agent_dir / "codex"]
    return []


def sandbox_record(request: AgentRequest) -> Path:
    """Where the confinement of one invocation is recorded (`Outcome.to_json`)."""
    return request.agent_dir / f"{stem(request)}.sandbox.json"


def run_agent_process(request: AgentRequest, cmd: Sequence[str]) -> process.Result:
    """Run `cmd` in the agent's worktree with the prompt on stdin; the group dies with it.

    Confined by `[agents] sandbox` when it can be (agents/sandbox.py); how it ran is written
    to `sandbox_record(request)` for `invoke` and the audit trail.
    """
    env = agent_env(request)
    setting = request.settings.sandbox if request.settings is not None else "auto"
    readable = request.settings.sandbox_readable if request.settings is not None else ()
    try:
        choice = sandbox.choose(setting)
    except sandbox.SandboxUnavailable as exc:
        return _refused(request, cmd, str(exc))
    missing = _missing(cmd, request.worktree, env)
    if missing is not None:
        return missing
    if choice.confined:
        try:
            with sandbox.confine(
                choice.bwrap,
                cmd,
                env,
                worktree=request.worktree,
                branch=request.branch,
                outputs=agent_outputs(request),
                readable=readable,
                writable_dirs=_backend_dirs(request),
            ) as jail:
                proc = _run(request, jail.argv, jail.env)
                outcome = jail.finish()
            atomic_write_json(sandbox_record(request), outcome.to_json())
            code = proc.returncode
            if 128 < code <= 128 + 64 and not proc.timed_out:
                code = 128 - code  # bwrap reports a child killed by signal N as 128 + N
            return replace(proc, cmd=tuple(cmd), returncode=code)
        except sandbox.ShadowError as exc:
            if setting == "bwrap":
                return _refused(request, cmd, f'[agents] sandbox = "bwrap" but {exc}')
            choice = sandbox.Choice(False, f"cannot confine: {exc}")
    proc = _run(request, cmd, env)
    atomic_write_json(
        sandbox_record(request), sandbox.Outcome(sandbox.UNCONFINED, choice.reason).to_json()
    )
    return proc


def _run(request: AgentRequest, cmd: Sequence[str], env: dict[str, str]) -> process.Result:
    registered: list[str] = []

    def register(pid: int) -> None:
        """The agent door's proof of who asks (server/peers.py): this process and everything
        it starts speak for this agent on this task, with no session of their own."""
        registered.extend(_register_agent(request, pid))

    try:
        return process.run(
            cmd,
            cwd=request.worktree,
            env=env,
            stdin=request.prompt,
            timeout=request.timeout_s,
            kill_group=True,
            started=register,
        )
    finally:
        for path in registered:
            peers.unregister(path)


def _register_agent(request: AgentRequest, pid: int) -> list[str]:
    started = peers.start_time(pid)
    if started is None:
        return []  # not Linux, or gone already: the door proves nothing for it
    identity = peers.Identity(peers.RUN, pid, started, task=request.task, agent=request.agent)
    try:
        ws = find_workspace(request.worktree)
        return [peers.register(ws.state_dir, identity)]
    except (OSError, TaskgateError):
        return []


def _missing(cmd: Sequence[str], cwd: Path, env: dict[str, str]) -> process.Result | None:
    """Exit 127 for a program that does not exist (before any sandbox is built), like
    process.run says it for one it cannot start."""
    if not cmd:
        return process.Result((), 127, "", "no command")
    name = cmd[0]
    found = (
        os.access(cwd / name, os.X_OK)
        if "/" in name
        else shutil.which(name, path=env.get("PATH")) is not None
    )
    if found:
        return None
    return process.Result(tuple(cmd), 127, "", f"{name}: No such file or directory")


def _refused(request: AgentRequest, cmd: Sequence[str], why: str) -> process.Result:
    """The agent is not started: confinement is required and impossible (exit 126)."""
    outcome = sandbox.Outcome(sandbox.UNCONFINED, why, violations=("not started: " + why,))
    atomic_write_json(sandbox_record(request), outcome.to_json())
    return process.Result(tuple(cmd), 126, "", f"taskgate: {why}")


def transcript(proc: process.Result) -> str:
    """stdout, then stderr under a separator: what is kept as the raw output."""
    if not proc.stderr.strip():
        return proc.stdout
    return f"{proc.stdout}\n--- stderr ---\n{proc.stderr}"


def failed_process(proc: process.Result, request: AgentRequest, backend: str) -> AgentResult | None:
    """TIMEOUT / ERROR for a process that timed out, could not start or exited non-zero."""
    raw = transcript(proc)
    if proc.timed_out:
        minutes = request.timeout_s / 60
        return AgentResult(
            ResultStatus.TIMEOUT,
            message=f"no result within {minutes:g} min; the agent's process group was killed",
            reason="agent timeout (C-02)",
            backend=backend,
            raw_output=raw,
            exit_code=proc.returncode,
        )
    if proc.returncode == 127 and not proc.stdout:
        return error_result(
            f"cannot run {proc.cmd[0]!r}: {proc.stderr.strip()} "
            f"(fix the command of [agents.{request.agent}] or [agents.{backend}] in taskgate.toml)",
            backend=backend,
            raw=raw,
            code=127,
        )
    if proc.returncode < 0:
        return error_result(
            f"the agent was killed by signal {-proc.returncode}",
            backend=backend,
            raw=raw,
            code=proc.returncode,
        )
    return None


@dataclass(frozen=True)
class CommandBackend:
    """Runs `command` (an argument list, no shell) as the agent."""

    command: tuple[str, ...]
    name: str = field(default="command", init=False)

    @classmethod
    def from_settings(cls, settings: AgentSettings) -> CommandBackend:
        """From `command = [...]` in [agents.command] or [agents.<agent>]."""
        command = settings.strings("command")
        if not command:
            raise UsageError(
                f"taskgate.toml {settings.where}: backend 'command' needs command = [\"...\"]",
                hint="see docs/agents.md, 'The command backend'",
            )
        return cls(command)

    def run(self, request: AgentRequest) -> AgentResult:
        """Run the executable and read its JSON answer."""
        answer = result_file(request)
        answer.unlink(missing_ok=True)  # a stale answer from an earlier attempt means nothing
        proc = run_agent_process(request, self.command)
        failed = failed_process(proc, request, self.name)
        if failed is not None:
            return failed
        raw = transcript(proc)
        if proc.returncode != 0:
            said = extract_json_object(proc.stdout) or {}
            message = said.get("message")
            reason = f"the agent exited with code {proc.returncode}"
            extra = message if isinstance(message, str) and message else tail(proc.stderr, 5)
            return error_result(
                f"{reason}: {extra}" if extra else reason,
                backend=self.name,
                raw=raw,
                code=proc.returncode,
            )
        text = proc.stdout
        if answer.is_file():
            text = answer.read_text(encoding="utf-8", errors="replace")
        result = parse_result_text(text, request.mode, backend=self.name)
        return replace(result, raw_output=raw, exit_code=0)


def forget_confinement(request: AgentRequest) -> None:
    """Remove an earlier record of this invocation (a resumed run repeats the attempt)."""
    sandbox_record(request).unlink(missing_ok=True)


def with_confinement(request: AgentRequest, result: AgentResult) -> AgentResult:
    """`result` with how the agent ran (meta["sandbox"]); an agent that tried to move another
    ref or its worktree's HEAD is an ERROR: its attempt is discarded and named (R-WTB-02)."""
    try:
        record = json.loads(sandbox_record(request).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return result  # not an agent process (the built-in backend runs inside taskgate)
    result = replace(result, meta={**result.meta, "sandbox": record})
    violations = [str(v) for v in record.get("violations") or []]
    if violations:
        shown = "; ".join(violations[:3]) + (
            f" (+{len(violations) - 3} more)" if len(violations) > 3 else ""
        )
        result = result.with_error(f"sandbox: {shown}")
    return result
