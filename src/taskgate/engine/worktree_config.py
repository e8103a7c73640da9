"""The `[worktree]` table of taskgate.toml (issue 21), parsed once into typed values."""

from __future__ import annotations

from pathlib import PurePosixPath

from taskgate.dataclass_lite import dataclass, field_names
from taskgate.errors import UsageError

TYPE_CHECKING = False  # typing stays unimported on the command path (issue 18)
if TYPE_CHECKING:
    from typing import Any

COPY_MODES = ("reflink", "hardlink")


@dataclass(frozen=True)
class WorktreeConfig:
    """[worktree]: what a new worktree receives (copied files, links, setup, a port block)."""

    include: tuple[str, ...] = ()
    symlink: tuple[str, ...] = ()
    copy: tuple[str, ...] = ()
    copy_mode: str = "reflink"
    setup: tuple[tuple[str, ...], ...] = ()
    setup_timeout_minutes: int = 30
    jobs: int = 0
    port_start: int = 20000
    ports_per_worktree: int = 20

    @property
    def max_slots(self) -> int:
        """How many worktree indexes fit below port 65536 (index 0 is the main worktree's)."""
        return (65536 - self.port_start) // self.ports_per_worktree - 1


def _strings(table: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise UsageError(
            f"{where}: {key} must be a list of non-empty strings, got {value!r}",
            hint=f'for example {key} = ["node_modules"]',
        )
    return tuple(value)


def _relative_dir(entry: str, key: str, where: str) -> str:
    """A path inside the worktree: relative, no `..`, not git's own directory."""
    path = PurePosixPath(entry.strip().rstrip("/"))
    if path.is_absolute() or ".." in path.parts or not path.parts or path.parts[0] == ".git":
        raise UsageError(
            f"{where}: {key} entry {entry!r} must be a path inside the repository",
            hint=f'use a relative path such as {key} = ["node_modules"]',
        )
    return path.as_posix()


def _int(table: dict[str, Any], key: str, default: int, low: int, high: int, where: str) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise UsageError(
            f"{where}: {key} must be an integer from {low} to {high}, got {value!r}",
            hint=f"fix {key} in taskgate.toml",
        )
    return value


def _commands(value: Any, where: str) -> tuple[tuple[str, ...], ...]:
    if not isinstance(value, list):
        raise UsageError(f"{where}: setup must be a list of commands", hint=_SETUP_HINT)
    commands = []
    for item in value:
        if isinstance(item, str):
            try:
                import shlex

                parts = tuple(shlex.split(item))
            except ValueError as exc:
                raise UsageError(f"{where}: setup command {item!r}: {exc}") from None
        elif isinstance(item, list) and all(isinstance(p, str) for p in item):
            parts = tuple(item)
        else:
            raise UsageError(f"{where}: setup command {item!r} is not a command", hint=_SETUP_HINT)
        if not parts or not parts[0]:
            raise UsageError(f"{where}: empty setup command", hint=_SETUP_HINT)
        commands.append(parts)
    return tuple(commands)


_SETUP_HINT = 'for example setup = [["npm", "ci"]] (argument lists; no shell)'

_KEYS = set(field_names(WorktreeConfig))


def parse_worktree(table: dict[str, Any], where: str) -> WorktreeConfig:
    """Parse the `[worktree]` table; UsageError names the key that is wrong."""
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise UsageError(
            f"{where}: unknown key(s) {', '.join(unknown)}",
            hint=f"valid keys: {', '.join(sorted(_KEYS))}",
        )
    mode = table.get("copy_mode", "reflink")
    if mode not in COPY_MODES:
        raise UsageError(
            f"{where}: copy_mode must be one of {', '.join(COPY_MODES)}, got {mode!r}",
            hint='copy_mode = "reflink" (falls back to a plain copy where reflinks are missing)',
        )
    symlink = tuple(_relative_dir(e, "symlink", where) for e in _strings(table, "symlink", where))
    copy = tuple(_relative_dir(e, "copy", where) for e in _strings(table, "copy", where))
    both = sorted(set(symlink) & set(copy))
    if both:
        raise UsageError(
            f"{where}: {', '.join(both)} is listed in both symlink and copy",
            hint="choose one: symlink shares the directory, copy gives each worktree its own",
        )
    start = _int(table, "port_start", 20000, 1024, 65000, where)
    block = _int(table, "ports_per_worktree", 20, 1, 1000, where)
    config = WorktreeConfig(
        include=_strings(table, "include", where),
        symlink=symlink,
        copy=copy,
        copy_mode=mode,
        setup=_commands(table.get("setup", []), where),
        setup_timeout_minutes=_int(table, "setup_timeout_minutes", 30, 1, 24 * 60, where),
        jobs=_int(table, "jobs", 0, 0, 64, where),
        port_start=start,
        ports_per_worktree=block,
    )
    if config.max_slots < 1:
        raise UsageError(
            f"{where}: port_start {start} leaves no room for blocks of {block} ports",
            hint="lower port_start or ports_per_worktree",
        )
    return config
