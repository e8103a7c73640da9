"""R-CMP-08 / C-83: the build of main after the merge, which `taskgate cleanup` runs first.

The delivered commit is built in a throwaway worktree (never the task's or the user's); a
failure is recorded as a `validation` event on main and stops for the user (exit 4).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from taskgate.engine import worktree_setup
from taskgate.engine.core import Engine
from taskgate.engine.facts import task_path
from taskgate.errors import NeedsHuman, Refused
from taskgate.git import ops
from taskgate.git import repo as gitrepo
from taskgate.git.cmd import git
from taskgate.process import clean_env
from taskgate.protocol.escalation import escalation_message
from taskgate.protocol.states import State
from taskgate.protocol.violations import Violation
from taskgate.store.base import Tx
from taskgate.store.records import TaskSnapshot


def verify_main_build(engine: Engine, snap: TaskSnapshot) -> tuple[dict[str, Any], bool]:
    """R-CMP-08 / C-83: the delivered commit builds and its files exist on main.

    The build runs in a throwaway worktree at the merged commit (see `build_worktree`). A
    failure blocks CLEANUP and needs the user (exit 4); main has already advanced, so
    reverting is theirs to decide. Returns the report and whether it is still to be recorded
    (a `validation` event on main): the caller records it with the move into CLEANUP.
    """
    t = snap.task
    repo = engine.ws.repo
    merged = str(t.extra.get("merged_sha") or "")
    if not merged or not ops.is_ancestor(repo, merged, f"refs/heads/{t.base_branch}"):
        raise Refused(
            f"{t.base_branch} does not contain the task commit {merged[:12] or '?'}",
            [Violation("R-CLN-01", "CLEANUP starts only after main shows the task commit")],
            hint=f"run 'taskgate complete {t.name}'",
        )
    from taskgate.engine import mainbuild  # issue 17: current main, --accept-main

    built = mainbuild.target(engine, snap, merged)
    for e in snap.events:  # verified already (cleanup rerun after a crash)
        p = e.payload
        if e.kind == "validation" and p.get("on_main") and p.get("head_sha") == built:
            passed = p.get("result") in ("SUCCESS", "UNCHANGED")
            if passed:
                return dict(p), False
    report: dict[str, Any] = {"on_main": True, "head_sha": built, "branch": t.base_branch}
    if State.IMPLEMENTATION in task_path(snap):  # "the delivered module must exist on main"
        present = ops.all_paths(repo, f"refs/heads/{t.base_branch}")
        info = ops.commit(repo, merged)
        missing = [p for p in info.created + info.modified if p not in present]
        if missing:
            escalate(engine, t.name, f"delivered files missing on {t.base_branch}: "
                      f"{', '.join(missing[:10])}", report | {"missing": missing})  # fmt: skip
    if (accepted := mainbuild.accepted(snap)) is not None:
        return {"on_main": True, "head_sha": built, "result": "ACCEPTED", **accepted}, False
    commands = engine.ws.config.validation.commands
    if not commands:
        return report | {"result": "SKIPPED", "reason": "no [validation] commands (C-80)"}, False
    from taskgate.engine.validated_tree import reuse  # issue 17: one suite run, not two

    if (same := reuse(engine, snap, built)) is not None:
        return report | same, True  # in the audit trail, not a suite run
    timeout = engine.ws.config.validation.timeout_minutes * 60
    ran = []
    failure: dict[str, Any] = {}
    from taskgate.agents import build_sandbox  # issue 14: main's build runs the agents' code

    confinement = build_sandbox.of(engine.ws)
    report["sandbox"] = {"mode": confinement.mode, "reason": confinement.choice.reason}
    if confinement.notice("the build on main") and engine.progress is not None:
        engine.progress(confinement.notice("the build on main"))
    with build_worktree(engine, t.name, built) as wt:
        env = clean_env(worktree_setup.prepare_build(engine, t.name, wt))  # issue 21
        for cmd in commands:
            result, _ = confinement.run(cmd, cwd=wt, env=env, timeout=timeout)
            ran.append(" ".join(cmd))
            if not result.ok:
                failure = {
                    "command": " && ".join(ran),
                    "exit_code": result.returncode,
                    "output_tail": (result.stdout + result.stderr)[-2000:],
                }
                break
    if failure:
        escalate(
            engine,
            t.name,
            f"the build of {t.base_branch} at {built[:12]} fails: {failure['command']} exited "
            f"{failure['exit_code']}",
            report | failure,
        )
    report |= {"command": " && ".join(ran), "exit_code": 0, "result": "SUCCESS"}
    return report, True


def record_body(
    engine: Engine, task: str, report: dict[str, Any]
) -> Callable[[Tx, TaskSnapshot], None]:
    def record(tx: Tx, current: TaskSnapshot) -> None:
        engine.event(tx, task, "validation", report)
        engine.touch(tx, current)

    return record


def record(engine: Engine, task: str, report: dict[str, Any]) -> None:
    engine.step(task, record_body(engine, task, report))


@contextmanager
def build_worktree(engine: Engine, task: str, sha: str) -> Iterator[Path]:
    """A throwaway detached worktree at `sha` for the main build, removed afterwards.

    Building there leaves no artifacts in the task worktree (they would count as work to
    lose) and never touches the user's main worktree.
    """
    repo = engine.ws.repo
    path = engine.ws.task_dir(task) / "main-build"
    with gitrepo.repo_lock(engine.ws.common_dir):
        gitrepo.remove_worktree(repo, path)  # left by a crash
        if path.exists():
            shutil.rmtree(path)  # a half-created build directory of ours, never registered
        git("worktree", "add", "--detach", "-q", str(path), sha, cwd=repo)
    try:
        yield path
    finally:
        with gitrepo.repo_lock(engine.ws.common_dir):
            gitrepo.remove_worktree(repo, path)


def escalate(engine: Engine, task: str, issue: str, report: dict[str, Any]) -> None:
    """Record the failed check, then stop for the user (R-REC-16 message shape)."""

    def record(tx: Tx, current: TaskSnapshot) -> None:
        engine.event(tx, task, "validation", report | {"result": "FAILURE"})
        engine.touch(tx, current)

    engine.step(task, record)
    raise NeedsHuman(
        escalation_message(
            task,
            issue=issue,
            state="COMPLETE (CLEANUP blocked, R-CMP-08, C-83)",
            attempts="the build on main ran once and failed",
            impact="main already contains the task commit",
            option1="Fix forward in a new task",
            option2="Revert the commit on main (only with your consent)",
        ),
        hint=f"fix main, then run 'taskgate cleanup {task}' again (it builds main's current "
        f"tip), or take main as it is: taskgate cleanup {task} --accept-main --reason '…'",
    )
