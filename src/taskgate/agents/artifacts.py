"""What the scripted agents write: requirement reports, the plan, code and tests (deterministic).

Everything is derived from the task's todo.md entry (its Files list above all), so the same
task always produces the same artifacts, and every generated file carries the marker
`taskgate-task: <task>` by which an agent recognises work it has already done.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from taskgate.agents.base import TaskBrief
from taskgate.protocol.agents import is_test_path

FOCUS = {
    "architect": "module boundaries, public interfaces and how the change fits the design",
    "style": "naming, formatting and the project's code style rules",
    "quality": "correctness, error handling and maintainability of the implementation",
    "test": "test cases for every behaviour, edge cases and regression coverage",
    "build": "the build, packaging and the commands that validate the change",
    "security": "input validation, secrets, authentication and least privilege",
    "performance": "complexity, hot paths and resource use",
    "usability": "what users see: messages, defaults and documentation",
}
_COMMENT = {
    ".py": "#",
    ".sh": "#",
    ".toml": "#",
    ".yml": "#",
    ".yaml": "#",
    ".cfg": "#",
    ".ini": ";",
    ".js": "//",
    ".ts": "//",
    ".java": "//",
    ".go": "//",
    ".rs": "//",
    ".c": "//",
    ".h": "//",
    ".css": "/*",
    ".md": "",
    ".markdown": "",
    ".rst": "",
    ".txt": "",
}
_GLOB = re.compile(r"[*?\[]")
_DOC_SUFFIXES = (".md", ".markdown", ".rst", ".txt", ".adoc")


def marker(task: str) -> str:
    """The line fragment that marks a file as written for `task`."""
    return f"taskgate-task: {task}"


def comment_prefix(path: str) -> str | None:
    """How a line comment starts in `path` ("" for Markdown/text, None when unknown)."""
    return _COMMENT.get(PurePosixPath(path).suffix.lower())


def planned_files(brief: TaskBrief) -> tuple[str, ...]:
    """The concrete paths of the Files list (globs dropped); a notes file when there are none."""
    files = tuple(f for f in brief.files if not _GLOB.search(f) and not f.startswith("/"))
    return files or (f"docs/{brief.name}.md",)


def owner(path: str, team: Sequence[str], fallback: str) -> str:
    """The one agent that implements `path`: tests → test, documentation → architect, code →
    quality (each falling back to the others in the team), so no two agents edit one file."""
    if is_test_path(path):
        preference: tuple[str, ...] = ("test", "quality", "architect")
    elif PurePosixPath(path).suffix.lower() in _DOC_SUFFIXES:
        preference = ("architect", "quality")
    else:
        preference = ("quality", "architect")
    for agent in preference:
        if agent in team:
            return agent
    return team[0] if team else fallback


def identifier(text: str) -> str:
    """A Python identifier made from a file stem or task name."""
    name = re.sub(r"\W+", "_", text).strip("_").lower() or "value"
    return f"f_{name}" if name[0].isdigit() else name


def _source_for(test: str, files: Sequence[str]) -> str | None:
    stem = PurePosixPath(test).stem
    target = stem.removeprefix("test_").removesuffix("_test")
    for path in files:
        if path != test and path.endswith(".py") and PurePosixPath(path).stem == target:
            return path
    return None


def python_source(path: str, brief: TaskBrief) -> str:
    """A small, real module: one pure function named after the file."""
    name = identifier(PurePosixPath(path).stem)
    if name == "init":
        return f'"""{brief.title or brief.name} ({marker(brief.name)})."""\n'
    return f'''"""{name}: {brief.title or brief.name} ({marker(brief.name)})."""

from __future__ import annotations


def {name}(value: str) -> str:
    """Normalise `value`: strip the surrounding white space and lower-case it."""
    return value.strip().lower()
'''


def python_test(path: str, brief: TaskBrief) -> str:
    """Tests for the source file with the matching stem, runnable by pytest or plain python."""
    source = _source_for(path, brief.files)
    head = f'"""Tests for {source or brief.name} ({marker(brief.name)})."""\n\n'
    if source is None:
        body = (
            f"def test_{identifier(brief.name)}_is_named() -> None:\n"
            f"    assert {brief.name!r}.strip() == {brief.name!r}\n"
        )
        return (
            head
            + body
            + '\n\nif __name__ == "__main__":\n'
            + (f'    test_{identifier(brief.name)}_is_named()\n    print("ok")\n')
        )
    name = identifier(PurePosixPath(source).stem)
    depth = len(PurePosixPath(path).parts) - 1
    return (
        head
        + f'''from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

_SOURCE = Path(__file__).resolve().parents[{depth}] / "{source}"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("{name}", _SOURCE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_{name}_strips_and_lowercases() -> None:
    assert _load().{name}("  Hello World ") == "hello world"


def test_{name}_is_idempotent() -> None:
    module = _load()
    assert module.{name}(module.{name}(" A ")) == "a"


if __name__ == "__main__":
    test_{name}_strips_and_lowercases()
    test_{name}_is_idempotent()
    print("ok")
'''
    )


def file_content(path: str, brief: TaskBrief, existing: str | None) -> str | None:
    """The content `path` should have; None when the scripted agents cannot write that kind."""
    suffix = PurePosixPath(path).suffix.lower()
    tag = marker(brief.name)
    if existing is not None:  # modify: append a marked block, keep everything else
        if tag in existing:
            return existing
        prefix = _COMMENT.get(suffix)
        if prefix is None:
            return None
        if suffix == ".py" and not is_test_path(path):
            name = identifier(brief.name)
            block = (
                f'\n\ndef {name}() -> str:\n    """The task that added this ({tag})."""\n'
                f"    return {brief.name!r}\n"
            )
        elif prefix:
            close = " */" if prefix == "/*" else ""
            block = f"\n{prefix} {tag}: {brief.title or brief.name}{close}\n"
        else:
            block = (
                f"\n## {brief.title or brief.name}\n\n{brief.purpose or brief.name}\n\n"
                f"<!-- {tag} -->\n"
            )
        return existing.rstrip("\n") + "\n" + block
    if suffix == ".py":
        return python_test(path, brief) if is_test_path(path) else python_source(path, brief)
    if suffix in ("", ".md", ".markdown", ".rst", ".txt"):
        return (
            f"# {brief.title or brief.name}\n\n{brief.purpose or 'See the task.'}\n\n"
            f"Scope: {brief.scope or brief.name}\n\n<!-- {tag} -->\n"
        )
    prefix = _COMMENT.get(suffix)
    if prefix is None:
        return None
    close = " */" if prefix == "/*" else ""
    return f"{prefix} {tag}: {brief.title or brief.name}{close}\n"


def requirements_report(brief: TaskBrief, agent: str) -> str:
    """A requirements report from `agent`'s domain (well over 100 bytes, R-DOC-04)."""
    focus = FOCUS.get(agent, "the task's requirements")
    lines = [
        f"# {agent} requirements: {brief.name}",
        "",
        f"Task: {brief.title or brief.name}",
        f"Purpose: {brief.purpose or '(not given)'}",
        f"Domain focus: {focus}.",
        "",
        "## Requirements",
        "",
    ]
    for index, path in enumerate(planned_files(brief), 1):
        kind = "tests" if is_test_path(path) else "implementation"
        lines.append(
            f"{index}. `{path}` ({kind}): meets the task's purpose with respect to {focus}."
        )
    lines += [
        "",
        "## Acceptance criteria",
        "",
        "- Build passes with zero test failures.",
        f"- Every file above exists on the task branch and carries the change for {brief.name}.",
        "",
        "## Risks",
        "",
        f"- Scope creep beyond: {brief.scope or brief.name}.",
        "",
    ]
    return "\n".join(lines)


def plan_section(
    brief: TaskBrief, team: Sequence[str], agent: str, exists: set[str], reports: Sequence[Path]
) -> str:
    """The `## Implementation Plan` section in the seeds' required structure (R-DOC-11/12)."""
    files = planned_files(brief)
    team = tuple(team) or (agent,)
    create = [f for f in files if f not in exists]
    modify = [f for f in files if f in exists]
    title = brief.title or brief.name
    out = [
        "## Implementation Plan",
        "",
        "### Purpose",
        "",
        brief.purpose or title,
        "",
        "### Approach",
        "",
        f"Change {len(files)} file(s) within the scope: "
        f"{brief.scope or title}. Each stakeholder implements the files of its domain in its "
        "own worktree; the task branch merges them.",
        "",
        "### Benefits",
        "",
        f"- {title}, with tests, in one reviewed change.",
        "",
        "### Files to Create",
        "",
        "| File Path | Purpose | Owner |",
        "|---|---|---|",
    ]
    out += [
        f"| `{f}` | {'tests' if is_test_path(f) else 'implementation'} | {owner(f, team, agent)} |"
        for f in create
    ] or ["| (none) | | |"]
    out += ["", "### Files to Modify", "", "| File Path | Changes | Owner |", "|---|---|---|"]
    out += [
        f"| `{f}` | add the change for {brief.name} | {owner(f, team, agent)} |" for f in modify
    ] or ["| (none) | | |"]
    out += ["", "### API Design", ""]
    sources = [f for f in files if f.endswith(".py") and not is_test_path(f)]
    out += [
        f"- `{f}`: `def {identifier(PurePosixPath(f).stem)}(value: str) -> str`" for f in sources
    ] or ["- No public API changes."]
    out += [
        "",
        "### Behavior Specifications",
        "",
        "| Scenario | Input | Expected Behavior |",
        "|---|---|---|",
        "| surrounding space | `'  Hello World '` | `'hello world'` |",
        "| already normal | `'a'` | `'a'` (idempotent) |",
        "",
        "### Test Cases",
        "",
        "| Test Name | Expected |",
        "|---|---|",
    ]
    tests = [f for f in files if is_test_path(f)]
    out += [f"| `{f}`: strips and lower-cases; idempotent | passes |" for f in tests] or [
        "| build and existing tests | pass |"
    ]
    out += ["", "### Implementation Sequence", ""]
    implementers = sorted({owner(f, team, agent) for f in files}, key=team.index)
    rounds = max(1, math.ceil(len(files) / max(1, len(implementers))))
    for number, who in enumerate(implementers, 1):
        mine = ", ".join(f"`{f}`" for f in files if owner(f, team, agent) == who)
        out.append(f"{number}. Phase {number}: {mine} (Agent: {who})")
    out += [
        "",
        "### Decision Log",
        "",
        "| Decision | Options Considered | Chosen | Rationale |",
        "|---|---|---|---|",
        f"| File ownership | one agent vs by domain | by domain | {rounds} round(s) expected |",
        "| Scope | extend vs defer | defer anything beyond the task | R-REV-04 |",
        "",
        "### Requirement Sources",
        "",
    ]
    out += [f"- {p.name} ({p.stat().st_size} bytes)" for p in reports] or ["- (no reports)"]
    out += [
        "",
        "### Risks and Mitigations",
        "",
        "- Agents editing the same lines: files have exactly one owner.",
        "",
        "### Success Criteria",
        "",
        "- Build passes with zero test failures.",
        "- The configured validation commands pass.",
        f"- Every planned file carries `{marker(brief.name)}`.",
        "",
    ]
    return "\n".join(out)
