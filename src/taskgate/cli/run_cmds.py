"""`taskgate run` and `taskgate demo` (issue 6): the orchestrator's face."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from taskgate.errors import EXIT_OK


def register(add: Any) -> None:
    """The main job's commands."""
    s = add("run", cmd_run, "drive whole tasks through the protocol with the configured agents")
    s.add_argument("tasks", nargs="*", metavar="TASK")
    s.add_argument("--next", action="store_true", help="the next available task (continuous)")
    s.add_argument("--all", action="store_true", help="every available task, one at a time")
    s.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="PATTERN",
        help="with --next/--all: only task names matching (glob or substring)",
    )
    s.add_argument(
        "--yes",
        action="store_true",
        help="approve checkpoints automatically (only if allow_auto_approve)",
    )
    s.add_argument("--parallel", type=int, default=0, help="agents at once (default: config)")
    s = add("demo", cmd_demo, "a complete protocol run on a generated sample repository")
    s.add_argument("--dir", type=Path, help="where to create the sample repository (new/empty)")
    s.add_argument("--yes", action="store_true", help="approve both checkpoints for you")


def _progress(args: argparse.Namespace) -> Any:
    from taskgate.orchestrator.progress import Progress

    return Progress(as_json=bool(args.json))


def _finish(args: argparse.Namespace, progress: Any, finished: list[str]) -> None:
    progress.finish()
    if args.json:
        summary = {"event": "summary", "finished": finished, **progress.timeline.to_json()}
        print(json.dumps(summary, sort_keys=True))
    else:
        print(progress.timeline.render())


def cmd_run(args: argparse.Namespace) -> int:
    """`taskgate run [TASK...] [--next|--all]`."""
    from taskgate.cli.commands import engine_for
    from taskgate.orchestrator.run import choose_approver, run

    if not args.session and not os.environ.get("TASKGATE_SESSION"):
        from taskgate.process import hostname

        args.session = f"run@{hostname()}"  # stable, so a rerun resumes (R-LCK-03)
    with engine_for(args) as engine:
        progress = _progress(args)
        approver = choose_approver(engine, yes=args.yes)
        from taskgate.agents.config import parse_agents_config

        parallel = (
            args.parallel
            or parse_agents_config(engine.ws.config.agents, engine.ws.repo).max_parallel
        )
        try:
            outcome = run(
                engine,
                tasks=args.tasks,
                next_only=args.next,
                run_all=args.all,
                filters=args.filter,
                approver=approver,
                progress=progress,
                parallel=parallel,
            )
        finally:
            progress.finish()  # the live status line never outlives the run
        _finish(args, progress, outcome.finished)
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    """`taskgate demo [--dir PATH] [--yes]`."""
    from taskgate.orchestrator.demo import epilogue, prepare
    from taskgate.orchestrator.run import choose_approver, run

    engine = prepare(args.dir, auto_approve=args.yes, session="demo")
    try:
        progress = _progress(args)
        progress.emit("demo", "demo", f"sample repository at {engine.ws.repo}")
        approver = choose_approver(engine, yes=args.yes)
        try:
            outcome = run(engine, run_all=True, approver=approver, progress=progress)
        finally:
            progress.finish()
        _finish(args, progress, outcome.finished)
        if not args.json:
            print(epilogue(engine))
    finally:
        engine.close()
    return EXIT_OK
