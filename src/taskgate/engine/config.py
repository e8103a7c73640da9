"""taskgate.toml: parsed once into typed values (STYLE.md 4); errors name the file and key."""

from __future__ import annotations

from pathlib import Path

from taskgate.dataclass_lite import dataclass, field, field_names
from taskgate.engine.worktree_config import WorktreeConfig, parse_worktree
from taskgate.errors import UsageError

TYPE_CHECKING = False  # typing stays unimported on the command path (issue 18)
if TYPE_CHECKING:
    from typing import Any

CONFIG_NAME = "taskgate.toml"

DEFAULT_CONFIG_TEXT = """\
# taskgate configuration: README.md "Configuration" and docs/guide.md describe every table.
# Every value below is the default. To change one, uncomment the table's [header] together
# with the keys you set (a table may appear only once in the file).

# [workspace]
# Where task directories live (task worktrees, reports, views). Relative paths are relative
# to the main worktree; ".taskgate/tasks" is excluded from git by `taskgate init`.
# tasks_root = ".taskgate/tasks"
# The branch tasks start from and merge into. Empty: the branch checked out in the main worktree.
# main_branch = ""
# todo = "todo.md"
# changelog = "changelog.md"
# remote = "origin"

# [protocol]
# Refuse INIT/CLASSIFIED/REQUIREMENTS transitions unless run from the task worktree
# (R-TRN-09, R-TRN-10, D-DOC-2 check 3).
# check_cwd = true
# max_agent_retries = 3          # C-01
# agent_timeout_minutes = 60     # C-02
# build_recovery_iterations = 3  # C-65
# Allow `taskgate run --yes` to approve checkpoints automatically (recorded as automated).
# allow_auto_approve = false

# [validation]
# Commands run by `taskgate validate` in the task worktree, in order, without a shell.
# commands = ["python -m pytest -q"]
# timeout_minutes = 30
# rebuild_on_main = "changed"   # cleanup skips the build when main is the validated tree
#                               # apart from todo.md/changelog.md; "always" builds it anyway

# [worktree]
# What every new task and agent worktree gets before anyone works in it (docs/guide.md,
# "Worktrees ready to work in"). Files matched by .worktreeinclude at the repository root
# (gitignore syntax) are always copied from the main worktree; they stay ignored by git.
# include = [".env", "config/*.local.json"]   # more patterns, like .worktreeinclude lines
# Heavy directories linked to the main worktree's copy instead of rebuilt (opt-in):
# symlink = ["node_modules", ".venv"]
# ... or copied with reflinks where the filesystem has them ("hardlink": hard links, Linux):
# copy = []
# copy_mode = "reflink"
# Commands run once in each new worktree, in order, without a shell; their output is kept in
# the agent's directory (setup/). A failing one stops with its name; rerunning resumes it.
# setup = [["npm", "ci"], ["python", "-m", "pip", "install", "-e", "."]]
# setup_timeout_minutes = 30
# Worktrees set up at the same time (0: up to 4; 1: one after the other).
# jobs = 0
# Each worktree gets TASKGATE_PORT_BASE (its own block of ports) and TASKGATE_WORKTREE_INDEX.
# port_start = 20000
# ports_per_worktree = 20

# [cleanup]
# Ignored files in task and agent worktrees are kept in the quarantine snapshot when cleanup
# removes a worktree, except these disposable build caches (a name matches any path part;
# a pattern with a slash matches the path from the worktree root).
# disposable = ["__pycache__", "*.pyc", ".pytest_cache", ".mypy_cache", ".ruff_cache",
#               "node_modules", ".venv", ".tox", "target", "build", "dist", ".gradle"]

# [agents]
# Which backend runs each agent: scripted (built-in, deterministic) | command | claude | codex
# (docs/agents.md). Options of a backend go under [agents.<backend>], one agent's own settings
# under [agents.<agent>].
# backend = "scripted"
# max_parallel = 4
# sandbox = "auto"               # "auto" | "bwrap" | "none": confinement (docs/security.md)
# sandbox_readable = []          # extra paths under /tmp or $HOME agents may read
# [agents.claude]
# model = "sonnet"
# [agents.quality]
# backend = "command"
# command = ["./bin/my-agent"]

# [spec]
# Who writes and reviews specifications (`taskgate spec new`, docs/spec.md); without this
# table `spec new` exits 2 (`--demo` runs the canned demo agents; "scripted" chooses them).
# backend = "claude"             # scripted | command | claude | codex
# model = "sonnet"

# [risk]
# Extra risk patterns (gitignore-style globs), added in front of the defaults of their level.
# high = ["infra/**"]
# medium = ["scripts/**"]
# low = ["notes/**"]
# keywords = ["security", "architecture", "breaking", "performance", "concurrent",
#             "database", "api", "state", "dependency"]

# [risk.agents]
# The agent set of each risk level. A set may add stakeholders to these defaults, never drop
# one (architect is always selected). Aliases: formatter, engineer, tester, builder.
# Documentation-only changes keep {architect} (R-AGT-09); add to them with DOCS_ONLY below.
# high = ["architect", "style", "quality", "build"]
# medium = ["architect", "quality"]
# low = ["architect"]

# [risk.agents.traits]
# Extra agents for a task trait (listed by `taskgate classify --explain`), for example:
# PERFORMANCE = ["test"]
# DOCS_ONLY = ["usability"]
"""


@dataclass(frozen=True)
class WorkspaceConfig:
    """[workspace]"""

    tasks_root: str = ".taskgate/tasks"
    main_branch: str = ""
    todo: str = "todo.md"
    changelog: str = "changelog.md"
    remote: str = "origin"


@dataclass(frozen=True)
class ProtocolConfig:
    """[protocol]"""

    check_cwd: bool = True
    max_agent_retries: int = 3
    agent_timeout_minutes: int = 60
    build_recovery_iterations: int = 3
    allow_auto_approve: bool = False


@dataclass(frozen=True)
class ValidationConfig:
    """[validation]"""

    commands: tuple[tuple[str, ...], ...] = ()
    timeout_minutes: int = 30
    # issue 17: "changed" skips the build on main when main is the validated tree apart from
    # todo.md/changelog.md; "always" builds it (the archival files are part of the build)
    rebuild_on_main: str = "changed"


DEFAULT_DISPOSABLE = (
    "__pycache__", "*.pyc", ".pytest_cache", ".mypy_cache", ".ruff_cache", "node_modules",
    ".venv", ".tox", "target", "build", "dist", ".gradle",
)  # fmt: skip


@dataclass(frozen=True)
class CleanupConfig:
    """[cleanup]"""

    disposable: tuple[str, ...] = DEFAULT_DISPOSABLE


@dataclass(frozen=True)
class Config:
    """The whole configuration; `risk` and `agents` stay raw until their modules parse them."""

    workspace: WorkspaceConfig = field(default_factory=WorkspaceConfig)
    protocol: ProtocolConfig = field(default_factory=ProtocolConfig)
    validation: ValidationConfig = field(default_factory=ValidationConfig)
    cleanup: CleanupConfig = field(default_factory=CleanupConfig)
    risk: dict[str, Any] = field(default_factory=dict)
    agents: dict[str, Any] = field(default_factory=dict)
    spec: dict[str, Any] = field(default_factory=dict)  # [spec]: parsed by taskgate.spec
    worktree: WorktreeConfig = field(default_factory=WorktreeConfig)  # issue 21
    text: str = ""
    path: Path | None = None


_SECTIONS = {
    "workspace", "protocol", "validation", "cleanup", "risk", "agents", "run", "spec", "hooks",
    "worktree", "store",  # [store] url: store/select.py (issue 20)
}  # fmt: skip


def _table(data: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise UsageError(f"{where}: [{key}] must be a table", hint="see README 'Configuration'")
    return value


def _typed(table: dict[str, Any], key: str, kind: type, default: Any, where: str) -> Any:
    if key not in table:
        return default
    value = table[key]
    if (kind is int and isinstance(value, bool)) or not isinstance(value, kind):
        raise UsageError(
            f"{where}: {key} must be a {kind.__name__}, got {value!r}",
            hint=f"fix {key} in taskgate.toml",
        )
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        raise UsageError(f"{where}: {key} must not be negative", hint=f"fix {key}")
    return value


def _known(table: dict[str, Any], known: set[str], where: str) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        raise UsageError(
            f"{where}: unknown key(s) {', '.join(unknown)}",
            hint=f"valid keys: {', '.join(sorted(known))}",
        )


def comments_only(text: str) -> bool:
    """True when `text` is TOML holding nothing: blank lines and valid comments only, as the
    file `taskgate init` writes. Such a text parses to {} without importing tomllib (about
    3 ms of every command, issue 18); anything else, even a doubtful comment, goes to tomllib.
    TOML 1.0: whitespace is space or tab, a newline is LF or CRLF, and a comment may hold any
    character but the controls U+0000-U+0008, U+000A-U+001F and U+007F."""
    lines = text.split("\n")
    for number, line in enumerate(lines):
        if line.endswith("\r") and number < len(lines) - 1:
            line = line[:-1]  # CRLF
        body = line.lstrip(" \t")
        if not body:
            continue
        if body[0] != "#":
            return False
        if not body.isprintable() and any((c < " " and c != "\t") or c == "\x7f" for c in body):
            return False
    return True


def _toml(text: str, where: str) -> dict[str, Any]:
    if comments_only(text):
        return {}
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{where}: {exc}", hint="fix the TOML syntax") from None


def parse_config(text: str, path: Path | None = None) -> Config:
    """Parse taskgate.toml text into a Config; UsageError names what is wrong."""
    where = str(path or CONFIG_NAME)
    data = _toml(text, where)
    _known(data, _SECTIONS, where)
    ws = _table(data, "workspace", where)
    _known(ws, set(field_names(WorkspaceConfig)), f"{where} [workspace]")
    pr = _table(data, "protocol", where)
    _known(pr, set(field_names(ProtocolConfig)), f"{where} [protocol]")
    va = _table(data, "validation", where)
    _known(va, {"commands", "timeout_minutes", "rebuild_on_main"}, f"{where} [validation]")
    d_ws, d_pr = WorkspaceConfig(), ProtocolConfig()
    workspace = WorkspaceConfig(
        **{
            k: _typed(ws, k, str, getattr(d_ws, k), f"{where} [workspace]")
            for k in field_names(WorkspaceConfig)
        }
    )
    for key in ("tasks_root", "todo", "changelog"):
        _check_path(key, getattr(workspace, key), f"{where} [workspace]")
    for section, known in _RESERVED.items():
        _known(_table(data, section, where), known, f"{where} [{section}]")
    protocol = ProtocolConfig(
        check_cwd=_typed(pr, "check_cwd", bool, d_pr.check_cwd, where),
        max_agent_retries=_typed(pr, "max_agent_retries", int, d_pr.max_agent_retries, where),
        agent_timeout_minutes=_typed(
            pr, "agent_timeout_minutes", int, d_pr.agent_timeout_minutes, where
        ),
        build_recovery_iterations=_typed(
            pr, "build_recovery_iterations", int, d_pr.build_recovery_iterations, where
        ),
        allow_auto_approve=_typed(pr, "allow_auto_approve", bool, False, where),
    )
    raw_commands = _typed(va, "commands", list, [], f"{where} [validation]")
    commands: list[tuple[str, ...]] = []
    for item in raw_commands:
        if isinstance(item, str):
            try:
                import shlex

                parts = tuple(shlex.split(item))
            except ValueError as exc:
                raise UsageError(f"{where}: validation command {item!r}: {exc}") from None
        elif isinstance(item, list) and all(isinstance(p, str) for p in item):
            parts = tuple(item)
        else:
            raise UsageError(f"{where}: validation commands must be strings or string lists")
        if not parts:
            raise UsageError(f"{where}: empty validation command")
        commands.append(parts)
    validation = ValidationConfig(
        commands=tuple(commands),
        timeout_minutes=_typed(va, "timeout_minutes", int, 30, where),
        rebuild_on_main=_typed(va, "rebuild_on_main", str, "changed", where),
    )
    if validation.rebuild_on_main not in ("changed", "always"):
        raise UsageError(
            f'{where} [validation]: rebuild_on_main must be "changed" or "always", got '
            f"{validation.rebuild_on_main!r}",
            hint="see docs/cli.md, 'cleanup'",
        )
    return Config(
        workspace=workspace,
        protocol=protocol,
        validation=validation,
        cleanup=_cleanup(_table(data, "cleanup", where), f"{where} [cleanup]"),
        risk=_table(data, "risk", where),
        agents=_table(data, "agents", where),
        spec=_table(data, "spec", where),
        worktree=parse_worktree(_table(data, "worktree", where), f"{where} [worktree]"),
        text=text,
        path=path,
    )


# Sections read elsewhere or reserved: their keys are checked here all the same, so a typo is
# an error naming the key, never a silently ignored setting.
_RESERVED: dict[str, set[str]] = {"run": set(), "hooks": set()}


def _check_path(key: str, value: str, where: str) -> None:
    """tasks_root, todo and changelog: a path inside the repository (tasks_root may also be
    absolute, DESIGN.md Workspace); never empty, never through `..` or into `.git`."""
    path = value.strip()
    parts = path.replace("\\", "/").split("/")
    problem = ""
    if not path:
        problem = "is empty"
    elif ".." in parts:
        problem = "goes through '..' (it must stay inside the repository)"
    elif any(p.lower() == ".git" for p in parts):
        problem = "points into .git, which belongs to git"
    elif path.startswith("/") and key != "tasks_root":
        problem = "is absolute; it must be a path relative to the repository root"
    elif key != "tasks_root" and path.endswith("/"):
        problem = "names a directory; it must name a file"
    if problem:
        raise UsageError(
            f"{where}: {key} = {value!r} {problem}",
            hint=f"for example {key} = {_EXAMPLES[key]!r}",
        )


_EXAMPLES = {"tasks_root": ".taskgate/tasks", "todo": "todo.md", "changelog": "changelog.md"}


def _cleanup(table: dict[str, Any], where: str) -> CleanupConfig:
    _known(table, {"disposable"}, where)
    raw = _typed(table, "disposable", list, list(DEFAULT_DISPOSABLE), where)
    if not all(isinstance(p, str) and p.strip("/") for p in raw):
        raise UsageError(
            f"{where}: disposable must be a list of non-empty patterns, got {raw!r}",
            hint='for example disposable = ["__pycache__", "node_modules"]',
        )
    return CleanupConfig(disposable=tuple(raw))


def load_config(main_worktree: Path) -> Config:
    """Read `<main worktree>/taskgate.toml`; defaults when it does not exist."""
    path = main_worktree / CONFIG_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Config()
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text", hint="save it as UTF-8") from None
    return parse_config(text, path)
