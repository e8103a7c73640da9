"""todo.md: the task list format (DESIGN.md Workspace; R-LCK-12, C-75). Pure parsing.

    ## add-login: Add a login page
    - Purpose: users cannot sign in yet
    - Scope: the login form and session handling in src/auth
    - Components: form, session store, tests
    - Depends: setup-db, add-users
    - Files: src/auth/login.py, tests/test_login.py
    - Risk: HIGH

A task is a level-2 heading `## name: title`. Field lines are `Key: value` with an optional
leading `- `; keys are case-insensitive. Other lines are free description. Text outside tasks
is never touched when taskgate edits the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from taskgate.protocol.names import task_name_problem
from taskgate.protocol.states import RiskLevel
from taskgate.protocol.todo_deps import blocked_reasons_of

FIELDS = ("purpose", "scope", "components", "depends", "files", "risk")
FEASIBILITY_FIELDS = ("purpose", "scope", "components")  # R-LCK-12
_FIELD_SET = frozenset(FIELDS)

_TASK_HEADING = re.compile(r"^##[ \t]+(\S+?):(?:[ \t]+(.*))?$")
_ANY_HEADING = re.compile(r"^(#{1,2})[ \t]")
_FIELD = re.compile(r"^(?:[-*][ \t]+)?([A-Za-z]+)[ \t]*:[ \t]*(.*)$")
_SPLIT = re.compile(r"[,\s]+")


class TodoError(ValueError):
    """todo.md does not parse; the message names the line."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"todo.md line {line}: {message}")
        self.line = line


@dataclass(frozen=True)
class TodoTask:
    """One task entry of todo.md."""

    name: str
    title: str
    line: int  # 1-based line of the heading
    end_line: int  # 1-based last line of the entry (inclusive)
    purpose: str = ""
    scope: str = ""
    components: str = ""
    depends: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    risk: RiskLevel | None = None
    description: str = ""

    @property
    def missing_fields(self) -> tuple[str, ...]:
        """Feasibility fields (Purpose, Scope, Components) that are empty (R-LCK-12)."""
        return tuple(k.capitalize() for k in FEASIBILITY_FIELDS if not getattr(self, k).strip())

    def text(self) -> str:
        """Title and fields as one text, the input for escalation keywords (R-RSK-09)."""
        return "\n".join(
            part
            for part in (self.title, self.purpose, self.scope, self.components, self.description)
            if part
        )


@dataclass(frozen=True)
class TodoList:
    """A parsed todo.md: the tasks in file order."""

    tasks: tuple[TodoTask, ...] = field(default_factory=tuple)

    def get(self, name: str) -> TodoTask | None:
        """The task called `name`, or None."""
        return next((t for t in self.tasks if t.name == name), None)

    @property
    def names(self) -> tuple[str, ...]:
        """Task names in file order."""
        return tuple(t.name for t in self.tasks)


BOM = "\ufeff"
# Characters str.splitlines() treats as line breaks that editors may show as breaks or not:
# taskgate splits on newlines only and refuses these, so no task is hidden or invented.
_FALSE_BREAKS = {"\u2028": "U+2028 LINE SEPARATOR", "\u2029": "U+2029 PARAGRAPH SEPARATOR",
                 "\x85": "U+0085 NEXT LINE"}  # fmt: skip


def split_lines(text: str, *, keepends: bool = False) -> list[str]:
    """Lines split at \\n only (\\r\\n included), unlike str.splitlines()."""
    parts = text.split("\n")
    if keepends:
        lines = [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
        return lines
    if parts and parts[-1] == "":
        parts.pop()
    return [p.removesuffix("\r") for p in parts]


def parse_todo(text: str) -> TodoList:
    """Parse todo.md strictly: malformed tasks raise TodoError naming the line."""
    body = text.removeprefix(BOM)
    lines = split_lines(body)
    if any(char in body for char in _FALSE_BREAKS):
        _refuse_false_breaks(lines)
    # One pass over the lines; the regexes run only on lines starting with '#' (issue 18:
    # `taskgate todo` parses 10,000 entries).
    headings: list[int] = []
    starts: set[int] = set()
    for index, line in enumerate(lines):
        if line[:1] == "#" and _ANY_HEADING.match(line):
            headings.append(index)
            if _TASK_HEADING.match(line):
                starts.add(index)
    tasks: list[TodoTask] = []
    seen: dict[str, int] = {}
    for k, start in enumerate(headings):
        if start not in starts:
            continue
        # An entry ends at the next heading of level 1 or 2 (a task heading is one).
        end = headings[k + 1] if k + 1 < len(headings) else len(lines)
        task = _parse_entry(lines, start, end)
        if task.name in seen:
            raise TodoError(
                task.line, f"task '{task.name}' is already defined at line {seen[task.name]}"
            )
        seen[task.name] = task.line
        tasks.append(task)
    for task in tasks:
        if task.name in task.depends:
            raise TodoError(task.line, f"task '{task.name}' depends on itself")
    return TodoList(tuple(tasks))


def _refuse_false_breaks(lines: list[str]) -> None:
    for index, line in enumerate(lines):
        for char, name in _FALSE_BREAKS.items():
            if char in line:
                raise TodoError(
                    index + 1,
                    f"contains {name}, which some editors show as a line break and others "
                    "do not; replace it with a newline (or a space)",
                )


def _parse_entry(lines: list[str], start: int, end: int) -> TodoTask:
    heading = _TASK_HEADING.match(lines[start])
    assert heading is not None
    name, title = heading.group(1), (heading.group(2) or "").strip()
    problem = task_name_problem(name)
    if problem:
        raise TodoError(start + 1, problem)
    if not title:
        raise TodoError(start + 1, f"task '{name}' has no title after ':'")
    values: dict[str, str] = {}
    value_lines: dict[str, int] = {}
    description: list[str] = []
    field = _FIELD.match
    last = start + 1  # one past the last non-blank line of the entry
    index = start
    for raw in lines[start + 1 : end]:
        index += 1
        line = raw.strip()
        if not line:
            continue
        last = index + 1
        match = field(line) if ":" in line else None
        if match is not None:
            key = match.group(1).lower()
            if key in _FIELD_SET:
                if key in values:
                    raise TodoError(
                        index + 1,
                        f"field '{match.group(1)}' repeated (first at line {value_lines[key]})",
                    )
                values[key] = match.group(2).strip()
                value_lines[key] = index + 1
                continue
        description.append(line)
    get = values.get
    depends = _names(values["depends"], value_lines["depends"]) if "depends" in values else ()
    risk: RiskLevel | None = None
    if get("risk"):
        try:
            risk = RiskLevel.parse(values["risk"])
        except ValueError as exc:
            raise TodoError(value_lines["risk"], str(exc)) from None
    files_text = get("files", "")
    files = tuple(p for p in (s.strip() for s in files_text.split(",")) if p) if files_text else ()
    return TodoTask(
        name, title, start + 1, last, get("purpose", ""), get("scope", ""),
        get("components", ""), depends, files, risk, "\n".join(description),
    )  # fmt: skip


def _names(text: str, line: int) -> tuple[str, ...]:
    names = tuple(n for n in _SPLIT.split(text.strip()) if n and n.lower() != "none")
    for name in names:
        problem = task_name_problem(name)
        if problem:
            raise TodoError(line, f"Depends: {problem}")
    return names


def remove_task(text: str, task: TodoTask) -> str:
    """todo.md without `task`'s entry, everything else byte-identical (R-CMP-03)."""
    lines = split_lines(text, keepends=True)
    end = task.end_line
    # Swallow the blank lines that separated this entry from the next one.
    while end < len(lines) and not lines[end].strip():
        end += 1
    kept = "".join(lines[: task.line - 1] + lines[end:])
    if text.startswith(BOM) and not kept.startswith(BOM):
        kept = BOM + kept  # the first entry went; the byte order mark stays
    return kept


def blocked_reasons(todo: TodoList, done: set[str]) -> dict[str, str]:
    """Why each task with unmet dependencies waits: unknown names and cycles said plainly."""
    return blocked_reasons_of(todo.names, {t.name: t.depends for t in todo.tasks}, done)
