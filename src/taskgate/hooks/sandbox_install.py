"""Claude Code's sandbox settings in a settings file: written by `taskgate hooks install` (by
default where the sandbox runs), taken out by `hooks uninstall` (issue 14).

`sandbox_settings(repo)` is what a repository needs (hooks/client_sandbox.py, plus the ways
to the agent door). Several repositories may share one settings file (the user scope, the
default), and a person may have had some of these settings before: so install records, per
settings file, what it added (the parts that were missing) and which repositories rely on it,
in `<state root>/client-sandbox.json`; uninstall for one repository takes out that
repository's own entries (its paths and door), and what was added for all of them only when no
other repository relies on it any more. A person's own settings are never removed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from taskgate.fsutil import atomic_write
from taskgate.hooks.client_sandbox import has_ours, merge_settings, unmerge_settings

RECORD = "client-sandbox.json"
_SHARED = ("enabled", "failIfUnavailable", "allowUnsandboxedCommands")  # sandbox.* scalars


def sandbox_settings(repo: Path) -> dict[str, Any]:
    """Claude Code's sandbox settings for `repo` (hooks/client_sandbox.py) plus the ways its
    taskgate commands reach the agent door: the door's socket in
    `sandbox.network.allowUnixSockets` (Claude Code 2.1.332 honours that list on macOS only)
    and, for Linux, where its seccomp filter refuses every Unix socket, the TCP door's
    `127.0.0.1:PORT` in `sandbox.network.allowedDomains` (server/door_tcp.py: reached through
    the sandbox's proxy). Chooses the TCP door's port and token on first use."""
    from taskgate.engine.workspace import find_workspace
    from taskgate.hooks.client_sandbox import claude_sandbox_settings
    from taskgate.hooks.policy import Layout
    from taskgate.server import door_tcp
    from taskgate.server.door import door_path

    ws = find_workspace(repo)
    layout = Layout(str(ws.repo), str(ws.common_dir), str(ws.state_dir), str(ws.tasks_root))
    ours = claude_sandbox_settings(layout)
    endpoint = door_tcp.ensure(ws.common_dir)
    ours["sandbox"]["network"] = {
        "allowUnixSockets": [str(door_path(Path(layout.common_dir)))],
        "allowedDomains": [endpoint.address],
    }
    return ours


def _record_path() -> Path:
    from taskgate.server.secret import state_root

    return state_root() / RECORD


def _read_record() -> dict[str, Any]:
    try:
        data = json.loads(_record_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_record(record: dict[str, Any]) -> None:
    path = _record_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write(path, json.dumps(record, indent=2, sort_keys=True) + "\n")


def _missing(existing: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    """The part of `ours` that `existing` does not hold (what merging adds)."""
    out: dict[str, Any] = {}
    for key, value in ours.items():
        current = existing.get(key)
        if isinstance(value, dict):
            inner = _missing(current if isinstance(current, dict) else {}, value)
            if inner:
                out[key] = inner
        elif isinstance(value, list):
            have = current if isinstance(current, list) else []
            extra = [v for v in value if v not in have]
            if extra:
                out[key] = extra
        elif current != value:
            out[key] = value
    return out


def _load(path: Path) -> dict[str, Any]:
    from taskgate.hooks.install import _load as load_settings

    return load_settings(path)


def _save(path: Path, data: dict[str, Any]) -> None:
    """Write the settings, keeping the file's mode (it may hold the hook secret: 0600)."""
    mode = path.stat().st_mode & 0o777 if path.exists() else None
    path.parent.mkdir(parents=True, exist_ok=True)
    old = os.umask(0o077) if mode is not None and mode & 0o077 == 0 else None
    try:
        atomic_write(path, json.dumps(data, indent=2) + "\n")
    finally:
        if old is not None:
            os.umask(old)
    if mode is not None:
        path.chmod(mode)


def install_sandbox(path: Path, repo: Path) -> list[str]:
    """Merge the sandbox settings for `repo` into `path`; the keys that were missing ([]:
    unchanged). Records what was added and that `repo` relies on it."""
    from taskgate.git.repo import discover

    ours = sandbox_settings(repo)
    data = _load(path)
    missing = has_ours(data, ours)
    record = _read_record()
    entry = record.setdefault(str(path), {"added": {}, "repos": []})
    key = str(discover(repo).common_dir)
    if key not in entry["repos"]:
        entry["repos"].append(key)
    if missing:
        entry["added"] = merge_settings(entry.get("added", {}), _missing(data, ours))
        _save(path, merge_settings(data, ours))
    _write_record(record)
    return missing


def _own_entries(ours: dict[str, Any]) -> dict[str, Any]:
    """`ours` without the settings every repository shares (the sandbox switches)."""
    sandbox = {k: v for k, v in ours.get("sandbox", {}).items() if k not in _SHARED}
    return {**ours, "sandbox": sandbox}


def uninstall_sandbox(path: Path, repo: Path) -> bool:
    """Take `repo`'s sandbox settings out of `path`: its own entries (paths, door) that
    install added, and the shared switches once no other repository relies on them; True when
    something changed. Settings taskgate did not add stay."""
    from taskgate.git.repo import discover

    record = _read_record()
    entry = record.get(str(path))
    if not isinstance(entry, dict) or not path.exists():
        return False
    key = str(discover(repo).common_dir)
    repos = [r for r in entry.get("repos", []) if r != key]
    if len(repos) == len(entry.get("repos", [])):
        return False  # this repository never installed them here
    added = entry.get("added", {})
    remove = added if not repos else _own_entries(_intersect(added, sandbox_settings(repo)))
    data = _load(path)
    rest = unmerge_settings(data, remove)
    if repos:
        entry["repos"] = repos
        entry["added"] = unmerge_settings(added, remove)
    else:
        del record[str(path)]
    _write_record(record)
    if rest == data:
        return False
    _save(path, rest)
    return True


def _intersect(added: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    """The entries of `ours` that install added (lists: common entries; scalars: equal)."""
    out: dict[str, Any] = {}
    for key, value in ours.items():
        have = added.get(key)
        if isinstance(value, dict) and isinstance(have, dict):
            inner = _intersect(have, value)
            if inner:
                out[key] = inner
        elif isinstance(value, list) and isinstance(have, list):
            common = [v for v in value if v in have]
            if common:
                out[key] = common
        elif have == value and have is not None:
            out[key] = value
    return out
