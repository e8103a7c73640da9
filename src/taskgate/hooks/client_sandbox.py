"""The clients' own sandbox and permission settings, derived from taskgate's layout
(DESIGN.md Trust, layer 1 for interactive sessions).

Claude Code runs Bash inside its own OS sandbox (bubblewrap on Linux, Seatbelt on macOS) when
`sandbox.enabled` is set; its file tools (Edit, Write) are outside that sandbox and obey
`permissions.deny`. Key names are those of Claude Code 2.1.332's settings schema (checked
against the binary's strings): `sandbox.enabled`, `sandbox.failIfUnavailable`,
`sandbox.allowUnsandboxedCommands`, `sandbox.filesystem.allowWrite` / `denyWrite`. Paths use
Claude Code's prefixes: `//abs/path` is absolute (a bare `/x` would be relative to the
settings file's directory).

What a session may write: the task directories (agent worktrees, task.md, reports) and the
repository's git dir (commits in those worktrees need objects, their refs and worktree
metadata). What it may not: the store and its snapshot, taskgate.toml, the hook and sandbox
settings (.claude/, the user's ~/.claude/settings.json, Codex's config), the main branch's
ref, git hooks and config, the governed marker, the agent door's registrations of who may
speak for which session (`.taskgate/peers`), and the views (task.json, the audit trail,
flags, agents' status.json). Other refs stay writable for commits in task worktrees; moving
them is caught by taskgate's effect checks (layer 2), not prevented here. docs/security.md.

`claude_sandbox_settings` and `codex_sandbox_settings` are pure; `merge_settings` and
`unmerge_settings` add them to, and take them out of, someone's settings without touching
entries that are not ours (STYLE.md 8).
"""

from __future__ import annotations

import os
import sys

from taskgate.hooks.policy import Layout

# copy, shutil and typing are imported where used: the SessionStart hook reads these settings
# (hooks/settings_check.py) and would pay ~40 ms for them (issue 14).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

STORE_FILES = ("state.db", "state.db-wal", "state.db-shm", "state.db-journal", "hook-snapshot.json",
               "hook-snapshot.clock",  # the clock: issue 20 (store/pg_hook.py)
               "hook-snapshot.gen")  # fmt: skip  # which file a step may splice (snapshot.py)
VIEWS = ("task.json", "audit-trail.json", "store-record.jsonl", "*.flag", "agents/*/status.json")
MAIN_REFS = ("main", "master")
GOVERNED_MARKER = "taskgate-governed"  # engine/workspace.py
PEERS = "peers"  # server/peers.py DIR
DOOR_DIR = "taskgate"  # in the git dir: the agent door's socket and TCP endpoint (server/)
_DIRS = (".claude", "hooks", "info", PEERS, DOOR_DIR)  # protected dirs: contents denied too


def _abs(path: str) -> str:
    """Claude Code's spelling of an absolute path."""
    return "/" + os.path.abspath(path)


def protected_paths(layout: Layout, *, home: str, main_branch: str = "main") -> list[str]:
    """Absolute paths (and globs) no agent may write, for this repository."""
    repo, common, state, tasks = layout.repo, layout.common_dir, layout.state_dir, layout.tasks_root
    paths = [os.path.join(state, name) for name in STORE_FILES]
    paths.append(os.path.join(state, PEERS))  # who the agent door acts for (server/peers.py)
    paths += [os.path.join(repo, "taskgate.toml"), os.path.join(repo, ".claude")]
    paths += [os.path.join(tasks, "*", view) for view in VIEWS]
    branches = dict.fromkeys((main_branch, *MAIN_REFS))
    paths += [os.path.join(common, "refs", "heads", b) for b in branches]
    paths += [os.path.join(common, name) for name in ("hooks", "config", GOVERNED_MARKER, "info",
                                                     DOOR_DIR)]  # fmt: skip
    paths += [
        os.path.join(home, ".claude", "settings.json"),
        os.path.join(home, ".claude", "settings.local.json"),
        os.path.join(home, ".codex", "config.toml"),
        os.path.join(home, ".codex", "hooks.json"),
    ]
    return paths


def unsupported() -> str:
    """Why Claude Code's sandbox cannot run on this machine ('' when it can): it needs macOS,
    or Linux with bubblewrap (working here) and socat."""
    if sys.platform == "darwin":
        return ""
    if not sys.platform.startswith("linux"):
        return f"Claude Code's sandbox does not run on {sys.platform}"
    import shutil

    missing = [tool for tool in ("bwrap", "socat") if shutil.which(tool) is None]
    if missing:
        return (
            f"Claude Code's sandbox on Linux needs {' and '.join(missing)} "
            "(Debian/Ubuntu: apt-get install bubblewrap socat)"
        )
    from taskgate.agents.sandbox import probe

    return probe()[1]


def claude_sandbox_settings(
    layout: Layout, *, home: str | None = None, main_branch: str = "main"
) -> dict[str, Any]:
    """Claude Code settings that confine what a session's Bash can write, and deny the file
    tools the same places."""
    home = home if home is not None else os.path.expanduser("~")
    protected = protected_paths(layout, home=home, main_branch=main_branch)
    deny_write = [_abs(p) for p in protected]
    rules = [f"{tool}({_abs(p)})" for p in protected for tool in ("Edit", "Write")]
    rules += [f"{tool}({_abs(p)}/**)" for p in protected if os.path.basename(p) in _DIRS
              for tool in ("Edit", "Write")]  # fmt: skip
    return {
        "sandbox": {
            "enabled": True,
            "failIfUnavailable": True,
            "allowUnsandboxedCommands": False,
            "filesystem": {
                "allowWrite": [_abs(layout.tasks_root), _abs(layout.common_dir)],
                "denyWrite": deny_write,
            },
        },
        "permissions": {"deny": rules},
    }


def codex_sandbox_settings(layout: Layout) -> dict[str, Any]:
    """Codex's ~/.codex/config.toml keys: workspace-write, with the task directories and the
    git dir as writable roots (Codex keeps `.git` and `.codex` inside a writable root
    read-only itself); the rest of the file system is read-only to its commands."""
    return {
        "sandbox_mode": "workspace-write",
        "sandbox_workspace_write": {
            "writable_roots": [layout.tasks_root, layout.common_dir],
            "network_access": True,  # agents call their model's API
        },
    }


def merge_settings(existing: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    """`existing` with `ours` added: tables merged, list entries appended once, our scalars
    set (a security setting is not left to the value it had). `existing` is not changed."""
    import copy

    merged = copy.deepcopy(existing)
    for key, value in ours.items():
        current = merged.get(key)
        if isinstance(value, dict) and isinstance(current, dict):
            merged[key] = merge_settings(current, value)
        elif isinstance(value, list) and isinstance(current, list):
            merged[key] = current + [v for v in value if v not in current]
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def unmerge_settings(existing: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    """`existing` without what `merge_settings` added: our list entries, and our scalars where
    they still hold our value; tables left empty are removed."""
    import copy

    result = copy.deepcopy(existing)
    for key, value in ours.items():
        if key not in result:
            continue
        current = result[key]
        if isinstance(value, dict) and isinstance(current, dict):
            rest = unmerge_settings(current, value)
            if rest:
                result[key] = rest
            else:
                del result[key]
        elif isinstance(value, list) and isinstance(current, list):
            rest_list = [v for v in current if v not in value]
            if rest_list:
                result[key] = rest_list
            else:
                del result[key]
        elif current == value:
            del result[key]
    return result


def has_ours(existing: dict[str, Any], ours: dict[str, Any]) -> list[str]:
    """The dotted keys of `ours` that `existing` lacks or weakens ([] when all are in place)."""
    missing: list[str] = []
    for key, value in ours.items():
        current = existing.get(key)
        if isinstance(value, dict):
            inner = has_ours(current if isinstance(current, dict) else {}, value)
            missing += [f"{key}.{k}" for k in inner]
        elif isinstance(value, list):
            have = current if isinstance(current, list) else []
            if any(v not in have for v in value):
                missing.append(key)
        elif current != value:
            missing.append(key)
    return missing
