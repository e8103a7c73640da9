"""Run a configured CLI backend once for its final reply: text, not a task status.

The task backends (`command`, `claude`, `codex`) run an agent in its worktree and read the task
result contract from its final reply. Other workflows — the spec roles (`taskgate.spec`) —
need the same executables, configured the same way ([agents.<backend>] in taskgate.toml), with
the same process handling and the same reading of each CLI's output, but a reply contract of
their own. `run_for_reply` gives them the final reply and leaves its parsing to the caller:

- the process runs in its own process group, killed on timeout (SIGTERM, then SIGKILL) and
  when it returns (`process.run(kill_group=True)`);
- the environment is the task agents' one: inherited GIT_* variables, the session and the
  failpoint stripped, GIT_TERMINAL_PROMPT=0, the `env` option, and TASKGATE_AGENT set — the
  marker that makes `taskgate approve` refuse (R-CKP-02);
- `claude`: the `{"type": "result"}` object (`claude.result_object`), an error subtype is an
  error; `codex`: the JSONL events (`codex.read_events`), the `--output-last-message` file or
  the last agent message; `command`: `$TASKGATE_RESULT_FILE` if written, else stdout;
- a timeout, a missing executable, a signal, a non-zero exit or no reply becomes a `Reply`
  with status TIMEOUT / ERROR and the reason. Nothing here raises for an agent failure.

Files go to `job.files_dir`: `<stem>.prompt.md` (also `$TASKGATE_PROMPT_FILE`),
`<stem>.answer.json` (`$TASKGATE_RESULT_FILE`), `<stem>.last-message.txt` (codex) and
`<stem>.output.txt` (the transcript).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from taskgate import process
from taskgate.agents.base import ResultStatus, extract_json_object, tail
from taskgate.agents.claude import ClaudeBackend, final_reply
from taskgate.agents.codex import CodexBackend, final_message
from taskgate.agents.command import _STRIP, _STRIP_PREFIXES, CommandBackend, transcript
from taskgate.agents.config import AgentSettings
from taskgate.errors import UsageError
from taskgate.fsutil import atomic_write, read_text

CLI_BACKENDS = ("command", "claude", "codex")


@dataclass(frozen=True)
class ReplyJob:
    """One run: who (`agent`, the TASKGATE_AGENT marker), what (`prompt`), where (`cwd`)."""

    agent: str
    prompt: str
    cwd: Path
    files_dir: Path  # prompt, answer, last message and transcript files
    stem: str
    timeout_s: float = 60 * 60.0
    env: Mapping[str, str] = field(default_factory=dict)  # extra variables, after settings.env
    args: tuple[str, ...] = ()  # command backend only: appended to the command
    stdin: str | None = None  # command backend only: sent instead of the prompt


@dataclass(frozen=True)
class Reply:
    """The agent's final reply (COMPLETE), or why there is none (ERROR / TIMEOUT)."""

    status: ResultStatus
    text: str = ""
    reason: str = ""
    exit_code: int | None = None
    raw_output: str = ""
    backend: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when there is a reply to parse."""
        return self.status is ResultStatus.COMPLETE


def reply_env(settings: AgentSettings, job: ReplyJob, **files: Path) -> dict[str, str]:
    """The environment of a task agent (command.agent_env) without the task's variables."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(_STRIP_PREFIXES) and key not in _STRIP
    }
    env["GIT_TERMINAL_PROMPT"] = "0"
    env.update(settings.env)
    env.update(job.env)
    env["TASKGATE_AGENT"] = job.agent  # approvals refuse (R-CKP-02)
    env.update({f"TASKGATE_{key.upper()}": str(path) for key, path in files.items()})
    return env


def run_for_reply(settings: AgentSettings, job: ReplyJob) -> Reply:
    """Run `settings.backend` (command, claude or codex) once and return its final reply."""
    name = settings.backend
    if name not in CLI_BACKENDS:
        raise ValueError(f"backend {name!r} has no executable; use one of {CLI_BACKENDS}")
    job.files_dir.mkdir(parents=True, exist_ok=True)
    prompt_file = job.files_dir / f"{job.stem}.prompt.md"
    answer = job.files_dir / f"{job.stem}.answer.json"
    last = job.files_dir / f"{job.stem}.last-message.txt"
    atomic_write(prompt_file, job.prompt)
    answer.unlink(missing_ok=True)  # a stale reply from an earlier run means nothing
    last.unlink(missing_ok=True)
    stdin = job.prompt
    if name == "command":
        cmd = [*CommandBackend.from_settings(settings).command, *job.args]
        stdin = job.prompt if job.stdin is None else job.stdin
    elif name == "claude":
        cmd = ClaudeBackend.from_settings(settings).command()
    else:
        cmd = CodexBackend.from_settings(settings).command_in(job.cwd, last)
    env = reply_env(settings, job, prompt_file=prompt_file, result_file=answer)
    proc, how = _run_confined(settings, job, cmd, env, stdin, outputs=(answer, last))
    atomic_write(job.files_dir / f"{job.stem}.sandbox.json", json.dumps(how) + "\n")
    raw = transcript(proc)
    if raw:
        atomic_write(job.files_dir / f"{job.stem}.output.txt", raw)
    failed = Reply(ResultStatus.ERROR, exit_code=proc.returncode, raw_output=raw, backend=name,
                   meta={"sandbox": how})  # fmt: skip
    if proc.timed_out:
        return replace(
            failed,
            status=ResultStatus.TIMEOUT,
            reason=f"no reply within {job.timeout_s:g} s; the agent's process group was killed",
        )
    if proc.returncode == 127 and not proc.stdout:
        return replace(failed, reason=f"cannot run {cmd[0]!r}: {proc.stderr.strip()}")
    if proc.returncode < 0:
        return replace(failed, reason=f"the agent was killed by signal {-proc.returncode}")
    if name == "command":
        return _command_reply(proc, answer, failed)
    if name == "claude":
        return _claude_reply(proc, failed)
    return _codex_reply(proc, last, failed)


def _run_confined(
    settings: AgentSettings,
    job: ReplyJob,
    cmd: list[str],
    env: dict[str, str],
    stdin: str,
    *,
    outputs: tuple[Path, ...],
) -> tuple[process.Result, dict[str, Any]]:
    """Run the role in the agents' sandbox (issue 14), read-only but for its reply files, as
    `[agents] sandbox` says; unconfined it is said on stderr. (result, how it ran)."""
    from taskgate.agents import sandbox

    try:
        choice = sandbox.choose(settings.sandbox)
    except sandbox.SandboxUnavailable as exc:
        raise UsageError(str(exc), hint="see docs/security.md, 'Modes'") from None
    if not choice.confined:
        print(f"warning: spec role {job.agent} runs unconfined ({choice.reason}); see "
              "docs/security.md", file=sys.stderr)  # fmt: skip
        proc = process.run(cmd, cwd=job.cwd, env=env, stdin=stdin, timeout=job.timeout_s,
                           kill_group=True)  # fmt: skip
        return proc, sandbox.Outcome(sandbox.UNCONFINED, choice.reason).to_json()
    with sandbox.confine(
        choice.bwrap, cmd, env, worktree=job.cwd, branch="", outputs=outputs,
        readable=settings.sandbox_readable, read_only=True,
    ) as jail:  # fmt: skip
        proc = process.run(jail.argv, cwd=job.cwd, env=jail.env, stdin=stdin,
                           timeout=job.timeout_s, kill_group=True)  # fmt: skip
        outcome = jail.finish()
    code = proc.returncode
    if 128 < code <= 128 + 64 and not proc.timed_out:
        code = 128 - code  # bwrap reports a child killed by signal N as 128 + N
    return replace(proc, cmd=tuple(cmd), returncode=code), outcome.to_json()


def _command_reply(proc: process.Result, answer: Path, failed: Reply) -> Reply:
    if proc.returncode != 0:
        said = extract_json_object(proc.stdout) or {}
        message = said.get("message")
        extra = message if isinstance(message, str) and message else tail(proc.stderr, 5)
        reason = f"the agent exited with code {proc.returncode}"
        return replace(failed, reason=f"{reason}: {extra}" if extra else reason)
    text = read_text(answer) if answer.is_file() else None
    return replace(failed, status=ResultStatus.COMPLETE, text=proc.stdout if text is None else text)


def _claude_reply(proc: process.Result, failed: Reply) -> Reply:
    reply, reason, meta = final_reply(proc.stdout, proc.stderr, proc.returncode)
    if reply is None:
        return replace(failed, reason=reason, meta=meta)
    return replace(failed, status=ResultStatus.COMPLETE, text=reply, meta=meta)


def _codex_reply(proc: process.Result, last: Path, failed: Reply) -> Reply:
    final, reason, meta = final_message(proc.stdout, proc.stderr, proc.returncode, last)
    if final is None:
        return replace(failed, reason=reason, meta=meta)
    return replace(failed, status=ResultStatus.COMPLETE, text=final, meta=meta)
