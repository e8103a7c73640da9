"""`taskgate hook EVENT`: one process per Claude Code hook event, failing closed (issue 7).

Reads the documented hook JSON from stdin and prints the documented answer (docs/hooks.md):
PreToolUse denies with `hookSpecificOutput.permissionDecision = "deny"` and a reason that says
what to do instead, and prints nothing to allow (the normal permission flow continues);
SessionStart and UserPromptSubmit inject `additionalContext`; PostToolUse records the audit
trail's tool usage. cli/main.py calls `run_hook` before building its parser.
"""

from __future__ import annotations

import os
import sys

from taskgate.hooks.jsonio import dumps, loads

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TextIO

    from taskgate.engine.core import Engine
    from taskgate.hooks.policy import Layout
    from taskgate.hooks.shell import Analysis

    Handler = Callable[[dict[str, Any]], "dict[str, Any] | None"]

# Tools that only read: always allowed, even when the store is unreadable, so that the person
# can still inspect (issue 7 "fail closed").
READ_ONLY = frozenset(
    {
        "Read",
        "Grep",
        "Glob",
        "LS",
        "WebFetch",
        "WebSearch",
        "TodoWrite",
        "BashOutput",
        "NotebookRead",
        "ListMcpResourcesTool",
    }
)
WRITE_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
AGENT_TOOLS = frozenset({"Task", "Agent"})  # "Task" was renamed "Agent" in Claude Code 2.1
EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "Stop",
    "SubagentStop",
    "SessionEnd",
)
_BY_KEY = {name.lower(): name for name in EVENTS}
# States in which a session may end without leaving work half-done (R-CKP-01 checkpoints).
RESTING = frozenset({"SYNTHESIS", "AWAITING_USER_APPROVAL", "CLEANUP"})


class BadInput(Exception):
    """The hook input is not the documented JSON object."""


def run_hook(argv: list[str], stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """Handle one event; returns the exit code (0, or 2 for unusable input: blocking)."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    event = argv[0] if argv else ""
    # `pre-tool-use`, `pre_tool_use` and `pretooluse` name PreToolUse too.
    event = _BY_KEY.get(event.replace("-", "").replace("_", "").lower(), event)
    if event in ("-h", "--help"):
        print(f"usage: taskgate hook EVENT < hook.json  (EVENT: {', '.join(EVENTS)})", file=stdout)
        return 0
    if event not in EVENTS:
        print(
            f"taskgate hook: unknown event {event!r}; expected one of {', '.join(EVENTS)}\n"
            "hint: check the hook command in .claude/settings.json (taskgate hooks status)",
            file=sys.stderr,
        )
        return 2
    try:
        data = _parse(stdin.read())
    except BadInput as exc:
        return _bad_input(event, str(exc), stdout)
    handler: Handler = _HANDLERS[event]
    try:
        answer = handler(data)
    except Exception as exc:  # the fail-closed boundary: a bug never allows a guarded call
        if os.environ.get("TASKGATE_DEBUG"):
            raise
        answer = _internal_error(event, data, exc)
    if answer:
        print(dumps(answer), file=stdout)
    return 0


def _parse(raw: str) -> dict[str, Any]:
    try:
        data = loads(raw)
    except ValueError as exc:
        raise BadInput(f"stdin is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise BadInput("stdin is not a JSON object")
    for key in ("session_id", "cwd"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise BadInput(f"the hook input has no {key!r}")
    if not os.path.isabs(data["cwd"]):
        raise BadInput("the hook input's cwd is not an absolute path")
    return data


def _bad_input(event: str, why: str, stdout: TextIO) -> int:
    reason = (
        f"[R-REC-14] taskgate cannot judge this call: {why}. Nothing was allowed; "
        "check the Claude Code version against docs/hooks.md"
    )
    if event == "PreToolUse":
        print(dumps(_deny_output(reason)), file=stdout)
        return 0
    # Other events guard nothing: say why on stderr and let the session go on.
    print(f"taskgate hook {event}: {why}", file=sys.stderr)
    return 0


def _deny_output(reason: str) -> dict[str, Any]:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }


def _context_output(event: str, text: str) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def _internal_error(event: str, data: dict[str, Any], exc: Exception) -> dict[str, Any] | None:
    rule = getattr(exc, "rule", "R-REC-14")
    text = (
        f"[{rule}] taskgate could not check this call ({type(exc).__name__}: {exc}); "
        "guarded actions are denied until it can. Run 'taskgate status' or "
        "'taskgate recover' (read-only tools stay allowed)"
    )
    if event == "PreToolUse":
        if data.get("tool_name") in READ_ONLY:
            return None
        return _deny_output(text)
    from taskgate.errors import EnvironmentFault

    if isinstance(exc, FileNotFoundError) and hasattr(exc, "hint"):  # spawn.UntrustedGit
        text = f"[{rule}] taskgate could not check what this {event} saw changed: {exc}"
        print(f"taskgate hook {event}: {text}", file=sys.stderr)
        shown = event in ("PostToolUse", "SessionStart", "UserPromptSubmit")
        return _context_output(event, text) if shown else None  # the others take none
    if isinstance(exc, EnvironmentFault):  # the machine refused (a held store lock): no repair
        hint = f"; {exc.hint}" if exc.hint else ""
        text = f"[{rule}] taskgate did not record this {event} ({type(exc).__name__}: {exc}){hint}"
    print(f"taskgate hook {event}: {text}", file=sys.stderr)
    if event in ("SessionStart", "UserPromptSubmit"):
        return _context_output(event, text)
    return None


# -- PreToolUse: the fast path ---------------------------------------------------------------


def pre_tool_use(data: dict[str, Any]) -> dict[str, Any] | None:
    """Deny guarded calls that break a rule; print nothing to let the normal flow continue.
    The first allowed call of a session holding a task leaves the baseline PostToolUse and
    every taskgate step compare with (hooks/effects.py)."""
    from taskgate.hooks.judge import _WATCH, judge

    verdict = judge(data)
    if not verdict.allow:
        return _deny_output(verdict.message())
    if not _WATCH:
        return None
    from taskgate.hooks.effects import before_tool

    layout, actor = _WATCH.pop()
    try:
        # Whenever the session's baseline is (re)made: a git the agent cannot have planted
        # first. Once a session found one, its agent cannot take it away (root-owned, never
        # the user's: spawn.agent_writable), and its PATH is the client's, fixed.
        before_tool(layout, actor, data["session_id"])
    except FileNotFoundError as exc:  # spawn.UntrustedGit (it has a hint): fail closed
        if not hasattr(exc, "hint") or data.get("tool_name") in READ_ONLY:
            raise  # _internal_error: denied, read-only tools excepted
        return _deny_output(
            f"[R-REC-14] taskgate cannot check what this call changes: {exc}. Nothing was "
            "allowed; read-only tools stay allowed"
        )
    return None


# -- the other events: without the engine in their usual case (hooks/engine_path.py else) ---


def session_start(data: dict[str, Any]) -> dict[str, Any] | None:
    """Resume text for the session's task (R-LCK-20, R-CKP-18); export TASKGATE_SESSION."""
    from taskgate.hooks import settings_check  # issue 14: the agent door, the hook settings

    report, _ = settings_check.at_session_start(data)
    return settings_check.with_report(_session_start(data), report)


def _session_start(data: dict[str, Any]) -> dict[str, Any] | None:
    _export_session(data["session_id"])
    state = _session_state(data)
    return _context_output("SessionStart", state) if state else None


def _session_state(data: dict[str, Any]) -> str | None:
    """The session's task and what to do next; None outside a taskgate workspace."""
    from taskgate.hooks.quick import session_start as quick

    text = quick(data)  # a session holding no task: no engine (issue 18)
    if text is not None:
        return text or None
    from taskgate.hooks.engine_path import session_state

    return session_state(data)


def _export_session(session: str) -> None:
    # The documented way for SessionStart to give later Bash commands an environment variable.
    env_file = os.environ.get("CLAUDE_ENV_FILE")
    if env_file and session.isprintable():
        with open(env_file, "a", encoding="utf-8") as handle:
            handle.write(f"export TASKGATE_SESSION={_shell_quote(session)}\n")


_SHELL_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-")


def _shell_quote(text: str) -> str:
    """shlex.quote without shlex (it imports `re`): the same output (tests compare them)."""
    if not text:
        return "''"
    if all(c in _SHELL_SAFE for c in text):
        return text
    return "'" + text.replace("'", "'\"'\"'") + "'"


def user_prompt_submit(data: dict[str, Any]) -> dict[str, Any] | None:
    """The person's own words: approvals and change requests at a checkpoint, else interruptions."""

    prompt = data.get("prompt")
    if not isinstance(prompt, str):
        raise BadInput("UserPromptSubmit input has no prompt")
    if client_generated(prompt):
        return None  # never an approval, never a change request (DESIGN "Trust")
    nested = started_by_agent()
    if nested:
        note = (
            f"taskgate: this prompt reached a client started from an agent's command ({nested}); "
            "it approves nothing and is no change request. Approvals come only from the person "
            "(their own prompt, terminal or the dashboard)"
        )
        return _context_output("UserPromptSubmit", note)
    from taskgate.hooks.quick import holds_no_task

    found: list[Layout | None] = []  # the workspace, discovered once for both
    if holds_no_task(data, found):
        return None  # nothing to record: answered without the engine (issue 18)
    from taskgate.hooks.prompt import record

    text = record(data, prompt, found)  # an interruption: recorded and anchored without the engine
    if text is not None:
        return _context_output("UserPromptSubmit", text) if text else None
    from taskgate.hooks.engine_path import on_owned_task
    from taskgate.hooks.record import handle_prompt

    text = on_owned_task(data, lambda engine, task: handle_prompt(engine, task, prompt))
    return _context_output("UserPromptSubmit", text) if text is not None else None


# Set in the environment of the commands an agent session runs but not in its own hooks'
# (verified with Claude Code 2.1.332 and Codex 0.169.0), and by `taskgate run` for its agents.
AGENT_COMMAND_VARS = (
    "CLAUDE_CODE_EXECPATH",
    "CODEX_TOOL_CALL_ID",
    "CODEX_THREAD_ID",
    "TASKGATE_AGENT",
)
CLIENTS = frozenset({"claude", "claude.exe", "codex"})


def started_by_agent() -> str:
    """Why this hook's client looks started by an agent's command ('' when it does not): a
    variable the agent's shell carries, or a second coding client among the hook's ancestors
    (`claude -p --resume <id> approved` run from the agent's Bash).

    A courtesy, not the boundary: an agent can unset variables or detach the process; inside a
    sandbox (docs/security.md) the copy cannot write the store whatever it claims."""
    found = next((name for name in AGENT_COMMAND_VARS if os.environ.get(name)), "")
    if found:
        return f"{found} is set"
    clients = 0
    pid = os.getppid()
    for _ in range(64):  # bounded: a cycle or a deep tree never hangs the hook
        if pid <= 1:
            break
        stat = _proc_stat(pid)
        if not stat:
            break  # not Linux, or the process is gone: nothing more to learn
        comm = stat[stat.find(b"(") + 1 : stat.rfind(b")")]
        clients += comm.decode("utf-8", "replace") in CLIENTS
        if clients > 1:
            return "another coding client is among its ancestors"
        pid = int(stat[stat.rfind(b")") + 2 :].split()[1])
    return ""


def _proc_stat(pid: int) -> bytes:
    """/proc/PID/stat (b"" when unreadable), read without a text file object: the prompt hook
    reads one per ancestor on every prompt (issue 18)."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        return os.read(fd, 4096)  # one read: the kernel renders the whole line (< 1 KB)
    except OSError:
        return b""
    finally:
        os.close(fd)


def client_generated(prompt: str) -> bool:
    """True for text Claude Code itself hands to UserPromptSubmit: a background agent's
    `<task-notification>`, a slash command's `<command-name>` / `<local-command-stdout>`, a
    `<system-reminder>` and the like all open with a tag that they close; the person's own
    words do not (verified with 2.1.332: tests/realclients)."""
    # `\s*<([a-z][a-z0-9_-]*)(?:\s[^>]*)?>` by hand: `re` costs the hook about 5 ms.
    text = prompt.lstrip()
    if len(text) < 2 or text[0] != "<" or text[1] not in _LOWER:
        return False
    end = 2
    while end < len(text) and text[end] in _TAG_CHARS:
        end += 1
    name, rest = text[1:end], text[end:]
    opened = rest.startswith(">") or (rest[:1].isspace() and ">" in rest)
    return opened and f"</{name}>" in prompt


_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz")
_TAG_CHARS = _LOWER | frozenset("0123456789_-")


def post_tool_use(data: dict[str, Any]) -> dict[str, Any] | None:
    """R-AUD-03 tool usage record; views edited behind taskgate's back are reported; while the
    main agent may not write its task worktree, the worktree and refs are compared with the
    PreToolUse baseline and any change is quarantined and reported (hooks/effects.py)."""
    analysis = _bash_analysis(data)
    pure = analysis is not None and analysis.reads_only and not analysis.runs_code
    if pure and not os.path.exists(guard_marker(data["session_id"])):
        # A plain read (git status, ls, grep) in a session whose main agent may write its task
        # worktree, or that holds no task: nothing to compare, and one stat to know it. In a
        # guarded session it is compared like any call: the analyser's "pure" is a prediction
        # (a PATH entry or the repository's config can make `cat` or `git status` write).
        return None
    from taskgate.hooks.effects import after_tool

    found = after_tool(data)
    if analysis is not None and _writes_nothing(analysis):
        return _context_output("PostToolUse", found) if found else None
    if not found:  # the usual case: recorded without the engine (hooks/quick.py, issue 18)
        from taskgate.hooks.preload import POST_RECORD, load

        load(POST_RECORD)
        from taskgate.hooks.quick import record

        if record(data, analysis) is not None:
            return None
    from taskgate.hooks.engine_path import on_owned_task, verify_snapshot
    from taskgate.hooks.record import record_tool_use

    def act(engine: Engine, task: str | None) -> str:
        snapshot = verify_snapshot(engine, task)
        recorded = record_tool_use(engine, task, data, analysis) if task else ""
        return "\n".join(t for t in (found, snapshot, recorded) if t)

    warning = on_owned_task(data, act, any_session=True)
    warning = found if warning is None else warning
    return _context_output("PostToolUse", warning) if warning else None


def guard_marker(session: str) -> str:
    """The file whose existence says that `session`'s effect-check baseline is guarded (its
    main agent may not write its task worktree): hooks/effects.py save() and drop() keep it,
    PostToolUse after a plain read stats it. Named from the session id alone, because finding
    the repository's baseline would cost the common unguarded call a walk up the directories
    and a read; a missing marker only defers detection to the next comparison."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    name = session.encode("utf-8", "surrogateescape").hex()[:200]
    return os.path.join(base, "taskgate", "guarded", name)


def _bash_analysis(data: dict[str, Any]) -> Analysis | None:
    """What a Bash call's command line may have written; None for other tools."""
    tool_input = data.get("tool_input")
    if data.get("tool_name") != "Bash" or not isinstance(tool_input, dict):
        return None
    command = tool_input.get("command")
    if not isinstance(command, str):
        return None
    from taskgate.hooks.shell import analyse

    return analyse(command, data["cwd"])


def _writes_nothing(found: Analysis) -> bool:
    """A command that provably writes no file (git status, a test run, grep: most Bash calls)
    leaves nothing to record and could not have touched a view or the snapshot, so
    PostToolUse answers without loading the engine."""
    return found.reads_only


def stop(data: dict[str, Any]) -> dict[str, Any] | None:
    """Warn when the session stops or ends holding a lock mid-phase (never blocks a stop)."""
    from taskgate.hooks.quick import session_end

    event = data.get("hook_event_name") or "Stop"
    held = session_end(data, event)  # without the engine in the usual case (issue 18)
    if held is None:
        from taskgate.hooks.engine_path import stop as by_engine

        held = by_engine(data, event)
    if len(held) != 2 or event == "SubagentStop" or held[1] in RESTING:
        return None
    name, state = held
    return {
        "systemMessage": f"taskgate: this session still holds task '{name}' in "
        f"{state}; a new session resumes it with 'taskgate start {name}' "
        "(the lock never expires, R-LCK-21)"
    }


_HANDLERS: dict[str, Handler] = {
    "SessionStart": session_start,
    "UserPromptSubmit": user_prompt_submit,
    "PreToolUse": pre_tool_use,
    "PostToolUse": post_tool_use,
    "Stop": stop,
    "SubagentStop": stop,
    "SessionEnd": stop,
}
