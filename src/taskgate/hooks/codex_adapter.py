"""Codex CLI hook inputs, translated for the one dispatcher (hooks/dispatch.py), issue 13.

Codex 0.169 sends Claude Code's hook JSON (session_id, cwd, hook_event_name, tool_name,
tool_input, tool_use_id, plus turn_id and model) and reads Claude Code's answers
(`hookSpecificOutput.permissionDecision = "deny"` blocks the call and the reason reaches the
model). Its tools reach a hook as:

    exec_command / shell     tool_name "Bash", tool_input {"command": "<the command line>"}
    apply_patch              tool_name "apply_patch", tool_input {"command": "<the patch>"}
    write_stdin              tool_name "write_stdin" (text typed into a running command)
    MCP tools                tool_name "mcp__<server>__<tool>", tool_input the arguments

Bash and MCP calls go to the dispatcher as they are. An apply_patch is judged as one Write per
file it adds, updates, deletes or moves to (the patch's `*** Add File:` … headers, Codex's own
grammar); a patch whose files cannot be read is denied (fail closed). Text typed into a
running command is judged as a Bash command line.
"""

from __future__ import annotations

import io
import sys

from taskgate.hooks import dispatch
from taskgate.hooks.jsonio import dumps, loads

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TextIO

PATCH_TOOL = "apply_patch"
STDIN_TOOL = "write_stdin"
BEGIN = "*** Begin Patch"
_HEADERS = ("*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: ")


def patch_paths(patch: str) -> list[str]:
    """The files a Codex patch writes, in order, without repeats ([] when it is no patch)."""
    if BEGIN not in patch:
        return []
    paths: list[str] = []
    for line in patch.splitlines():
        for header in _HEADERS:
            if line.startswith(header):
                path = line[len(header) :].strip()
                if path and path not in paths:
                    paths.append(path)
    return paths


def _patch_text(tool_input: Any) -> str:
    """The patch inside an apply_patch input: `command` in 0.169, else any string holding one."""
    if isinstance(tool_input, str):
        return tool_input
    values = list(tool_input.values()) if isinstance(tool_input, dict) else []
    for value in values:
        for text in value if isinstance(value, list) else [value]:
            if isinstance(text, str) and BEGIN in text:
                return text
    return ""


def translate(data: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The dispatcher inputs one Codex hook input stands for; None: pass it on unchanged;
    [] for a patch whose files cannot be read."""
    tool = data.get("tool_name")
    if tool == PATCH_TOOL:
        paths = patch_paths(_patch_text(data.get("tool_input")))
        return [
            {**data, "tool_name": "Write", "tool_input": {"file_path": path, "content": ""}}
            for path in paths
        ]
    if tool == STDIN_TOOL:
        tool_input = data.get("tool_input")
        chars = tool_input.get("chars") if isinstance(tool_input, dict) else None
        if isinstance(chars, str) and chars.strip():
            return [{**data, "tool_name": "Bash", "tool_input": {"command": chars}}]
        return None  # polling a running command for its output writes nothing
    return None


def run_codex_hook(
    argv: list[str], stdin: TextIO | None = None, stdout: TextIO | None = None
) -> int:
    """Handle one Codex hook event through the dispatcher; returns the exit code."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    raw = stdin.read()
    try:
        data = loads(raw)
    except ValueError:
        data = None
    calls = translate(data) if isinstance(data, dict) else None
    if calls is None:
        return dispatch.run_hook(argv, io.StringIO(raw), stdout)
    event = argv[0] if argv else ""
    if not calls:
        reason = (
            "[R-REC-14] taskgate cannot tell which files this apply_patch changes, so it "
            "was not applied; send a patch in Codex's *** Begin Patch format"
        )
        if event.replace("_", "").replace("-", "").lower() == "pretooluse":
            print(dumps(_deny(reason)), file=stdout)
        return 0
    return _each(argv, calls, stdout)


def _each(argv: list[str], calls: list[dict[str, Any]], stdout: TextIO) -> int:
    """Run the dispatcher once per call: the first denial wins; context texts are joined."""
    texts: list[str] = []
    answer: dict[str, Any] = {}
    for call in calls:
        out = io.StringIO()
        code = dispatch.run_hook(argv, io.StringIO(dumps(call)), out)
        printed = out.getvalue().strip()
        if code != 0:
            if printed:
                print(printed, file=stdout)
            return code
        if not printed:
            continue
        found = loads(printed)
        specific = found.get("hookSpecificOutput", {}) if isinstance(found, dict) else {}
        if specific.get("permissionDecision") == "deny":
            print(printed, file=stdout)
            return 0
        if specific.get("additionalContext"):
            texts.append(str(specific["additionalContext"]))
            answer = found
    if answer:
        answer["hookSpecificOutput"]["additionalContext"] = "\n".join(texts)
        print(dumps(answer), file=stdout)
    return 0


def _deny(reason: str) -> dict[str, Any]:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }
