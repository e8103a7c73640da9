"""Where everything lives, found from any worktree of the repository (DESIGN.md Workspace)."""

from __future__ import annotations

from pathlib import Path

from taskgate.dataclass_lite import dataclass
from taskgate.engine.config import CONFIG_NAME, DEFAULT_CONFIG_TEXT, Config, load_config
from taskgate.errors import StoreLost, UsageError
from taskgate.git import repo as gitrepo
from taskgate.protocol.states import (
    ARCHIVAL_FLAG,
    CHANGE_FLAG,
    PLAN_FLAG,
)

STATE_DIR = ".taskgate"
DB_NAME = "state.db"
# In the common git dir: this repository is governed even when taskgate.toml and .taskgate/
# are gone (hooks/context.py load_layout); the tasks root on its first line. Delete it to
# stop using taskgate here.
GOVERNED_MARKER = "taskgate-governed"
# Written by `taskgate init` beside the store: proof that a store existed here, so a missing
# or emptied state.db is reported as lost (exit 5), never silently replaced by a new one.
STORE_MARKER = "store-created"


@dataclass(frozen=True)
class Workspace:
    """Paths of one repository's taskgate workspace; every location is injected from here."""

    repo: Path  # the main worktree
    common_dir: Path
    config: Config

    @property
    def state_dir(self) -> Path:
        """`.taskgate/` in the main worktree (holds state.db)."""
        return self.repo / STATE_DIR

    @property
    def db_path(self) -> Path:
        """The embedded SQLite store."""
        return self.state_dir / DB_NAME

    @property
    def tasks_root(self) -> Path:
        """Root of the task directories (`tasks_root` in taskgate.toml)."""
        root = Path(self.config.workspace.tasks_root)
        return root if root.is_absolute() else self.repo / root

    @property
    def todo_path(self) -> Path:
        """todo.md in the main worktree."""
        return self.repo / self.config.workspace.todo

    @property
    def changelog_path(self) -> Path:
        """changelog.md in the main worktree."""
        return self.repo / self.config.workspace.changelog

    def task_dir(self, task: str) -> Path:
        """`WS/tasks/T`."""
        return self.tasks_root / task

    def task_worktree(self, task: str) -> Path:
        """`WS/tasks/T/code`, on branch T (R-WTB-01)."""
        return self.task_dir(task) / "code"

    def agent_dir(self, task: str, agent: str) -> Path:
        """`WS/tasks/T/agents/A`."""
        return self.task_dir(task) / "agents" / agent

    def agent_worktree(self, task: str, agent: str) -> Path:
        """`WS/tasks/T/agents/A/code`, on branch T-A (R-WTB-02, C-16)."""
        return self.agent_dir(task, agent) / "code"

    def report_path(self, task: str, agent: str) -> Path:
        """`WS/tasks/T/T-A-requirements.md` (R-DOC-03, C-17)."""
        return self.task_dir(task) / f"{task}-{agent}-requirements.md"

    def task_md(self, task: str) -> Path:
        """`WS/tasks/T/task.md` (R-DOC-01)."""
        return self.task_dir(task) / "task.md"

    def flag(self, task: str, kind: str) -> Path:
        """The approval / archival flag views (C-03, C-04)."""
        name = {"plan": PLAN_FLAG, "changes": CHANGE_FLAG, "archival": ARCHIVAL_FLAG}[kind]
        return self.task_dir(task) / name

    @property
    def initialized(self) -> bool:
        """True once `taskgate init` created the state directory."""
        if self.uses_database_server:  # issue 20: no state.db; init's marker on this machine
            return self.store_marker.exists()
        return self.db_path.exists()

    @property
    def uses_database_server(self) -> bool:
        """The store is a team's PostgreSQL (store/select.py), not `.taskgate/state.db`."""
        from taskgate.store.select import uses_database_server

        return uses_database_server(self.config.text)

    @property
    def store_marker(self) -> Path:
        """`.taskgate/store-created`, written by init once the store exists."""
        return self.state_dir / STORE_MARKER

    def store_evidence(self) -> str | None:
        """Why we know a store existed here (init's marker, rendered task views), or None."""
        if self.store_marker.exists():
            return f"{self.store_marker} was written by 'taskgate init'"
        try:
            views = sorted(self.tasks_root.glob("*/task.json"))
        except OSError:
            views = []
        if views:
            return f"task views such as {views[0]} were rendered from it"
        return None


def find_workspace(start: Path) -> Workspace:
    """The workspace of the repository containing `start` (any of its worktrees)."""
    paths = gitrepo.discover(start)
    return Workspace(paths.main_worktree, paths.common_dir, load_config(paths.main_worktree))


def store_problem(ws: Workspace) -> str | None:
    """A store that once existed and is now missing or empty (zero bytes), else None."""
    if ws.uses_database_server:  # issue 20: PostgreSQL reports its own faults
        return None
    try:
        size = ws.db_path.stat().st_size
    except FileNotFoundError:
        size = None
    if size:
        return None
    evidence = ws.store_evidence()
    if size == 0:
        return f"the store {ws.db_path} is empty (0 bytes)" + (f"; {evidence}" if evidence else "")
    if evidence:
        return f"the store {ws.db_path} is missing, but this repository was initialised: {evidence}"
    return None


LOST_STORE_HINT = (
    "run 'taskgate recover --rebuild' (rebuilds it from the task views, each audit chain proven "
    "against git; the damaged file is kept aside), or restore .taskgate/state.db (with "
    "state.db-wal if it exists) from a backup; nothing was changed. To start over with an "
    "empty store instead, move .taskgate aside (mv .taskgate .taskgate.lost) and run "
    "'taskgate init'"
)


def require_initialized(ws: Workspace) -> None:
    """Refuse to work on a repository where `taskgate init` has not run, or whose store is
    gone (exit 5: a lost store is never replaced by a fresh one)."""
    problem = store_problem(ws)
    if problem and _rebuild_finished(ws):  # not lost: being put in place by a rebuild
        problem = store_problem(ws)
    if problem:
        raise StoreLost(problem, hint=LOST_STORE_HINT)
    if not ws.initialized:
        raise UsageError(
            f"taskgate is not initialised in {ws.repo}",
            hint=f"run 'taskgate init' in {ws.repo}",
        )


def _rebuild_finished(ws: Workspace) -> bool:
    """A `recover --rebuild` was running here and has finished (store/dbswap.py)."""
    import os

    from taskgate.store import dbswap

    try:
        wait = float(os.environ.get("TASKGATE_LOCK_TIMEOUT", "60"))
    except ValueError:
        wait = 60.0
    return dbswap.wait_for_rebuild(ws.state_dir, wait)


def init_files(ws: Workspace) -> list[str]:
    """Create what `taskgate init` owns; returns what it created (idempotent)."""
    created: list[str] = []
    config_path = ws.repo / CONFIG_NAME
    if not config_path.exists():
        config_path.write_text(DEFAULT_CONFIG_TEXT, encoding="utf-8")
        created.append(CONFIG_NAME)
    for path in (ws.state_dir, ws.tasks_root):
        if not path.exists():
            path.mkdir(parents=True)
            created.append(str(path.relative_to(ws.repo)) + "/" if path.is_relative_to(ws.repo)
                           else str(path))  # fmt: skip
    exclude = ws.common_dir / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    lines = exclude.read_text(encoding="utf-8").splitlines() if exclude.exists() else []
    entry = f"/{STATE_DIR}/"
    if entry not in lines:
        with exclude.open("a", encoding="utf-8") as handle:
            if lines and lines[-1] != "":
                handle.write("\n")
            handle.write(f"# taskgate state (taskgate init)\n{entry}\n")
        created.append(".git/info/exclude entry")
    marker = ws.common_dir / GOVERNED_MARKER  # fail closed without the config (issue 14)
    if not marker.is_file():
        marker.write_text(f"{ws.tasks_root}\n", encoding="utf-8")
        created.append(f".git/{GOVERNED_MARKER} (the repository stays guarded)")
    # changelog.md is created by the first task's archival commit (R-CMP-03): an untracked
    # copy in the main worktree would block the fast-forward merge of that commit.
    if not ws.todo_path.exists():
        text = "# Tasks\n\nTasks for taskgate; the format is in docs/todo-format.md.\n"
        ws.todo_path.write_text(text, encoding="utf-8")
        created.append(ws.todo_path.name)
    return created
