"""The taskgate CLI: parse, call the engine, print. Exit codes at one boundary (DESIGN.md)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from taskgate import __version__
from taskgate.errors import EXIT_INTERNAL, EXIT_USAGE, TaskgateError

Handler = Callable[[argparse.Namespace], int]


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so usage errors pass the one error boundary."""

    def error(self, message: str) -> Any:
        from taskgate.errors import UsageError

        raise UsageError(message, hint=f"see '{self.prog} --help'")


def _parser() -> argparse.ArgumentParser:
    from taskgate.cli import commands as c

    p = _Parser(prog="taskgate", description="The Task State Machine Protocol, enforced.")
    p.add_argument("--version", action="version", version=f"taskgate {__version__}")
    p.add_argument("--repo", type=Path, help="repository (default: the current directory)")
    p.add_argument("--session", help="session id (default: $TASKGATE_SESSION)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def add(name: str, handler: Handler, help_text: str, json_flag: bool = True) -> Any:
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        cmd.set_defaults(handler=handler)
        if json_flag:
            cmd.add_argument("--json", action="store_true", help="machine-readable output")
        return cmd

    add("init", c.cmd_init, "create taskgate.toml, the state dir and todo.md (idempotent)")
    add("todo", c.cmd_todo, "list todo.md tasks with their availability")
    s = add("start", c.cmd_start, "claim a task (or resume this session's task)")
    s.add_argument("task")
    s.add_argument(
        "--adopt",
        action="store_true",
        help="resume work in an existing worktree left without a lock (D-LCK-2 #2)",
    )
    add("next", c.cmd_next, "start or resume the next available task for this session")
    s = add("classify", c.cmd_classify, "risk level, agents and workflow -> CLASSIFIED")
    s.add_argument("task")
    s.add_argument("--files", nargs="+", metavar="PATH", help="files the task touches")
    s.add_argument("--risk-level", help="manual override: HIGH, MEDIUM or LOW (R-RSK-11)")
    s.add_argument("--force-full-protocol", action="store_true", help="HIGH, full path (R-RSK-12)")
    s.add_argument("--explain", action="store_true", help="show why each file and agent")
    s = add("transition", c.cmd_transition, "guarded transition to STATE")
    s.add_argument("task")
    s.add_argument("state")
    s.add_argument("--reason", default="", help="required for backward transitions (R-TRN-06)")
    s = add("status", c.cmd_status, "one task in full, or all tasks")
    s.add_argument("task", nargs="?")
    agent = sub.add_parser("agent", help="agent status, additions, verdicts, checks")
    asub = agent.add_subparsers(dest="agent_command", metavar="ACTION", parser_class=_Parser)
    agent.set_defaults(handler=lambda a: c.usage(agent))

    def aadd(name: str, handler: Handler, help_text: str) -> Any:
        cmd = asub.add_parser(name, help=help_text, description=help_text)
        cmd.set_defaults(handler=handler)
        cmd.add_argument("--json", action="store_true", help="machine-readable output")
        cmd.add_argument("task")
        return cmd

    s = aadd("set", c.cmd_agent_set, "record an agent's status for the current phase")
    s.add_argument("agent")
    s.add_argument("status", help="WORKING, IN_PROGRESS, COMPLETE, ERROR or BLOCKED")
    s.add_argument("--message", default="")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--work-remaining", dest="work_remaining", action="store_true", default=None)
    g.add_argument("--done", dest="work_remaining", action="store_false")
    s = aadd("add", c.cmd_agent_add, "add an agent mid-task (R-AGT-14..21)")
    s.add_argument("agent")
    s.add_argument("--why", required=True, help="justification (R-AGT-15)")
    s = aadd("verdict", c.cmd_agent_verdict, "review decision for the current task-branch HEAD")
    s.add_argument("agent")
    s.add_argument("decision", help="APPROVED or REJECTED")
    s.add_argument("--reason", default="")
    aadd("check", c.cmd_agent_check, "partial-completion report and recommended action")
    s = add("present", c.cmd_present, "show the plan or the change to the user and record it")
    s.add_argument("task")
    s = add("approve", c.cmd_approve, "record the user's approval of the presented plan/changes")
    s.add_argument("task")
    s.add_argument("kind", choices=["plan", "changes"])
    s.add_argument("--message", default="", help="the user's words, hashed into the record")
    s = add("validate", c.cmd_validate, "run the configured build and record it against HEAD")
    s.add_argument("task")
    s = add("release", c.cmd_release, "human-only: release a task lock (R-LCK-21)")
    s.add_argument("task")
    s.add_argument("--force", action="store_true")
    s.add_argument("--reason", default="")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 done, 1 refused, 2 usage, 3 foreign, 4 human,
    5 corrupted, 10 internal)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    wants_json = "--json" in args_list
    try:
        args = _parser().parse_args(args_list)
        if not getattr(args, "handler", None):
            _parser().print_help()
            return EXIT_USAGE
        handler: Handler = args.handler
        return handler(args)
    except TaskgateError as exc:
        _report(exc, wants_json)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted; the store holds the last committed step", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # the one boundary for bugs: say so, never a silent pass
        if os.environ.get("TASKGATE_DEBUG"):
            raise
        print(f"taskgate: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        print("hint: rerun with TASKGATE_DEBUG=1 and report the traceback", file=sys.stderr)
        return EXIT_INTERNAL


def _report(exc: TaskgateError, wants_json: bool) -> None:
    if wants_json:
        print(json.dumps(exc.to_json(), indent=2, sort_keys=True))
        return
    print(f"taskgate: {exc.message}", file=sys.stderr)
    for violation in getattr(exc, "violations", ()):
        print(f"  {violation.render()}", file=sys.stderr)
    if exc.hint:
        print(f"hint: {exc.hint}", file=sys.stderr)


def entry() -> None:
    """Console-script entry point."""
    sys.exit(main())
