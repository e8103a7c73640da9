"""The third pass on PostToolUse and SessionStart (issue 18): `_sqlite3` loaded without
functools, and the snapshot check answered by the store's snapshot clock
(store/snapshot_clock.py) instead of every task. Each fast path is compared with the path it
stands for, and the changes made around taskgate that the full comparison finds are still
found (R-LCK-09), through the real hook command."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from conftest import Repo, edit_store
from flow import copy_repo, implementation_template
from taskgate.store import snapshot, snapshot_clock
from test_hooks_dispatch import TASK, context, fixture, hook

SRC = Path(__file__).resolve().parent.parent / "src"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with implementation_template(tmp_path_factory, "fast", TASK, second=True) as repo:
        yield repo.path


@pytest.fixture
def impl(template: Path, tmp_path: Path) -> Repo:
    return copy_repo(template, tmp_path / "repo")


def _db(repo: Repo) -> Path:
    return repo.path / ".taskgate" / "state.db"


def clock_row(repo: Repo) -> tuple[Any, ...]:
    with closing(sqlite3.connect(_db(repo))) as db:  # closed now, not at a later gc
        row = db.execute(
            "SELECT seq, checked_seq, checked_schema, checked_sha256 FROM snapshot_clock"
        ).fetchone()
    assert row is not None
    return tuple(row)


def events(repo: Repo, task: str = TASK) -> list[tuple[str, str]]:
    with closing(sqlite3.connect(_db(repo))) as db:  # closed now, not at a later gc
        rows = db.execute("SELECT kind, payload FROM events WHERE task = ? ORDER BY seq", (task,))
        return [(str(k), str(p)) for k, p in rows]


def dump(repo: Repo, *paths: Path) -> list[str]:
    """Every row of the store but the clock's record of the last full check, the repository's
    path as "R" and the event hashes (of payloads that hold the path) as "H"."""
    with closing(sqlite3.connect(_db(repo))) as db:  # closed now, not at a later gc
        db.execute("UPDATE snapshot_clock SET checked_seq = NULL, checked_schema = NULL, "
                   "checked_sha256 = NULL, checked_file = NULL")  # fmt: skip
        lines = list(db.iterdump())
        db.rollback()
    for path in paths:
        lines = [line.replace(str(path), "R") for line in lines]
    return [re.sub("'[0-9a-f]{64}'", "'H'", line) for line in lines]


def post_edit(repo: Repo, name: str = "notes.md") -> dict[str, Any]:
    target = repo.worktree(TASK) / name
    return fixture("post_tool_use_write", repo, tool_input={"file_path": str(target)})


def vouched(repo: Repo) -> bool:
    seq, checked_seq, _, checked = clock_row(repo)
    path = repo.path / ".taskgate" / snapshot.FILE_NAME
    return seq == checked_seq and checked == snapshot_clock.digest(path.read_bytes())


# -- _sqlite3 without functools --------------------------------------------------------------


def test_sqlite_module_is_loaded_without_functools_and_caches_like_it() -> None:
    """The stand-in's statement cache is functools.lru_cache's own C wrapper: same type, same
    hits and evictions; the process gets the real functools afterwards."""
    code = f"""
import sys
sys.path.insert(0, {str(SRC)!r})
from taskgate.store import hook_tx
m = hook_tx.sqlite_module()
assert "functools" not in sys.modules and "collections" not in sys.modules, sorted(sys.modules)
conn = m.connect(":memory:", isolation_level=None, cached_statements=2)
for i in range(300):  # distinct statements evict, repeated ones hit
    assert conn.execute(f"SELECT {{i % 7}}").fetchone() == (i % 7,)
calls = []
def probe(x):
    calls.append(x)
    return x
mine = hook_tx._lru_cache(2)(probe)
for x in (1, 2, 1, 3, 1, 2, 3, 3):
    mine(x)
import functools
theirs = functools.lru_cache(2)(probe)
assert type(mine) is type(theirs), (type(mine), type(theirs))
seen, calls[:] = list(calls), []
for x in (1, 2, 1, 3, 1, 2, 3, 3):
    theirs(x)
assert calls == seen, (calls, seen)
assert hasattr(functools, "reduce") and "collections" in sys.modules
assert hook_tx.sqlite_module() is m
print("ok")
"""
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_sqlite_module_falls_back_to_functools_when_the_stand_in_is_not_enough() -> None:
    """An interpreter whose _sqlite3 wants more of functools than lru_cache at its init, or
    whose private C wrapper takes other arguments, still gets a working module (with the
    real functools), not an error in every hook."""
    for breakage in (
        # init: the stand-in lacks what the module asks for
        "hook_tx._stand_in = lambda: type(sys)('functools')",
        # connect: the wrapper refuses the stand-in's call (functools' own still works)
        "import _functools\n"
        "real = _functools._lru_cache_wrapper\n"
        "def picky(f, size, typed, info):\n"
        "    if info is tuple:\n"
        "        raise TypeError('another signature')\n"
        "    return real(f, size, typed, info)\n"
        "_functools._lru_cache_wrapper = picky",
    ):
        code = f"""
import sys
sys.path.insert(0, {str(SRC)!r})
from taskgate.store import hook_tx
{breakage}
m = hook_tx.sqlite_module()
conn = m.connect(":memory:")
assert [conn.execute("SELECT 1").fetchone() for _ in range(3)] == [(1,)] * 3
print("ok")
"""
        out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True)
        assert out.returncode == 0 and out.stdout.strip() == "ok", (breakage, out.stderr)


# -- the snapshot clock ----------------------------------------------------------------------


def test_the_clock_moves_with_what_the_snapshot_holds_and_nothing_else(impl: Repo) -> None:
    seq = clock_row(impl)[0]
    edit_store(impl, "UPDATE tasks SET updated_at = 'x', seq = seq + 1 WHERE name = ?", TASK)
    edit_store(impl, "INSERT INTO events (task, at, kind, payload, prev_hash, hash) "
               "VALUES (?, 'a', 'tool_usage', '{}', 'p', 'h')", TASK)  # fmt: skip
    assert clock_row(impl)[0] == seq  # what the hook's own writes change: not the snapshot's
    for statement in (
        "UPDATE tasks SET state = 'VALIDATION' WHERE name = ?",
        "UPDATE tasks SET required_agents = '[]' WHERE name = ?",
        "UPDATE tasks SET lock_released_at = 'now' WHERE name = ?",
        "UPDATE approvals SET revoked_at = 'now' WHERE task = ?",
        "INSERT INTO events (task, at, kind, payload, prev_hash, hash) "
        "VALUES (?, 'a', 'validation', '{}', 'p', 'h')",
        "DELETE FROM events WHERE task = ? AND kind = 'tool_usage'",
    ):
        edit_store(impl, statement, TASK)
        now = clock_row(impl)[0]
        assert now > seq, statement
        seq = now


def test_post_tool_use_records_the_check_and_the_next_one_trusts_it(impl: Repo) -> None:
    """The first PostToolUse compares every task and records what it found; the next one is
    answered by the clock. Both leave the store as the full comparison does."""
    assert clock_row(impl)[1:] == (None, None, None)
    assert hook(impl, post_edit(impl, "a.md")).out == ""
    assert vouched(impl)
    full = copy_repo(impl.path, impl.path.parent / "full")
    edit_store(full, "UPDATE snapshot_clock SET checked_sha256 = 'none'")  # compare all
    for repo in (impl, full):
        run = hook(repo, post_edit(repo, "b.md"), env={"TASKGATE_FAKE_NOW": "2026-01-02T03:04:05Z"})
        assert (run.code, run.out) == (0, ""), run.err
    assert vouched(impl) and vouched(full)
    assert dump(impl, impl.path) == dump(full, full.path, impl.path)
    assert [k for k, _ in events(impl)][-2:] == ["tool_usage", "tool_usage"]


def test_the_engine_path_records_the_same_events(impl: Repo) -> None:
    """With no snapshot the hook takes the engine's path (it writes one): the events it
    records are the ones the clock-checked fast path records."""
    engine = copy_repo(impl.path, impl.path.parent / "engine")
    hook(impl, post_edit(impl, "warm.md"))
    hook(engine, post_edit(engine, "warm.md"))
    (engine.path / ".taskgate" / snapshot.FILE_NAME).unlink()
    assert vouched(impl)
    for repo in (impl, engine):
        hook(repo, post_edit(repo, "c.md"), env={"TASKGATE_FAKE_NOW": "2026-01-02T03:04:05Z"})
    mine = [(k, p.replace(str(impl.path), "R")) for k, p in events(impl)]
    theirs = [(k, p.replace(str(engine.path), "R")) for k, p in events(engine)]
    assert mine == theirs


def _forge(repo: Repo) -> None:
    """The snapshot rewritten so the main agent may edit (VALIDATION, C-27), its format kept."""
    path = repo.path / ".taskgate" / snapshot.FILE_NAME
    from taskgate.hooks.jsonio import loads

    data = snapshot.parse(path.read_text(), loads)
    assert data is not None
    for t in data["tasks"]:
        if t["name"] == TASK:
            t.update(state="VALIDATION", main_may_fix=True)
    path.write_text(snapshot.render(data))


def _reported(repo: Repo, event: str) -> None:
    """The event's answer reports R-LCK-09 and the snapshot equals the store again."""
    data = post_edit(repo) if event == "PostToolUse" else fixture(
        "session_start", repo, session_id="fresh-session", source="startup"
    )  # fmt: skip
    text = context(hook(repo, data), event)
    assert "[R-LCK-09]" in text and "changed outside taskgate" in text, text
    from taskgate.hooks.jsonio import loads

    with closing(sqlite3.connect(_db(repo))) as db:  # closed now, not at a later gc
        store = snapshot.collect(db, loads)
    on_disk = (repo.path / ".taskgate" / snapshot.FILE_NAME).read_text()
    assert snapshot.parse(on_disk, loads) == store


@pytest.mark.parametrize("event", ["PostToolUse", "SessionStart"])
def test_a_forged_snapshot_is_found_while_the_clock_vouches_for_the_old_one(
    impl: Repo, event: str
) -> None:
    hook(impl, post_edit(impl, "warm.md"))
    assert vouched(impl)
    _forge(impl)
    _reported(impl, event)
    if event == "PostToolUse":
        assert "snapshot_mismatch" in [k for k, _ in events(impl)]


@pytest.mark.parametrize("event", ["PostToolUse", "SessionStart"])
def test_a_store_row_changed_around_taskgate_is_found(impl: Repo, event: str) -> None:
    hook(impl, post_edit(impl, "warm.md"))
    assert vouched(impl)
    edit_store(impl, "UPDATE tasks SET state = 'VALIDATION' WHERE name = ?", TASK)
    _reported(impl, event)


def test_a_change_with_the_clock_switched_off_is_found(impl: Repo) -> None:
    """Dropping a trigger moves the schema version the check was recorded at."""
    hook(impl, post_edit(impl, "warm.md"))
    assert vouched(impl)
    edit_store(impl, "DROP TRIGGER snapshot_clock_tasks_update")
    edit_store(impl, "UPDATE tasks SET state = 'VALIDATION' WHERE name = ?", TASK)
    _reported(impl, "PostToolUse")


def test_the_check_skips_the_tasks_only_where_the_clock_vouches(
    impl: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In-process: with the record fresh, the tasks are not read (file_text is never
    called); with the store changed, they are, and a difference is Unusable."""
    from taskgate.store import hook_tx

    hook(impl, post_edit(impl, "warm.md"))
    state_dir = str(impl.path / ".taskgate")
    calls: list[int] = []
    real = snapshot.file_text

    def counted(*args: Any) -> str:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(snapshot, "file_text", counted)
    with hook_tx.HookTx(state_dir) as tx:
        tx.check_snapshot()
    assert calls == []
    edit_store(impl, "UPDATE tasks SET required_agents = '[\"quality\"]' WHERE name = ?", TASK)
    with hook_tx.HookTx(state_dir) as tx, pytest.raises(hook_tx.Unusable, match="differs"):
        tx.check_snapshot()
    assert calls == [1]


def test_a_store_without_the_clock_compares_everything(impl: Repo) -> None:
    """A store last opened by an older taskgate has no clock row: the full comparison."""
    edit_store(impl, "DROP TABLE snapshot_clock")
    for name, _, _ in snapshot_clock._TRIGGERS:
        edit_store(impl, f"DROP TRIGGER IF EXISTS snapshot_clock_{name}")
    from taskgate.store import hook_tx

    with hook_tx.HookTx(str(impl.path / ".taskgate")) as tx:
        tx.check_snapshot()
        assert tx._checked is None
    assert hook(impl, post_edit(impl)).out == ""
    edit_store(impl, "UPDATE tasks SET state = 'VALIDATION' WHERE name = ?", TASK)
    _reported(impl, "PostToolUse")


def test_the_hooks_load_neither_functools_nor_collections(impl: Repo) -> None:
    """The installed PostToolUse and SessionStart commands, as Claude Code runs them."""
    import os
    import shlex

    from taskgate.hooks.install import default_program

    argv = shlex.split(default_program())
    for data in (
        post_edit(impl),
        fixture("session_start", impl, session_id="new", source="startup"),
    ):
        proc = subprocess.run(
            [argv[0], "-X", "importtime", *argv[1:], data["hook_event_name"]],
            cwd=impl.path, input=json.dumps(data), capture_output=True, text=True, check=True,
            env={**os.environ, "TASKGATE_DEBUG": "1"},
        )  # fmt: skip
        loaded = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()}
        assert "_sqlite3" in loaded and "taskgate.hooks.quick" in loaded
        assert not {"functools", "collections"} & loaded, data["hook_event_name"]


def _check(repo: Repo) -> None:
    """One PostToolUse-like transaction: the check, committed with what it records."""
    from taskgate.store import hook_tx

    with hook_tx.HookTx(str(repo.path / ".taskgate")) as tx:
        tx.check_snapshot()
        tx.commit()


def test_a_settled_file_is_vouched_for_by_its_key_and_an_edit_in_place_is_not(
    impl: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once its key is recorded the file is not even read; a write in place of the same
    size, its mtime put back, still changes the ctime: hashed, compared, found."""
    import os
    import time

    from taskgate.store import hook_tx

    monkeypatch.setattr(snapshot_clock, "FINE_SETTLED_NS", 0)  # the test's file is new
    monkeypatch.setattr(snapshot_clock, "COARSE_SETTLED_NS", 0)
    _check(impl)
    path = impl.path / ".taskgate" / snapshot.FILE_NAME
    with sqlite3.connect(_db(impl)) as db:
        (key,) = db.execute("SELECT checked_file FROM snapshot_clock").fetchone()
    assert key == snapshot_clock.file_key(path.stat())
    hashed: list[int] = []
    real = snapshot_clock.digest
    monkeypatch.setattr(snapshot_clock, "digest", lambda data: hashed.append(1) or real(data))
    _check(impl)
    assert hashed == []
    time.sleep(0.05)  # past the file system's timestamp tick
    before = path.stat()
    text = path.read_bytes()
    at = text.index(b"IMPLEMENTATION")
    with open(path, "r+b") as handle:
        handle.seek(at)
        handle.write(b"VALIDATION\t\t\t\t")  # as long as IMPLEMENTATION
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino, before.st_size, before.st_mtime_ns
    )  # fmt: skip
    with pytest.raises(hook_tx.Unusable, match="differs"):
        _check(impl)
    assert hashed == [1]


def test_a_file_is_settled_once_older_than_its_timestamps_granularity() -> None:
    import time

    now = time.time_ns()
    fine = now - now % 1_000_000 + 123  # nanosecond digits: a fine-grained file system
    assert not snapshot_clock.settled(fine - 50_000_000)
    assert snapshot_clock.settled(fine - 200_000_000)
    whole = now - now % 1_000_000_000  # whole seconds: maybe 1 s or 2 s granularity
    assert not snapshot_clock.settled(whole - 1_000_000_000)
    assert snapshot_clock.settled(whole - 4_000_000_000)


def test_a_recent_file_is_hashed_every_time(impl: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file changed more recently than its granularity gets no key: a later write could
    leave the same one."""
    monkeypatch.setattr(snapshot_clock, "FINE_SETTLED_NS", 3_600 * 10**9)
    monkeypatch.setattr(snapshot_clock, "COARSE_SETTLED_NS", 3_600 * 10**9)
    _check(impl)
    with sqlite3.connect(_db(impl)) as db:
        assert db.execute("SELECT checked_file FROM snapshot_clock").fetchone() == (None,)
    hashed: list[int] = []
    real = snapshot_clock.digest
    monkeypatch.setattr(snapshot_clock, "digest", lambda data: hashed.append(1) or real(data))
    _check(impl)
    assert hashed == [1]


# -- the baseline after a recorded edit ------------------------------------------------------


def test_the_marker_is_taken_without_the_snapshot_only_where_no_flag_matters() -> None:
    """hooks/quick._marker: a view only where the main agent may write whatever the plan
    approval and the last build failure say; the states where one of them decides (SYNTHESIS,
    VALIDATION) and those that forbid (IMPLEMENTATION, REVIEW...) read the snapshot."""
    from taskgate.hooks.policy import STATES, TaskView, forbids_main_writes
    from taskgate.hooks.quick import _marker

    for state in STATES:
        free = not any(
            forbids_main_writes(TaskView("t", state, plan_approved=a, main_may_fix=f))
            for a in (False, True)
            for f in (False, True)
        )
        assert (_marker("t", (state, ("quality",))) is not None) == free, state
    for state in ("SYNTHESIS", "VALIDATION", "IMPLEMENTATION", "REVIEW"):
        assert _marker("t", (state, ())) is None
    assert _marker("t", ("NO-SUCH-STATE", ())) is None
    assert _marker("t", None) is None


def test_the_baseline_from_the_row_equals_the_one_from_the_snapshot(impl: Repo) -> None:
    """fix-typo (held by s2, where its main agent may write): the baseline PostToolUse takes
    again from the step's row is the one load_actor's snapshot read gives, but for its time."""
    from taskgate.hooks import effects, quick
    from taskgate.store import hook_tx

    layout = quick.workspace(str(impl.path))
    assert layout is not None
    with hook_tx.HookTx(layout.state_dir) as tx:
        [(name, state, _)] = tx.held_by("s2")
        agents = tx.agents(name)
    assert name == "fix-typo" and quick._marker(name, (state, agents)) is not None
    path = effects.baseline_path(layout.state_dir, "s2")
    stale = {"format": effects.FORMAT, "task": name, "state": "OLD", "taken": 0}
    effects.save(path, stale)
    found = []
    for row in ((state, agents), None):  # None: the snapshot's path, as before issue 18
        quick._rebaseline(layout, "s2", name, row)
        base = effects.load(path)
        assert base is not None and base["state"] == state and base["taken"] > 0
        found.append({k: v for k, v in base.items() if k != "taken"})
        effects.save(path, stale)
    assert found[0] == found[1] and found[0]["guarded"] is False


def test_a_check_recorded_for_another_format_is_not_trusted(
    impl: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An upgraded taskgate that renders another snapshot format compares everything: the
    file the previous one checked is not what this one writes."""
    monkeypatch.setattr(snapshot_clock, "FINE_SETTLED_NS", 0)
    monkeypatch.setattr(snapshot_clock, "COARSE_SETTLED_NS", 0)
    _check(impl)
    calls: list[int] = []
    real = snapshot.file_text
    monkeypatch.setattr(snapshot, "file_text", lambda *a: calls.append(1) or real(*a))
    _check(impl)
    assert calls == []
    monkeypatch.setattr(snapshot, "FORMAT", snapshot.FORMAT + 1)
    from taskgate.store import hook_tx

    with hook_tx.HookTx(str(impl.path / ".taskgate")) as tx, pytest.raises(hook_tx.Unusable):
        tx.check_snapshot()  # the file says format 3, this "taskgate" renders 4
    assert calls == [1]


def test_a_marker_baseline_of_the_same_state_is_kept(impl: Repo) -> None:
    """PostToolUse after an edit by a session whose main agent may write: its marker baseline
    stays as it is (only its unread time would change); a marker of another state, or a
    guarded baseline, is taken again."""
    from taskgate.hooks import effects, quick

    layout = quick.workspace(str(impl.path))
    assert layout is not None
    path = Path(effects.baseline_path(layout.state_dir, "s2"))
    target = impl.worktree("fix-typo") / "notes.md"
    post = fixture("post_tool_use_write", impl, session_id="s2",
                   tool_input={"file_path": str(target)})  # fmt: skip
    for base in (
        {"format": effects.FORMAT, "task": "fix-typo", "state": "INIT", "session": "s2",
         "guarded": False, "taken": 1},
        {"format": effects.FORMAT, "task": "fix-typo", "state": "CLASSIFICATION",
         "session": "s2", "guarded": False, "taken": 1},
    ):  # fmt: skip
        effects.save(str(path), base)
        before = path.read_bytes()
        assert hook(impl, post).out == ""
        kept = path.read_bytes() == before
        assert kept == (base["state"] == "INIT"), base
        assert json.loads(path.read_bytes())["state"] == "INIT"
    assert [k for k, _ in events(impl, "fix-typo")].count("tool_usage") == 2


def test_client_process_finds_the_ancestor_its_comm_file_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SessionStart's registration reads each ancestor's name from /proc/PID/stat: the same
    process as /proc/PID/comm finds, nearest first."""
    import os

    from taskgate.server import peers

    chain = [pid for pid, _ in peers.ancestors(os.getpid())]
    names = [Path(f"/proc/{pid}/comm").read_text().strip() for pid in chain]
    assert len(chain) >= 2
    for name in names:
        monkeypatch.setattr(peers, "CLIENTS", frozenset({name}))
        assert peers.client_process(os.getpid()) == chain[names.index(name)], name
    monkeypatch.setattr(peers, "CLIENTS", frozenset({"no-such-client"}))
    assert peers.client_process(os.getpid()) is None


# -- the __future__ stand-in of hooks/launch.py -----------------------------------------------

_FUTURE_PROBE = """
import sys
launch = sys.argv[1]
preamble = open(launch).read().split("from taskgate.hooks.dispatch")[0]
exec(compile(preamble, launch, "exec"), {"__file__": launch})  # launch.py before taskgate
exec("from __future__ import annotations\\nassert annotations == 'annotations'")
assert not hasattr(sys.modules["__future__"], "__path__")  # the import system's question
assert "__file__" not in vars(sys.modules["__future__"]), "the real module was loaded"
import __future__
assert __future__.CO_FUTURE_ANNOTATIONS == 0x1000000  # any other name: the real module
assert sys.modules["__future__"].__file__.endswith("__future__.py")
exec("from __future__ import annotations, generator_stop\\nprint(type(annotations).__name__)")
"""


def test_the_future_stand_in_serves_annotations_and_loads_the_real_module_for_the_rest() -> None:
    """launch.py binds `from __future__ import annotations` from a stand-in (issue 18); the
    import system's questions find nothing on it, and any other name gets the real module."""
    import taskgate.hooks

    launch = Path(taskgate.hooks.__file__).with_name("launch.py")
    out = subprocess.run([sys.executable, "-S", "-c", _FUTURE_PROBE, str(launch)],
                         capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "_Feature"  # the real module's
