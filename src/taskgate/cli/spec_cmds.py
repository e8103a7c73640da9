"""`taskgate spec …`: the specification workflow (issue 9, seed 003, RULES §18)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from taskgate.cli.spec_run import agents_config_of, emit, report, run, where
from taskgate.cli.spec_terminal import ask, interactive, responder
from taskgate.errors import EXIT_HUMAN, EXIT_OK, Corrupted, Refused, UsageError

if TYPE_CHECKING:
    from taskgate.spec.detect import Candidate


def _confirm_fresh(args: argparse.Namespace) -> bool:
    """R-SPC-17: "This will delete all progress. Continue?" (--yes answers it)."""
    if args.yes:
        return True
    if interactive():
        return (ask("This will delete all progress. Continue? [y/N] ") or "").lower() in (
            "y",
            "yes",
        )
    raise UsageError(
        "start fresh deletes all progress and needs confirmation (R-SPC-17)",
        hint="add --yes to confirm, or run it on a terminal",
    )


def _start(
    args: argparse.Namespace, root: Path, common: Path, description: str, slug: str | None
) -> int:
    from taskgate.engine.clock import iso, system_clock
    from taskgate.spec.detect import create, slugify
    from taskgate.spec.recovery import workflow_lock
    from taskgate.spec.state import load_state

    cfg = agents_config_of(args)
    with workflow_lock(common, "numbering", wait=True):
        paths = create(
            root,
            description,
            slug or slugify(description),
            agents=cfg,
            scripted=args.demo,
            now=iso(system_clock()),
        )
    state = load_state(paths)
    assert state is not None
    if not args.json:
        print(f"spec {paths.root.name}: started in {paths.root}")
    return run(args, common, paths, state, responder(state, args.demo))


# --- commands ------------------------------------------------------------------------------


def cmd_new(args: argparse.Namespace) -> int:
    """`taskgate spec new "description"`: resume detection first (R-SPC-01), then A1."""
    from taskgate.spec.detect import detect, specs_root
    from taskgate.spec.texts import resume_prompt

    repo, common = where(args)
    root = specs_root(repo)
    description = " ".join(args.description.split())
    if not description:
        raise UsageError("the feature description is empty", hint='taskgate spec new "what"')
    matches = detect(root, description)
    if not matches:
        return _start(args, root, common, description, args.name)
    best, others = matches[0], matches[1:]
    choice = "resume" if args.resume else "fresh" if args.fresh else None
    if choice is None and not args.json and interactive():
        print(resume_prompt(best, others))
        answer = (ask("[r]esume / start [f]resh> ") or "").lower()
        choice = {"r": "resume", "resume": "resume", "f": "fresh", "fresh": "fresh"}.get(answer)
    if choice is None:
        data = {
            "found": True,
            "feature_id": best.feature_id,
            "iteration": best.state.current_iteration if best.state else 1,
            "loop_status": best.state.loop_status if best.state else None,
            "index_path": str(best.paths.index),
            "others": [c.feature_id for c in others],
        }
        emit(
            args,
            data,
            resume_prompt(best, others) + "\nhint: taskgate spec new "
            f'"{description}" --resume, or --fresh --yes to delete it and start again',
        )
        return EXIT_HUMAN
    if choice == "fresh":
        return _fresh(args, common, best, description, args.name)
    return _resume(args, common, best, description=description)


def _resume(
    args: argparse.Namespace, common: Path, candidate: Candidate, description: str = ""
) -> int:
    from taskgate.engine.clock import iso, system_clock
    from taskgate.spec.detect import adopt_orphan
    from taskgate.spec.loop import Outcome
    from taskgate.spec.recovery import repair, workflow_lock
    from taskgate.spec.state import FINAL_STATUSES, save_state, validate_state

    paths, state = candidate.paths, candidate.state
    if args.fresh:  # Start Fresh chosen up front (R-SPC-17)
        return _fresh(args, common, candidate, description)
    if candidate.problem:  # unreadable state: repair is impossible (R-SPC-16)
        return _integrity_failure(args, common, candidate, [candidate.problem], repairable=False)
    if state is None:  # C-58: a directory without state resumes at A1
        if not description:
            raise UsageError(
                f"{candidate.feature_id} has no saved state, so its description "
                "is unknown (a crash in A1)",
                hint=f'taskgate spec resume {candidate.feature_id} --description "..."',
            )
        with workflow_lock(common, candidate.feature_id):
            state = adopt_orphan(
                paths,
                description,
                agents=agents_config_of(args),
                scripted=args.demo,
                now=iso(system_clock()),
            )
    if state.loop_status in FINAL_STATUSES:  # R-SPC-09, C-59: report only
        return report(args, paths, Outcome(state))
    problems = validate_state(state)  # R-SPC-16: before any resume
    if problems:
        if not args.repair:
            return _integrity_failure(args, common, candidate, problems, repairable=True)
        from taskgate.spec.index import render_index

        state, actions = repair(state)
        with workflow_lock(common, candidate.feature_id):
            save_state(paths, state, render=render_index)
        if not args.json:
            print("repaired: " + "; ".join(actions))
    if not args.json:
        print(
            f"resuming {candidate.feature_id} ({state.loop_status}, iteration "
            f"{state.current_iteration})"
        )
    return run(args, common, paths, state, responder(state, args.demo))


def _integrity_failure(
    args: argparse.Namespace,
    common: Path,
    candidate: Candidate,
    problems: list[str],
    *,
    repairable: bool,
) -> int:
    """R-SPC-16: a failed check blocks the resume; offer repair, fresh start, manual."""
    fid = candidate.feature_id
    if interactive() and not args.json:
        print(f"spec {fid} failed its integrity check:\n  " + "\n  ".join(problems))
        options = (["[r]epair"] if repairable else []) + ["start [f]resh", "[m]anual"]
        answer = (ask(" / ".join(options) + "> ") or "").lower()[:1]
        if answer == "r" and repairable:
            args.repair = True
            return _resume(args, common, candidate)
        if answer == "f":
            return _fresh(args, common, candidate)
    options = ([f"'taskgate spec resume {fid} --repair'"] if repairable else []) + [
        f"'taskgate spec resume {fid} --fresh --yes' (deletes all progress)",
        f"edit {candidate.paths.state} by hand",
    ]
    raise Corrupted(
        f"spec workflow {fid} failed its integrity check (R-SPC-16): " + "; ".join(problems),
        hint="options: " + ", or ".join(options),
    )


def _fresh(
    args: argparse.Namespace,
    common: Path,
    candidate: Candidate,
    description: str = "",
    name: str | None = None,
) -> int:
    """Start Fresh (R-SPC-17): confirm, remove the directory, start A1 again."""
    from taskgate.spec.recovery import remove_workflow

    description = description or (candidate.state.description if candidate.state else "")
    if not description:
        raise UsageError(
            f"{candidate.feature_id}: the description is unknown (no saved state)",
            hint='start again with taskgate spec new "<description>" --fresh --yes',
        )
    if not remove_workflow(candidate.paths, confirmed=_confirm_fresh(args)):
        emit(args, {"fresh": False}, "nothing deleted; no phase started (R-SPC-17)")
        return EXIT_OK
    root = candidate.paths.root.parent
    return _start(args, root, common, description, name or candidate.feature_id[4:])


def cmd_resume(args: argparse.Namespace) -> int:
    """`taskgate spec resume [ID]`: the named workflow, or the most recent interrupted one."""
    from taskgate.spec.detect import find, scan, specs_root

    repo, common = where(args)
    root = specs_root(repo)
    if args.id:
        return _resume(args, common, find(root, args.id), description=args.description or "")
    waiting = [c for c in scan(root) if not c.finished]
    if not waiting:
        raise UsageError(
            "no interrupted spec workflow to resume",
            hint='start one with taskgate spec new "description"',
        )
    if len(waiting) > 1 and not args.json:
        print("most recent first (R-SPC-03): " + ", ".join(c.feature_id for c in waiting))
    return _resume(args, common, waiting[0], description=args.description or "")


def cmd_answer(args: argparse.Namespace) -> int:
    """`taskgate spec answer ID --answer C1.1=TEXT … / --decision D`, then go on."""
    from taskgate.spec.detect import find, specs_root
    from taskgate.spec.loop import record_answers
    from taskgate.spec.responders import Preset
    from taskgate.spec.state import copy_state, validate_state

    repo, common = where(args)
    candidate = find(specs_root(repo), args.id)
    fid, state = candidate.feature_id, candidate.state
    if state is None:
        raise Corrupted(
            f"{fid}: {candidate.problem or 'no saved state (a crash in A1)'}",
            hint=f"taskgate spec resume {fid}",
        )
    problems = validate_state(state)  # R-SPC-16: never build on a state that fails the check
    if problems:
        raise Corrupted(
            f"spec workflow {fid} failed its integrity check (R-SPC-16): " + "; ".join(problems),
            hint=f"taskgate spec resume {fid} --repair",
        )
    answers = {}
    for item in args.answer:
        qid, sep, text = item.partition("=")
        if not sep or not qid.strip():
            raise UsageError(f"--answer {item!r} must be ID=TEXT", hint='--answer C1.1="..."')
        answers[qid.strip()] = text
    if not answers and not args.decision:
        raise UsageError("nothing to record", hint="pass --answer ID=TEXT or --decision D")
    if answers:
        if state.loop_status != "clarifying" or state.user_answers:
            raise Refused(
                f"spec {fid} is not waiting for answers (status {state.loop_status}; R-SPC-08)",
                hint=f"taskgate spec status {fid}",
            )
        record_answers(copy_state(state), answers)  # checked first: bad input changes nothing
    decision = state.pending_decision
    if args.decision:
        if decision is None:
            raise Refused(f"spec {fid} has no pending decision", hint=f"taskgate spec status {fid}")
        if args.decision not in decision.options:
            raise UsageError(
                f"--decision {args.decision!r} is not one of {', '.join(decision.options)}",
                hint=decision.message,
            )
    args.repair = args.fresh = args.yes = False
    preset = Preset(answers, args.decision, responder(state, args.demo))
    return run(args, common, candidate.paths, state, preset)


def cmd_status(args: argparse.Namespace) -> int:
    """`taskgate spec status [ID]`."""
    from taskgate.spec.detect import find, specs_root
    from taskgate.spec.loop import describe
    from taskgate.spec.recovery import resume_point
    from taskgate.spec.state import validate_state
    from taskgate.spec.texts import status_text

    if not args.id:
        return cmd_list(args)
    repo, _ = where(args)
    candidate = find(specs_root(repo), args.id)
    s = candidate.state
    if s is None:
        data = {
            "feature_id": candidate.feature_id,
            "loop_status": None,
            "problem": candidate.problem or "no saved state (crash in A1, C-58)",
            "resume_point": "A1",
        }
        emit(args, data, f"{candidate.feature_id}: {data['problem']}; resumes at A1")
        return EXIT_OK
    point = resume_point(s, spec_exists=candidate.paths.spec.exists())
    problems = validate_state(s)
    data = describe(s) | {
        "resume_point": point,
        "integrity": problems,
        "paths": {"spec": str(candidate.paths.spec), "index": str(candidate.paths.index)},
    }
    emit(args, data, status_text(s, point, problems))
    return EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    """`taskgate spec list`."""
    from taskgate.spec.detect import scan, specs_root
    from taskgate.spec.texts import list_row

    repo, _ = where(args)
    rows = [list_row(c) for c in scan(specs_root(repo))]
    lines = [
        f"{r['feature_id']:<32} {r['loop_status'] or 'no state':<12} "
        f"it {r['current_iteration'] or '-'}  {r['termination_reason'] or ''}"
        for r in rows
    ]
    emit(args, rows, "\n".join(lines) or "no spec workflows in specs/")
    return EXIT_OK


def cmd_to_task(args: argparse.Namespace) -> int:
    """`taskgate spec to-task ID`: append a todo.md task seeded by a completed spec."""
    from taskgate.engine.workspace import find_workspace
    from taskgate.errors import GitError
    from taskgate.spec.detect import find, specs_root
    from taskgate.spec.totask import append_task, commit_blocker, commit_task, spec_files

    repo, _ = where(args)
    candidate = find(specs_root(repo), args.id)
    # Decided before the edit: the person's own uncommitted todo.md edits are never committed.
    blocker = (
        "--no-commit" if args.no_commit else commit_blocker(repo, find_workspace(repo).todo_path)
    )
    name, todo = append_task(repo, candidate, args.name)
    sha = ""
    if not blocker:
        try:
            sha = commit_task(repo, todo, candidate, name)
        except GitError as exc:  # e.g. a pre-commit hook of the project refused it
            blocker = f"git commit failed: {exc}"
    rels = [str(p.relative_to(repo)) for p in (todo, *spec_files(candidate))]
    if sha:
        text = f"added task '{name}' to {todo}, committed with its spec as {sha[:12]}"
    else:
        text = (
            f"added task '{name}' to {todo}; not committed ({blocker}): commit it with the spec "
            f"before 'taskgate start' (the task branch starts from the committed main):\n"
            f"  git add {' '.join(rels)} && git commit -m 'todo: add task {name}'"
        )
    emit(
        args,
        {
            "task": name,
            "todo": str(todo),
            "commit": sha or None,
            "files": rels,
            "not_committed": blocker or None,
        },
        f"{text}\n  next: taskgate start {name}",
    )
    return EXIT_OK


def register(add: Any) -> None:
    """The `spec` command group (issue 9)."""
    spec = add.group("spec", "the specification workflow: specs/NNN-name/spec.md (seed 003)")

    def agent_options(p: Any) -> None:
        p.add_argument(
            "--demo",
            action="store_true",
            help="scripted agents and scripted answers (no person needed)",
        )
        p.add_argument("--yes", action="store_true", help="confirm start fresh (R-SPC-17)")

    s = spec("new", cmd_new, "start a spec workflow (after resume detection, R-SPC-01)")
    s.add_argument("description")
    s.add_argument("--name", help="short name of specs/NNN-NAME (default: from the description)")
    s.add_argument("--script", help="JSON scenario for the scripted agents (see docs/spec.md)")
    s.add_argument(
        "--agent-command",
        help="executable run as 'EXE ROLE' (JSON in, JSON out); default: [spec] backend",
    )
    choice = s.add_mutually_exclusive_group()
    choice.add_argument("--resume", action="store_true", help="resume a matching workflow")
    choice.add_argument("--fresh", action="store_true", help="delete it and start again")
    agent_options(s)
    s.set_defaults(repair=False)
    s = spec("resume", cmd_resume, "continue a workflow at its saved step")
    s.add_argument("id", nargs="?", help="NNN-name or NNN (default: the most recent)")
    s.add_argument("--repair", action="store_true", help="repair a failed integrity check")
    s.add_argument("--fresh", action="store_true", help="delete all progress and start again")
    s.add_argument("--description", help="description for a directory without saved state")
    agent_options(s)
    s = spec("answer", cmd_answer, "answer pending questions / decide, then go on")
    s.add_argument("id")
    s.add_argument("--answer", action="append", default=[], metavar="ID=TEXT")
    s.add_argument("--decision", help="retry, accept, edit or abort (as offered)")
    s.add_argument("--demo", action="store_true", help="scripted answers after these")
    s = spec("status", cmd_status, "one workflow in full (or all)")
    s.add_argument("id", nargs="?")
    spec("list", cmd_list, "every workflow in specs/")
    s = spec("to-task", cmd_to_task, "append a todo.md task seeded by a completed spec")
    s.add_argument("id")
    s.add_argument("--name", help="task name (default: the spec's short name)")
    s.add_argument(
        "--no-commit",
        action="store_true",
        help="only append to todo.md; do not commit it with the spec",
    )
