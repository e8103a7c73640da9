"""todo.md parsing (DESIGN.md format; R-LCK-12) and the selection matrix (D-LCK-1)."""

from __future__ import annotations

import pytest

from taskgate.protocol.names import agent_name_problem, task_name_problem
from taskgate.protocol.selection import Availability, LockInfo, SelectionInput, select
from taskgate.protocol.states import RiskLevel
from taskgate.protocol.todo import TodoError, parse_todo, remove_task

TEXT = """# Tasks

Intro text.

## add-login: Add a login page
- Purpose: users cannot sign in yet
- Scope: the login form
- Components: form, tests
- Depends: setup-db, add-users
- Files: src/auth/login.py, tests/test_login.py
- Risk: high
Some free description.

## setup-db: Database
Purpose: tables
scope: schema
COMPONENTS: migrations

## Notes
Not a task.
"""


def test_parse_fields() -> None:
    todo = parse_todo(TEXT)
    assert todo.names == ("add-login", "setup-db")
    task = todo.get("add-login")
    assert task is not None
    assert task.title == "Add a login page"
    assert task.depends == ("setup-db", "add-users")
    assert task.files == ("src/auth/login.py", "tests/test_login.py")
    assert task.risk is RiskLevel.HIGH
    assert task.description == "Some free description."
    assert task.missing_fields == ()
    db = todo.get("setup-db")
    assert db is not None and db.scope == "schema" and db.components == "migrations"


def test_missing_feasibility_fields() -> None:
    todo = parse_todo("## t: x\n- Purpose: p\n")
    task = todo.get("t")
    assert task is not None and task.missing_fields == ("Scope", "Components")  # R-LCK-12


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("## Bad-Name: x\n", 1),
        ("## ok: x\n- Risk: HUGE\n", 2),
        ("## ok: x\n- Purpose: a\n- purpose: b\n", 3),
        ("## ok: x\n\n## ok: y\n", 3),
        ("## ok: x\n- Depends: ../x\n", 2),
        ("## ok:\n", 1),
        ("## main: reserved\n", 1),
    ],
)
def test_errors_name_the_line(text: str, line: int) -> None:
    with pytest.raises(TodoError) as info:
        parse_todo(text)
    assert info.value.line == line
    assert f"line {line}" in str(info.value)


def test_self_dependency() -> None:
    with pytest.raises(TodoError, match="depends on itself"):
        parse_todo("## a: x\n- Depends: a\n")


def test_remove_task_keeps_everything_else() -> None:
    todo = parse_todo(TEXT)
    task = todo.get("add-login")
    assert task is not None
    out = remove_task(TEXT, task)
    assert "add-login" not in out
    assert out.startswith("# Tasks\n\nIntro text.\n\n## setup-db: Database\n")
    assert out.endswith("## Notes\nNot a task.\n")


@pytest.mark.parametrize("name", ["", "-x", "a/b", "..", "main", "A", "é", "a" * 65, "x.lock"])
def test_bad_task_names(name: str) -> None:
    assert task_name_problem(name) is not None


@pytest.mark.parametrize("name", ["a", "add-login", "v1.2_fix", "a" * 64])
def test_good_task_names(name: str) -> None:
    assert task_name_problem(name) is None


def test_agent_names() -> None:
    assert agent_name_problem("quality") is None
    assert agent_name_problem("../x") is not None


def sel(**kw: object) -> Availability:
    base: dict[str, object] = {"task": "t", "session_id": "me", "lock": None,
                               "worktree_exists": False}  # fmt: skip
    base.update(kw)
    return select(SelectionInput(**base)).availability  # type: ignore[arg-type]


def test_D_LCK_1_matrix_rows() -> None:
    mine, theirs = LockInfo("me"), LockInfo("other")
    assert sel(lock=mine, worktree_exists=True) is Availability.RESUME  # row 1
    assert sel(lock=mine, worktree_exists=False) is Availability.ASK_USER  # row 2
    assert sel(lock=theirs, worktree_exists=True) is Availability.FOREIGN  # row 3
    assert sel(lock=theirs, worktree_exists=False) is Availability.FOREIGN  # row 4
    assert sel(lock=None, worktree_exists=True) is Availability.ASK_USER  # row 5
    assert sel(lock=None, worktree_exists=False) is Availability.AVAILABLE  # row 6


def test_R_LCK_08_unreadable_lock_asks_user() -> None:
    assert sel(lock=LockInfo("", readable=False)) is Availability.ASK_USER
    assert sel(lock=LockInfo("")) is Availability.ASK_USER


def test_feasibility_and_dependencies() -> None:
    assert sel(missing_fields=("Scope",)) is Availability.INFEASIBLE
    assert sel(unmet_dependencies=("a",)) is Availability.BLOCKED
    assert sel(done=True) is Availability.DONE
    assert sel(lock=LockInfo("me"), pending_setup=True) is Availability.RESUME


# -- blocked_reasons at scale (issue 18) ---------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from taskgate.protocol.todo import blocked_reasons  # noqa: E402
from taskgate.protocol.todo_deps import _cycle_from, _in_cycles  # noqa: E402


@settings(max_examples=500, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from("abcdefg"), st.lists(st.sampled_from("abcdefghz"), max_size=4), max_size=7
    )
)
def test_the_tasks_on_cycles_are_those_a_search_finds(deps: dict[str, list[str]]) -> None:
    assert _in_cycles(deps) == {n for n in deps if _cycle_from(n, deps) is not None}
    for start in deps:
        assert _cycle_from(start, deps) == _copying_cycle_from(start, deps)


def _copying_cycle_from(start: str, deps: dict[str, list[str]]) -> list[str] | None:
    """_cycle_from as it was (a path copied per task): the same path for the message."""
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    seen: set[str] = set()
    while stack:
        node, path = stack.pop()
        for nxt in deps.get(node, []):
            if nxt == start:
                return [*path, start]
            if nxt not in seen and nxt in deps:
                seen.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return None


def test_a_long_chain_of_blocked_tasks_is_linear() -> None:
    count = 2000
    text = (
        "".join(
            f"## t{i}: T\n- Purpose: p\n- Scope: s\n- Components: c\n- Depends: t{i + 1}\n"
            for i in range(count)
        )
        + f"## t{count}: T\n- Purpose: p\n- Scope: s\n- Components: c\n- Depends: t0\n"
    )
    reasons = blocked_reasons(parse_todo(text), set())
    assert len(reasons) == count + 1  # a cycle through all of them
    assert reasons["t7"].startswith("'t7' is in a dependency cycle: t7 -> t8 -> ")
    chain = blocked_reasons(parse_todo(text.replace("- Depends: t0\n", "")), set())
    assert chain["t0"] == "'t0' waits for t1 to be completed"
