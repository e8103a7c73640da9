"""SCOPE_NEGOTIATION's outcome: deferred work becomes new todo.md tasks (R-REV-05, C-22)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from taskgate.engine.core import Engine
from taskgate.fsutil import atomic_write, read_text
from taskgate.git.cmd import git
from taskgate.protocol.todo import parse_todo


def _slug(text: str, taken: set[str]) -> str:
    words = re.findall(r"[a-z0-9]+", text.lower())[:5] or ["deferred"]
    base = "-".join(words)[:50].strip("-") or "deferred"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    return name


def write_deferred_tasks(engine: Engine, task: str, items: Sequence[str]) -> list[str]:
    """Append one todo.md task per deferred item on the task branch and commit it there, so
    the follow-ups reach main in the task's squashed commit. Idempotent by task title."""
    worktree = engine.ws.task_worktree(task)
    todo_path = worktree / engine.ws.config.workspace.todo
    text = read_text(todo_path) or "# Tasks\n"
    todo = parse_todo(text)
    taken = set(todo.names)
    titles = {t.title for t in todo.tasks}
    created: list[str] = []
    additions = []
    for item in items:
        title = item.strip().splitlines()[0][:120] if item.strip() else ""
        if not title or title in titles:
            continue
        name = _slug(title, taken)
        taken.add(name)
        created.append(name)
        additions.append(
            f"\n## {name}: {title}\n- Purpose: deferred from {task} during scope negotiation\n"
            f"- Scope: {title}\n- Components: follow-up of {task}\n"
        )
    if not additions:
        return created
    atomic_write(todo_path, text.rstrip("\n") + "\n" + "".join(additions))
    rel = str(todo_path.relative_to(worktree))
    git("add", "--", rel, cwd=worktree)
    git("commit", "-q", "-m", f"Defer follow-up work of {task} to todo.md (R-REV-05)", cwd=worktree)
    return created
