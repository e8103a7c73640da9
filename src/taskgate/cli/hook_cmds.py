"""`taskgate hooks install|uninstall|status [--project]`, `hooks plugin-path` and
`taskgate hook EVENT` (issues 7 and 13)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from taskgate.cli.commands import emit
from taskgate.errors import EXIT_OK, EXIT_REFUSED, UsageError


def _home() -> Path:
    if not os.environ.get("HOME"):
        raise UsageError(
            "user scope needs HOME to be set", hint="set HOME, or pass --project instead"
        )
    return Path(os.environ["HOME"])


def _repo(args: argparse.Namespace) -> Path:
    from taskgate.git.repo import discover

    return discover(args.repo if args.repo else Path.cwd()).main_worktree


def _settings(args: argparse.Namespace) -> tuple[Path, Path | None]:
    """(settings file, main worktree); user scope (the default) works outside a repository."""
    from taskgate.errors import TaskgateError
    from taskgate.hooks.install import settings_path

    if args.project:
        main = _repo(args)
        return settings_path(main, main, False), main
    repo: Path | None
    try:
        repo = _repo(args)
    except TaskgateError:
        repo = None
    home = _home()
    return settings_path(home, home, True), repo


def _emit(args: argparse.Namespace, report: Any, verb: str, program: str = "") -> None:
    lines = [f"{verb} {report.path}"]
    lines += [f"  {event}: {change}" for event, change in report.changes.items()]
    lines += [f"  problem: {p}" for p in report.problems]
    if not report.changes:
        lines.append("  (no taskgate entries; nothing changed)")
    if program:
        lines.append(f"  each entry runs: {program} EVENT")
    data = {"path": str(report.path), "changes": report.changes, "problems": report.problems}
    emit(args, data | ({"program": program} if program else {}), "\n".join(lines))


def _codex(args: argparse.Namespace, verb: str) -> int:
    """`taskgate hooks install|uninstall|status --client codex` (hooks/codex_install.py)."""
    from taskgate.errors import TaskgateError
    from taskgate.hooks import codex_install as codex

    if args.project:
        raise UsageError(
            "--client codex installs in Codex's user scope only",
            hint="drop --project: Codex loads a repository's .codex/hooks.json only where it "
            "starts and only in a trusted project, not in taskgate's worktrees",
        )
    home = codex.codex_home()
    path = codex.hooks_path(home)
    repo: Path | None
    try:
        repo = _repo(args)
    except TaskgateError:
        repo = None
    program = codex.default_program()
    if verb == "uninstall":
        report = codex.uninstall(path)
        codex.sync_profile(report, home, verb=verb)
        _emit(args, report, "codex hooks in")
        return EXIT_OK
    if verb == "install":
        report = codex.install(path, program)
    else:
        report = codex.status(path, program, repo)
    codex.apply_trust(report, path, repo or path.parent, trust=verb == "install")
    codex.sync_profile(report, home, verb=verb)
    _emit(args, report, "codex hooks in", program if verb == "install" else "")
    return EXIT_REFUSED if report.problems else EXIT_OK


def _http_target(args: argparse.Namespace) -> Any:
    """`--http`: the repository's server (port, hook secret, state dir) the entries post to."""
    from taskgate.engine.workspace import find_workspace, require_initialized
    from taskgate.hooks.install import HttpTarget
    from taskgate.server import secret

    ws = find_workspace(_repo(args))
    require_initialized(ws)
    root = secret.state_root(args.state_dir).absolute()
    hook_secret = secret.load_or_create(secret.server_dir(root, ws.common_dir) / "hook-secret")
    return HttpTarget(ws.repo, args.port, hook_secret, root)


def cmd_hooks_install(args: argparse.Namespace) -> int:
    """`taskgate hooks install [--project] [--http]` (user scope by default: loaded
    everywhere; `--http`: answered by `taskgate serve`, started by SessionStart)."""
    from taskgate.hooks.install import default_program, install

    if getattr(args, "client", "claude") == "codex":
        if getattr(args, "http", False):
            raise UsageError("--http is for Claude Code", hint="drop --http with --client codex")
        if getattr(args, "sandbox", None):
            raise UsageError(
                "--sandbox is for Claude Code", hint="drop --sandbox with --client codex"
            )
        return _codex(args, "install")
    http = _http_target(args) if getattr(args, "http", False) else None
    path, repo = _settings(args)
    program = default_program()
    sandboxed = _sandbox_wanted(args, repo)
    report = install(path, program, http)
    _emit(args, report, "hooks in", program)
    if sandboxed:
        _sandbox(args, path)
    if http is not None and not getattr(args, "json", False):
        print(
            f"  HTTP hooks post to {http.base}/hooks/EVENT; SessionStart starts "
            f"'taskgate serve --port {http.port}' when it is not running (docs/hooks.md)"
        )
    return EXIT_OK


def cmd_hooks_uninstall(args: argparse.Namespace) -> int:
    """`taskgate hooks uninstall [--project]`."""
    from taskgate.hooks.install import uninstall

    if getattr(args, "client", "claude") == "codex":
        return _codex(args, "uninstall")
    path, repo = _settings(args)
    _emit(args, uninstall(path), "hooks in")
    if repo is not None:  # issue 14: the sandbox settings `install --sandbox` wrote
        from taskgate.hooks.install import uninstall_sandbox

        if uninstall_sandbox(path, repo) and not getattr(args, "json", False):
            print(f"  removed taskgate's sandbox settings from {path}")
    return EXIT_OK


def _sandbox_wanted(args: argparse.Namespace, repo: Path | None) -> bool:
    """Write Claude Code's sandbox settings? By default where its sandbox runs (and inside a
    repository); `--sandbox` insists (an error where it cannot run), `--no-sandbox` opts out.
    Every unconfined install says so."""
    from taskgate.hooks.client_sandbox import unsupported

    asked = getattr(args, "sandbox", None)
    quiet = getattr(args, "json", False)
    if asked is False:
        if not quiet:
            print("note: --no-sandbox: Claude Code sessions run unconfined; what their Bash "
                  "runs can write the store (docs/security.md, 'Modes')")  # fmt: skip
        return False
    why = unsupported() if repo is not None else "not inside a taskgate repository"
    if not why:
        return True
    if asked:
        raise UsageError(f"--sandbox: {why}", hint="install what is missing, or drop --sandbox")
    if not quiet:
        print(f"note: Claude Code sessions run unconfined: {why} (docs/security.md, 'Modes')")
    return False


def _sandbox(args: argparse.Namespace, path: Path) -> None:
    """Claude Code's own sandbox keeps the session's Bash off the store; its taskgate commands
    go through the agent door of `taskgate serve` (issue 14)."""
    from taskgate.hooks.install import install_sandbox

    missing = install_sandbox(path, _repo(args))
    if getattr(args, "json", False):
        return
    print(f"  sandbox settings in {path}: " + (", ".join(missing) if missing else "unchanged"))
    print(
        "  the session's taskgate commands reach the store through 'taskgate serve' (the agent "
        "door, started by SessionStart with --http, else run it yourself); opt out with "
        "--no-sandbox (docs/security.md)"
    )


def cmd_hooks_status(args: argparse.Namespace) -> int:
    """`taskgate hooks status [--project]`: wiring, a self-test of every event, and every
    worktree of the repository where Claude Code would start without the hooks."""
    from taskgate.hooks.install import (
        default_program,
        has_ours,
        settings_path,
        status,
        unguarded_worktrees,
    )

    if getattr(args, "client", "claude") == "codex":
        return _codex(args, "status")
    path, _ = _settings(args)
    repo = _repo(args)
    project = settings_path(repo, repo, False)
    if not (args.user or args.project) and not has_ours(path) and has_ours(project):
        path = project  # installed in project scope only: check that file
    report = status(path, default_program(), repo)
    report.problems += unguarded_worktrees(repo, settings_path(repo, _home(), True))
    _emit(args, report, "hooks in")
    return EXIT_REFUSED if report.problems else EXIT_OK


def cmd_hooks_plugin_path(args: argparse.Namespace) -> int:
    """`taskgate hooks plugin-path`: the Claude Code plugin directory shipped with taskgate."""
    from taskgate.hooks.install import plugin_dir

    path = plugin_dir()
    emit(args, {"path": str(path)}, str(path))
    return EXIT_OK


def cmd_hook(args: argparse.Namespace) -> int:
    """`taskgate hook EVENT` (normally served by the fast path in cli/main.py)."""
    from taskgate.hooks.dispatch import run_hook

    return run_hook([args.event])


def _http_flags(s: Any) -> None:
    s.add_argument(
        "--http",
        action="store_true",
        help="answer PreToolUse, PostToolUse, Stop, SubagentStop and SessionEnd from "
        "'taskgate serve' over HTTP (about a millisecond; blocked while it is down); "
        "SessionStart starts the server",
    )
    s.add_argument("--port", type=int, default=7457, help="with --http: the server's port")
    s.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help="with --http: the server's state dir (as for 'taskgate serve')",
    )


def register(add: Any) -> None:
    """Claude Code integration commands."""
    hooks = add.group("hooks", "Claude Code integration: install, uninstall, status, plugin-path")
    for name, handler, text in (
        ("install", cmd_hooks_install, "add taskgate's hooks to ~/.claude/settings.json"),
        ("uninstall", cmd_hooks_uninstall, "remove taskgate's hooks (others stay untouched)"),
        ("status", cmd_hooks_status, "check the wiring, self-test every event, every worktree"),
    ):
        s = hooks(name, handler, text)
        scope = s.add_mutually_exclusive_group()
        scope.add_argument(
            "--user", action="store_true", help="~/.claude/settings.json (the default)"
        )
        scope.add_argument(
            "--project",
            action="store_true",
            help=".claude/settings.json of the main worktree (loaded only when Claude Code "
            "starts in that directory)",
        )
        s.add_argument(
            "--client",
            choices=("claude", "codex"),
            default="claude",
            help="claude (default) or codex: ~/.codex/hooks.json, trusted through codex",
        )
        if name == "install":
            _http_flags(s)
            s.add_argument(
                "--sandbox",
                action=argparse.BooleanOptionalAction,
                default=None,
                help="write Claude Code's sandbox settings (the default where its sandbox runs: "
                "macOS, Linux with bubblewrap and socat): the session's Bash cannot write the "
                "store, its taskgate commands use the agent door of 'taskgate serve'; "
                "--no-sandbox: sessions run unconfined",
            )
    hooks("plugin-path", cmd_hooks_plugin_path, "print the Claude Code plugin directory")
    s = add("hook", cmd_hook, "handle one Claude Code hook event (JSON on stdin)", json_flag=False)
    s.add_argument("event", help="SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, ...")
