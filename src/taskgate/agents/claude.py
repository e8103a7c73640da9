"""The `claude` backend: Claude Code CLI in headless (print) mode.

    claude -p --output-format json --permission-mode acceptEdits \\
           --allowedTools "Read,Edit,Write,…" [--model M] [--max-turns N] [args…]   < prompt

The prompt goes on stdin (no argument-length limit), the working directory is the agent's
worktree. With `--output-format json` Claude Code prints one object when the run ends
(documented shape, also the last line of `stream-json`):

    {"type": "result", "subtype": "success", "is_error": false, "result": "<final reply>",
     "session_id": "…", "total_cost_usd": 0.01, "num_turns": 3, "duration_ms": 1234, …}

`subtype` is "success" or an error such as "error_max_turns" / "error_during_execution"
(those may carry `errors` instead of `result`). The final reply must end with the taskgate
result object (prompts.RESULT_CONTRACT); it is parsed like the `command` backend's stdout.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from taskgate.agents.base import AgentRequest, AgentResult, error_result, parse_result_text, tail
from taskgate.agents.command import failed_process, run_agent_process, transcript

if TYPE_CHECKING:
    from taskgate.agents.config import AgentSettings

# Enough to read, edit and commit in the worktree and run the project's tests; the user widens
# or narrows it with allowed_tools. Approval is never among them: R-CKP-02.
DEFAULT_ALLOWED_TOOLS = (
    "Read",
    "Edit",
    "MultiEdit",
    "Write",
    "Glob",
    "Grep",
    "Bash(git status:*)",
    "Bash(git diff:*)",
    "Bash(git log:*)",
    "Bash(git add:*)",
    "Bash(git commit:*)",
)
_META_KEYS = ("session_id", "total_cost_usd", "num_turns", "duration_ms", "subtype")


def result_object(stdout: str) -> dict[str, Any] | None:
    """The `{"type": "result", …}` object: the whole stdout (json) or its last such line."""
    candidates = [stdout.strip(), *reversed(stdout.strip().splitlines())]
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(data, dict) and data.get("type") == "result":
            return data
    return None


@dataclass(frozen=True)
class ClaudeBackend:
    """Claude Code headless; options from [agents.claude] / [agents.<agent>]."""

    executable: str = "claude"
    permission_mode: str = "acceptEdits"
    allowed_tools: tuple[str, ...] = DEFAULT_ALLOWED_TOOLS
    model: str = ""
    max_turns: int = 0
    args: tuple[str, ...] = ()
    name: str = field(default="claude", init=False)

    @classmethod
    def from_settings(cls, settings: AgentSettings) -> ClaudeBackend:
        """From the agent's settings."""
        turns = settings.options.get("max_turns", 0)
        return cls(
            executable=settings.text("executable", "claude"),
            permission_mode=settings.text("permission_mode", "acceptEdits"),
            allowed_tools=settings.strings("allowed_tools", DEFAULT_ALLOWED_TOOLS),
            model=settings.text("model"),
            max_turns=int(turns),
            args=settings.strings("args"),
        )

    def command(self) -> list[str]:
        """The argument list (the prompt itself goes on stdin)."""
        cmd = [self.executable, "-p", "--output-format", "json"]
        if self.permission_mode:
            cmd += ["--permission-mode", self.permission_mode]
        if self.allowed_tools:
            cmd += ["--allowedTools", ",".join(self.allowed_tools)]
        if self.model:
            cmd += ["--model", self.model]
        if self.max_turns:
            cmd += ["--max-turns", str(self.max_turns)]
        return cmd + list(self.args)

    def run(self, request: AgentRequest) -> AgentResult:
        """Run Claude Code and read the taskgate result from its final reply."""
        proc = run_agent_process(request, self.command())
        failed = failed_process(proc, request, self.name)
        if failed is not None:
            return failed
        raw = transcript(proc)
        reply, reason, meta = final_reply(proc.stdout, proc.stderr, proc.returncode)
        if reply is None:
            failed_run = error_result(reason, backend=self.name, raw=raw, code=proc.returncode)
            return replace(failed_run, meta=meta)
        result = parse_result_text(reply, request.mode, backend=self.name)
        return replace(result, raw_output=raw, exit_code=proc.returncode, meta=meta)


def final_reply(
    stdout: str, stderr: str, returncode: int
) -> tuple[str | None, str, dict[str, Any]]:
    """Claude's final reply text, or None and why there is none; plus the run's metadata.

    Shared by the task backend and the one-shot runs of `agents.reply`: an error subtype,
    `is_error` or a missing result object is never read as a reply.
    """
    data = result_object(stdout)
    if data is None:
        detail = tail(stderr, 5) or stdout.strip()[:200] or "(no output)"
        return None, f"claude printed no result object (exit {returncode}): {detail}", {}
    meta = {key: data[key] for key in _META_KEYS if key in data}
    reply = data.get("result")
    if data.get("is_error") or data.get("subtype") != "success" or not isinstance(reply, str):
        errors = data.get("errors") or reply or "no details"
        return None, f"claude run failed ({data.get('subtype', 'unknown')}): {errors}", meta
    return reply, "", meta
