"""The `codex` backend: Codex CLI in non-interactive mode (`codex exec`), verified with 0.169.0.

    codex exec --json --sandbox workspace-write --cd <worktree> \\
               --output-last-message <agent_dir>/<mode>-rR-aA.last-message.txt \\
               --add-dir <agent_dir>/codex [--add-dir <worktree git dir> --add-dir <objects>] \\
               -c sandbox_workspace_write.exclude_slash_tmp=true \\
               -c sandbox_workspace_write.exclude_tmpdir_env_var=true \\
               [--model M] [args…] -                                   < prompt

`-` reads the prompt from stdin. `--json` prints one JSON event per line (documented in
codex-rs/exec/src/exec_events.rs):

    {"type": "thread.started", "thread_id": "…"}
    {"type": "turn.started"}
    {"type": "item.completed", "item": {"id": "item_3", "type": "agent_message", "text": "…"}}
    {"type": "turn.completed", "usage": {"input_tokens": …, "cached_input_tokens": …,
                                         "output_tokens": …}}
    {"type": "turn.failed", "error": {"message": "…"}}     {"type": "error", "message": "…"}

The final agent message (the `-o` file, else the last `agent_message` item) must end with the
taskgate result object. What the sandbox lets the agent write, and how it commits without any
writable ref, is in agents/codex_sandbox.py (add_git_dir = false: implementation runs cannot
commit; shared_tmp = true: /tmp and $TMPDIR stay writable, as Codex has them by default).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from taskgate.agents import codex_sandbox
from taskgate.agents.base import AgentRequest, AgentResult, error_result, parse_result_text, tail
from taskgate.agents.command import failed_process, run_agent_process, transcript
from taskgate.errors import UsageError
from taskgate.fsutil import read_text
from taskgate.process import Result

if TYPE_CHECKING:
    from taskgate.agents.config import AgentSettings

SANDBOXES = ("read-only", "workspace-write", "danger-full-access")


@dataclass(frozen=True)
class Events:
    """What a `codex exec --json` stream said."""

    thread_id: str = ""
    messages: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    completed: bool = False
    usage: dict[str, Any] = field(default_factory=dict)
    count: int = 0


def read_events(stdout: str) -> Events:
    """Fold the JSONL stream; lines that are not JSON objects are ignored (progress noise)."""
    thread = ""
    messages: list[str] = []
    errors: list[str] = []
    completed, count = False, 0
    usage: dict[str, Any] = {}
    for line in stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        count += 1
        kind = event.get("type")
        item = event.get("item")
        item = item if isinstance(item, dict) else {}
        if kind == "thread.started":
            thread = str(event.get("thread_id", ""))
        elif kind == "item.completed" and item.get("type") == "agent_message":
            messages.append(str(item.get("text", "")))
        elif kind == "turn.completed":
            completed = True
            found = event.get("usage")
            usage = found if isinstance(found, dict) else {}
        elif kind == "turn.failed":
            error = event.get("error")
            errors.append(str(error.get("message", error) if isinstance(error, dict) else error))
        elif kind == "error":
            errors.append(str(event.get("message", "")))
    return Events(thread, tuple(messages), tuple(errors), completed, usage, count)


@dataclass(frozen=True)
class CodexBackend:
    """Codex CLI `exec`; options from [agents.codex] / [agents.<agent>]."""

    executable: str = "codex"
    sandbox: str = "workspace-write"
    model: str = ""
    add_git_dir: bool = True
    shared_tmp: bool = False
    args: tuple[str, ...] = ()
    name: str = field(default="codex", init=False)

    @classmethod
    def from_settings(cls, settings: AgentSettings) -> CodexBackend:
        """From the agent's settings; an unknown sandbox names the key."""
        sandbox = settings.text("sandbox", "workspace-write")
        if sandbox not in SANDBOXES:
            raise UsageError(
                f"taskgate.toml {settings.where}: sandbox must be one of "
                f"{', '.join(SANDBOXES)}, got {sandbox!r}",
                hint="workspace-write lets the agent edit and commit in its worktree",
            )
        return cls(
            executable=settings.text("executable", "codex"),
            sandbox=sandbox,
            model=settings.text("model"),
            add_git_dir=bool(settings.options.get("add_git_dir", True)),
            shared_tmp=bool(settings.options.get("shared_tmp", False)),
            args=settings.strings("args"),
        )

    def confinement(self, request: AgentRequest) -> codex_sandbox.Confinement:
        """What this run may write (agents/codex_sandbox.py)."""
        return codex_sandbox.plan(request, commit=self.add_git_dir)

    def _roots(self, conf: codex_sandbox.Confinement) -> list[str]:
        if self.sandbox != "workspace-write":
            return []  # read-only writes nothing; danger-full-access has no roots to add
        return codex_sandbox.codex_args(conf, shared_tmp=self.shared_tmp)

    def inner(self, request: AgentRequest) -> CodexBackend:
        """The backend as it runs under taskgate's own sandbox (agents/sandbox.py), if any.

        Codex's sandbox is bubblewrap too, and taskgate's forbids new user namespaces inside
        it (`--disable-userns`): nested, every command the model runs would fail. So when
        taskgate confines the agent, Codex runs without its own sandbox and taskgate's is the
        boundary (same worktree, private git namespace, the report/task.md copied back).
        """
        from taskgate.agents import sandbox

        setting = request.settings.sandbox if request.settings is not None else "auto"
        try:
            confined = sandbox.choose(setting).confined
        except sandbox.SandboxUnavailable:
            return self  # run_agent_process refuses to start the agent and says why
        if not confined or self.sandbox == "read-only":
            return self
        return replace(self, sandbox="danger-full-access")

    def command_in(self, cwd: Path, last: Path, extra: list[str] | None = None) -> list[str]:
        """`codex exec` working in `cwd`, writing its final message to `last`; `-` makes codex
        read the prompt from stdin. One-shot replies (agents/reply.py) get no extra roots."""
        cmd = [self.executable, "exec", "--json", "--sandbox", self.sandbox]
        cmd += ["--cd", str(cwd), "--output-last-message", str(last), *(extra or [])]
        if self.model:
            cmd += ["--model", self.model]
        return [*cmd, *self.args, "-"]

    def run(self, request: AgentRequest) -> AgentResult:
        """Run `codex exec` confined to what its mode must write; read the taskgate result
        from the final agent message."""
        last = _last(request)
        last.unlink(missing_ok=True)
        backend = self.inner(request)
        if backend.sandbox != "workspace-write":
            proc = run_agent_process(request, backend.command_in(request.worktree, last))
            return backend._result(proc, request, last)
        conf = backend.confinement(request)
        problems: list[str] = []
        try:
            seen = codex_sandbox.prepare(conf, request)
            cmd = backend.command_in(request.worktree, last, backend._roots(conf))
            proc = run_agent_process(seen, cmd)
        finally:
            problems = codex_sandbox.finish(conf, request)
        result = backend._result(proc, request, last)
        return result.with_error("; ".join(problems)) if problems else result

    def _result(self, proc: Result, request: AgentRequest, last: Path) -> AgentResult:
        failed = failed_process(proc, request, self.name)
        if failed is not None:
            return failed
        raw = transcript(proc)
        final, reason, meta = final_message(proc.stdout, proc.stderr, proc.returncode, last)
        if final is None:
            failed_run = error_result(reason, backend=self.name, raw=raw, code=proc.returncode)
            return replace(failed_run, meta=meta)
        result = parse_result_text(final, request.mode, backend=self.name)
        meta["codex_sandbox"] = self.sandbox  # what Codex applied to the model's commands
        return replace(result, raw_output=raw, exit_code=proc.returncode, meta=meta)


def _last(request: AgentRequest) -> Path:
    """Where `--output-last-message` writes (outside the worktree)."""
    stem = f"{request.mode.value}-r{request.round}-a{request.attempt}"
    return request.agent_dir / f"{stem}.last-message.txt"


def final_message(
    stdout: str, stderr: str, returncode: int, last: Path
) -> tuple[str | None, str, dict[str, Any]]:
    """Codex's final agent message, or None and why there is none; plus thread id and usage.

    Shared by the task backend and the one-shot runs of `agents.reply`.
    """
    events = read_events(stdout)
    meta: dict[str, Any] = {"thread_id": events.thread_id, "usage": events.usage}
    if events.count == 0:
        detail = tail(stderr, 5) or stdout.strip()[:200] or "(no output)"
        return None, f"codex printed no JSON events (exit {returncode}): {detail}", meta
    if (events.errors and not events.completed) or returncode != 0:
        detail = "; ".join(events.errors) or tail(stderr, 5) or "no details"
        return None, f"codex run failed (exit {returncode}): {detail}", meta
    final = (read_text(last) or "").strip() or (events.messages[-1] if events.messages else "")
    if not final:
        return None, "codex finished without a final agent message", meta
    return final, "", meta
