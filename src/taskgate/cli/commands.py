"""One function per command: build the engine, call one service, print the result."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from taskgate.errors import EXIT_OK, EXIT_REFUSED, UsageError

TYPE_CHECKING = False  # typing and argparse stay unimported on the command path (issue 18)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterator
    from typing import Any

    from taskgate.engine.core import Engine


@contextmanager
def engine_for(args: argparse.Namespace) -> Iterator[Engine]:
    """The engine for this invocation: repository from --repo or the cwd, session id."""
    # Imported here so that `--help` and parse errors load no engine, store or git code.
    from taskgate.engine.core import Engine, session_from_env
    from taskgate.engine.workspace import find_workspace

    cwd = Path.cwd()
    start = args.repo if args.repo else cwd
    if not start.exists():
        raise UsageError(f"--repo {start} does not exist")
    ws = find_workspace(start)
    session = args.session if args.session is not None else session_from_env()
    engine = Engine(ws, session_id=session.strip(), cwd=cwd)
    engine.progress = _progress_line
    try:
        yield engine
    finally:
        engine.close()


def _progress_line(line: str) -> None:
    """Progress of a long step (worktree setup), on stderr so --json stays parseable."""
    import sys

    print(line, file=sys.stderr, flush=True)


def emit(args: argparse.Namespace, data: Any, text: str) -> None:
    """Print JSON with --json, else the human text."""
    if getattr(args, "json", False):
        import json

        print(json.dumps(data, indent=2, sort_keys=True, default=str))
    elif text:
        print(text)


def cmd_init(args: argparse.Namespace) -> int:
    """`taskgate init`."""
    from taskgate.engine.lifecycle import init

    with engine_for(args) as engine:
        created = init(engine)
        emit(
            args,
            {"repo": str(engine.ws.repo), "created": created},
            "\n".join([f"initialised taskgate in {engine.ws.repo}"]
                      + [f"  created {item}" for item in created]
                      + ([] if created else ["  (already initialised; nothing changed)"])),
        )  # fmt: skip
    return EXIT_OK


def cmd_todo(args: argparse.Namespace) -> int:
    """`taskgate todo`."""
    from taskgate.engine.lifecycle import availability

    with engine_for(args) as engine:
        items = availability(engine)
        data = [
            {
                "task": i.name,
                "title": i.title,
                "availability": i.availability.value,
                "rule": i.rule,
                "reason": i.message,
                "state": i.state,
                "owner": i.owner,
            }
            for i in items
        ]
        if getattr(args, "json", False):  # the C encoder, the same bytes (issue 18)
            from taskgate.cli.jsonout import dumps_records

            print(dumps_records(data))
            return EXIT_OK
        width = max((len(i.name) for i in items), default=4)
        lines = [f"{i.name:<{width}}  {i.availability.value:<10}  {i.message}" for i in items]
        emit(args, data, "\n".join(lines) or "todo.md lists no tasks")
    return EXIT_OK


def _start_text(result: Any) -> str:
    verb = {"claimed": "started", "resumed": "resuming", "adopted": "adopted",
            "took-over": "took over"}[result.action]  # fmt: skip
    lines = [
        f"{verb} task '{result.task}' (state {result.state})",
        f"  worktree: {result.worktree}",
    ]
    if result.action == "resumed":
        lines.insert(0, f"=== RESUMING TASK: {result.task} (State: {result.state}) ===")
    lines.append(
        f"  next: cd {result.worktree} && taskgate classify {result.task}"
        if result.state == "INIT"
        else f"  next: taskgate status {result.task}"
    )
    return "\n".join(lines)  # fmt: skip


def cmd_start(args: argparse.Namespace) -> int:
    """`taskgate start T`."""
    from taskgate.engine.lifecycle import start

    with engine_for(args) as engine:
        result = start(engine, args.task, adopt=args.adopt)
        emit(args, result.__dict__, _start_text(result))
    return EXIT_OK


def cmd_next(args: argparse.Namespace) -> int:
    """`taskgate next`."""
    from taskgate.engine.lifecycle import next_task

    with engine_for(args) as engine:
        result = next_task(engine)
        emit(args, result.__dict__, _start_text(result))
    return EXIT_OK


def cmd_classify(args: argparse.Namespace) -> int:
    """`taskgate classify T`."""
    from taskgate.engine.flow import classify_task

    if args.raise_to is not None:  # R-WFV-11: a person raises the risk mid-task
        from taskgate.cli.checkpoint_cmds import cmd_raise

        return cmd_raise(args)
    with engine_for(args) as engine:
        record = classify_task(
            engine,
            args.task,
            files=args.files,
            risk_level=args.risk_level,
            force_full=args.force_full_protocol,
        )
        lines = [
            f"classified '{args.task}': {record['risk_level']} ({record['method']}), "
            f"workflow {record['variant']}",
            f"  agents: {', '.join(record['agents'])}",
            f"  path:   {' -> '.join(record['path'])}",
        ]
        if record.get("triggers"):
            lines.append(f"  triggers: {', '.join(record['triggers'])}")
        if args.explain:
            lines += ["", *record.get("explanation", [])]
        emit(args, record, "\n".join(lines))
    return EXIT_OK


def cmd_transition(args: argparse.Namespace) -> int:
    """`taskgate transition T STATE`."""
    from taskgate.engine.flow import transition

    with engine_for(args) as engine:
        result = transition(engine, args.task, args.state, reason=args.reason)
        emit(args, result.__dict__, f"'{result.task}': {result.source} -> {result.target}")
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    """`taskgate status [T]`."""
    from taskgate.engine.status import all_status, task_status

    with engine_for(args) as engine:
        if args.task:
            data = task_status(engine, args.task)
            emit(args, data, _status_text(data))
        else:
            rows = all_status(engine)
            if getattr(args, "json", False):  # the C encoder, the same bytes (issue 18)
                from taskgate.cli.jsonout import dumps_records

                print(dumps_records(rows))
                return EXIT_OK
            lines = [
                f"{r['task_name']}  {r['state']}"
                + ("  (yours)" if r["owned_by_me"] else "")
                + ("  (released)" if r["released"] else f"  owner {r['session_id']}")
                for r in rows
            ]
            emit(args, rows, "\n".join(lines) or "no tasks started yet (taskgate todo)")
    return EXIT_OK


def _status_text(d: dict[str, Any]) -> str:
    lines = [
        f"task {d['task_name']}: {d['state']}" + (" (lock released)" if d.get("lock_released_at")
                                                   else f" (owner {d['session_id']})"),
        f"  risk: {d['risk_level'] or '-'}   path: {' -> '.join(d['path'])}",
        f"  worktree: {d['paths']['worktree']}",
    ]  # fmt: skip
    for a in d["agents"]:
        lines.append(f"  agent {a['agent']}: {a['status'] or '-'} ({a['phase'] or '-'})")
    for n in d["next"]:
        mark = "ready" if n["ready"] else "blocked"
        lines.append(f"  -> {n['to']}: {mark}")
        lines += [f"       [{b['rule']}] {b['message']}" for b in n["blocked_by"][:3]]
    lines.append(f"  {d['recovery']}")
    trust = d.get("confinement") or {}  # issue 14: say plainly when approvals are unprovable
    if trust.get("note"):
        lines.append(f"  agents: {trust['mode']}; {trust['note']}")
    return "\n".join(lines)


def cmd_agent_set(args: argparse.Namespace) -> int:
    """`taskgate agent set T A STATUS`."""
    from taskgate.engine.agentops import set_status

    with engine_for(args) as engine:
        row = set_status(
            engine, args.task, args.agent, args.status, message=args.message,
            work_remaining=args.work_remaining, no_change=args.no_change,
        )  # fmt: skip
        emit(args, row.__dict__, f"{row.agent}: {row.status} ({row.phase})")
    return EXIT_OK


def cmd_agent_add(args: argparse.Namespace) -> int:
    """`taskgate agent add T A --why ...`."""
    from taskgate.engine.agentops import add_agent

    with engine_for(args) as engine:
        row = add_agent(engine, args.task, args.agent, why=args.why)
        emit(args, row.__dict__, f"added agent {row.agent} in {row.added_at_state}")
    return EXIT_OK


def cmd_agent_verdict(args: argparse.Namespace) -> int:
    """`taskgate agent verdict T A DECISION`."""
    from taskgate.engine.agentops import verdict

    with engine_for(args) as engine:
        row = verdict(engine, args.task, args.agent, args.decision, reason=args.reason)
        emit(args, row.__dict__, f"{row.agent}: {row.decision} for {row.head_sha[:12]}")
    return EXIT_OK


def cmd_agent_check(args: argparse.Namespace) -> int:
    """`taskgate agent check T`."""
    from taskgate.engine.agentops import check

    with engine_for(args) as engine:
        report = check(engine, args.task)
        data = {
            "agents": [
                {"agent": x.agent, "condition": x.condition.value, "text": x.text,
                 "action": x.action}
                for x in report.lines
            ],
            "summary": report.summary,
            "all_complete": report.all_complete,
            "recommendation": report.recommendation,
        }  # fmt: skip
        text = "\n".join([*(x.text for x in report.lines), report.summary, report.recommendation])
        emit(args, data, text)
    return EXIT_OK if report.all_complete else EXIT_REFUSED


def cmd_validate(args: argparse.Namespace) -> int:
    """`taskgate validate T`."""
    from taskgate.engine.validate import validate

    with engine_for(args) as engine:
        result = validate(engine, args.task)
        row = result.row
        data = {**row.__dict__, "failure": result.failure.__dict__ if result.failure else None}
        if row.success:
            emit(args, data, f"build PASSED for {row.head_sha[:12]} ({row.command})")
            return EXIT_OK
        failure = result.failure
        assert failure is not None
        emit(
            args,
            data,
            f"build FAILED for {row.head_sha[:12]} (exit {row.exit_code}): {failure.type} - "
            f"{failure.detail}; responsible: {failure.responsible}\n" + result.output[-2000:],
        )
    return EXIT_REFUSED


def cmd_release(args: argparse.Namespace) -> int:
    """`taskgate release T --force`."""
    from taskgate.cli.checkpoint_cmds import refuse_agents
    from taskgate.engine.lifecycle import release

    refuse_agents("release --force")
    with engine_for(args) as engine:
        row = release(engine, args.task, force=args.force, reason=args.reason)
        emit(args, {"task": row.name, "released_at": row.lock_released_at},
             f"released the lock of '{row.name}' (state {row.state} kept)")  # fmt: skip
    return EXIT_OK


def register(add: Any) -> None:
    """The core engine's commands (issue 2)."""
    add("init", cmd_init, "create taskgate.toml, the state dir and todo.md (idempotent)")
    add("todo", cmd_todo, "list todo.md tasks with their availability")
    s = add("start", cmd_start, "claim a task (or resume this session's task)")
    s.add_argument("task")
    s.add_argument(
        "--adopt",
        action="store_true",
        help="resume work in an existing worktree left without a lock (D-LCK-2 option 2)",
    )
    add("next", cmd_next, "start or resume the next available task for this session")
    s = add("classify", cmd_classify, "risk level, agents and workflow -> CLASSIFIED")
    s.add_argument("task")
    s.add_argument("--files", nargs="+", metavar="PATH", help="files the task touches")
    s.add_argument("--risk-level", help="manual override: HIGH, MEDIUM or LOW (R-RSK-11)")
    s.add_argument("--force-full-protocol", action="store_true", help="HIGH, full path (R-RSK-12)")
    s.add_argument("--explain", action="store_true", help="show why each file and agent")
    s.add_argument(
        "--raise",
        dest="raise_to",
        nargs="?",
        const="",
        metavar="LEVEL",
        help="mid-task: raise the risk (one level, or to LEVEL) (R-WFV-11)",
    )
    s.add_argument("--reason", default="", help="with --raise: why")
    s = add("transition", cmd_transition, "guarded transition to STATE")
    s.add_argument("task")
    s.add_argument("state")
    s.add_argument("--reason", default="", help="required for backward transitions (R-TRN-06)")
    s = add("status", cmd_status, "one task in full, or all tasks")
    s.add_argument("task", nargs="?")
    agent = add.group("agent", "agent status, additions, verdicts, checks")
    s = agent("set", cmd_agent_set, "record an agent's status for the current phase")
    s.add_argument("task")
    s.add_argument("agent")
    s.add_argument("status", help="WORKING, IN_PROGRESS, COMPLETE, ERROR or BLOCKED")
    s.add_argument("--message", default="")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--work-remaining", dest="work_remaining", action="store_true", default=None)
    g.add_argument("--done", dest="work_remaining", action="store_false")
    s.add_argument(
        "--no-change",
        default="",
        metavar="WHY",
        help="IMPLEMENTATION: this agent's part needs no commit, and why (R-TRN-14)",
    )
    s = agent("add", cmd_agent_add, "add an agent mid-task (R-AGT-14..21)")
    s.add_argument("task")
    s.add_argument("agent")
    s.add_argument("--why", required=True, help="justification (R-AGT-15)")
    s = agent("verdict", cmd_agent_verdict, "review decision for the current task-branch HEAD")
    s.add_argument("task")
    s.add_argument("agent")
    s.add_argument("decision", help="APPROVED or REJECTED")
    s.add_argument("--reason", default="")
    s = agent("check", cmd_agent_check, "partial-completion report and recommended action")
    s.add_argument("task")
    s = add("validate", cmd_validate, "run the configured build and record it against HEAD")
    s.add_argument("task")
    s = add("release", cmd_release, "human-only: release a task lock (R-LCK-21)")
    s.add_argument("task")
    s.add_argument("--force", action="store_true")
    s.add_argument("--reason", default="")
