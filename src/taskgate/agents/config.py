"""The `[agents]` table of taskgate.toml, parsed once into typed settings (STYLE.md 4).

    [agents]
    backend = "scripted"            # default backend of every agent
    prompts_dir = "prompts"         # optional: <mode>.md templates override the built-ins
    max_parallel = 4                # agents invoked at once by `taskgate run`
    sandbox = "auto"                # "auto" | "bwrap" | "none": confinement (docs/security.md)
    sandbox_readable = []           # extra paths under /tmp or $HOME agents may read
    [agents.prompts]                # optional: one template per mode
    review = "prompts/strict-review.md"
    [agents.claude]                 # options of a backend, for every agent that uses it
    model = "sonnet"
    [agents.quality]                # one agent: its backend and options (override the above)
    backend = "command"
    command = ["./bin/my-agent", "--fast"]

Errors name the key (`[agents.quality] command must be …`) and say how to fix it.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from taskgate.agents.base import BACKENDS, Mode
from taskgate.errors import UsageError
from taskgate.protocol.agents import UnknownAgentError, canonical_agent

_HINT = "see docs/agents.md, 'Configuration'"

# Options each backend understands, with their TOML types. `env` and `timeout_minutes` are
# common to all backends.
_COMMON: dict[str, tuple[type, ...]] = {"env": (dict,), "timeout_minutes": (int,)}
OPTIONS: dict[str, dict[str, tuple[type, ...]]] = {
    "scripted": {
        "rounds": (int,),
        "hang_seconds": (int, float),
        "faults": (list,),
        "conflict_file": (str,),
    },
    "command": {"command": (list, str)},
    "claude": {
        "executable": (str,),
        "args": (list,),
        "model": (str,),
        "permission_mode": (str,),
        "allowed_tools": (list,),
        "max_turns": (int,),
    },
    "codex": {
        "executable": (str,),
        "args": (list,),
        "model": (str,),
        "sandbox": (str,),
        "add_git_dir": (bool,),
        "shared_tmp": (bool,),
    },
}
_TOP = {"backend", "prompts_dir", "prompts", "max_parallel", "sandbox", "sandbox_readable"}
SANDBOX_SETTINGS = ("auto", "bwrap", "none")  # agents/sandbox.py


@dataclass(frozen=True)
class AgentSettings:
    """One agent's effective configuration: backend, its options, timeout, prompt files."""

    backend: str = "scripted"
    options: Mapping[str, Any] = field(default_factory=dict)
    timeout_minutes: int | None = None  # None: [protocol] agent_timeout_minutes (C-02)
    prompt_files: Mapping[Mode, Path] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    where: str = "[agents]"  # for error messages about options
    sandbox: str = "auto"  # [agents] sandbox: confinement of the agent's process
    sandbox_readable: tuple[Path, ...] = ()

    def strings(self, key: str, default: tuple[str, ...] = ()) -> tuple[str, ...]:
        """A list-of-strings option."""
        value = self.options.get(key)
        return default if value is None else tuple(value)

    def text(self, key: str, default: str = "") -> str:
        """A string option."""
        value = self.options.get(key)
        return default if value is None else str(value)


@dataclass(frozen=True)
class AgentsConfig:
    """The parsed `[agents]` table."""

    backend: str = "scripted"
    max_parallel: int = 4
    prompt_files: Mapping[Mode, Path] = field(default_factory=dict)
    backend_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    agent_tables: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    sandbox: str = "auto"
    sandbox_readable: tuple[Path, ...] = ()

    def settings(self, agent: str) -> AgentSettings:
        """The effective settings of `agent`: [agents.<agent>] over [agents.<backend>]."""
        own = dict(self.agent_tables.get(agent, {}))
        backend = str(own.pop("backend", self.backend))
        options = {**self.backend_options.get(backend, {}), **own}
        env = {**options.pop("env", {})}
        timeout = options.pop("timeout_minutes", None)
        where = f"[agents.{agent}]" if agent in self.agent_tables else f"[agents.{backend}]"
        return AgentSettings(
            backend,
            options,
            timeout,
            self.prompt_files,
            env,
            where,
            self.sandbox,
            self.sandbox_readable,
        )


def _fail(where: str, message: str) -> UsageError:
    return UsageError(f"taskgate.toml {where}: {message}", hint=_HINT)


def _check_options(table: Mapping[str, Any], backend: str, where: str) -> dict[str, Any]:
    """Type-check a backend's options; `command` strings are split like a shell would."""
    known = {**_COMMON, **OPTIONS[backend]}
    checked: dict[str, Any] = {}
    for key, value in table.items():
        if key not in known:
            raise _fail(
                where,
                f"unknown key {key!r} for backend {backend!r}; valid keys: "
                f"{', '.join(sorted(known))}",
            )
        kinds = known[key]
        if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
            names = " or ".join(k.__name__ for k in kinds)
            raise _fail(where, f"{key} must be of type {names}, got {value!r}")
        if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
            raise _fail(where, f"{key} must not be negative")
        if key == "command" and isinstance(value, str):
            try:
                value = shlex.split(value)
            except ValueError as exc:
                raise _fail(where, f"command {value!r}: {exc}") from None
        if key in ("command", "args", "allowed_tools") and not all(
            isinstance(v, str) for v in value
        ):
            raise _fail(where, f"{key} must be a list of strings")
        if key == "command" and not value:
            raise _fail(where, "command must not be empty")
        if key == "env" and not all(isinstance(v, str) for v in value.values()):
            raise _fail(where, "env values must be strings")
        if key == "faults":
            value = _check_faults(value, where)
        checked[key] = value
    return checked


def check_backend_options(table: Mapping[str, Any], backend: str, where: str) -> dict[str, Any]:
    """`table`'s options for `backend`, checked like an [agents.<agent>] table (e.g. [spec])."""
    return _check_options(table, _backend(backend, f"{where} backend"), where)


def _check_faults(items: list[Any], where: str) -> list[dict[str, Any]]:
    from taskgate.agents.scripted import FAULT_KINDS

    checked = []
    for index, item in enumerate(items):
        here = f"{where} faults[{index}]"
        if not isinstance(item, dict):
            raise _fail(here, "each fault is a table like { agent = 'quality', fault = 'fail' }")
        unknown = set(item) - {"agent", "mode", "round", "attempt", "fault"}
        if unknown:
            raise _fail(
                here,
                f"unknown key(s) {', '.join(sorted(unknown))}; valid keys: "
                "agent, mode, round, attempt, fault",
            )
        if item.get("fault") not in FAULT_KINDS:
            raise _fail(
                here, f"fault must be one of {', '.join(FAULT_KINDS)}, got {item.get('fault')!r}"
            )
        if "mode" in item:
            try:
                Mode.parse(str(item["mode"]))
            except ValueError as exc:
                raise _fail(here, str(exc)) from None
        for key in ("round", "attempt"):
            if key in item and (isinstance(item[key], bool) or not isinstance(item[key], int)):
                raise _fail(here, f"{key} must be an integer")
        if "agent" in item and item["agent"] != "*":
            item = {**item, "agent": _agent(str(item["agent"]), here)}
        checked.append(item)
    return checked


def _agent(name: str, where: str) -> str:
    try:
        return canonical_agent(name)
    except UnknownAgentError as exc:
        raise UsageError(f"taskgate.toml {where}: {exc}", hint=exc.hint) from None


def _backend(value: object, where: str) -> str:
    if value not in BACKENDS:
        raise _fail(where, f"backend must be one of {', '.join(BACKENDS)}, got {value!r}")
    return str(value)


def _path(value: object, root: Path, where: str) -> Path:
    if not isinstance(value, str) or not value:
        raise _fail(where, f"must be a path string, got {value!r}")
    path = Path(value).expanduser()
    return path if path.is_absolute() else root / path


def parse_agents_config(raw: Mapping[str, Any], root: Path) -> AgentsConfig:
    """Parse the raw `[agents]` table (Config.agents); relative paths are from `root`."""
    backend = _backend(raw.get("backend", "scripted"), "[agents] backend")
    max_parallel = raw.get("max_parallel", 4)
    if isinstance(max_parallel, bool) or not isinstance(max_parallel, int) or max_parallel < 1:
        raise _fail("[agents]", f"max_parallel must be a positive integer, got {max_parallel!r}")
    sandbox = raw.get("sandbox", "auto")
    if sandbox not in SANDBOX_SETTINGS:
        raise _fail(
            "[agents] sandbox",
            f"must be one of {', '.join(SANDBOX_SETTINGS)}, got {sandbox!r} "
            "(docs/security.md says what each one guarantees)",
        )
    readable = raw.get("sandbox_readable", [])
    if not isinstance(readable, list):
        raise _fail("[agents] sandbox_readable", "must be a list of paths")
    readable_paths = tuple(_path(p, root, "[agents] sandbox_readable") for p in readable)
    prompt_files: dict[Mode, Path] = {}
    if "prompts_dir" in raw:
        directory = _path(raw["prompts_dir"], root, "[agents] prompts_dir")
        for mode in Mode:
            candidate = directory / f"{mode.value}.md"
            if candidate.is_file():
                prompt_files[mode] = candidate
    prompts = raw.get("prompts", {})
    if not isinstance(prompts, dict):
        raise _fail("[agents] prompts", "must be a table of mode = path")
    for key, value in prompts.items():
        try:
            mode = Mode.parse(key)
        except ValueError as exc:
            raise _fail("[agents.prompts]", str(exc)) from None
        path = _path(value, root, f"[agents.prompts] {key}")
        if not path.is_file():
            raise _fail(f"[agents.prompts] {key}", f"template {path} does not exist")
        prompt_files[mode] = path
    backend_options: dict[str, dict[str, Any]] = {}
    agent_tables: dict[str, dict[str, Any]] = {}
    for key, value in raw.items():
        if key in _TOP:
            continue
        where = f"[agents.{key}]"
        if not isinstance(value, dict):
            raise _fail(
                "[agents]",
                f"unknown key {key!r}; valid keys: {', '.join(sorted(_TOP))}, "
                "or a table per backend or agent",
            )
        if key in BACKENDS:
            backend_options[key] = _check_options(value, key, where)
            continue
        agent = _agent(key, where)
        own_backend = _backend(value.get("backend", backend), f"{where} backend")
        options = {k: v for k, v in value.items() if k != "backend"}
        agent_tables[agent] = {
            "backend": own_backend,
            **_check_options(options, own_backend, where),
        }
    return AgentsConfig(
        backend,
        max_parallel,
        prompt_files,
        backend_options,
        agent_tables,
        str(sandbox),
        readable_paths,
    )
