"""The fast todo.md parser (issue 18) against the line-by-line parser it replaced: the same
tasks, fields and line numbers, and the same error naming the same line, on generated text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from taskgate.protocol.names import task_name_problem
from taskgate.protocol.states import RiskLevel
from taskgate.protocol.todo import (
    _ANY_HEADING,
    _FALSE_BREAKS,
    _FIELD,
    _TASK_HEADING,
    BOM,
    FIELDS,
    TodoError,
    TodoList,
    TodoTask,
    _names,
    parse_todo,
    split_lines,
)


# -- the parser as it was before issue 18 (the oracle) ----------------------------------------
def old_parse_todo(text: str) -> TodoList:
    """Parse todo.md strictly: malformed tasks raise TodoError naming the line."""
    lines = split_lines(text.removeprefix(BOM))
    for index, line in enumerate(lines):
        for char, name in _FALSE_BREAKS.items():
            if char in line:
                raise TodoError(
                    index + 1,
                    f"contains {name}, which some editors show as a line break and others "
                    "do not; replace it with a newline (or a space)",
                )
    starts: list[int] = []
    for index, line in enumerate(lines):
        if _TASK_HEADING.match(line):
            starts.append(index)
    tasks: list[TodoTask] = []
    seen: dict[str, int] = {}
    for start in starts:
        end = start + 1
        while end < len(lines) and not _ANY_HEADING.match(lines[end]):
            end += 1
        task = _old_parse_entry(lines, start, end)
        if task.name in seen:
            raise TodoError(
                task.line, f"task '{task.name}' is already defined at line {seen[task.name]}"
            )
        seen[task.name] = task.line
        tasks.append(task)
    for task in tasks:
        for dep in task.depends:
            if dep == task.name:
                raise TodoError(task.line, f"task '{task.name}' depends on itself")
    return TodoList(tuple(tasks))


def _old_parse_entry(lines: list[str], start: int, end: int) -> TodoTask:
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
    for index in range(start + 1, end):
        match = _FIELD.match(lines[index].strip())
        key = match.group(1).lower() if match else ""
        if match and key in FIELDS:
            if key in values:
                raise TodoError(
                    index + 1,
                    f"field '{match.group(1)}' repeated (first at line {value_lines[key]})",
                )
            values[key] = match.group(2).strip()
            value_lines[key] = index + 1
        elif lines[index].strip():
            description.append(lines[index].strip())
    last = end
    while last > start + 1 and not lines[last - 1].strip():
        last -= 1
    depends = _names(values.get("depends", ""), value_lines.get("depends", 0))
    risk: RiskLevel | None = None
    if values.get("risk"):
        try:
            risk = RiskLevel.parse(values["risk"])
        except ValueError as exc:
            raise TodoError(value_lines["risk"], str(exc)) from None
    files = tuple(p for p in (s.strip() for s in values.get("files", "").split(",")) if p)
    return TodoTask(
        name=name,
        title=title,
        line=start + 1,
        end_line=last,
        purpose=values.get("purpose", ""),
        scope=values.get("scope", ""),
        components=values.get("components", ""),
        depends=depends,
        files=files,
        risk=risk,
        description="\n".join(description),
    )


# -- generated todo.md text ---------------------------------------------------------------------

TODO_LINES = [  # tests/test_todo_fast.py samples these too, with more
    "## add-login: Add a login page",
    "## setup-db: Database",
    "## add-login: again",
    "## Bad Name: x",
    "## no-title:",
    "##\tt1:\ttab title",
    "# Tasks",
    "### sub heading",
    "#nospace",
    "- Purpose: users cannot sign in",
    "Purpose: p",
    "  * scope :  the form  ",
    "- Components: c",
    "- Depends: setup-db, add-users",
    "- Depends: none",
    "- Depends: Bad!",
    "- Depends: add-login",
    "- Files: src/a.py, , tests/b.py",
    "- Risk: high",
    "- Risk: extreme",
    "- Note: not a field",
    "free text: with a colon",
    "free text",
    "",
    "   ",
    "\r",
    "x\u2028y",
    "tab\there",
]
LINES = st.sampled_from(TODO_LINES)


@settings(max_examples=400, deadline=None)
@given(st.lists(LINES, max_size=30), st.booleans(), st.booleans(), st.booleans())
def test_same_result_as_the_old_parser(lines: list[str], bom: bool, crlf: bool, tail: bool) -> None:
    text = ("\r\n" if crlf else "\n").join(lines) + ("\n" if tail else "")
    text = (BOM if bom else "") + text

    def outcome(parse: object) -> object:
        try:
            return parse(text)  # type: ignore[operator]
        except TodoError as exc:
            return ("error", exc.line, str(exc))

    assert outcome(parse_todo) == outcome(old_parse_todo)


def test_a_large_file_parses_the_same() -> None:
    text = "".join(
        f"## t{i:05d}: Task {i}\n- Purpose: p\n- Scope: s\n- Components: c\n"
        f"- Depends: t{max(i - 1, 0):05d}\n- Files: src/m{i}.py\nmore\n\n"
        for i in range(1, 2000)
    )
    assert parse_todo(text) == old_parse_todo(text)
