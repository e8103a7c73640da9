"""`taskgate hooks install/uninstall/status`: taskgate's entries in Claude Code's settings.json.

Our entries are marked (the command ends with `# taskgate-hook`, pre-commit's `is_our_script`
idea); install and uninstall are idempotent and never remove or reorder anyone else's hooks.

Where: Claude Code (verified with 2.1.332, docs/hooks.md) reads project settings only from
`.claude/` of the directory it starts in: not from the repository root above it, not from the
main worktree when it starts in a task or agent worktree. So the default scope is the user's
`~/.claude/settings.json`, the one file it reads wherever it starts; the hook finds the
repository from its cwd and answers nothing outside a taskgate repository. Project scope
(`--project`) is still offered for teams that commit their settings, and `status` names every
worktree where the hooks would then not load.
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from taskgate.errors import UsageError
from taskgate.fsutil import atomic_write
from taskgate.hooks.dispatch import EVENTS, READ_ONLY
from taskgate.process import run

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
LAUNCHER = Path(__file__).with_name("launch.py")


@dataclass
class Report:
    """What install/uninstall/status found or changed, per event."""

    path: Path
    changes: dict[str, str] = field(default_factory=dict)  # event -> added/updated/...
    problems: list[str] = field(default_factory=list)


def settings_path(repo: Path, home: Path, user: bool) -> Path:
    """Project scope `.claude/settings.json` in the main worktree, or the user's."""
    return (home if user else repo) / ".claude" / "settings.json"


def plugin_dir() -> Path:
    """The Claude Code plugin shipped in the package (`claude --plugin-dir PATH`)."""
    return Path(__file__).resolve().parent.parent / "plugin"


PLUGIN_PROGRAM = 'sh "${CLAUDE_PLUGIN_ROOT}/bin/hook"'


def plugin_hooks() -> dict[str, Any]:
    """The plugin's hooks/hooks.json: the same entries `install` writes, run through the
    plugin's bin/hook (tests/test_hooks_install.py checks the shipped file equals this)."""
    return {
        "description": "taskgate: the Task State Machine Protocol's hooks "
        "(generated from taskgate.hooks.install)",
        "hooks": {e: [_group(e, hook_command(PLUGIN_PROGRAM, e))] for e in EVENTS},
    }


def default_program() -> str:
    """How Claude Code should start the hook: this interpreter, without site, on launch.py.

    Absolute paths, so the hook runs this very installation whatever PATH the session has;
    `-S` saves the site module's start-up cost on every tool call (hooks/launch.py).
    """
    return shlex.join([sys.executable, "-S", str(LAUNCHER)])


def hook_command(program: str, event: str) -> str:
    """The marked command for one event; PreToolUse fails closed if taskgate cannot start."""
    # Claude Code treats exit 2 as "block"; any other failure would let the tool call run.
    fail_closed = " || exit 2" if event == "PreToolUse" else ""
    return f"{program} {event}{fail_closed} {MARKER}"


def is_ours(hook: Any) -> bool:
    """True for an entry taskgate installed."""
    return isinstance(hook, dict) and MARKER in str(hook.get("command", ""))


def _load(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not valid JSON: {exc}", hint="fix it by hand first") from None
    if not isinstance(data, dict) or not isinstance(data.get("hooks", {}), dict):
        raise UsageError(
            f"{path} does not have the settings shape (an object with 'hooks')",
            hint="fix it by hand first",
        )
    for event, groups in data.get("hooks", {}).items():
        if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
            raise UsageError(
                f"{path}: hooks.{event} is not a list of matcher groups",
                hint="fix it by hand first",
            )
    return data


def _save(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(data, indent=2) + "\n")


def _group(event: str, command: str) -> dict[str, Any]:
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


def install(path: Path, program: str) -> Report:
    """Add or update taskgate's entries in place; other entries keep their order."""
    data = _load(path)
    report = Report(path)
    hooks = data.setdefault("hooks", {})
    for event in EVENTS:
        groups: list[dict[str, Any]] = hooks.setdefault(event, [])
        wanted = _group(event, hook_command(program, event))
        mine = [g for g in groups if any(is_ours(h) for h in g.get("hooks", []))]
        if not mine:
            groups.append(wanted)
            report.changes[event] = "added"
        elif mine[0] == wanted:
            report.changes[event] = "unchanged"
        else:
            mine[0].clear()
            mine[0].update(wanted)  # same position in the list: nothing is reordered
            report.changes[event] = "updated"
        for extra in mine[1:]:  # a duplicate of ours (hand-copied): keep just one
            groups.remove(extra)
    if any(v != "unchanged" for v in report.changes.values()):
        _save(path, data)
    return report


def uninstall(path: Path) -> Report:
    """Remove taskgate's entries only; empty containers we leave behind are removed."""
    report = Report(path)
    if not path.exists():
        return report
    data = _load(path)
    hooks = data.get("hooks", {})
    for event in list(hooks):
        kept = []
        for group in hooks[event]:
            entries = group.get("hooks", [])
            if not any(is_ours(h) for h in entries):
                kept.append(group)
                continue
            report.changes[event] = "removed"
            rest = [h for h in entries if not is_ours(h)]
            if rest:
                kept.append({**group, "hooks": rest})
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
    if not hooks:
        data.pop("hooks", None)
    if report.changes:
        _save(path, data)
    return report


def has_ours(path: Path) -> bool:
    """True when the settings file at `path` holds a PreToolUse entry of taskgate's."""
    try:
        groups = _load(path).get("hooks", {}).get("PreToolUse", [])
    except UsageError:
        return False
    return any(is_ours(h) for g in groups for h in g.get("hooks", []))


_LOCAL = ("settings.json", "settings.local.json")


def switched_off(paths: list[Path]) -> list[str]:
    """Problems for settings files that set `disableAllHooks`: Claude Code then runs no hook at
    all, the user-scope ones included (verified with 2.1.332)."""
    problems = []
    for path in paths:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        if isinstance(data, dict) and data.get("disableAllHooks") is True:
            problems.append(
                f"{path} sets disableAllHooks, so Claude Code runs none of taskgate's hooks "
                "there; remove that setting"
            )
    return problems


def unguarded_worktrees(repo: Path, user_path: Path) -> list[str]:
    """Problems for the worktrees where Claude Code would start without taskgate's hooks.

    With the user-scope entries every directory is covered. Otherwise a worktree is covered
    only through `.claude/settings.json` or `.claude/settings.local.json` in its own root, and
    only when Claude Code starts exactly there (a subdirectory reads neither). Either way a
    `disableAllHooks` in the user's or a worktree's settings switches them all off.
    """
    from taskgate.git.repo import worktree_paths

    worktrees = list(worktree_paths(repo))
    problems = switched_off([user_path, *(w / ".claude" / n for w in worktrees for n in _LOCAL)])
    if has_ours(user_path):
        return problems
    fix = "run 'taskgate hooks install' (user scope: loaded wherever Claude Code starts)"
    for worktree in worktrees:
        local = [worktree / ".claude" / name for name in _LOCAL]
        if not any(has_ours(p) for p in local):
            problems.append(
                f"Claude Code started in {worktree} would not load taskgate's hooks "
                f"(it reads project settings only from the directory it starts in); {fix}"
            )
        else:
            problems.append(
                f"taskgate's hooks load only when Claude Code starts in the root of {worktree}, "
                f"not in one of its subdirectories; {fix}"
            )
    return problems


def status(path: Path, program: str, repo: Path) -> Report:
    """Is every event wired to this taskgate? Then run each command on a sample input."""
    report = Report(path)
    hooks = _load(path).get("hooks", {})
    for event in EVENTS:
        ours = [g for g in hooks.get(event, []) if any(is_ours(h) for h in g.get("hooks", []))]
        if not ours:
            report.changes[event] = "missing"
            report.problems.append(f"{event}: not installed (run 'taskgate hooks install')")
        elif ours[0] != _group(event, hook_command(program, event)):
            report.changes[event] = "outdated"
            report.problems.append(f"{event}: differs from this taskgate (run install again)")
        else:
            command = next(h["command"] for h in ours[0]["hooks"] if is_ours(h))
            problem = self_test(event, command, repo)
            report.changes[event] = "ok" if not problem else "failing"
            if problem:
                report.problems.append(f"{event}: {problem}")
    return report


def _sample(event: str, repo: Path) -> dict[str, Any]:
    base = {
        "session_id": "taskgate-selftest",
        "transcript_path": "",
        "cwd": str(repo),
        "permission_mode": "default",
        "hook_event_name": event,
    }
    extras: dict[str, dict[str, Any]] = {
        "SessionStart": {"source": "startup"},
        "UserPromptSubmit": {"prompt": "status?"},
        "PreToolUse": {
            "tool_name": "Write",
            "tool_use_id": "selftest",
            "tool_input": {"file_path": str(repo / ".taskgate" / "state.db"), "content": ""},
        },
        "PostToolUse": {
            "tool_name": "Bash",
            "tool_use_id": "selftest",
            "tool_input": {"command": "true"},
            "tool_response": {},
        },
        "Stop": {"stop_hook_active": False},
        "SubagentStop": {"stop_hook_active": False},
        "SessionEnd": {"reason": "other"},
    }
    return {**base, **extras[event]}


def self_test(event: str, command: str, repo: Path) -> str:
    """Run the installed command the way Claude Code does (a shell); '' when it behaves."""
    result = run(
        ["/bin/sh", "-c", command],
        cwd=repo,
        stdin=json.dumps(_sample(event, repo)),
        timeout=TIMEOUT_S,
    )
    if result.returncode != 0:
        return f"exit {result.returncode}: {result.stderr.strip()[:200]}"
    out = result.stdout.strip()
    try:
        answer = json.loads(out) if out else {}
    except ValueError:
        return f"printed something that is not JSON: {out[:200]}"
    if event == "PreToolUse":
        decision = answer.get("hookSpecificOutput", {}).get("permissionDecision")
        if decision != "deny":
            return "did not deny a write to the store (is taskgate initialised here?)"
    return ""
