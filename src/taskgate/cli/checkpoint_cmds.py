"""`present`, `approve` and `say`: the human checkpoints and the conversation (issue 5)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from taskgate.cli.commands import emit, engine_for
from taskgate.errors import EXIT_HUMAN, EXIT_OK, Refused, UsageError
from taskgate.protocol.violations import Violation

# Environment variables that mark a process started by an AI agent rather than by a person.
AGENT_ENV_MARKERS = ("CLAUDECODE", "TASKGATE_AGENT")


def agent_marker() -> str | None:
    """The first agent marker set in the environment, or None for a person's shell."""
    return next((m for m in AGENT_ENV_MARKERS if os.environ.get(m)), None)


def refuse_agents(what: str) -> None:
    """Approvals come only from the person (R-CKP-02); refuse when an agent runs us."""
    marker = agent_marker()
    if marker:
        raise Refused(
            f"{what} must be typed by the user, not run by an agent ({marker} is set)",
            [Violation("R-CKP-02", "an agent cannot approve its own work")],
            hint="ask the user to approve in their own terminal or reply in the chat",
        )


def provenance() -> str:
    """How this command's words reached us: an agent's relay, a person at a terminal, a script.

    The person's own prompt captured by the Claude Code hook is `human-prompt`; the hook
    calls `record_human_message` in-process, so no command-line flag can claim it.
    """
    from taskgate.engine.checkpoints import AGENT_RELAYED, NON_INTERACTIVE, TERMINAL

    if agent_marker():
        return AGENT_RELAYED
    return TERMINAL if sys.stdin.isatty() else NON_INTERACTIVE


def cmd_present(args: argparse.Namespace) -> int:
    """`taskgate present T`."""
    from taskgate.engine.checkpoints import present

    with engine_for(args) as engine:
        shown = present(engine, args.task)
        data = {
            "task": shown.task,
            "kind": shown.kind,
            "bound_to": shown.bound_to,
            "presented_at": shown.at,
            "text": shown.text,
            **shown.details,
        }
        emit(args, data, shown.text)
    return EXIT_OK


def cmd_approve(args: argparse.Namespace) -> int:
    """`taskgate approve T plan|changes`."""
    from taskgate.engine.checkpoints import approve

    refuse_agents("approval")
    if args.kind == "noop":
        from taskgate.engine.checkpoints import approve_noop

        with engine_for(args) as engine:
            record = approve_noop(engine, args.task, provenance=provenance(), message=args.message)
            emit(args, {"task": args.task, **record}, f"recorded: '{args.task}' needs no change")
        return EXIT_OK
    with engine_for(args) as engine:
        row = approve(engine, args.task, args.kind, provenance=provenance(), message=args.message)
        emit(args, row.__dict__, f"approved {row.kind} of '{row.task}' ({row.bound_to[:12]})")
    return EXIT_OK


def _stdin_text() -> str:
    """The person's words from stdin; bytes that are not UTF-8 are a usage error (issue 16)."""
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"stdin is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})",
            hint="convert it first, e.g. iconv -f latin1 -t utf-8 | taskgate say T -",
        ) from None


def cmd_say(args: argparse.Namespace) -> int:
    """`taskgate say T TEXT`: exit 4 when the person must answer (ambiguous, unrelated work)."""
    from taskgate.engine.conversation import record_human_message

    text = _stdin_text() if args.text == "-" else args.text
    with engine_for(args) as engine:
        result = record_human_message(engine, args.task, text, provenance())
        emit(args, result.to_json(), result.response)
    return EXIT_HUMAN if result.needs_human else EXIT_OK


def cmd_request_changes(args: argparse.Namespace) -> int:
    """`taskgate request-changes T TEXT`: the person's change request, no keywords needed."""
    from taskgate.engine.conversation import record_human_message

    text = sys.stdin.read() if args.text == "-" else args.text
    with engine_for(args) as engine:
        result = record_human_message(engine, args.task, text, provenance(), change_request=True)
        emit(args, result.to_json(), result.response + f"\nnext: taskgate run {args.task}")
    return EXIT_OK


def cmd_abandon(args: argparse.Namespace) -> int:
    """`taskgate abandon T --reason …`: drop a task; its work is quarantined, nothing lost."""
    from taskgate.engine.abandon import abandon

    refuse_agents("abandoning a task")
    with engine_for(args) as engine:
        record = abandon(engine, args.task, reason=args.reason, provenance=provenance())
        kept = "\n".join(f"  {branch}: {ref}" for branch, ref in record["kept"].items())
        emit(
            args,
            {"task": args.task, **record},
            f"abandoned '{args.task}' (was {record['state']}); its work is kept under:\n"
            f"{kept or '  (nothing to keep)'}\n"
            f"remove its entry from todo.md, or give the task a new name to start it afresh",
        )
    return EXIT_OK


def cmd_raise(args: argparse.Namespace) -> int:
    """`taskgate classify T --raise [LEVEL] [--reason …]` (R-WFV-11, C-84)."""
    from taskgate.engine.reclassify import raise_risk

    by = "agent" if agent_marker() else "person"
    with engine_for(args) as engine:
        record = raise_risk(
            engine,
            args.task,
            level=args.raise_to or None,
            reason=args.reason or f"raised by the {by}",
            by=by,
        )
        added = ", ".join(record["agents_added"]) or "none"
        emit(
            args,
            record,
            f"'{args.task}': risk {record['from']} -> {record['to']}; agents added: {added}\n"
            f"  path: {' -> '.join(record['path'])}\n  next: taskgate run {args.task}",
        )
    return EXIT_OK


def register(add: Any) -> None:
    """The checkpoint commands."""
    s = add("present", cmd_present, "show the plan or the change to the user and record it")
    s.add_argument("task")
    s = add("approve", cmd_approve, "record the user's approval of the presented plan/changes")
    s.add_argument("task")
    s.add_argument(
        "kind", choices=["plan", "changes", "noop"], help="noop: the task needs no change"
    )
    s.add_argument("--message", default="", help="the user's words, hashed into the record")
    s = add("say", cmd_say, "a user message in context: approval, change request, question, ...")
    s.add_argument("task")
    s.add_argument("text", help="the user's words ('-' reads them from stdin)")
    s = add(
        "request-changes",
        cmd_request_changes,
        "a person's change request for the agents, whatever its words (R-INT-11)",
    )
    s.add_argument("task")
    s.add_argument("text", help="what to change ('-' reads it from stdin)")
    s = add("abandon", cmd_abandon, "drop a task: its work is quarantined under refs/taskgate/")
    s.add_argument("task")
    s.add_argument("--reason", required=True, help="why the task is dropped (recorded)")
