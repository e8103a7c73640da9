"""At SessionStart: are taskgate's hook entries still the ones it installed? (issue 14, DESIGN.md
"Trust", layer 2 for the hooks themselves.)

An agent that removes, edits or switches off a hook entry changes nothing until the next
session: the client reads its settings when it starts. So the SessionStart hook, which the
client itself spawns, compares what the session was started with against what
`taskgate hooks install` writes, in every settings file that holds taskgate's entries:

- Claude Code: the user's `~/.claude/settings.json` and the start directory's
  `.claude/settings.json` / `.claude/settings.local.json`; every event's group must be exactly
  `install`'s (same program as the SessionStart entry), none may be missing, `disableAllHooks`
  must not be set, and when `--sandbox` put the sandbox settings there they must all hold;
- Codex: `$CODEX_HOME/hooks.json` (default `~/.codex/hooks.json`), the same way.

A file without any of taskgate's entries is not checked (the hooks live in another scope).
Problems are reported in the SessionStart answer (`systemMessage` for the person,
`additionalContext` for the agent; both checked in Claude Code 2.1.332's and Codex 0.169.0's
hook output schema) and recorded (engine/guard_trail.py) on the tasks the session holds, else
on the repository's trail, so `taskgate audit` fails there.

The same hook registers the client process for the agent door (server/peers.py): that is how
the door later tells this session's own `taskgate` commands from anyone else's.

Fast path: JSON through hooks/jsonio.py, no engine; install's and Codex's modules and the
engine are imported only when there is something to compare that way or to record.
"""

from __future__ import annotations

import os

from taskgate.hooks import entries
from taskgate.hooks.dispatch import EVENTS
from taskgate.hooks.jsonio import loads

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from taskgate.hooks.policy import Layout

_LOCAL = ("settings.json", "settings.local.json")


def _read(path: str) -> Any:
    """The file's JSON; None when it is missing or unreadable (`hooks status` reports that)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return loads(handle.read())
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def claude_files(cwd: str, home: str) -> list[str]:
    """The settings files Claude Code reads hooks from for a session started in `cwd`."""
    project = [os.path.join(cwd, ".claude", name) for name in _LOCAL]
    return [os.path.join(home, ".claude", "settings.json"), *project] if home else project


def codex_file(environ: dict[str, str]) -> str | None:
    """Codex's hooks.json ($CODEX_HOME, else ~/.codex); None without either."""
    home = environ.get("CODEX_HOME") or (
        os.path.join(environ["HOME"], ".codex") if environ.get("HOME") else ""
    )
    return os.path.join(home, "hooks.json") if home else None


def _ours(groups: Any) -> list[dict[str, Any]]:
    if not isinstance(groups, list):
        return []
    return [
        g
        for g in groups
        if isinstance(g, dict) and any(entries.is_ours(h) for h in g.get("hooks") or [])
    ]


def _program(hooks: dict[str, Any], events: tuple[str, ...]) -> str | None:
    """The program taskgate's entries run: the SessionStart one's first (it is running now)."""
    for event in ("SessionStart", *events):
        for group in _ours(hooks.get(event)):
            for hook in group.get("hooks") or []:
                command = hook.get("command") if isinstance(hook, dict) else None
                program = entries.program_of(command, event) if isinstance(command, str) else None
                if program:
                    return program
    return None


def _compare(path: str, hooks: dict[str, Any], events: tuple[str, ...], wanted: Any) -> list[str]:
    """Each event's first group of ours against `wanted(event)`."""
    problems = []
    for event in events:
        ours = _ours(hooks.get(event))
        if not ours:
            problems.append(f"{path}: the {event} entry was removed")
        elif ours[0] != wanted(event):
            problems.append(f"{path}: the {event} entry was changed")
    return problems


def check_claude(path: str, layout: Layout | None) -> list[str]:
    """Problems with taskgate's entries (and --sandbox settings) in one Claude Code file."""
    data = _read(path)
    if not isinstance(data, dict):
        return []
    problems = []
    if data.get("disableAllHooks") is True:
        problems.append(f"{path}: disableAllHooks is set (no hook runs)")
    hooks = data.get("hooks")
    if not isinstance(hooks, dict) or not any(_ours(g) for g in hooks.values()):
        return problems
    if any(isinstance(h, dict) and h.get("type") == "http"
           for g in hooks.values() for grp in _ours(g) for h in grp.get("hooks", [])):  # fmt: skip
        from pathlib import Path

        from taskgate.hooks import install

        http = install.installed_http(Path(path))
        program = _program(hooks, EVENTS) or ""
        problems += _compare(path, hooks, EVENTS,
                             lambda e: install.wanted_group(e, program, http))  # fmt: skip
    else:
        command = _program(hooks, EVENTS)
        if command is None:
            return [*problems, f"{path}: taskgate's entries were changed (no command is ours)"]
        problems += _compare(path, hooks, EVENTS, lambda e: _command_group(e, command))
    return problems + _sandbox_problems(path, data, layout)


def _command_group(event: str, program: str) -> dict[str, Any]:
    return entries.command_group(event, entries.hook_command(program, event))


def _sandbox_problems(path: str, data: dict[str, Any], layout: Layout | None) -> list[str]:
    """`hooks install --sandbox` settings (marked by the door socket it allows) weakened."""
    network = (
        data.get("sandbox", {}).get("network", {}) if isinstance(data.get("sandbox"), dict) else {}
    )
    sockets = network.get("allowUnixSockets") if isinstance(network, dict) else None
    if layout is None:
        return []
    door = os.path.join(layout.common_dir, "taskgate", "door.sock")  # server/door.py door_path
    if not (isinstance(sockets, list) and door in sockets) and not _installed_here(path, layout):
        return []
    from taskgate.hooks.client_sandbox import claude_sandbox_settings, has_ours

    missing = has_ours(data, claude_sandbox_settings(layout))
    return [f"{path}: the sandbox setting {key} was removed or weakened" for key in missing]


def check_codex(path: str) -> list[str]:
    """Problems with taskgate's entries in Codex's hooks.json."""
    data = _read(path)
    hooks = data.get("hooks") if isinstance(data, dict) else None
    if not isinstance(hooks, dict) or not any(_ours(g) for g in hooks.values()):
        return []
    from taskgate.hooks import codex_install

    program = _program(hooks, codex_install.EVENTS)
    if program is None:
        return [f"{path}: taskgate's entries were changed (no command is ours)"]
    return _compare(path, hooks, codex_install.EVENTS,
                    lambda e: codex_install._group(e, program))  # fmt: skip


def problems(cwd: str, environ: dict[str, str], layout: Layout | None) -> list[str]:
    """Every removed, changed or switched-off taskgate hook setting this session started with."""
    found: list[str] = []
    for path in claude_files(cwd, environ.get("HOME", "")):
        found += check_claude(path, layout)
    codex = codex_file(environ)
    if codex is not None:
        found += check_codex(codex)
    return found


def at_session_start(data: dict[str, Any]) -> tuple[str, list[str]]:
    """Register the client for the agent door; check the hook settings and record what is
    wrong. (text for the SessionStart answer, the problems); ('', []) when all is in place."""
    from taskgate.hooks.context import load_layout

    layout = load_layout(data["cwd"])
    if layout is None:
        return "", []  # not a taskgate repository: nothing is guarded here
    from taskgate.server import peers

    peers.register_client(layout.state_dir, data["session_id"])
    door = _door_started(layout, data["cwd"], os.environ.get("HOME", ""))
    found = problems(data["cwd"], dict(os.environ), layout)
    if not found:
        return door, []
    where = _record(data, found)
    text = (
        "[R-REC-14] taskgate: this session started with taskgate's hook settings changed, so "
        "some of its guards may not run: " + "; ".join(found) + f". Recorded in {where}. "
        "Ask the person to run 'taskgate hooks install' (and 'taskgate hooks status'); "
        "'taskgate audit' fails until they have looked"
    )
    return (f"{door}\n{text}" if door else text), found


def _installed_here(path: str, layout: Layout) -> bool:
    """Whether `hooks install` recorded sandbox settings in `path` that this repository relies
    on (hooks/sandbox_install.py's record, under server/secret.state_root: the same lookup,
    without importing hashlib on the hook path). It tells a removed `sandbox` table (the
    door's socket gone with it) from an install without the sandbox (`--no-sandbox`)."""
    env = os.environ
    if env.get("TASKGATE_STATE_DIR"):
        root = env["TASKGATE_STATE_DIR"]
    else:
        home = env.get("HOME") or os.path.expanduser("~")
        root = os.path.join(env.get("XDG_STATE_HOME") or os.path.join(home, ".local", "state"),
                            "taskgate")  # fmt: skip
    record = _read(os.path.join(root, "client-sandbox.json"))
    if not isinstance(record, dict):
        return False
    here, common = os.path.realpath(path), os.path.realpath(layout.common_dir)
    for settings_file, entry in record.items():
        repos = entry.get("repos") if isinstance(entry, dict) else None
        if os.path.realpath(settings_file) == here and isinstance(repos, list):
            return any(os.path.realpath(str(r)) == common for r in repos)
    return False


def _autostart_installed(cwd: str, home: str) -> bool:
    """Whether `hooks install --http` put its own server start (server/autostart.py) in
    SessionStart: the client runs it beside this hook, and the server it starts (with the
    HTTP hooks' secret) opens the door; a second server started here would take the door
    first and leave the HTTP hooks without theirs."""
    for path in claude_files(cwd, home):
        data = _read(path)
        hooks = data.get("hooks") if isinstance(data, dict) else None
        groups = hooks.get("SessionStart") if isinstance(hooks, dict) else None
        for group in groups if isinstance(groups, list) else []:
            for hook in group.get("hooks", []) if isinstance(group, dict) else []:
                if isinstance(hook, dict) and "autostart.py" in str(hook.get("command", "")):
                    return True
    return False


def _door_started(layout: Any, cwd: str, home: str) -> str:
    """The agent door this repository's sandboxed sessions write through, started when it is
    not running (server/autostart.py): '' when it answers, else what to do. The usual cases
    (no TCP door chosen, or the server answers) cost a file read and a connect: `_socket`,
    not `socket` (which loads enum) on the hook path."""
    path = os.path.join(layout.common_dir, "taskgate", "door-tcp.json")
    try:
        with open(path, "rb") as fh:
            port = int(loads(fh.read().decode("utf-8"))["port"])
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError):
        return ""  # no TCP door chosen (hooks install --no-sandbox): nothing to start
    if _autostart_installed(cwd, home):
        return ""  # the HTTP hooks' own SessionStart entry starts the server
    import _socket

    probe = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    try:
        probe.settimeout(0.2)
        if probe.connect_ex(("127.0.0.1", port)) == 0:
            return ""
    finally:
        probe.close()
    from pathlib import Path

    from taskgate.server.autostart import start_door

    problem = start_door(Path(layout.repo), Path(layout.common_dir))
    return f"[R-LCK-09] taskgate: {problem}" if problem else ""


def _record(data: dict[str, Any], found: list[str]) -> str:
    """The event on the session's unreleased tasks, else on the repository's trail."""
    from pathlib import Path

    from taskgate.engine import guard_trail
    from taskgate.engine.core import Engine
    from taskgate.engine.workspace import find_workspace

    try:
        ws = find_workspace(Path(data["cwd"]))
        engine = Engine(ws, session_id=data["session_id"], cwd=Path(data["cwd"]))
        try:
            with engine.store.read() as tx:
                held = [r.name for r in tx.tasks()
                        if r.session_id == engine.session_id and not r.released]  # fmt: skip
            payload = {"problems": found, "source": str(data.get("source", ""))}
            written = guard_trail.record(engine, held, guard_trail.HOOKS_CHANGED, payload)
        finally:
            engine.close()
    except Exception as exc:  # the report still reaches the session; say why it is not stored
        return f"no audit trail ({type(exc).__name__}: {exc})"
    if written == [guard_trail.REPOSITORY]:
        return "the repository's audit trail"
    return "the audit trail of " + ", ".join(f"'{t}'" for t in written)


def with_report(answer: dict[str, Any] | None, report: str) -> dict[str, Any] | None:
    """The SessionStart answer with the report added for the person (`systemMessage`) and the
    agent (`additionalContext`, first)."""
    if not report:
        return answer
    answer = answer or {"hookSpecificOutput": {"hookEventName": "SessionStart"}}
    specific = answer.setdefault("hookSpecificOutput", {"hookEventName": "SessionStart"})
    rest = specific.get("additionalContext")
    specific["additionalContext"] = f"{report}\n{rest}" if rest else report
    answer["systemMessage"] = report[:3900]  # Claude Code 2.1.332 caps it at 4000
    return answer
