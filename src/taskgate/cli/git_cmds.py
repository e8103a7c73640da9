"""The git lifecycle commands (issue 4): merge, complete, cleanup."""

from __future__ import annotations

import argparse
from typing import Any

from taskgate.cli.commands import emit, engine_for
from taskgate.errors import EXIT_OK, EXIT_REFUSED


def cmd_merge(args: argparse.Namespace) -> int:
    """`taskgate merge T [--agent A]...`."""
    from taskgate.engine.merge import merge_agents

    with engine_for(args) as engine:
        result = merge_agents(engine, args.task, args.agent or ())
        lines = [f"'{result.task}' at {result.head[:12]}"]
        lines += [
            f"  merged {m['agent']} ({m['commits']} commit{'s' if m['commits'] != 1 else ''})"
            for m in result.merged
        ]
        lines += [f"  {a}: already merged" for a in result.up_to_date]
        if result.conflict:
            lines.append(f"  CONFLICT merging {result.task}-{result.conflict.agent} (aborted, "
                         "nothing half-merged):")  # fmt: skip
            lines += [
                f"    {path}  (touched by {', '.join(agents)})"
                for path, agents in result.conflict.files.items()
            ]
            lines.append(
                f"  hint: the agents resolve it in their worktrees (git rebase {result.task}), "
                f"commit with [agent:A], then run 'taskgate merge {result.task}' again"
            )
        lines += [f"  rebased {a} onto {result.task}" for a in result.rebased]
        lines += [f"  not rebased {a}: {why}" for a, why in result.not_rebased.items()]
        emit(args, result.to_json(), "\n".join(lines))
    return EXIT_REFUSED if result.conflict else EXIT_OK


def cmd_complete(args: argparse.Namespace) -> int:
    """`taskgate complete T`."""
    from taskgate.engine.complete import complete

    with engine_for(args) as engine:
        result = complete(engine, args.task)
        verb = "was already complete" if result.already_complete else "completed"
        text = [
            f"'{result.task}' {verb}: {result.main_branch} is at {result.merged_sha[:12]}",
            f"  approved {result.approved_sha[:12]} -> archival {result.archival_sha[:12]} -> "
            f"squash {result.squash_sha[:12]}",
        ]
        if result.unblocked:
            text.append(f"  unblocked: {', '.join(result.unblocked)}")
        text.append(f"  next: taskgate cleanup {result.task}")
        emit(args, result.__dict__, "\n".join(text))
    return EXIT_OK


def cmd_cleanup(args: argparse.Namespace) -> int:
    """`taskgate cleanup T [--quarantine]`."""
    from taskgate.engine.cleanup import cleanup

    with engine_for(args) as engine:
        if args.accept_main:  # issue 17: the person takes main as it is, with a reason
            from taskgate.cli.checkpoint_cmds import provenance, refuse_agents
            from taskgate.engine.mainbuild import accept_main

            refuse_agents("accepting main without a passing build")
            accept_main(engine, args.task, reason=args.reason, provenance=provenance())
        result = cleanup(engine, args.task, quarantine=args.quarantine)
        if result.already_clean:
            text = [f"'{result.task}' was already cleaned up (nothing to do)"]
        else:
            text = [f"'{result.task}' -> CLEANUP; lock released, task directory kept"]
        text += [f"  removed worktree {p}" for p in result.removed_worktrees]
        text += [f"  deleted branch {b}" for b in result.deleted_branches]
        text += [f"  quarantined {b} as {ref}" for b, ref in result.quarantined.items()]
        build = result.main_build
        if build:
            text.append(f"  build on {build.get('branch', 'main')}: {build.get('result')}")
        emit(args, result.__dict__, "\n".join(text))
    return EXIT_OK


def register(add: Any) -> None:
    """The git lifecycle commands."""
    s = add("merge", cmd_merge, "merge agent branches T-A into the task branch (IMPLEMENTATION)")
    s.add_argument("task")
    s.add_argument("--agent", action="append", metavar="A", help="only this agent (repeatable)")
    s = add("complete", cmd_complete, "archive, squash and merge --ff-only into main -> COMPLETE")
    s.add_argument("task")
    s = add("cleanup", cmd_cleanup, "remove the task's worktrees and branches -> CLEANUP")
    s.add_argument("task")
    s.add_argument(
        "--quarantine",
        action="store_true",
        help="keep undelivered work under refs/taskgate/quarantine/ instead of refusing",
    )
    s.add_argument(
        "--accept-main",
        action="store_true",
        help="the build on main failed and you take main as it is (needs --reason; recorded)",
    )
    s.add_argument("--reason", default="", help="with --accept-main: why main is acceptable")
