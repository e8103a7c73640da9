"""`taskgate hooks install|uninstall|status [--user]` and `taskgate hook EVENT` (issue 7)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from taskgate.cli.commands import emit
from taskgate.errors import EXIT_OK, EXIT_REFUSED, UsageError


def _settings(args: argparse.Namespace) -> tuple[Path, Path]:
    from taskgate.git.repo import discover
    from taskgate.hooks.install import settings_path

    start = args.repo if args.repo else Path.cwd()
    repo = discover(start).main_worktree
    home = Path(os.environ.get("HOME", "")) if args.user else repo
    if args.user and not os.environ.get("HOME"):
        raise UsageError("--user needs HOME to be set", hint="set HOME or drop --user")
    return settings_path(repo, home, args.user), repo


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


def cmd_hooks_install(args: argparse.Namespace) -> int:
    """`taskgate hooks install [--user]`."""
    from taskgate.hooks.install import default_program, install

    path, _ = _settings(args)
    program = default_program()
    _emit(args, install(path, program), "hooks in", program)
    return EXIT_OK


def cmd_hooks_uninstall(args: argparse.Namespace) -> int:
    """`taskgate hooks uninstall [--user]`."""
    from taskgate.hooks.install import uninstall

    path, _ = _settings(args)
    _emit(args, uninstall(path), "hooks in")
    return EXIT_OK


def cmd_hooks_status(args: argparse.Namespace) -> int:
    """`taskgate hooks status [--user]`: wiring plus a self-test of every event."""
    from taskgate.hooks.install import default_program, status

    path, repo = _settings(args)
    report = status(path, default_program(), repo)
    _emit(args, report, "hooks in")
    return EXIT_REFUSED if report.problems else EXIT_OK


def cmd_hook(args: argparse.Namespace) -> int:
    """`taskgate hook EVENT` (normally served by the fast path in cli/main.py)."""
    from taskgate.hooks.dispatch import run_hook

    return run_hook([args.event])


def register(add: Any) -> None:
    """Claude Code integration commands."""
    hooks = add.group("hooks", "Claude Code integration: install, uninstall, status")
    for name, handler, text in (
        ("install", cmd_hooks_install, "add taskgate's hooks to .claude/settings.json"),
        ("uninstall", cmd_hooks_uninstall, "remove taskgate's hooks (others stay untouched)"),
        ("status", cmd_hooks_status, "check the wiring and self-test every event"),
    ):
        s = hooks(name, handler, text)
        s.add_argument("--user", action="store_true", help="~/.claude/settings.json instead")
    s = add("hook", cmd_hook, "handle one Claude Code hook event (JSON on stdin)", json_flag=False)
    s.add_argument("event", help="SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, ...")
