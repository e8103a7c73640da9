"""hooks/context.Layout resolves its paths as os.path.realpath does, with fewer lookups for
those below the repository (issue 18): every shape of symlink, a missing directory, `..` and
paths outside the repository give realpath's answer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from taskgate.hooks.context import Layout


def _tree(root: Path) -> Path:
    repo = root / "work" / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".taskgate" / "tasks").mkdir(parents=True)
    (root / "elsewhere" / "tasks").mkdir(parents=True)
    return repo


def _symlinked_state(repo: Path) -> None:
    (repo / ".taskgate").rename(repo.parent / "state")
    (repo / ".taskgate").symlink_to(repo.parent / "state")


def _symlinked_tasks(repo: Path) -> None:
    (repo / ".taskgate" / "tasks").rmdir()
    (repo / ".taskgate" / "tasks").symlink_to("../../../elsewhere/tasks")


def _symlinked_git(repo: Path) -> None:
    (repo / ".git").rename(repo.parent / "git-dir")
    (repo / ".git").symlink_to(repo.parent / "git-dir")


def _dangling_tasks(repo: Path) -> None:
    (repo / ".taskgate" / "tasks").rmdir()
    (repo / ".taskgate" / "tasks").symlink_to("nowhere/tasks")


def _missing_tasks(repo: Path) -> None:
    (repo / ".taskgate" / "tasks").rmdir()


SHAPES = {
    "plain": None,
    ".taskgate a symlink": _symlinked_state,
    "tasks root a relative symlink": _symlinked_tasks,
    ".git a symlink": _symlinked_git,
    "tasks root a dangling symlink": _dangling_tasks,
    "tasks root missing": _missing_tasks,
}


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("through_link", [False, True])
def test_the_layout_is_made_of_realpaths(tmp_path: Path, shape: str, through_link: bool) -> None:
    repo = _tree(tmp_path)
    change = SHAPES[shape]
    if change is not None:
        change(repo)
    given = str(repo)
    if through_link:  # the repository reached through a symlinked parent directory
        (tmp_path / "link").symlink_to(tmp_path / "work")
        given = str(tmp_path / "link" / "repo")
    tasks_roots = [
        os.path.join(given, ".taskgate", "tasks"),
        os.path.join(given, ".taskgate", "..", ".taskgate", "tasks"),  # `..`: realpath itself
        str(tmp_path / "elsewhere" / "tasks"),  # outside the repository
        given + "/.taskgate//tasks",
    ]
    for tasks_root in tasks_roots:
        layout = Layout(given, os.path.join(given, ".git"), os.path.join(given, ".taskgate"),
                        tasks_root)  # fmt: skip
        assert (layout.repo, layout.common_dir, layout.state_dir, layout.tasks_root) == (
            os.path.realpath(given),
            os.path.realpath(os.path.join(given, ".git")),
            os.path.realpath(os.path.join(given, ".taskgate")),
            os.path.realpath(tasks_root),
        ), (shape, tasks_root)
