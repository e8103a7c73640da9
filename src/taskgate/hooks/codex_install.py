"""`taskgate hooks install|uninstall|status --client codex`: taskgate's entries in Codex's
`$CODEX_HOME/hooks.json` (default `~/.codex/hooks.json`), trusted (issue 13; Codex 0.169.0).

User scope, because Codex loads a repository's own `.codex/hooks.json` only from the project it
starts in, and only once that project is trusted: not in the task and agent worktrees taskgate
creates. Codex runs a hook only after a person trusted its exact definition (the trust is kept
as `[hooks.state."<file>:<event>:<group>:<handler>"] trusted_hash` in `config.toml`); an
untrusted hook is skipped without a word. So `install` trusts the entries it wrote, the way
Codex's own `/hooks` screen does: it asks `codex app-server` for the hooks (`hooks/list`, with
Codex's hash of each) and writes the trust of taskgate's entries only (`config/batchWrite`).
Running install is the person's act of trust; `status` reports an entry Codex would skip.

Entries are marked like Claude Code's (`# taskgate-hook`), install and uninstall are
idempotent and leave other hooks alone. Each runs hooks/codex_launch.py, the same dispatcher
behind hooks/codex_adapter.py.
"""

from __future__ import annotations

import json
import os
import selectors
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from taskgate.errors import UsageError
from taskgate.fsutil import atomic_write
from taskgate.hooks.install import MARKER, TIMEOUT_S, Report, drop_ours, hook_command, is_ours
from taskgate.process import run

EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop")
# Codex's names for the tools that can write (see hooks/codex_adapter.py); read-only tools
# such as view_image never start a process.
TOOLS = "^(Bash|apply_patch|write_stdin|mcp__.*)$"
MATCHERS: dict[str, str | None] = {
    "SessionStart": None,
    "UserPromptSubmit": None,
    "PreToolUse": TOOLS,
    "PostToolUse": TOOLS,
    "Stop": None,
}
LAUNCHER = Path(__file__).with_name("codex_launch.py")
# A Codex config profile (`codex -p taskgate`) whose sandbox keeps `.taskgate/` (the store, the
# views, the task directories) read-only at the OS level in every workspace root, the rest of
# the workspace writable: Codex's `:workspace` permission profile with one carve-out (verified
# with 0.169.0 on Linux, bubblewrap). Opt-in per session, so the person's own defaults stay.
PROFILE = "taskgate"
PROFILE_TEXT = f"""\
# taskgate-profile: written by `taskgate hooks install --client codex`; rewritten and removed
# by it. Start Codex with `codex -p {PROFILE}` in a taskgate repository: commands may write the
# workspace except .taskgate/ (the store and the views), which stays read-only.
default_permissions = "{PROFILE}"

[permissions.{PROFILE}]
extends = ":workspace"

[permissions.{PROFILE}.filesystem.":workspace_roots"]
".taskgate" = "read"
"""
TRUST_HINT = (
    "start codex, type /hooks and trust the taskgate entries, or put codex on PATH and run "
    "'taskgate hooks install --client codex' again"
)


def codex_home(environ: dict[str, str] | None = None) -> Path:
    """$CODEX_HOME, else ~/.codex (where Codex reads config.toml and hooks.json)."""
    env = dict(os.environ) if environ is None else environ
    if env.get("CODEX_HOME"):
        return Path(env["CODEX_HOME"])
    if not env.get("HOME"):
        raise UsageError("Codex's home needs HOME or CODEX_HOME", hint="set HOME or CODEX_HOME")
    return Path(env["HOME"]) / ".codex"


def hooks_path(home: Path) -> Path:
    """Codex's user-scope hooks file."""
    return home / "hooks.json"


def profile_path(home: Path) -> Path:
    """The config profile `codex -p taskgate` layers on top of config.toml."""
    return home / f"{PROFILE}.config.toml"


def sync_profile(report: Report, home: Path, *, verb: str) -> None:
    """Write, check or remove the `taskgate` Codex profile; its state under "profile"."""
    path = profile_path(home)
    text = path.read_text(encoding="utf-8") if path.is_file() else None
    ours = text is None or text.startswith("# taskgate-profile")
    if not ours:
        report.changes["profile"] = "foreign"
        report.problems.append(f"{path} exists and was not written by taskgate; move it away")
    elif verb == "install":
        state = "unchanged" if text == PROFILE_TEXT else "added"
        report.changes["profile"] = f"{state} (start sessions with: codex -p {PROFILE})"
        if text != PROFILE_TEXT:
            atomic_write(path, PROFILE_TEXT)
    elif verb == "uninstall":
        if text is not None:
            path.unlink()
            report.changes["profile"] = "removed"
    elif text != PROFILE_TEXT:
        report.changes["profile"] = "missing" if text is None else "outdated"
        report.problems.append(
            f"profile: {path} is {report.changes['profile']}: run 'taskgate hooks install "
            "--client codex' (sessions started with 'codex -p taskgate' rely on it)"
        )
    else:
        report.changes["profile"] = "ok"


def default_program() -> str:
    """This interpreter, without site, on codex_launch.py (absolute paths, as for Claude)."""
    return shlex.join([sys.executable, "-S", str(LAUNCHER)])


def _group(event: str, program: str) -> dict[str, Any]:
    group: dict[str, Any] = {}
    if MATCHERS[event] is not None:
        group["matcher"] = MATCHERS[event]
    entry = {"type": "command", "command": hook_command(program, event), "timeout": TIMEOUT_S}
    group["hooks"] = [entry]
    return group


def _load(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not valid JSON: {exc}", hint="fix it by hand first") from None
    hooks = data.get("hooks", {}) if isinstance(data, dict) else None
    if not isinstance(hooks, dict) or not all(
        isinstance(groups, list) and all(isinstance(g, dict) for g in groups)
        for groups in hooks.values()
    ):
        raise UsageError(
            f"{path} does not have Codex's hooks.json shape "
            '({"hooks": {"EVENT": [{"matcher": …, "hooks": […]}]}})',
            hint="fix it by hand first",
        )
    return data


def _ours(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [g for g in groups if any(is_ours(h) for h in g.get("hooks", []))]


def install(path: Path, program: str) -> Report:
    """Add or update taskgate's entries; other groups keep their place."""
    data = _load(path)
    report = Report(path)
    hooks = data.setdefault("hooks", {})
    for event in EVENTS:
        groups: list[dict[str, Any]] = hooks.setdefault(event, [])
        wanted = _group(event, program)
        mine = _ours(groups)
        if not mine:
            groups.append(wanted)
            report.changes[event] = "added"
        elif mine[0] == wanted:
            report.changes[event] = "unchanged"
        else:
            mine[0].clear()
            mine[0].update(wanted)
            report.changes[event] = "updated"
        for extra in mine[1:]:
            groups.remove(extra)
    if any(change != "unchanged" for change in report.changes.values()):
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(data, indent=2) + "\n")
    return report


def uninstall(path: Path) -> Report:
    """Remove taskgate's entries only (their trust entries in config.toml stay: inert)."""
    report = Report(path)
    if not path.exists():
        return report
    data = _load(path)
    report.changes.update(dict.fromkeys(drop_ours(data.get("hooks", {})), "removed"))
    if report.changes:
        atomic_write(path, json.dumps(data, indent=2) + "\n")
    return report


# -- trust, through Codex's own app server ----------------------------------------------------


class CodexError(Exception):
    """`codex app-server` did not answer as expected."""


class AppServer:
    """`codex app-server` over stdio: one JSON-RPC message per line.

    The app server answers only while its stdin is open, so this is the one place where
    taskgate holds a conversation with a child process (everything else goes through
    process.run).
    """

    def __init__(self, codex: str, env: dict[str, str], timeout_s: float = 30.0) -> None:
        self.timeout_s = timeout_s
        self.proc = subprocess.Popen(
            [codex, "app-server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
        )
        self.next_id = 0
        self.request("initialize", {"clientInfo": {"name": "taskgate", "version": "1"}})
        self._send({"method": "initialized"})

    def __enter__(self) -> AppServer:
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request and wait for its answer (notifications in between are skipped)."""
        self.next_id += 1
        self._send({"id": self.next_id, "method": method, "params": params})
        assert self.proc.stdout is not None
        deadline = time.monotonic() + self.timeout_s
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                    break
                line = self.proc.stdout.readline()
                if not line:
                    raise CodexError(f"codex app-server exited during {method}")
                try:
                    answer = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(answer, dict) or answer.get("id") != self.next_id:
                    continue
                if "error" in answer:
                    raise CodexError(f"{method}: {answer['error']}")
                result = answer.get("result")
                return result if isinstance(result, dict) else {}
        raise CodexError(f"codex app-server did not answer {method} in {self.timeout_s:g} s")


def _listed(server: AppServer, path: Path, cwd: Path) -> list[dict[str, Any]]:
    """Codex's view of taskgate's entries in `path`."""
    listing = server.request("hooks/list", {"cwds": [str(cwd)]})
    found: list[dict[str, Any]] = []
    for entry in listing.get("data", []):
        for hook in entry.get("hooks", []):
            source = hook.get("sourcePath")
            if source and Path(source) == path and MARKER in str(hook.get("command", "")):
                found.append(hook)
    return found


def _event(hook: dict[str, Any]) -> str:
    name = str(hook.get("eventName", ""))
    return next((e for e in EVENTS if e.lower() == name.lower()), name)


def trust_states(codex: str, path: Path, cwd: Path, *, trust: bool) -> dict[str, str]:
    """{event: Codex's trust status} of taskgate's entries; with `trust`, untrusted and
    modified ones are trusted first (their current hash, as Codex computed it)."""
    with AppServer(codex, dict(os.environ)) as server:
        hooks = _listed(server, path, cwd)
        stale = [h for h in hooks if h.get("trustStatus") != "trusted" and h.get("currentHash")]
        if trust and stale:
            edits = [
                {
                    "keyPath": f"hooks.state.{json.dumps(str(h['key']))}.trusted_hash",
                    "value": h["currentHash"],
                    "mergeStrategy": "upsert",
                }
                for h in stale
            ]
            server.request("config/batchWrite", {"edits": edits})
            hooks = _listed(server, path, cwd)
    return {_event(h): str(h.get("trustStatus", "unknown")) for h in hooks}


def find_codex() -> str | None:
    """The `codex` executable on PATH."""
    return shutil.which("codex")


def apply_trust(report: Report, path: Path, cwd: Path, *, trust: bool) -> None:
    """Add Codex's trust status of every entry to `report` (a problem where Codex skips it)."""
    codex = find_codex()
    if codex is None:
        report.problems.append(f"codex is not on PATH: cannot check the hooks' trust; {TRUST_HINT}")
        return
    try:
        states = trust_states(codex, path, cwd, trust=trust)
    except (CodexError, OSError) as exc:
        report.problems.append(f"cannot ask Codex about the hooks' trust ({exc}); {TRUST_HINT}")
        return
    for event in EVENTS:
        if report.changes.get(event) in ("missing", "removed"):
            continue
        state = states.get(event, "not listed by codex")
        report.changes[event] = f"{report.changes.get(event, 'ok')}, {state}"
        if state != "trusted":
            report.problems.append(f"{event}: Codex skips this hook ({state}); {TRUST_HINT}")


# -- status ------------------------------------------------------------------------------------


def _sample(event: str, repo: Path) -> dict[str, Any]:
    base = {"session_id": "taskgate-selftest", "transcript_path": None, "cwd": str(repo),
            "hook_event_name": event, "model": "selftest"}  # fmt: skip
    store = repo / ".taskgate" / "state.db"
    patch = f"*** Begin Patch\n*** Add File: {store}\n+x\n*** End Patch\n"
    extras: dict[str, dict[str, Any]] = {
        "SessionStart": {"source": "startup"},
        "UserPromptSubmit": {"prompt": "status?", "turn_id": "selftest"},
        "PreToolUse": {"tool_name": "apply_patch", "tool_input": {"command": patch},
                       "tool_use_id": "selftest", "turn_id": "selftest"},
        "PostToolUse": {"tool_name": "Bash", "tool_input": {"command": "true"},
                        "tool_response": "", "tool_use_id": "selftest", "turn_id": "selftest"},
        "Stop": {"stop_hook_active": False, "last_assistant_message": "", "turn_id": "selftest"},
    }  # fmt: skip
    return {**base, **extras[event]}


def self_test(event: str, command: str, repo: Path) -> str:
    """Run the installed command as Codex does (`sh -c`) on a Codex input; '' when it behaves."""
    result = run(["/bin/sh", "-c", command], cwd=repo, stdin=json.dumps(_sample(event, repo)),
                 timeout=TIMEOUT_S)  # fmt: skip
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
            return "did not deny an apply_patch on the store (is taskgate initialised here?)"
    return ""


def status(path: Path, program: str, repo: Path | None) -> Report:
    """Is every event wired to this taskgate and trusted by Codex? Self-test each command."""
    report = Report(path)
    hooks = _load(path).get("hooks", {})
    for event in EVENTS:
        ours = _ours(hooks.get(event, []))
        if not ours:
            report.changes[event] = "missing"
            report.problems.append(
                f"{event}: not installed (taskgate hooks install --client codex)"
            )
        elif ours[0] != _group(event, program):
            report.changes[event] = "outdated"
            report.problems.append(f"{event}: differs from this taskgate (run install again)")
        elif repo is not None:
            command = next(h["command"] for h in ours[0]["hooks"] if is_ours(h))
            problem = self_test(event, command, repo)
            report.changes[event] = "failing" if problem else "ok"
            if problem:
                report.problems.append(f"{event}: {problem}")
        else:
            report.changes[event] = "ok"
    return report
