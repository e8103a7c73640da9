"""What one of taskgate's hook entries looks like in Claude Code's settings (the command form):
the marker, the matchers, the command and its matcher group.

`hooks install` writes these (hooks/install.py builds on them) and the SessionStart hook
compares the installed ones with them (hooks/settings_check.py), so they live apart from
install's file handling: standard library only, nothing that costs a hook process time.
"""

from __future__ import annotations

from taskgate.hooks.dispatch import READ_ONLY

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MARKER = "# taskgate-hook"
# Every tool but the read-only ones (issue 15): Edit, Write, Bash, Agent, MCP tools (mcp__...)
# and any tool a later client adds. Claude Code reads a matcher with other characters than
# letters, digits and `|` as an unanchored JavaScript regex, hence the anchors; read-only tools
# still never start a process (docs/hooks.md).
GUARDED = f"^(?!(?:{'|'.join(sorted(READ_ONLY))})$).+"
# Which calls each event's entry sees; PostToolUse the same calls, for the effect check.
MATCHERS: dict[str, str | None] = {
    "SessionStart": None,
    "UserPromptSubmit": None,
    "PreToolUse": GUARDED,
    "PostToolUse": GUARDED,
    "Stop": None,
    "SubagentStop": None,
    "SessionEnd": None,
}
TIMEOUT_S = 30
SECRET_HEADER = "X-Taskgate-Hook-Secret"  # server/hookdoor.py reads it (case-insensitive)
_FAIL_CLOSED = " || exit 2"


def hook_command(program: str, event: str) -> str:
    """The marked command for one event; PreToolUse fails closed if taskgate cannot start."""
    # Claude Code treats exit 2 as "block"; any other failure would let the tool call run.
    fail_closed = _FAIL_CLOSED if event == "PreToolUse" else ""
    return f"{program} {event}{fail_closed} {MARKER}"


def program_of(command: str, event: str) -> str | None:
    """The program a `hook_command(program, event)` was built from; None if it is not one."""
    fail_closed = _FAIL_CLOSED if event == "PreToolUse" else ""
    suffix = f" {event}{fail_closed} {MARKER}"
    return command[: -len(suffix)] if command.endswith(suffix) else None


def is_ours(hook: Any) -> bool:
    """True for an entry taskgate installed (a marked command, or an HTTP entry that sends
    taskgate's hook-secret header)."""
    if not isinstance(hook, dict):
        return False
    if hook.get("type") == "http":
        headers = hook.get("headers")
        return isinstance(headers, dict) and SECRET_HEADER in headers
    return MARKER in str(hook.get("command", ""))


def command_group(event: str, command: str) -> dict[str, Any]:
    """taskgate's matcher group for `event` running `command`."""
    group: dict[str, Any] = {}
    if MATCHERS[event] is not None:
        group["matcher"] = MATCHERS[event]
    entry: dict[str, Any] = {"type": "command", "command": command, "timeout": TIMEOUT_S}
    if event == "PreToolUse":
        # A hook that cannot start, times out or crashes blocks the call (Claude Code >= 2.1
        # `onFailure`; `|| exit 2` covers clients that predate it, except for the timeout).
        entry["onFailure"] = "block"
    group["hooks"] = [entry]
    return group
