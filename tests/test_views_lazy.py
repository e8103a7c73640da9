"""An agent's status.json and the flags are rewritten only when their content changes (issue 18:
most steps changed nothing in them but `_seq`); their `_seq` is then the step they were last
rendered at. The audit accepts that and still reports a view whose content is wrong, and the
next step repairs it."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import Repo
from taskgate.engine import audit, views
from taskgate.engine.core import Engine
from taskgate.engine.workspace import find_workspace

TASK = "add-login"


def _problems(repo: Repo) -> list[str]:
    engine = Engine(find_workspace(repo.path), session_id="s1", cwd=repo.path)
    try:
        with engine.store.read() as tx:
            snap = tx.snapshot(TASK)
        assert snap is not None
        return audit.view_problems(engine.ws, snap)
    finally:
        engine.close()


def _status_files(repo: Repo) -> dict[str, Path]:
    agents = repo.task_dir(TASK) / "agents"
    return {p.parent.name: p for p in sorted(agents.glob("*/status.json"))}


def test_unchanged_status_views_are_left_and_audited_as_current(repo: Repo) -> None:
    repo.ok("start", TASK)
    wt = repo.worktree(TASK)
    repo.ok("classify", TASK, cwd=wt)
    repo.ok("transition", TASK, "REQUIREMENTS", cwd=wt)
    files = _status_files(repo)
    assert len(files) >= 2
    first, *others = files
    before = {a: (p.stat().st_ino, p.read_text()) for a, p in files.items()}
    repo.ok("agent", "set", TASK, first, "WORKING", cwd=wt)
    task_seq = json.loads((repo.task_dir(TASK) / "task.json").read_text())["_seq"]
    for agent in others:  # nothing changed for them: the same file, its earlier _seq
        path = files[agent]
        assert (path.stat().st_ino, path.read_text()) == before[agent]
        assert json.loads(path.read_text())["_seq"] < task_seq
    changed = json.loads(files[first].read_text())
    assert changed["status"] == "WORKING" and changed["_seq"] == task_seq
    assert _problems(repo) == []


def test_a_wrong_status_view_is_reported_and_repaired(repo: Repo) -> None:
    repo.ok("start", TASK)
    wt = repo.worktree(TASK)
    repo.ok("classify", TASK, cwd=wt)
    repo.ok("transition", TASK, "REQUIREMENTS", cwd=wt)
    files = _status_files(repo)
    agent, path = next(iter(files.items()))
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "status": "COMPLETE"}))  # an edit behind taskgate
    assert any(f"agents/{agent}/status.json" in p and "'status'" in p for p in _problems(repo))
    ahead = {**data, "_seq": data["_seq"] + 100}  # a view ahead of the store is never current
    path.write_text(json.dumps(ahead))
    assert any("is stale" in p for p in _problems(repo))
    path.write_text(json.dumps({**data, "status": "COMPLETE"}))
    other = next(a for a in files if a != agent)
    repo.ok("agent", "set", TASK, other, "WORKING", cwd=wt)  # the next step re-renders it
    repaired = json.loads(path.read_text())
    assert repaired.get("status") == data.get("status") and _problems(repo) == []
    text = path.read_text()
    assert text == views.pretty_json(repaired) + "\n"
