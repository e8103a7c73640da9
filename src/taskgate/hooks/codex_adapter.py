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
running command is judged as a Bash command line, should a Codex version send it to hooks.

Codex 0.169 does not: `write_stdin` reaches no hook (verified with the real binary). A shell or
interpreter started to read its code from stdin (`bash`, `python3` with a terminal) would then
run whatever the model types, unseen. So in a taskgate repository, or for a session that holds
a task, a Bash call that starts one is denied before the dispatcher sees it (R-REC-14: taskgate
cannot judge it); scripts, `bash -c '…'` and here-documents are judged as usual.

An agent that `taskgate run` started on the codex backend writes its report (or task.md) in
its private directory beside its worktree, which Codex's sandbox makes writable for it alone;
a call that writes only there is allowed before the dispatcher, which would take any path
under `.taskgate/` for the store's.

A prompt is the person's only when a person handed it to Codex. An agent can start Codex
itself, even on its own session (`codex exec resume <id> "approved"`); that Codex and its
hooks inherit the agent's command environment (AGENT_SHELL), so its UserPromptSubmit is
answered with a note and never reaches the dispatcher.
"""

from __future__ import annotations

import io
import os
import sys

from taskgate.hooks import dispatch
from taskgate.hooks.jsonio import dumps, loads

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TextIO

# Programs that read what to do from the terminal when started without a script or file: the
# shells and interpreters (also known to the Bash analyser), REPLs and database shells it does
# not classify, and editors (their commands are typed too).
INTERACTIVE = frozenset({
    "bash", "sh", "dash", "zsh", "ksh", "fish", "csh", "tcsh", "python", "python3", "ipython",
    "node", "nodejs", "deno", "bun", "ruby", "irb", "perl", "php", "lua", "tclsh", "wish", "R",
    "julia", "ghci", "sqlite3", "psql", "mysql", "gdb", "expect",
})  # fmt: skip
EDITORS = frozenset({"vi", "vim", "nvim", "view", "nano", "pico", "emacs", "ed", "ex", "micro",
                     "joe"})  # fmt: skip
# Set in the environment of every command an agent session runs, so also in a Codex that such
# a command started (`codex exec resume <id> "approved"`) and in its hooks: Codex's own
# (verified with 0.169.0), Claude Code's, and taskgate's for the agents `taskgate run` starts.
AGENT_SHELL = ("CODEX_TOOL_CALL_ID", "CODEX_THREAD_ID", "CLAUDECODE", "TASKGATE_AGENT")
# The private directory of an agent `taskgate run` started on the codex backend, where its
# report / task.md copy and $TMPDIR live (agents/codex_sandbox.SANDBOX_DIR; Codex's own sandbox
# already confines the agent to it).
PRIVATE_DIR = "codex"
PATCH_TOOL = "apply_patch"
STDIN_TOOL = "write_stdin"
BEGIN = "*** Begin Patch"
_HEADERS = ("*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: ")


def patch_paths(patch: str) -> list[str]:
    """The files a Codex patch writes, in order, without repeats ([] when it is no patch).

    Read as Codex's parser reads them (codex-rs/apply-patch/src/parser.rs): lines split at
    "\n" with a trailing "\r" dropped (Rust's `str::lines`), and a hunk's header trimmed
    before its marker is matched, so `  *** Add File: x` is a header (it used to be missed:
    the file was written unjudged). Every line is tried raw and trimmed, a superset of what
    Codex accepts (Python's whitespace includes Rust's)."""
    if BEGIN not in patch:
        return []
    paths: list[str] = []
    for raw in patch.split("\n"):
        raw = raw.removesuffix("\r")
        for line in dict.fromkeys((raw, raw.strip())):
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
    event = argv[0] if argv else ""
    key = event.replace("_", "").replace("-", "").lower()
    if key == "userpromptsubmit" and agent_shell():
        # The "prompt" was handed to a Codex that an agent's own command started: the agent's
        # words, never the person's (no approval, no change request), DESIGN Trust.
        note = (
            f"taskgate: this prompt came from a Codex started by an agent's command "
            f"({agent_shell()} is set); it approves nothing and is no change request"
        )
        print(dumps({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                            "additionalContext": note}}), file=stdout)  # fmt: skip
        return 0
    pre = key == "pretooluse"
    if pre and isinstance(data, dict):
        unseen = feeds_stdin(data)
        if unseen:
            print(dumps(_deny(unseen)), file=stdout)
            return 0
        if writes_only_private(data, calls):
            return 0  # the run agent's own files beside its worktree (its staged report)
    if calls is None:
        return dispatch.run_hook(argv, io.StringIO(raw), stdout)
    if not calls:
        reason = (
            "[R-REC-14] taskgate cannot tell which files this apply_patch changes, so it "
            "was not applied; send a patch in Codex's *** Begin Patch format"
        )
        if pre:
            print(dumps(_deny(reason)), file=stdout)
        return 0
    return _each(argv, calls, stdout)


def agent_shell() -> str:
    """The variable showing that this Codex runs inside an agent's command ('' for a person's)."""
    return next((name for name in AGENT_SHELL if os.environ.get(name)), "")


def private_dir() -> str:
    """The private directory of the `taskgate run` agent this Codex is ('' for others)."""
    agent, task_dir = os.environ.get("TASKGATE_AGENT"), os.environ.get("TASKGATE_TASK_DIR")
    if not agent or not task_dir or os.sep in agent or agent in (".", ".."):
        return ""
    return os.path.realpath(os.path.join(task_dir, "agents", agent, PRIVATE_DIR))


def writes_only_private(data: dict[str, Any], calls: list[dict[str, Any]] | None) -> bool:
    """True when every file the call writes is in the run agent's private directory (which
    the dispatcher, knowing only the protocol's places, would take for the store's)."""
    private = private_dir()
    cwd = data.get("cwd")
    if not private or not isinstance(cwd, str):
        return False
    paths: set[str] = set()
    if data.get("tool_name") == "Bash":
        tool_input = data.get("tool_input")
        command = tool_input.get("command") if isinstance(tool_input, dict) else None
        if not isinstance(command, str):
            return False
        from taskgate.hooks.shell import analyse

        found = analyse(command, cwd, home=os.path.expanduser("~"))
        if not found.complete or found.unbounded or found.opaque or found.scripts:
            return False
        paths = found.writes | found.dir_writes | found.link_targets | found.tree_writes
    elif calls:
        paths = {os.path.join(cwd, c["tool_input"]["file_path"]) for c in calls}
    inside = [os.path.realpath(p) for p in paths]
    return bool(inside) and all(p == private or p.startswith(private + os.sep) for p in inside)


def feeds_stdin(data: dict[str, Any]) -> str:
    """Why a Bash call starts an interpreter the model could then drive through write_stdin,
    which no hook sees ('' when it does not, or outside taskgate's repositories)."""
    tool_input = data.get("tool_input")
    command = tool_input.get("command") if isinstance(tool_input, dict) else None
    cwd, session = data.get("cwd"), data.get("session_id")
    if data.get("tool_name") != "Bash" or not isinstance(command, str) or not isinstance(cwd, str):
        return ""
    from taskgate.hooks.shell import analyse

    analysis = analyse(command, cwd, home=os.path.expanduser("~"))
    reasons = [r for r in analysis.unbounded if "from stdin" in r]
    here = "<<" in command  # a here-document or here-string is the program's stdin
    for found in analysis.commands:
        name = os.path.basename(found.argv[0]) if found.argv else ""
        scriptless = not here and all(arg.startswith("-") for arg in found.argv[1:])
        if name in EDITORS or (name in INTERACTIVE and scriptless):
            reasons.append(f"{name} reading its commands from the terminal")
    if not reasons:
        return ""
    from taskgate.hooks.context import load_layout, session_repo

    if load_layout(cwd) is None and not (isinstance(session, str) and session_repo(session)):
        return ""
    return (
        f"[R-REC-14] {reasons[0]}: Codex passes what is typed into a running command "
        "(write_stdin) to no hook, so taskgate cannot judge it. Run it non-interactively: "
        "bash -c '…', python3 script.py, or a here-document"
    )


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
