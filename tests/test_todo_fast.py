"""`taskgate todo` without the engine (engine/todo_fast.py, issue 18) against the engine's path
(cli/commands.cmd_todo -> lifecycle.availability): the same bytes, text and --json, on the same
repository, store rows, worktrees and session; None (the engine answers) wherever it cannot
vouch, errors included. And protocol/todo_scan.headings against parse_todo."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import Repo, git, make_repo
from taskgate.cli.commands import cmd_todo
from taskgate.engine import availability, todo_fast
from taskgate.engine.core import SESSION_VARS
from taskgate.errors import TaskgateError
from taskgate.protocol import todo_scan
from taskgate.protocol.states import State
from taskgate.protocol.todo import BOM, TodoError, parse_todo
from taskgate.store import snapshot, sqlite
from taskgate.store.records import TaskRow
from taskgate.store.schema import MIGRATIONS
from taskgate.store.sqlite import SqliteStore
from test_todo_parser import TODO_LINES

# -- what the quick path copies is what the engine has ------------------------------------------


def test_copied_constants_are_the_engines() -> None:
    assert todo_fast.SESSION_VARS == SESSION_VARS
    assert {s.value for s in State} == todo_fast.STATES
    assert set(sqlite._TASK_COLUMNS) == todo_fast.TASK_COLUMNS
    assert set(todo_fast._DONE_STATES) == availability.DONE_STATES
    assert todo_fast._CHANGELOG_TASK.pattern == availability.CHANGELOG_TASK.pattern
    assert todo_fast._CHANGELOG_TASK.flags == availability.CHANGELOG_TASK.flags


# -- todo_scan.headings: never a different answer than parse_todo --------------------------------

LINES = [  # the parser suite's lines, and more shapes a heading or field can take
    *TODO_LINES,
    "## main: reserved",
    "## a..b: dots",
    "## x.lock: lock",
    "## ends.: dot",
    "## blank-title:   ",
    "## t2:\u00a0\u2003",
    "## a:b: colon name",
    "  ## indented: heading",
    "PURPOSE: again",
    "\u00a0- Scope: nbsp",
    "\x1c- Scope: file separator",
    "- \u017fcope: long s",
    "- Purposes: plural",
    "-Purpose: no space",
    "- - Purpose: two bullets",
    "- Components:",
    "x\x85y",
    BOM + "## bom: in a line",
]


def _outcome(text: str) -> object:
    try:
        return [(t.name, t.title) for t in parse_todo(text).tasks]
    except TodoError as exc:
        return ("error", exc.line, str(exc))


def _fields_agree(text: str) -> None:
    """Where scan read the fields, they are parse_todo's."""
    quick = todo_scan.scan(text)
    if quick is None or not quick.has_fields:
        return
    for index, task in enumerate(parse_todo(text).tasks):
        assert quick.missing_fields(index) == task.missing_fields
        assert quick.depends.get(task.name, ()) == task.depends


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(LINES), max_size=25), st.booleans(), st.booleans())
def test_headings_never_differs_from_parse_todo(lines: list[str], bom: bool, tail: bool) -> None:
    text = (BOM if bom else "") + "\n".join(lines) + ("\n" if tail else "")
    quick = todo_scan.headings(text)
    if quick is not None:
        assert quick == _outcome(text)
        _fields_agree(text)


def _canonical(count: int, *, extra: str = "") -> str:
    return "# Tasks\n\nFree text.\n\n" + "".join(
        f"## t{i}: Task {i}\n- Purpose: p\n- Scope: s\n- Components: c\n- Files: src/m{i}.py\n"
        f"{extra}\n"
        for i in range(count)
    )


@pytest.mark.parametrize(
    "text",
    [
        "",
        "# Tasks\n",
        _canonical(50),
        _canonical(5, extra="A description line: with a colon\n### notes\n"),
        _canonical(5).replace("- Scope", "* SCOPE").replace("- Files", "files "),
        _canonical(5).replace("- Files", "- Depends: x1, x2\n- Files").replace("t2: ", "t2:\t"),
        "# Tasks\n\n## a: x\n- Purpose: p\n- Depends: none b\n- Risk: low\nmore\n### n\n",
    ],
)
def test_headings_answers_the_usual_files(text: str) -> None:
    assert todo_scan.headings(text) == _outcome(text)
    _fields_agree(text)


def test_the_documented_layout_is_read_with_its_fields() -> None:
    text = "# Tasks\n\n## t0: Task 0\nplain\n\n" + "".join(
        f"## t{i}: Task {i}\n- Purpose: p\n- Scope: s\n- Components: c\n- Depends: t0\n"
        "- Files: f.py\n- Risk: LOW\n\n"
        for i in range(1, 20)
    )
    quick = todo_scan.scan(text)
    assert quick is not None and quick.has_fields
    assert quick.missing_fields(0) == ("Purpose", "Scope", "Components")
    assert quick.depends["t3"] == ("t0",) and "t0" not in quick.depends
    _fields_agree(text)
    assert todo_scan.scan(text + "## t0: again\n") is None  # t0 defined twice


SLOTS = {
    "Purpose": ["p", "", "  "],
    "Scope": ["s", ""],
    "Components": ["c"],
    "Depends": ["a", "a, b c", "none", "", "Bad!", "main", "x..y", "self"],
    "Files": ["f.py"],
    "Risk": ["HIGH", "low", "", "huge", " Medium "],
}


@settings(max_examples=1000, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c", "main", "Bad", "x.lock"]),
            st.sampled_from(["T", "", " "]),
            st.fixed_dictionaries({}, optional={k: st.sampled_from(v) for k, v in SLOTS.items()}),
            st.sampled_from(["", "free text\n", "Note: x\n", "- Scope: again\n", "# Other\n"]),
        ),
        max_size=6,
    )
)
def test_the_layout_never_differs_from_parse_todo(
    entries: list[tuple[str, str, dict[str, str], str]],
) -> None:
    text = "".join(
        f"## {name}: {title}\n"
        + "".join(
            f"- {key}: {(name if value == 'self' else value)}\n" for key, value in fields.items()
        )
        + tail
        for name, title, fields, tail in entries
    )
    quick = todo_scan.headings(text)
    if quick is not None:
        assert quick == _outcome(text)
        _fields_agree(text)


@pytest.mark.parametrize(
    "text",
    [
        "## a: x\n- Purpose: p\n- purpose: q\n",  # repeated field
        "## a: x\n  * Scope: p\nnote\n-\tSCOPE: q\n",
        "## a: x\n- Depends: a\n",  # depends on itself
        "## a: x\n- Depends: Bad!\n",
        "## a: x\n- Risk: HUGE\n",
        "## a: x\nDepends: b\n",  # Depends outside the layout: parse_todo's to check
        "## a: x\n- Risk: HIGH\n- Purpose: p\n",  # out of order: a repeat is not ruled out
        "## a: x\n## a: y\n",
        "## main: x\n",
        "## a: x\r\n",
    ],
)
def test_headings_leaves_what_it_cannot_prove_to_parse_todo(text: str) -> None:
    assert todo_scan.headings(text) is None


# -- the whole listing: the engine's path against the quick one ---------------------------------


def _engine(as_json: bool) -> object:
    """cmd_todo as the CLI runs it when the quick path says None."""
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            cmd_todo(argparse.Namespace(json=as_json, repo=None, session=None))
    except TaskgateError as exc:
        return ("error", type(exc).__name__, exc.message)
    return out.getvalue()


def _quick(as_json: bool) -> str | None:
    text = todo_fast.output(["--json"] if as_json else [])
    return None if text is None else text + "\n"


def _same(*, need_quick: bool = False) -> None:
    for as_json in (False, True):
        engine = _engine(as_json)
        quick = _quick(as_json)
        if isinstance(engine, tuple):
            assert quick is None, (engine, quick)
        elif quick is not None or need_quick:
            assert quick == engine


NAMES = ["a", "b", "c", "d"]
STATES = ["INIT", "REQUIREMENTS", "COMPLETE", "CLEANUP", "BOGUS"]
FIELD_LINES = [
    "- Purpose: p",
    "- Scope: s",
    "- Components: c",
    "- Depends: a",
    "- Depends: b, c",
    "- Depends: zz",
    "- Depends: d",
    "- Risk: LOW",
    "- Files: x.py",
    "note: free text",
    "- Purpose: again",
]
ROW = st.fixed_dictionaries(
    {
        "state": st.sampled_from(STATES),
        "session": st.sampled_from(["s1", "s2", "s3", ""]),
        "released": st.booleans(),
        "pending": st.sampled_from([None, {"op": "create_task_worktree"}, {"op": "cleanup"}]),
        "extra": st.sampled_from([{}, {"abandoned": {"reason": "gone"}}, {"note": 1}]),
    }
)


def _reset(repo: Repo) -> None:
    conn = sqlite3.connect(repo.path / ".taskgate" / "state.db")
    conn.execute("DELETE FROM tasks")
    conn.commit()
    conn.close()
    root = repo.path / ".taskgate" / "tasks"
    for code in root.glob("*/code"):
        code.rmdir()
    for path in (repo.path / "changelog.md",):
        path.unlink(missing_ok=True)


def _put_rows(repo: Repo, rows: dict[str, dict[str, object]]) -> None:
    store = SqliteStore(repo.path / ".taskgate" / "state.db")
    try:
        for name, r in rows.items():
            with contextlib.suppress(Exception), store.write() as tx:  # one lock per session
                tx.insert_task(
                    TaskRow(
                        name=name,
                        state=str(r["state"]),
                        session_id=str(r["session"]),
                        host="h",
                        fence=1,
                        created_at="2026-01-01T00:00:00Z",
                        updated_at="2026-01-01T00:00:00Z",
                        lock_released_at="2026-01-02T00:00:00Z" if r["released"] else None,
                        pending=r["pending"],  # type: ignore[arg-type]
                        extra=r["extra"],  # type: ignore[arg-type]
                    )
                )
    finally:
        store.close()


@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    entries=st.lists(
        st.tuples(
            st.sampled_from(NAMES),
            st.booleans(),  # with the three feasibility fields first
            st.lists(st.sampled_from(FIELD_LINES), max_size=4),
        ),
        max_size=5,
    ),
    rows=st.dictionaries(st.sampled_from([*NAMES, "zz"]), ROW, max_size=5),
    worktrees=st.sets(st.sampled_from(NAMES)),
    changelog=st.sets(st.sampled_from([*NAMES, "zz"])),
    session=st.sampled_from(["s1", "s2", ""]),
)
def test_the_quick_listing_is_the_engines(
    repo: Repo,
    monkeypatch: pytest.MonkeyPatch,
    entries: list[tuple[str, bool, list[str]]],
    rows: dict[str, dict[str, object]],
    worktrees: set[str],
    changelog: set[str],
    session: str,
) -> None:
    monkeypatch.chdir(repo.path)
    monkeypatch.setenv("TASKGATE_SESSION", session)
    _reset(repo)
    todo = "# Tasks\n\n" + "".join(
        f"## {name}: Task {name}\n"
        + ("- Purpose: p\n- Scope: s\n- Components: c\n" if feasible else "")
        + "".join(f"{line}\n" for line in fields)
        + "\n"
        for name, feasible, fields in entries
    )
    (repo.path / "todo.md").write_text(todo)
    if changelog:
        (repo.path / "changelog.md").write_text("".join(f"## {n}: done\n" for n in changelog))
    _put_rows(repo, rows)
    for name in worktrees:
        (repo.path / ".taskgate" / "tasks" / name / "code").mkdir(parents=True, exist_ok=True)
    _same()


@pytest.fixture
def busy(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> Repo:
    """The conftest todo.md with tasks in every situation the listing shows."""
    monkeypatch.chdir(repo.path)
    monkeypatch.setenv("TASKGATE_SESSION", "s1")
    _put_rows(
        repo,
        {
            "add-login": {"state": "REQUIREMENTS", "session": "s1", "released": False,
                          "pending": None, "extra": {}},
            "fix-typo": {"state": "INIT", "session": "s2", "released": False, "pending": None,
                         "extra": {}},
        },
    )  # fmt: skip
    (repo.path / ".taskgate" / "tasks" / "add-login" / "code").mkdir(parents=True)
    return repo


def test_the_quick_path_answers_a_plain_repository(busy: Repo) -> None:
    _same(need_quick=True)
    assert todo_fast.output([]) is not None
    listing = json.loads(todo_fast.output(["--json"]) or "")
    assert [r["availability"] for r in listing] == ["resume", "foreign", "blocked", "infeasible"]


def test_a_dependency_done_in_the_changelog_is_met(busy: Repo) -> None:
    assert "'needs-login' waits for add-login" in (todo_fast.output([]) or "")
    (busy.path / "changelog.md").write_text("# Changelog\n\n## add-login: Add a login page\n")
    _same(need_quick=True)
    assert "'needs-login' is available" in (todo_fast.output([]) or "")


@pytest.mark.parametrize(
    ("extra", "pending", "expected"),
    [
        ({"abandoned": {"reason": "no longer wanted"}}, None, "abandoned: no longer wanted"),
        ({}, {"op": "create_task_worktree"}, "resume 'fix-typo': this session owns it"),
        ({}, {"op": "cleanup"}, "lock for 'fix-typo' exists but worktree missing"),
    ],
)
def test_a_held_row_with_pending_or_extra_is_the_engines(
    busy: Repo, extra: dict[str, object], pending: dict[str, object] | None, expected: str
) -> None:
    with contextlib.closing(sqlite3.connect(busy.path / ".taskgate" / "state.db")) as conn, conn:
        conn.execute(
            "UPDATE tasks SET session_id = 's9', extra = ?, pending = ? WHERE name = 'fix-typo'",
            (json.dumps(extra), json.dumps(pending)),
        )
    os.environ["TASKGATE_SESSION"] = "s9"  # monkeypatched by the fixture: restored after
    _same(need_quick=True)
    assert expected in (todo_fast.output([]) or "")


def test_the_cli_prints_the_engines_bytes(busy: Repo) -> None:
    for args in (("todo",), ("todo", "--json")):
        run = busy.run(*args, session="s1")
        assert run.code == 0 and run.out == _engine(args == ("todo", "--json"))


def _linked_worktree(repo: Repo) -> Path:
    path = repo.path.parent / "linked"
    git(repo.path, "worktree", "add", "-q", str(path), "-b", "side")
    return path


@pytest.mark.parametrize(
    "change",
    [
        "args",
        "database-url",
        "config-table",
        "snapshot-ahead",
        "migration-missing",
        "column-dropped",
        "bad-todo",
        "todo-not-utf8",
        "bad-json-row",
        "blob-state",
        "empty-store",
    ],
)
def test_the_engine_answers_what_the_quick_path_cannot_vouch_for(
    busy: Repo, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    db = busy.path / ".taskgate" / "state.db"
    args: list[str] = []
    if change == "args":
        args = ["--session", "s2"]
    elif change == "database-url":
        monkeypatch.setenv("TASKGATE_DATABASE_URL", "postgresql://localhost/x")
    elif change == "config-table":
        (busy.path / "taskgate.toml").write_text('[workspace]\ntodo = "todo.md"\n')
    elif change == "snapshot-ahead":
        (busy.path / ".taskgate" / snapshot.SEQ_FILE).write_text("999999\n")
    elif change == "migration-missing":
        with contextlib.closing(sqlite3.connect(db)) as conn, conn:
            conn.execute("DELETE FROM migrations WHERE name = ?", (MIGRATIONS[-1][0],))
    elif change == "column-dropped":
        with contextlib.closing(sqlite3.connect(db)) as conn, conn:
            conn.execute("ALTER TABLE tasks DROP COLUMN owner_started")
    elif change == "bad-todo":
        (busy.path / "todo.md").write_text("## ok: x\n- Risk: HUGE\n")
    elif change == "todo-not-utf8":
        (busy.path / "todo.md").write_bytes(b"## ok: \xff\n")
    elif change == "bad-json-row":
        with contextlib.closing(sqlite3.connect(db)) as conn, conn:
            conn.execute("UPDATE tasks SET extra = '{' WHERE name = 'fix-typo'")
    elif change == "blob-state":
        with contextlib.closing(sqlite3.connect(db)) as conn, conn:
            conn.execute("UPDATE tasks SET state = x'37' WHERE name = 'fix-typo'")
    elif change == "empty-store":
        db.write_bytes(b"")
    if change == "blob-state":  # text shows no state: only --json must leave it
        assert todo_fast.output(["--json"]) is None
        _same()
        return
    assert todo_fast.output(args) is None
    assert todo_fast.output([*args, "--json"]) is None


def test_a_linked_worktree_lists_the_main_worktrees_tasks(
    busy: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(_linked_worktree(busy) / ".")
    _same(need_quick=True)
    (busy.path / "todo.md").write_text("## only-here: x\n")  # the main worktree's todo.md
    assert "only-here" in (todo_fast.output([]) or "")
    _same(need_quick=True)


def test_a_large_listing_is_the_engines(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo.path)
    monkeypatch.setenv("TASKGATE_SESSION", "s7")
    (repo.path / "todo.md").write_text(_canonical(300))
    _put_rows(
        repo,
        {
            f"t{i}": {"state": STATES[i % 4], "session": f"s{i}", "released": i % 3 == 0,
                      "pending": None, "extra": {}}
            for i in range(0, 300, 2)
        },
    )  # fmt: skip
    _same(need_quick=True)


def test_no_quick_path_in_an_uninitialised_directory(tmp_path: Path) -> None:
    make_repo(tmp_path / "r")
    os.chdir(tmp_path)  # not a repository at all
    try:
        assert todo_fast.output([]) is None
    finally:
        os.chdir(tmp_path / "r")


def test_json_strings_are_escaped_as_json_dumps() -> None:
    rows = [("t", 'a "q" \\ é \u2028 \x01', "foreign", "R-LCK-04", "m\n", "INIT", None)]
    expected = json.dumps(
        [
            {"task": "t", "title": rows[0][1], "availability": "foreign", "rule": "R-LCK-04",
             "reason": "m\n", "state": "INIT", "owner": None}
        ],
        indent=2,
        sort_keys=True,
    )  # fmt: skip
    out = todo_fast._JsonRows()
    out.add(*rows[0])
    assert out.text() == expected
    assert re.search("[^\\x00-\\x7f]", expected) is None
