"""`taskgate todo` over many tasks (issue 18): the projection it reads equals the full rows,
and the batched availability (one listing of the tasks root, the blocked reasons computed once)
decides every task exactly as selecting each task on its own does."""

from __future__ import annotations

from pathlib import Path

from conftest import Repo
from taskgate.engine import availability, lifecycle
from taskgate.engine.core import Engine
from taskgate.engine.workspace import find_workspace
from taskgate.store.base import Tx
from taskgate.store.records import TaskHead


def _todo(names: list[tuple[str, str]]) -> str:
    return "".join(
        f"\n## {n}: T {n}\n- Purpose: p\n- Scope: s\n- Components: c\n- Depends: {d}\n"
        f"- Files: src/{n}.py\n"
        for n, d in names
    )


def test_availability_matches_one_task_at_a_time(repo: Repo) -> None:
    tasks = [("alpha", "none"), ("beta", "alpha"), ("gamma", "delta"), ("delta", "gamma"),
             ("eps", "nosuch, alpha"), ("zeta", "none"), ("eta", "none")]  # fmt: skip
    (repo.path / "todo.md").write_text((repo.path / "todo.md").read_text() + _todo(tasks))
    repo.git("commit", "-qam", "tasks")
    repo.ok("start", "alpha", session="s-alpha")
    repo.ok("start", "zeta", session="s-zeta")
    repo.ok("release", "zeta", "--force", "--reason", "test", session=None)
    (repo.path / ".taskgate" / "tasks" / "eta" / "code").mkdir(parents=True)  # no lock: ask
    engine = Engine(find_workspace(repo.path), session_id="s-alpha", cwd=repo.path)
    try:
        batched = lifecycle.availability(engine)
        todo = engine.todo()
        rows = availability.task_rows(engine)  # full rows, each task selected on its own
        done = availability.done_names(engine, rows)
        single = [availability.selection(engine, e.name, e, rows.get(e.name), done, todo)
                  for e in todo.tasks]  # fmt: skip
        with engine.store.read() as tx:
            heads = tx.task_heads()
            generic = Tx.task_heads(tx)  # the generic one, from full rows
    finally:
        engine.close()
    assert [(a.availability, a.rule, a.message) for a in batched] == [
        (s.availability, s.rule, s.message) for s in single
    ]
    by_name = {a.name: a for a in batched}
    assert by_name["alpha"].availability.value == "resume"
    assert by_name["eta"].availability.value == "ask-user"  # the worktree listing saw it
    assert "dependency cycle" in by_name["gamma"].message
    assert "nosuch" in by_name["eps"].message
    assert heads == generic and [h.name for h in heads] == ["alpha", "zeta"]
    assert heads[1].released and not heads[0].released
    assert isinstance(heads[0], TaskHead)


def test_an_unreadable_tasks_root_is_asked_per_task(repo: Repo, tmp_path: Path) -> None:
    engine = Engine(find_workspace(repo.path), session_id="s", cwd=repo.path)
    try:
        worktrees = availability.Worktrees(engine)
        assert worktrees.dirs is not None and not worktrees.exists("alpha")
        worktrees.dirs = None  # as when listing the root fails
        (repo.path / ".taskgate" / "tasks" / "alpha" / "code").mkdir(parents=True)
        assert worktrees.exists("alpha")
    finally:
        engine.close()
