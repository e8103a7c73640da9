"""What a PreToolUse decision needs, read fast: the repository layout and the session's task.

The store is read through a read-only SQLite connection with a handful of queries (no Engine,
no views, no git subprocess), because this runs before every guarded tool call.
"""

from __future__ import annotations

import os

from taskgate.hooks.policy import Actor, Layout, TaskView

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

# The [workspace] tasks_root default of engine/config.py (tests/test_hooks_dispatch.py checks
# that the two agree); taskgate.toml is parsed in full only when it sets tasks_root.
DEFAULT_TASKS_ROOT = ".taskgate/tasks"
STATE_DIR = ".taskgate"


class StoreUnreadable(Exception):
    """The store is missing, corrupt, or holds a state the protocol does not know."""

    def __init__(self, message: str, rule: str) -> None:
        super().__init__(message)
        self.rule = rule


def load_layout(start: str, home: str) -> Layout | None:
    """The layout of the taskgate repository containing `start`; None when not governed."""
    from taskgate.errors import UsageError
    from taskgate.git.repo import discover

    try:
        paths = discover(_existing(start))
    except UsageError:
        return None
    repo = str(paths.main_worktree)
    state_dir = os.path.join(repo, STATE_DIR)
    if not os.path.exists(os.path.join(repo, "taskgate.toml")) and not os.path.isdir(state_dir):
        return None  # taskgate was never initialised here: nothing to guard
    return Layout(repo, str(paths.common_dir), state_dir, _tasks_root(repo), home)


def _existing(path: str) -> Path:
    from pathlib import Path

    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _tasks_root(repo: str) -> str:
    config = os.path.join(repo, "taskgate.toml")
    try:
        with open(config, encoding="utf-8") as handle:
            text = handle.read()
    except OSError:
        text = ""
    root = DEFAULT_TASKS_ROOT
    if any(line.strip().startswith("tasks_root") for line in text.splitlines()):
        from pathlib import Path

        from taskgate.engine.config import load_config

        root = load_config(Path(repo)).workspace.tasks_root
    return root if os.path.isabs(root) else os.path.join(repo, root)


def load_actor(layout: Layout, session: str, agent: str) -> Actor:
    """The session's task (R-LCK-20) and every task's branches, from the store."""
    import json
    import sqlite3
    from pathlib import Path

    from taskgate.protocol.states import State

    db = Path(layout.state_dir) / "state.db"
    if not db.exists():
        raise StoreUnreadable(f"the taskgate store {db} is missing", "R-LCK-08")
    try:
        conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=10)
        try:
            rows = conn.execute(
                "SELECT name, state, session_id, required_agents, lock_released_at FROM tasks"
            ).fetchall()
            tasks = {str(r[0]): tuple(json.loads(r[3])) for r in rows}
            mine = [r for r in rows if r[2] == session and r[4] is None] if session else []
            if len(mine) > 1:
                names = ", ".join(str(r[0]) for r in mine)
                raise StoreUnreadable(
                    f"session {session} holds several task locks ({names}): "
                    "corruption, manual intervention",
                    "R-LCK-20",
                )
            view = None
            if mine:
                name, state = str(mine[0][0]), str(mine[0][1])
                if state not in State.__members__:
                    raise StoreUnreadable(
                        f"task '{name}' has the unknown state {state!r}", "R-REC-07"
                    )
                approved = conn.execute(
                    "SELECT COUNT(*) FROM approvals WHERE task = ? AND kind = 'plan' "
                    "AND revoked_at IS NULL",
                    (name,),
                ).fetchone()[0]
                last = conn.execute(
                    "SELECT payload FROM events WHERE task = ? AND kind = 'validation' "
                    "ORDER BY seq DESC LIMIT 1",
                    (name,),
                ).fetchone()
                payload = json.loads(last[0]) if last else {}
                view = TaskView(
                    name,
                    state,
                    tasks[name],
                    plan_approved=bool(approved),
                    main_may_fix=payload.get("responsible") == "main",
                )
        finally:
            conn.close()
    except (sqlite3.Error, ValueError, TypeError) as exc:
        raise StoreUnreadable(f"the taskgate store cannot be read: {exc}", "R-LCK-08") from exc
    return Actor(view, agent, tasks)
