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

`--http` (issue 18): the events that need no person (PreToolUse, PostToolUse, Stop,
SubagentStop, SessionEnd) become `"type": "http"` entries posting to `taskgate serve`'s
`/hooks/EVENT` with the hook secret as a header, `onFailure: "block"` where a block stops
something (a server that is down blocks the call, never allows it). SessionStart stays a
command and gets a second command that starts the server if it is not running
(server/autostart.py); UserPromptSubmit stays a command (a person's approval, refused by the
HTTP door). Key names are Claude Code 2.1.332's (`url`, `headers`, `timeout`, `onFailure`).
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
from taskgate.hooks.dispatch import EVENTS

# The entries' shape lives in hooks/entries.py (light: the SessionStart check uses it too).
from taskgate.hooks.entries import MARKER as MARKER
from taskgate.hooks.entries import SECRET_HEADER as SECRET_HEADER
from taskgate.hooks.entries import TIMEOUT_S as TIMEOUT_S
from taskgate.hooks.entries import command_group
from taskgate.hooks.entries import hook_command as hook_command
from taskgate.hooks.entries import is_ours as is_ours

# Claude Code's sandbox settings (issue 14) live in hooks/sandbox_install.py.
from taskgate.hooks.sandbox_install import install_sandbox as install_sandbox
from taskgate.hooks.sandbox_install import sandbox_settings as sandbox_settings
from taskgate.hooks.sandbox_install import uninstall_sandbox as uninstall_sandbox
from taskgate.process import run

LAUNCHER = Path(__file__).with_name("launch.py")
AUTOSTART = Path(__file__).resolve().parent.parent / "server" / "autostart.py"
# Events answered over HTTP with --http; SessionStart (it starts the server) and
# UserPromptSubmit (approvals come only through a channel the client itself spawns) are not.
HTTP_EVENTS = ("PreToolUse", "PostToolUse", "Stop", "SubagentStop", "SessionEnd")
HTTP_BLOCKING = ("PreToolUse", "PostToolUse")  # onFailure "block": a down server stops these
HTTP_TIMEOUT_S = 10


@dataclass(frozen=True)
class HttpTarget:
    """Where `--http` entries post: the local server's base URL, its hook secret, and what
    the SessionStart command needs to start that server (repository, port, state dir)."""

    repo: Path
    port: int
    secret: str
    state_dir: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


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


# /bin/sh by its path, like every program a hook starts: a `sh` found on PATH could be one an
# unconfined agent put in ~/.local/bin (docs/security.md, "The git the hooks run").
PLUGIN_PROGRAM = '/bin/sh "${CLAUDE_PLUGIN_ROOT}/bin/hook"'


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


def autostart_command(target: HttpTarget) -> str:
    """The SessionStart command that starts `taskgate serve` when nothing answers its port."""
    argv = [sys.executable, "-S", str(AUTOSTART), "--repo", str(target.repo)]
    argv += ["--port", str(target.port), "--state-dir", str(target.state_dir)]
    return f"{shlex.join(argv)} {MARKER}"


def http_entry(event: str, target: HttpTarget) -> dict[str, Any]:
    """One HTTP hook entry (Claude Code 2.1.332's keys). The secret is written as a literal
    header value: docs/hooks.md "HTTP hooks" says who can read it."""
    entry: dict[str, Any] = {
        "type": "http",
        "url": f"{target.base}/hooks/{event}",
        "headers": {SECRET_HEADER: target.secret},
        "timeout": HTTP_TIMEOUT_S,
    }
    if event in HTTP_BLOCKING:
        entry["onFailure"] = "block"
    return entry


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


def _group(event: str, command: str, http: HttpTarget | None = None) -> dict[str, Any]:
    group = command_group(event, command)
    entry = group["hooks"][0]
    if http is not None and event in HTTP_EVENTS:
        entry = http_entry(event, http)
    group["hooks"] = [entry]
    if http is not None and event == "SessionStart":
        start = {"type": "command", "command": autostart_command(http), "timeout": TIMEOUT_S}
        group["hooks"] = [start, entry]  # the server first: the first tool call needs it
    return group


def wanted_group(event: str, program: str, http: HttpTarget | None = None) -> dict[str, Any]:
    """taskgate's matcher group for `event`: commands, or HTTP entries with `http`."""
    return _group(event, hook_command(program, event), http)


def install(path: Path, program: str, http: HttpTarget | None = None) -> Report:
    """Add or update taskgate's entries in place; other entries keep their order. With `http`
    the settings file holds the hook secret, so it is written 0600."""
    data = _load(path)
    report = Report(path)
    hooks = data.setdefault("hooks", {})
    for event in EVENTS:
        groups: list[dict[str, Any]] = hooks.setdefault(event, [])
        wanted = wanted_group(event, program, http)
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
    if http is not None:
        path.chmod(0o600)
    return report


def installed_http(path: Path) -> HttpTarget | None:
    """The HTTP target of taskgate's installed entries, None when they are commands."""
    try:
        groups = _load(path).get("hooks", {}).get("SessionStart", [])
    except UsageError:
        return None
    for group in groups:
        for hook in group.get("hooks", []):
            command = str(hook.get("command", "")) if isinstance(hook, dict) else ""
            if MARKER in command and str(AUTOSTART) in command:
                return _parse_autostart(command, path)
    return None


def _parse_autostart(command: str, path: Path) -> HttpTarget | None:
    argv = shlex.split(command.replace(MARKER, ""))
    values = dict(zip(argv[3::2], argv[4::2], strict=False))
    try:
        pre = _load(path)["hooks"]["PreToolUse"]
        secret = next(
            h["headers"][SECRET_HEADER] for g in pre for h in g.get("hooks", []) if is_ours(h)
        )
        return HttpTarget(
            Path(values["--repo"]), int(values["--port"]), str(secret), Path(values["--state-dir"])
        )
    except (KeyError, ValueError, StopIteration, TypeError):
        return None


def drop_ours(hooks: dict[str, Any]) -> list[str]:
    """Remove taskgate's entries from a `hooks` table in place (Claude Code's and Codex's have
    the same shape), dropping groups and events left empty; the events that had one."""
    found = []
    for event in list(hooks):
        kept = []
        for group in hooks[event]:
            entries = group.get("hooks", [])
            if not any(is_ours(h) for h in entries):
                kept.append(group)
                continue
            found.append(event)
            rest = [h for h in entries if not is_ours(h)]
            if rest:
                kept.append({**group, "hooks": rest})
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
    return found


def uninstall(path: Path) -> Report:
    """Remove taskgate's entries only; empty containers we leave behind are removed."""
    report = Report(path)
    if not path.exists():
        return report
    data = _load(path)
    hooks = data.get("hooks", {})
    report.changes.update(dict.fromkeys(drop_ours(hooks), "removed"))
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
    """Is every event wired to this taskgate? Then run each command (or post to the server
    for HTTP entries) on a sample input."""
    report = Report(path)
    hooks = _load(path).get("hooks", {})
    http = installed_http(path)
    for event in EVENTS:
        ours = [g for g in hooks.get(event, []) if any(is_ours(h) for h in g.get("hooks", []))]
        if not ours:
            report.changes[event] = "missing"
            report.problems.append(f"{event}: not installed (run 'taskgate hooks install')")
        elif ours[0] != wanted_group(event, program, http):
            report.changes[event] = "outdated"
            report.problems.append(f"{event}: differs from this taskgate (run install again)")
        else:
            entry = ours[0]["hooks"][-1]
            if entry.get("type") == "http":
                problem = http_self_test(event, entry, repo)
            else:
                problem = self_test(event, entry["command"], repo)
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


def http_self_test(event: str, entry: dict[str, Any], repo: Path) -> str:
    """Post the sample input to the server the way Claude Code does; '' when it behaves."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        str(entry["url"]),
        data=json.dumps(_sample(event, repo)).encode("utf-8"),
        headers={"Content-Type": "application/json", **entry.get("headers", {})},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
            out = response.read().decode("utf-8", "replace").strip()
    except urllib.error.HTTPError as exc:
        return f"the server answered {exc.code} at {entry['url']}"
    except OSError:
        return (
            f"no server answers {entry['url']}: every guarded tool call is blocked until one "
            "does (it starts with the next Claude Code session, or run 'taskgate serve')"
        )
    return _judge(event, out)


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
    return _judge(event, result.stdout.strip())


def _judge(event: str, out: str) -> str:
    try:
        answer = json.loads(out) if out else {}
    except ValueError:
        return f"printed something that is not JSON: {out[:200]}"
    if event == "PreToolUse":
        decision = answer.get("hookSpecificOutput", {}).get("permissionDecision")
        if decision != "deny":
            return "did not deny a write to the store (is taskgate initialised here?)"
    return ""
