"""SessionStart of a session resuming the task it holds, answered without the engine (issue 18).

The engine's path (hooks/engine_path.session_state) imports the engine (about 40 ms) to say
what to do next. What it does, in order:

1. opens the store (`SqliteStore`: WAL, the migrations and the snapshot clock's row and
   triggers installed where missing, every task column present, else SchemaDamaged), and
   finds the hook snapshot ahead of it or not (issue 16);
2. reads every task row for the ones this session holds (R-LCK-20): several are reported as
   corruption, none gives hooks/quick.NO_TASK;
3. rewrites the hook snapshot from the store under the write lock (R-LCK-09): a difference
   is recorded (`snapshot_mismatch`) and reported, an equal file is vouched for in
   `hook-snapshot.gen` (store/snapshot_splice.py);
4. reads the task's snapshot (`Engine.require_snapshot`: the name checked, StoreLost when its
   views are ahead of the store, every row of the task decoded, stale views re-rendered);
5. answers protocol/recovery.resume_text with protocol/recovery.hint of the snapshot
   (engine/checkpoints.recovery_hint) and the task worktree's path.

It writes no store row and no anchor in the usual case (only a `snapshot_mismatch` event,
and the snapshot files, when the snapshot differed); peer registration, the agent door and
the settings check (hooks/settings_check.at_session_start) run before either path.

`open_as_the_engine` and `answer` (hooks/quick.session_start calls them for every session)
do 1, 3, 4 and 5 from the rows they need, in one store/hook_tx.py transaction (the same
`BEGIN IMMEDIATE` as the engine's snapshot check, never committed: no row is written), and
`hook-snapshot.gen` is rewritten where the engine's check would rewrite it. They raise
hook_tx.Unusable wherever the engine's path would do anything else or could fail: a store
the engine would complete (a missing trigger), a missing column (every column the engine's
reads name is named here), an invalid task name, an unknown state, views ahead of the store,
a row of the task that does not decode (stricter than the engine's decoder: `_json` refuses
NaN), a path the engine would spell differently. Then the engine's path answers, as before.

One difference on purpose: stale views are left stale, as after PostToolUse and a recorded
prompt (hooks/quick.py): their `_seq` says so and the next reader renders them
(Engine.snapshot; `taskgate audit` accepts a lazily deferred render). Not checked here, as
in hooks/quick.session_start for a new session: the rows of other tasks (the engine's path
decodes every row to find the session's) and taskgate.toml beyond `tasks_root` and
`[store]` (hooks/context.py reads no more of it).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from taskgate.hooks.policy import Layout
    from taskgate.store.hook_tx import HookTx

# TaskRow's fields (store/sqlite_tx._TASK_COLUMNS; tests/test_hooks_resume.py compares them).
TASK_COLUMNS = (
    "name", "state", "session_id", "host", "fence", "created_at", "updated_at", "seq",
    "owner_pid", "owner_started", "risk_level", "change_type", "required_agents",
    "classification", "checkpoint", "lock_released_at", "cleanup_timestamp", "pending",
    "base_branch", "base_sha", "extra",
)  # fmt: skip
_JSON_COLUMNS = ("classification", "checkpoint", "pending", "extra")
# What Tx.snapshot reads of one task besides its row (store/sqlite_tx.py): every column it
# names, in its order: a column renamed or dropped fails here as there.
_READS = {
    "transitions": ("task, idx, source, target, at, reason, evidence", "idx"),
    "agents": ("task, agent, status, phase, updated_at, message, work_remaining, retry_count, "
               "initial, added_at_state, added_at, justification, invoked_at", "ord"),
    "verdicts": ("task, agent, round, head_sha, decision, reason, at", "round, agent"),
    "presentations": ("task, kind, bound_to, at, id", "id"),
    "approvals": ("task, kind, bound_to, presented_at, approved_at, provenance, message_hash, "
                  "revoked_at, revoke_reason", "id"),
    "validations": ("task, head_sha, command, exit_code, success, at, output_tail, "
                    "failure_class, tests, id", "id"),
    "events": ("task, at, kind, payload, prev_hash, hash, seq", "seq"),
}  # fmt: skip
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789._-")


def open_as_the_engine(tx: HookTx) -> None:
    """What opening the store and checking the snapshot through the engine does beyond this
    transaction; Unusable unless that would change nothing and fail nowhere: the snapshot
    clock's row and triggers in place (`snapshot_clock.install` adds missing ones), every
    task column there (SchemaDamaged). Then `hook-snapshot.gen` is made to name the file at
    the clock, as the engine's check does (`_vouch`). Call after tx.check_snapshot() (the
    file equals the store), under its lock."""
    from taskgate.store import hook_tx, snapshot_clock

    conn = tx._c
    table = snapshot_clock.TABLE
    wanted = {table, *(f"{table}_{name}" for name, _, _ in snapshot_clock._TRIGGERS)}
    have = {
        str(name)
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger') AND name LIKE ?",
            (table + "%",),
        )
    }
    if not wanted <= have:
        raise hook_tx.Unusable("the snapshot clock lacks a trigger: the engine installs it")
    conn.execute(f"SELECT {', '.join(TASK_COLUMNS)} FROM tasks LIMIT 0").fetchall()
    row = conn.execute(f"SELECT seq FROM {table} WHERE id = 1").fetchone()
    if row is None or type(row[0]) is not int:
        raise hook_tx.Unusable("no snapshot clock: the engine's store adds it")
    _vouch(tx.state_dir, row[0])


def _vouch(state_dir: str, clock: int) -> None:
    """SqliteStore._vouch after the snapshot check found the file equal to the store:
    `hook-snapshot.gen` names the file at the clock, rewritten (atomically, not fsynced, as
    there) only where it names something else; Unusable where a file operation fails."""
    from taskgate.store import snapshot
    from taskgate.store.hook_tx import Unusable

    path = os.path.join(state_dir, snapshot.GEN_FILE)
    tmp = os.path.join(state_dir, f".{snapshot.GEN_FILE}.{os.urandom(6).hex()}.tmp")
    try:
        key = snapshot.file_key(os.stat(os.path.join(state_dir, snapshot.FILE_NAME)))
        text = f"{clock} {key}\n".encode("ascii")
        try:
            with open(path, "rb") as handle:
                if handle.read() == text:
                    return
        except FileNotFoundError:
            pass
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise Unusable(f"hook-snapshot.gen: {exc}") from None


def answer(tx: HookTx, layout: Layout, name: str, state: str, seq: int) -> str:
    """The engine's resume text for task `name` (in `state` at `seq`) that this session
    holds; Unusable when the engine's path must answer."""
    from taskgate.hooks.policy import STATES
    from taskgate.protocol import recovery
    from taskgate.store.hook_tx import Unusable

    if not _valid_name(name):  # Engine.require_snapshot's check (protocol/names.py)
        raise Unusable(f"task name {name!r}: the engine's path refuses it")
    if state not in STATES:
        raise Unusable(f"unknown state {state!r}: the engine's path reports it")
    task_dir = os.path.join(layout.tasks_root, name)
    rendered = _view_seq(task_dir)
    if rendered is not None and rendered > seq:  # StoreLost (engine/core.check_history)
        raise Unusable(f"task.json rendered at seq {rendered}, the store at {seq}")
    worktree = os.path.join(task_dir, "code")
    if worktree != os.path.normpath(worktree) or worktree.startswith("//"):
        raise Unusable(f"{worktree!r}: pathlib spells it otherwise")
    row = _task_row(tx, name)
    _check_rows(tx, name)
    conn, loads = tx._c, tx.loads

    def plan_approved() -> bool:
        found = conn.execute(
            "SELECT 1 FROM approvals WHERE task = ? AND kind = 'plan' AND revoked_at IS NULL "
            "LIMIT 1",
            (name,),
        ).fetchone()
        return found is not None

    def plan_shown() -> bool:
        kinds = ", ".join(f"'{k}'" for k in recovery.SHOWN_KINDS)
        rows = conn.execute(
            f"SELECT kind, payload FROM events WHERE task = ? AND kind IN ({kinds}) "
            "ORDER BY seq DESC",
            (name,),
        )
        newest_first = ((str(kind), _payload(loads, text)) for kind, text in rows)
        if not recovery.shown("plan", newest_first):
            return False
        found = conn.execute(  # snap.latest_presentation("plan")
            "SELECT 1 FROM presentations WHERE task = ? AND kind = 'plan' LIMIT 1", (name,)
        ).fetchone()
        return found is not None

    try:
        hint = recovery.hint(name, state, row["extra"], row["checkpoint"], plan_approved,
                             plan_shown)  # fmt: skip
    except Unusable:
        raise
    except Exception as exc:  # the engine's call fails alike: its path reports it
        raise Unusable(f"the hint fails: {exc!r}") from None
    return recovery.resume_text(name, state, hint, worktree)


def _valid_name(name: str) -> bool:
    """protocol/names.task_name_problem(name) is None, without `re` (tests compare them)."""
    return (
        0 < len(name) <= 64
        and name[0] not in "._-"
        and all(c in _NAME_CHARS for c in name)
        and name != "main"
        and ".." not in name
        and not name.endswith((".", ".lock"))
    )


def _view_seq(task_dir: str) -> int | None:
    """engine/views.view_seq: task.json's `_seq`, None when missing; Unusable where this
    decoder is stricter than the engine's (it might read a number there)."""
    from taskgate.hooks.jsonio import loads
    from taskgate.store.hook_tx import Unusable

    try:
        with open(os.path.join(task_dir, "task.json"), encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        raise Unusable("task.json cannot be read here") from None
    try:
        data = loads(text)
    except ValueError:
        raise Unusable("task.json does not parse here") from None
    seq = data.get("_seq") if isinstance(data, dict) else None
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else None


def _json(loads: Any, text: Any) -> Any:
    """A JSON column as store/sqlite_tx._load decodes it; Unusable where that may differ."""
    from taskgate.store.hook_tx import Unusable

    if text is None:
        return None
    if not isinstance(text, str):
        raise Unusable("a JSON column that is not text")
    try:
        return loads(text)
    except (ValueError, RecursionError):
        raise Unusable("a JSON column that does not decode here") from None


def _payload(loads: Any, text: Any) -> dict[str, Any]:
    """An event's payload for recovery.shown; Unusable unless a JSON object (the engine
    keeps what does not parse as {"_unparseable": text}; stricter here)."""
    from taskgate.store.hook_tx import Unusable

    value = _json(loads, text)
    if not isinstance(value, dict):
        raise Unusable("an event payload that is not an object")
    return value


def _task_row(tx: HookTx, name: str) -> dict[str, Any]:
    """The task's row decoded as SqliteTx._task_from decodes it (Unusable where it fails)."""
    from taskgate.store.hook_tx import Unusable

    cursor = tx._c.execute(f"SELECT {', '.join(TASK_COLUMNS)} FROM tasks WHERE name = ?", (name,))
    found = cursor.fetchone()
    if found is None:
        raise Unusable(f"task {name!r} vanished")
    row = dict(zip(TASK_COLUMNS, found, strict=True))
    try:
        int(row["fence"])
        int(row["seq"])
        tuple(_json(tx.loads, row["required_agents"]))
    except (TypeError, ValueError):
        raise Unusable("the task row does not decode") from None
    for column in _JSON_COLUMNS:
        row[column] = _json(tx.loads, row[column])
    return row


def _check_rows(tx: HookTx, name: str) -> None:
    """Every read of Tx.snapshot of the task, as it reads it: Unusable where one fails (a
    column it names is missing, a value it converts does not convert)."""
    from taskgate.store.hook_tx import Unusable

    conn = tx._c
    decoded = {"transitions": ("evidence",), "agents": ("retry_count",), "validations": ("tests",)}
    for table, (columns, order) in _READS.items():
        names = [c.strip() for c in columns.split(",")]
        query = f"SELECT {columns} FROM {table} WHERE task = ? ORDER BY {order}"
        wanted = decoded.get(table)
        if wanted is None:
            conn.execute(query + " LIMIT 0", (name,)).fetchall()  # the columns exist
            continue
        at = [names.index(c) for c in wanted]
        for values in conn.execute(query, (name,)):
            for index in at:
                if names[index] == "retry_count":
                    try:
                        int(values[index])
                    except (TypeError, ValueError):
                        raise Unusable("an agent row does not decode") from None
                else:
                    _json(tx.loads, values[index])
