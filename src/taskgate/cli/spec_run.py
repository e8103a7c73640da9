"""Running a spec workflow under its lock and reporting where it stopped, for the
`taskgate spec` commands (cli/spec_cmds.py; issue 9, R-SPC-16)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from taskgate.errors import EXIT_HUMAN, EXIT_OK, Corrupted, UsageError

if TYPE_CHECKING:
    from taskgate.spec.loop import Outcome, Workflow
    from taskgate.spec.state import SpecPaths, SpecState


def emit(args: argparse.Namespace, data: Any, text: str) -> None:
    if getattr(args, "json", False):
        print(json.dumps(data, indent=2, sort_keys=True, default=str))
    elif text:
        print(text)


def where(args: argparse.Namespace) -> tuple[Path, Path]:
    """(main worktree, git common dir) of the repository; the spec workflow needs no init."""
    from taskgate.git import repo as gitrepo

    start = args.repo if args.repo else Path.cwd()
    if not start.exists():
        raise UsageError(f"--repo {start} does not exist")
    found = gitrepo.discover(start)
    return found.main_worktree, found.common_dir


def agents_config_of(args: argparse.Namespace) -> dict[str, Any]:
    """A new workflow's agents: the flags, else taskgate.toml's [spec] backend."""
    from taskgate.spec.agents import agents_config
    from taskgate.spec.backends import load_spec_config

    script, command = getattr(args, "script", None), getattr(args, "agent_command", None)
    configured = "scripted"
    if not (script or command or args.demo):  # the demo never needs taskgate.toml
        repo = where(args)[0]
        spec = load_spec_config(repo)
        if not spec.declared:  # issue 17: never the canned demo agents by surprise
            raise UsageError(
                f"{repo / 'taskgate.toml'} has no [spec] section: no agents are configured to "
                "write and review the specification",
                hint='add to taskgate.toml: [spec] backend = "claude" (or "codex", "command" '
                "with command = [...], see docs/spec.md), or pass --agent-command EXE; "
                "--demo runs the canned demo agents and answers",
            )
        configured = spec.backend
    return agents_config(script, command, demo=args.demo, configured=configured)


def workflow(paths: SpecPaths, state: SpecState, args: argparse.Namespace) -> Workflow:
    from taskgate.spec.agents import SpecAgents, backend_from
    from taskgate.spec.backends import SpecPlace
    from taskgate.spec.loop import Workflow

    notify = None if args.json else (lambda text: print(f"  {text}"))
    backend = backend_from(state.agents, SpecPlace(where(args)[0], paths))
    return Workflow(paths, state, SpecAgents(backend), notify=notify)


def run(
    args: argparse.Namespace, common: Path, paths: SpecPaths, state: SpecState, responder: Any
) -> int:
    from taskgate.spec.recovery import workflow_lock
    from taskgate.spec.state import load_state, validate_state

    with workflow_lock(common, paths.root.name):
        # Another process may have moved the workflow on while we were not holding the lock:
        # run from what is on disk now, checked again (R-SPC-16).
        current = load_state(paths)
        if current is None or validate_state(current):
            raise Corrupted(
                f"spec workflow {paths.root.name} changed while waiting for its lock",
                hint=f"taskgate spec status {paths.root.name}, then resume it",
            )
        outcome = workflow(paths, current, args).run(responder)
    return report(args, paths, outcome)


def report(args: argparse.Namespace, paths: SpecPaths, outcome: Outcome) -> int:
    from taskgate.spec.loop import describe
    from taskgate.spec.texts import pending_text

    s = outcome.state
    data = describe(s) | {"waiting": outcome.waiting, "spec": str(paths.spec)}
    if outcome.waiting is None:
        done = (
            f"spec {s.feature_id}: {s.loop_status} ({s.termination_reason}) "
            f"after {s.current_iteration} iteration(s)\n  spec: {paths.spec}"
        )
        if s.loop_status == "completed":
            done += f"\n  report: {paths.report}\n  next: taskgate spec to-task {s.feature_id}"
        emit(args, data, done)
        return EXIT_OK
    emit(args, data, pending_text(s))
    return EXIT_HUMAN
