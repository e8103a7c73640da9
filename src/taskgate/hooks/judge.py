"""The PreToolUse verdict on one tool call (issues 7 and 15): every tool is judged.

Bash through the analyser (hooks/shell.py, bashrules.py); Write/Edit/NotebookEdit, MCP tools
and any tool whose input names a path by the places those paths are in (hooks/policy.py); an
MCP tool whose name says it reads is allowed (the effect check stands behind it). The
repository is the hook cwd's, else the project's (CLAUDE_PROJECT_DIR), else that of a path the
call names, else the one where this session holds its task: a cwd outside the repository never
switches the rules off.
"""

from __future__ import annotations

import os

from taskgate.hooks.dispatch import AGENT_TOOLS, READ_ONLY, WRITE_TOOLS, BadInput

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from taskgate.hooks.policy import Verdict


# (layout, actor) of the last judged call when the effect check applies to it.
_WATCH: list[tuple[Any, Any]] = []


# Keys of a tool's input that name files (built-in, MCP and unknown tools alike).
PATH_KEYS = (
    "file_path",
    "path",
    "notebook_path",
    "filename",
    "file",
    "target",
    "destination",
    "dest",
    "source",
    "src",
    "directory",
    "dir",
    "target_file",
    "new_path",
    "old_path",
    "output",
    "output_path",
    "paths",
    "files",
    "edits",
    "repo_path",
    "repository",
    "cwd",
    "working_directory",
    "folder",
)


_READ_VERBS = (
    "read",
    "get",
    "list",
    "search",
    "find",
    "view",
    "show",
    "stat",
    "describe",
    "query",
    "fetch",
    "lookup",
    "count",
    "diff",
    "status",
    "tree",
    "info",
    "head",
)


def judge(data: dict[str, Any]) -> Verdict:
    """The verdict on one PreToolUse input (raises when it cannot be judged: fail closed)."""
    from taskgate.hooks import policy

    tool = data.get("tool_name")
    tool_input = data.get("tool_input")
    if not isinstance(tool, str) or not isinstance(tool_input, dict):
        raise BadInput("the hook input has no tool_name / tool_input")
    if tool in READ_ONLY:
        return policy.ALLOW
    cwd = data["cwd"]
    agent = data.get("agent_type") or ""
    agent = agent if isinstance(agent, str) else ""
    if tool == "Bash":
        from taskgate.hooks.bashrules import check_bash
        from taskgate.hooks.shell import analyse

        command = tool_input.get("command")
        if not isinstance(command, str):
            raise BadInput("Bash input has no command")
        analysis = analyse(command, cwd, home=os.path.expanduser("~"))
        places = [c for cmd in analysis.commands[:8] for c in cmd.cwds[:2]]
        places += sorted(analysis.writes)[:8] + sorted(analysis.dir_writes)[:8]
        places += sorted(analysis.tree_writes)[:8]
        found = _layout(data, places)
        if found is None:
            return policy.ALLOW  # not a taskgate repository, and no task of this session
        layout, from_cwd = found
        nobody = policy.Actor(None, agent)
        first = check_bash(analysis, command, layout, nobody)
        if not first.allow or (
            from_cwd and not policy.needs_task(analysis) and not _watched(layout, data)
        ):
            return first
        actor = _actor(layout, data, agent)
        verdict = check_bash(analysis, command, layout, actor)
        _remember(verdict, layout, actor)
        return verdict
    paths = _tool_paths(tool, tool_input, cwd)
    if tool in WRITE_TOOLS and not paths:
        raise BadInput(f"{tool} input has no file path")
    found = _layout(data, paths)
    if found is None:
        return policy.ALLOW
    layout = found[0]
    if tool in AGENT_TOOLS:
        actor = _actor(layout, data, agent)
        verdict = policy.check_task_tool(tool_input, actor)
        _remember(verdict, layout, actor)
        return verdict
    if tool not in WRITE_TOOLS and _reads(tool):
        return policy.ALLOW  # an MCP read tool: the effect check stays behind it
    nobody = policy.Actor(None, agent)
    checked = []
    for path in paths:
        first = policy.check_write(path, layout, nobody)
        if not first.allow:
            return first
        if policy.place(os.path.realpath(path), layout)[0] != "outside":
            checked.append(path)
    if not checked and not _watched(layout, data):
        return policy.ALLOW
    actor = _actor(layout, data, agent)
    for path in checked:
        verdict = policy.check_write(path, layout, actor)
        if not verdict.allow:
            return verdict
    _remember(policy.ALLOW, layout, actor)
    return policy.ALLOW


def _tool_paths(tool: str, tool_input: dict[str, Any], cwd: str) -> list[str]:
    """Absolute paths a tool's input names (file_path, path, notebook_path, lists of them)."""
    found: list[str] = []
    for key in PATH_KEYS:
        value = tool_input.get(key)
        values = value if isinstance(value, list) else [value]
        for item in values[:64]:
            if isinstance(item, dict):  # MultiEdit-style lists of edits carry no paths here
                item = item.get("file_path") or item.get("path")
            if isinstance(item, str) and item and "\n" not in item and len(item) < 4096:
                found.append(os.path.normpath(os.path.join(cwd, os.path.expanduser(item))))
    return found


def _reads(tool: str) -> bool:
    """An MCP tool whose name says it only reads (`mcp__fs__read_file`, `..._list_dir`)."""
    last = tool.rsplit("__", 1)[-1].lower().replace("-", "_")
    return last.startswith(_READ_VERBS)


def _layout(data: dict[str, Any], places: list[str]) -> tuple[Any, bool] | None:
    """The taskgate repository a call concerns, and whether it was found from the hook's cwd:
    the cwd's, else the project's (CLAUDE_PROJECT_DIR), else that of a path the call names,
    else the repository of this session's task (hooks/context.py session_repo)."""
    from taskgate.hooks.context import load_layout, session_repo

    layout = load_layout(data["cwd"])
    if layout is not None:
        return layout, True
    candidates = [os.environ.get("CLAUDE_PROJECT_DIR", ""), *places]
    candidates.append(session_repo(data["session_id"]) or "")
    for place in candidates:
        if place:
            start = place if os.path.isdir(place) else os.path.dirname(place)
            layout = load_layout(start) if start and os.path.isdir(start) else None
            if layout is not None:
                return layout, False
    return None


def _actor(layout: Any, data: dict[str, Any], agent: str) -> Any:
    from taskgate.hooks.context import load_actor, remember_session

    actor = load_actor(layout, data["session_id"], agent)
    if actor.task is not None:
        remember_session(data["session_id"], layout.repo)
    return actor


def _watched(layout: Any, data: dict[str, Any]) -> bool:
    """Whether this session's main agent is under the effect check: then every call needs
    the store, so that PreToolUse can leave a baseline (the flag file is effects.py's)."""
    if data.get("agent_type"):
        return False
    from taskgate.hooks.effects import watched

    return watched(layout, data["session_id"])


def _remember(verdict: Verdict, layout: Any, actor: Any) -> None:
    _WATCH.clear()
    if verdict.allow and not actor.agent and actor.task is not None:
        _WATCH.append((layout, actor))
