"""Views rendered once for many steps (issue 18): inside `Engine.views_deferred` a step's views
are held back and rendered when the block ends, or earlier by `flush_views`, which `run` calls
before anything outside the process reads them: an agent starts, an anchor goes to git, the
person is asked. Killed in between, the views are behind the store, never ahead of it, and the
next command renders them, as after a kill between a commit and its rendering. The hook
snapshot is rewritten at the same points; a write still drops it before its commit, so in
between the hooks read the store.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from conftest import Repo
from store_kinds import query
from taskgate import anchor_write, gitplumb
from taskgate.cli.main import main
from taskgate.engine import agentops, anchor, views
from taskgate.engine.core import Engine
from taskgate.engine.workspace import find_workspace
from taskgate.errors import Refused
from taskgate.orchestrator import pool
from test_faults_resume import SLUG, _finished
from test_run import sample

TASK = "add-login"


def _view(repo: Repo, task: str = TASK) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((repo.task_dir(task) / "task.json").read_text())
    return data


def _store_seq(repo: Repo, task: str = TASK) -> int:
    return int(query(repo.path, "SELECT seq FROM tasks WHERE name = ?", task)[0]["seq"])


@pytest.fixture
def requirements(repo: Repo) -> Repo:
    repo.ok("start", TASK)
    wt = repo.worktree(TASK)
    repo.ok("classify", TASK, cwd=wt)
    repo.ok("transition", TASK, "REQUIREMENTS", cwd=wt)
    return repo


def _engine(repo: Repo) -> Engine:
    return Engine(find_workspace(repo.path), session_id="s1", cwd=repo.path)


def test_steps_in_a_block_render_once_when_it_ends(requirements: Repo) -> None:
    repo = requirements
    path = repo.task_dir(TASK) / "task.json"
    before = (path.stat().st_ino, path.read_text())
    agents = list(_view(repo)["required_agents"])[:3]
    engine = _engine(repo)
    try:
        with engine.views_deferred():
            for agent in agents:
                agentops.set_status(engine, TASK, agent, "WORKING")
            assert engine.require_snapshot(TASK).task.seq == _store_seq(repo)  # a read: no render
            with engine.views_deferred():  # nested: the outer block renders
                agentops.set_status(engine, TASK, agents[0], "IN_PROGRESS")
            with pytest.raises(Refused):  # a refused step keeps what is held back
                agentops.verdict(engine, TASK, agents[0], "APPROVED")
            assert (path.stat().st_ino, path.read_text()) == before  # nothing rendered yet
        view = _view(repo)
        assert view["_seq"] == _store_seq(repo) > json.loads(before[1])["_seq"]
        with engine.store.read() as tx:
            snap = tx.snapshot(TASK)
        assert snap is not None and views.view_is_current(engine.ws, snap)
        status = json.loads(
            (repo.task_dir(TASK) / "agents" / agents[1] / "status.json").read_text()
        )
        assert status["status"] == "WORKING"
    finally:
        engine.close()
    assert repo.ok("audit", TASK).code == 0


def test_flush_renders_what_is_held_back_now(requirements: Repo) -> None:
    repo = requirements
    agent = _view(repo)["required_agents"][0]
    engine = _engine(repo)
    try:
        with engine.views_deferred():
            agentops.set_status(engine, TASK, agent, "WORKING")
            assert _view(repo)["_seq"] < _store_seq(repo)
            engine.flush_views()
            assert _view(repo)["_seq"] == _store_seq(repo)
    finally:
        engine.close()


def test_the_hook_snapshot_is_dropped_by_the_write_and_rewritten_when_the_block_ends(
    requirements: Repo,
) -> None:
    repo = requirements
    hook_snapshot = repo.path / ".taskgate" / "hook-snapshot.json"
    assert hook_snapshot.exists()
    engine = _engine(repo)
    try:
        with engine.views_deferred():
            # A write to what the snapshot holds (the last build's fixer, C-27).
            engine.step(TASK, lambda tx, snap: engine.event(tx, TASK, "validation",
                                                            {"responsible": "main"}))  # fmt: skip
            assert not hook_snapshot.exists()  # dropped before the commit: hooks read the store
            engine.flush_views()
            assert engine.store.refresh_snapshot() == "unchanged"  # rewritten, current
            engine.step(TASK, lambda tx, snap: engine.event(tx, TASK, "validation", {}))
            assert not hook_snapshot.exists()
        assert engine.store.refresh_snapshot() == "unchanged"
        assert not engine.store.hold_snapshot
        engine.step(TASK, lambda tx, snap: engine.event(tx, TASK, "validation", {}))
        assert engine.store.refresh_snapshot() == "unchanged"  # outside: after each write
    finally:
        engine.close()


def test_killed_inside_a_run_the_views_are_behind_and_the_next_command_renders_them(
    tmp_path: Path,
) -> None:
    repo = sample(tmp_path)
    # At the start of SYNTHESIS the requirements' outcomes and the move are held back.
    killed = repo.run("run", SLUG, "--yes", session="run",
                      env={"TASKGATE_FAILPOINT": "run:SYNTHESIS"})  # fmt: skip
    assert killed.code == -signal.SIGKILL
    stale = _view(repo, SLUG)
    assert stale["_seq"] < _store_seq(repo, SLUG)  # behind, never ahead
    assert stale["state"] == "REQUIREMENTS"
    shown = repo.ok("status", SLUG, "--json", session="run").json()
    assert shown["state"] == "SYNTHESIS"
    assert _view(repo, SLUG)["_seq"] == _store_seq(repo, SLUG)  # rendered by that command
    assert _view(repo, SLUG)["state"] == "SYNTHESIS"
    repo.ok("run", SLUG, "--yes", session="run")
    _finished(repo, SLUG, commits=2)


def test_agents_and_anchors_find_the_views_current(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The demo in this process: every agent starts, and every anchor is written, with the
    views rendered at the store's sequence and events (the agents' hooks compare task.json
    with the store; `recover --rebuild` proves the views' record against the anchored head)."""
    target = tmp_path / "demo"
    seen: list[str] = []
    stale: list[str] = []  # an assertion inside the demo would only show as its exit code

    def views_current(task: str) -> bool:
        engine = Engine(find_workspace(target), session_id="check", cwd=target)
        try:
            with engine.store.read() as tx:
                snap = tx.snapshot(task)
            assert snap is not None
            trail = json.loads((engine.ws.task_dir(task) / "audit-trail.json").read_text())
            return (
                views.view_is_current(engine.ws, snap)
                and trail["events"] == len(snap.events)
                and engine.store.refresh_snapshot(wait_s=5) == "unchanged"  # the hooks' too
            )
        finally:
            engine.close()

    invoke = pool.invoke

    def checked_invoke(request: Any) -> Any:
        seen.append(f"agent {request.agent}")
        if not views_current(request.task):
            stale.append(f"{request.agent} started on stale views")
        return invoke(request)

    git = anchor_write._git

    def checked_git(args: list[str], *rest: Any, **kwargs: Any) -> Any:
        if args[0] == "update-ref":  # the anchor is written: its head is in the views' record
            ref = next(a for a in args if a.startswith(anchor.REF_PREFIX))
            task = ref.removeprefix(anchor.REF_PREFIX)
            seen.append(f"anchor {task}")
            if not views_current(task):
                stale.append(f"the anchor of {task} is ahead of its views")
        return git(args, *rest, **kwargs)

    plumb = gitplumb.commit

    def checked_plumb(repo: str, common: str, ref: str, *rest: Any) -> Any:
        # the anchor written without git (issue 18): checked the same way, counted once
        task = ref.removeprefix(anchor.REF_PREFIX)
        current = views_current(task)
        made = plumb(repo, common, ref, *rest)
        if made is not None:
            seen.append(f"anchor {task}")
            if not current:
                stale.append(f"the anchor of {task} is ahead of its views")
        return made

    monkeypatch.setattr(pool, "invoke", checked_invoke)
    monkeypatch.setattr(anchor_write, "_git", checked_git)
    monkeypatch.setattr(gitplumb, "commit", checked_plumb)
    assert main(["demo", "--dir", str(target), "--yes"]) == 0, capsys.readouterr()
    assert stale == []
    assert sum(s.startswith("agent ") for s in seen) >= 10
    assert sum(s.startswith("anchor ") for s in seen) == 8  # present and approve, twice each
