"""The PreToolUse verdict on one tool call (issues 7 and 15): every tool is judged.

Bash through the analyser (hooks/shell.py), its line judged below (`check_bash`); Write, Edit,
NotebookEdit, MCP tools and any tool whose input names a path by the places those paths are in
(hooks/policy.py); an MCP tool whose name says it reads is allowed (the effect check stands
behind it). The repository is the hook cwd's, else the project's (CLAUDE_PROJECT_DIR), else
that of a path the call names, else the one where this session holds its task: a cwd outside
the repository never switches the rules off. Where the actor is the main agent and may not
write its task's worktree (`guarded`), a program that may write anything, a line not fully
analysed or over the analyser's budget is refused too, with what to do instead.
"""

from __future__ import annotations

import os

from taskgate.hooks.dispatch import AGENT_TOOLS, READ_ONLY, WRITE_TOOLS, BadInput
from taskgate.hooks.policy import (
    ALLOW,
    PROTECTED_MARKERS,
    Actor,
    Layout,
    Verdict,
    _inside,
    _main_write,
    check_command,
    check_write,
    deny,
    forbids_main_writes,
    place,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from taskgate.hooks.shell import Analysis


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
    # Claude Code 2.1.332's Artifact tool saves an asset into `out_dir` (sdk-tools.d.ts); its
    # Projects tool reads `local_path`; and the spellings MCP servers use for where they write.
    "out_dir",
    "output_dir",
    "outdir",
    "output_file",
    "out_file",
    "local_path",
    "file_paths",
    "save_path",
    "download_path",
    "dest_path",
    "destination_path",
    "target_path",
    "target_dir",
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
    for where in candidates:
        if where:
            start = where if os.path.isdir(where) else os.path.dirname(where)
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
    """Whether PreToolUse must read the session's task: its effect-check baseline
    (hooks/effects.py baseline_path) does not exist yet. Checked here without importing
    effects.py: this is the fast path of every call."""
    if data.get("agent_type"):
        return False
    from taskgate.hooks.context import safe_name

    name = safe_name(data["session_id"]) + ".json"
    return not os.path.exists(os.path.join(layout.state_dir, "effects", name))


def _remember(verdict: Verdict, layout: Any, actor: Any) -> None:
    _WATCH.clear()
    if verdict.allow and not actor.agent and actor.task is not None:
        _WATCH.append((layout, actor))


# -- Bash: judging a line from its analysis (hooks/shell.py) ------------------------------


TYPE_CHECKING = False
if TYPE_CHECKING:
    from taskgate.hooks.shell import Analysis


def guarded(actor: Actor) -> bool:
    """True when the actor is the main agent in a state where it may not write its task's
    worktree: programs that may write anything are denied (issue 15)."""
    return not actor.agent and forbids_main_writes(actor.task)


def _guard_denial(actor: Actor, what: str, hint: str) -> Verdict:
    t = actor.task
    assert t is not None
    rule = _main_write("", "task-worktree", t).rule
    return deny(
        rule,
        f"{what}; in {t.state} the main agent may not change the task's files "
        f"(task '{t.name}'). {hint}",
    )


_READ_HINT = (
    "Use read-only commands (git status/log/diff, grep, cat, pytest, make -n: the read list is "
    "in docs/hooks.md) or delegate the change to a stakeholder agent"
)


def check_bash(analysis: Analysis, text: str, layout: Layout, actor: Actor) -> Verdict:
    """Judge a Bash command line from its analysis (shell.analyse)."""
    if analysis.budget:
        if _mentions_protected(text, layout) or guarded(actor):
            return deny(
                "R-REC-14",
                f"{analysis.budget}; split it into smaller commands (nothing was run)",
            )
        return ALLOW
    for command in analysis.commands:
        verdict = check_command(command, layout, actor)
        if not verdict.allow:
            return verdict
    for path in sorted(analysis.writes):
        verdict = check_write(path, layout, actor)
        if verdict.allow:
            verdict = _hard_link(path, layout, actor)
        if not verdict.allow:
            return verdict
    for directory in sorted(analysis.dir_writes):
        verdict = _check_dir_write(directory, layout, actor)
        if not verdict.allow:
            return verdict
    for tree in sorted(analysis.tree_writes):
        verdict = check_write(os.path.join(tree, "-"), layout, actor)  # git keeps to tracked files
        if not verdict.allow:
            return verdict
    for target in sorted(analysis.link_targets):
        if place(os.path.realpath(target), layout)[0] in ("store", "config", "git"):
            return deny(
                "R-LCK-09",
                f"a link to {target} would let later writes reach "
                "taskgate's files; read them directly or use the taskgate CLI",
            )
        if guarded(actor) and not check_write(target, layout, actor).allow:
            return _guard_denial(actor, f"a link to {target} would let writes reach it", _READ_HINT)
    for code in analysis.opaque:
        if _mentions_protected(code, layout):
            return deny(
                "R-LCK-09",
                "code that names taskgate's files counts as a write to the store; use the "
                "taskgate CLI (taskgate status / transition)",
            )
    for path, source in analysis.scripts:
        if _mentions_protected(source, layout):
            return deny(
                "R-LCK-09",
                f"the script {path} names taskgate's files, so running it counts as a write "
                "to the store; change task state only through the taskgate CLI",
            )
    if analysis.unbounded and guarded(actor):
        return _guard_denial(actor, f"{analysis.unbounded[0]}, so it may write files", _READ_HINT)
    if not analysis.complete:
        if _mentions_protected(text, layout):
            return deny(
                "R-LCK-09",
                "this command cannot be fully analysed ("
                f"{analysis.problems[0]}) and names taskgate's files; use the taskgate "
                "CLI to change task state",
            )
        if guarded(actor):
            return _guard_denial(
                actor,
                f"this command cannot be fully analysed ({analysis.problems[0]})",
                "Spell the paths out, or delegate to a stakeholder agent",
            )
    return ALLOW


def _hard_link(path: str, layout: Layout, actor: Actor) -> Verdict:
    """A file with several names may be a hard link to a protected file."""
    try:
        st = os.lstat(path)
    except OSError:
        return ALLOW
    if st.st_nlink < 2 or not os.path.isfile(path):
        return ALLOW
    try:
        db = os.stat(os.path.join(layout.state_dir, "state.db"))
        protected = (st.st_dev, st.st_ino) == (db.st_dev, db.st_ino)
    except OSError:
        protected = False
    if protected:
        return deny("R-LCK-09", f"{path} is a hard link to taskgate's store")
    if guarded(actor):
        return _guard_denial(
            actor, f"{path} has {st.st_nlink} names (a hard link may reach a protected file)",
            _READ_HINT,
        )  # fmt: skip
    return ALLOW


def _check_dir_write(directory: str, layout: Layout, actor: Actor) -> Verdict:
    real = os.path.realpath(directory)
    for protected in (layout.state_dir, layout.common_dir):
        if _inside(protected, real):
            return deny(
                "R-LCK-09",
                f"this command may delete or change files anywhere below "
                f"{real}, which holds taskgate's store or git's state; narrow it",
            )
    return check_write(os.path.join(real, "-"), layout, actor)


def _mentions_protected(text: str, layout: Layout) -> bool:
    return any(m in text for m in PROTECTED_MARKERS) or layout.state_dir in text
