"""`taskgate recover --rebuild`: a lost or damaged store rebuilt from the views, each audit chain
proven against the head anchored in git (issue 16 "the store knows its own history", issue 14
item 4). Real git, the real CLI; the assertions are on the store's rows, on `audit` and on the
damaged files kept aside.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from conftest import Repo
from taskgate.engine import store_record
from test_complete import TASK, approved_repo

DB = Path(".taskgate") / "state.db"
_TABLES = {
    "tasks": "name",
    "transitions": "task, idx",
    "agents": "task, ord",
    "verdicts": "task, round, agent",
    "presentations": "task, id",
    "approvals": "task, id",
    "validations": "task, id",
    "events": "seq",
}


def dump(db: Path) -> dict[str, list[dict[str, Any]]]:
    """Every row of the store, table by table (autoincrement ids left out: they renumber)."""
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return {
            table: [
                {k: r[k] for k in r.keys() if not (k == "id" and table != "events")}  # noqa: SIM118
                for r in conn.execute(f"SELECT * FROM {table} ORDER BY {order}")
            ]
            for table, order in _TABLES.items()
        }
    finally:
        conn.close()


def checkpoint_copy(repo: Repo, dest: Path) -> None:
    """A consistent copy of the store as it is now (what a lost WAL later rolls back to)."""
    conn = sqlite3.connect(repo.path / DB)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    shutil.copy(repo.path / DB, dest)


def lose_wal(repo: Repo, copy: Path) -> None:
    """The store without the steps after `copy` was taken (state.db-wal lost)."""
    for suffix in ("-wal", "-shm"):
        Path(f"{repo.path / DB}{suffix}").unlink(missing_ok=True)
    shutil.copy(copy, repo.path / DB)


def record_path(repo: Repo) -> Path:
    return repo.task_dir(TASK) / store_record.FILE_NAME


def read_record(repo: Repo) -> dict[str, Any]:
    """The rows the task's store-record.jsonl adds up to."""
    got = store_record.replay(record_path(repo))
    assert got is not None and got.record is not None and not got.damage
    return got.record


def write_record(repo: Repo, record: dict[str, Any]) -> None:
    """The record replaced by `record` as one line, its hash recomputed (a forger who knows
    the format)."""
    record_path(repo).write_bytes(store_record.encode(record))


def aside_dirs(repo: Repo) -> list[Path]:
    """The directories the damaged store files were moved to."""
    return sorted((repo.path / ".taskgate").glob("lost-*"))


@pytest.fixture
def arepo(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Repo:
    """add-login approved at AWAITING_USER_APPROVAL: plan and change checkpoints anchored."""
    return approved_repo(tmp_path_factory, tmp_path / "repo")


def _rebuilt_rows_match(before: dict[str, list[dict[str, Any]]], after: dict[str, Any]) -> None:
    """Nothing lost, nothing invented: every row is back; the only new event is the rebuild's."""
    for table in _TABLES:
        if table in ("tasks", "events"):
            continue
        assert after[table] == before[table], table
    assert after["events"][: len(before["events"])] == before["events"]
    extra = after["events"][len(before["events"]) :]
    assert [e["kind"] for e in extra] == ["recovery"]
    assert json.loads(extra[0]["payload"])["procedure"] == "rebuild"
    (old,), (new,) = before["tasks"], after["tasks"]
    changed = {k for k in old if old[k] != new[k]}
    assert changed <= {"seq", "updated_at"}, changed  # the rebuild's own step


@pytest.mark.parametrize("damage", ["delete", "zero", "truncate", "garbage"])
def test_lost_store_is_rebuilt_from_the_views_and_proven(arepo: Repo, damage: str) -> None:
    db = arepo.path / DB
    checkpoint_copy(arepo, arepo.path.parent / "unused.db")  # WAL folded in: one file to damage
    before = dump(db)
    size = db.stat().st_size
    if damage == "delete":
        db.unlink()
    elif damage == "zero":
        db.write_bytes(b"")
    elif damage == "truncate":
        db.write_bytes(db.read_bytes()[: size // 3])
    else:
        db.write_bytes(b"this is not a database\n" * 200)
    damaged = db.read_bytes() if db.exists() else None
    assert arepo.run("status", TASK).code == 5  # the documented state before the way out
    out = arepo.run("recover", "--rebuild", "--json")
    assert out.code == 0, out.out + out.err
    data = out.json()
    assert data["rebuilt"] and data["proven"]
    (task,) = data["tasks"]
    assert task["task"] == TASK and task["source"] == "views" and task["unproven_events"] == []
    assert task["anchored_event"] is not None
    _rebuilt_rows_match(before, dump(db))
    # The damaged file is kept aside, byte for byte, never deleted.
    (aside,) = aside_dirs(arepo)
    if damaged is None:
        assert not (aside / "state.db").exists()
    else:
        assert (aside / "state.db").read_bytes() == damaged
    audit = arepo.run("audit", TASK, "--json")
    assert audit.code == 0, audit.out
    checks = {c["id"]: c for c in audit.json()["tasks"][0]["checks"]}
    assert checks["rebuild"]["passed"] and checks["anchor"]["passed"]
    status = arepo.ok("status", TASK, "--json").json()
    assert status["state"] == "AWAITING_USER_APPROVAL"
    assert [a["kind"] for a in status["approvals"] if a["revoked_at"] is None] == [
        "plan",
        "changes",
    ]
    # The rebuilt store carries on: the task completes with the approval it had.
    arepo.ok("complete", TASK)
    arepo.ok("audit", TASK)


def test_lost_wal_with_an_approval_is_rebuilt_and_proven(arepo: Repo, tmp_path: Path) -> None:
    """The approval lived only in the lost WAL; it was anchored in git, so it is proven."""
    arepo.ok("present", TASK)  # a new presentation revokes nothing (same commit) ...
    checkpoint_copy(arepo, tmp_path / "old.db")
    arepo.ok("approve", TASK, "changes")  # ... and a new approval, anchored, then lost
    before = dump(arepo.path / DB)
    lose_wal(arepo, tmp_path / "old.db")
    assert arepo.run("status", TASK).code == 5
    assert arepo.run("audit").code == 5
    out = arepo.run("recover", "--rebuild", "--json")
    assert out.code == 0, out.out + out.err
    assert out.json()["tasks"][0]["unproven_events"] == []
    _rebuilt_rows_match(before, dump(arepo.path / DB))
    (aside,) = aside_dirs(arepo)
    assert (aside / "state.db").read_bytes() == (tmp_path / "old.db").read_bytes()
    arepo.ok("audit")


def test_a_tail_after_the_last_anchor_is_restored_but_not_proven(
    arepo: Repo, tmp_path: Path
) -> None:
    """complete writes no anchor: its steps, lost with the WAL, come back from the views and
    are kept, but `audit` says that nothing outside the store proves them."""
    checkpoint_copy(arepo, tmp_path / "old.db")
    arepo.ok("complete", TASK)
    before = dump(arepo.path / DB)
    lose_wal(arepo, tmp_path / "old.db")
    out = arepo.run("recover", "--rebuild")
    assert out.code == 4, out.out + out.err
    assert "NOT PROVEN" in out.out and "events only in the views" in out.out
    after = dump(arepo.path / DB)
    _rebuilt_rows_match(before, after)
    assert after["tasks"][0]["state"] == "COMPLETE"  # nothing dropped
    audit = arepo.run("audit", TASK, "--json")
    assert audit.code == 1
    checks = {c["id"]: c for c in audit.json()["tasks"][0]["checks"]}
    failed = [c for c in checks.values() if not c["passed"]]
    assert [c["id"] for c in failed] == ["rebuild"]
    evidence = checks["rebuild"]["findings"][0]["evidence"]
    assert "came only from the views" in evidence and "after the last git anchor" in evidence


def test_an_edited_view_is_not_proven(arepo: Repo) -> None:
    """A view edited to invent an approval breaks the chain: restored as it is, never proven."""
    db = arepo.path / DB
    db.unlink()
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    record = read_record(arepo)
    approval = next(e for e in record["events"] if e["kind"] == "approval")
    approval["payload"]["provenance"] = "terminal-forged"
    write_record(arepo, record)  # every line hash recomputed: only the chain and git tell
    out = arepo.run("recover", "--rebuild", "--json")
    assert out.code == 4
    (task,) = out.json()["tasks"]
    assert not task["proven"] and any("breaks the hash chain" in p for p in task["problems"])
    audit = arepo.run("audit", TASK, "--json")
    assert audit.code == 1
    failed = {c["id"] for c in audit.json()["tasks"][0]["checks"] if not c["passed"]}
    assert {"hash-chain", "rebuild"} <= failed


def test_an_intact_store_is_left_alone(arepo: Repo) -> None:
    db = arepo.path / DB
    before = dump(db)
    out = arepo.run("recover", "--rebuild")
    assert out.code == 0 and "nothing changed" in out.out
    assert dump(db) == before and aside_dirs(arepo) == []
    assert arepo.run("recover", TASK, "--rebuild").code == 2  # whole store only


def test_a_store_rewritten_with_hashes_recomputed_is_still_caught(arepo: Repo) -> None:
    """The reverse (issue 14 item 4): rewriting the store and recomputing every hash after the
    edit fails `audit` against the anchored head; --rebuild does not replace such a store
    (it is not behind its views), so the evidence stays."""
    from taskgate.store.records import GENESIS_HASH, event_hash

    conn = sqlite3.connect(arepo.path / DB)
    rows = conn.execute(
        "SELECT seq, task, at, kind, payload FROM events WHERE task = ? ORDER BY seq", (TASK,)
    ).fetchall()
    previous = GENESIS_HASH
    for seq, task, at, kind, payload in rows:
        data = json.loads(payload)
        if kind == "approval":
            data["provenance"] = "rewritten"
        digest = event_hash(previous, task, at, kind, data)
        conn.execute(
            "UPDATE events SET payload = ?, prev_hash = ?, hash = ? WHERE seq = ?",
            (json.dumps(data, sort_keys=True, separators=(",", ":")), previous, digest, seq),
        )
        previous = digest
    conn.commit()
    conn.close()
    audit = arepo.run("audit", TASK, "--json")
    failed = {c["id"] for c in audit.json()["tasks"][0]["checks"] if not c["passed"]}
    assert "anchor" in failed and "hash-chain" not in failed


# -- a hook snapshot ahead of the store (issue 16) ---------------------------------------------


def pre_tool_use(repo: Repo, session: str, path: Path) -> str:
    """The deny reason PreToolUse gives a Write of `path` ("" when allowed)."""
    data = {
        "session_id": session,
        "cwd": str(repo.worktree(TASK)),
        "hook_event_name": "PreToolUse",
        "tool_name": "Write",
        "tool_input": {"file_path": str(path), "content": "x = 1\n"},
    }
    result = repo.run("hook", "PreToolUse", session=None, stdin=json.dumps(data))
    assert result.code == 0, result.err
    out = json.loads(result.out).get("hookSpecificOutput", {}) if result.out.strip() else {}
    return str(out.get("permissionDecisionReason", "")) if out.get(
        "permissionDecision"
    ) == "deny" else ""  # fmt: skip


def test_a_hook_snapshot_ahead_of_the_store_is_never_trusted(tmp_path: Path) -> None:
    from conftest import make_repo
    from flow import approve_plan, to_synthesis

    repo = make_repo(tmp_path / "repo")
    to_synthesis(repo, TASK)
    checkpoint_copy(repo, tmp_path / "old.db")
    approve_plan(repo, TASK)  # changes the hook snapshot: plan_approved, a later store_seq
    repo.ok("transition", TASK, "IMPLEMENTATION", cwd=repo.worktree(TASK))
    state_dir = repo.path / ".taskgate"
    snap_text = (state_dir / "hook-snapshot.json").read_text()
    lose_wal(repo, tmp_path / "old.db")
    # A person accepts the older store the documented way for the views (issue 16) ...
    task_json = repo.task_dir(TASK) / "task.json"
    task_json.rename(task_json.with_suffix(".json.lost"))
    # ... but the hook snapshot still shows the lost steps: the next hook event finds them
    # and appends nothing to the older store; commands exit 5.
    events = len(dump(repo.path / DB)["events"])
    post = {
        "session_id": "s1",
        "cwd": str(repo.worktree(TASK)),
        "hook_event_name": "PostToolUse",
        "tool_name": "Write",
        "tool_input": {"file_path": str(repo.worktree(TASK) / "notes.txt"), "content": "x"},
        "tool_response": {"success": True},
    }
    hooked = repo.run("hook", "PostToolUse", session=None, stdin=json.dumps(post))
    assert "committed steps were lost" in hooked.err  # said to the agent and the person
    assert len(dump(repo.path / DB)["events"]) == events
    assert not (state_dir / "hook-snapshot.json").exists()
    result = repo.run("status", TASK)
    assert result.code == 5, result.err
    text = " ".join(result.err.split())
    assert "hook snapshot" in text and "committed steps were lost" in text
    assert "taskgate recover --rebuild" in text
    assert not (state_dir / "hook-snapshot.json").exists()
    assert (state_dir / "hook-snapshot.ahead.json").read_text() == snap_text  # kept
    assert repo.run("transition", TASK, "SYNTHESIS", "--reason", "x").code == 5
    # PreToolUse no longer reads it, and the store it falls back to is known to be behind.
    reason = pre_tool_use(repo, "s1", repo.worktree(TASK) / "src" / "app.py")
    assert "R-REC-12" in reason and "recover --rebuild" in reason, reason
    # The way out: rebuild; the approval (anchored in git) is back and proven.
    out = repo.run("recover", "--rebuild", "--json")
    assert out.code == 4, out.out + out.err  # the IMPLEMENTATION move came after the anchor
    assert not (state_dir / "hook-snapshot.ahead.json").exists()
    (aside,) = aside_dirs(repo)
    assert (aside / "hook-snapshot.ahead.json").read_text() == snap_text
    status = repo.ok("status", TASK, "--json").json()
    assert status["state"] == "IMPLEMENTATION"
    assert [a["kind"] for a in status["approvals"]] == ["plan"]
    assert "R-REC-12" not in pre_tool_use(repo, "s1", repo.worktree(TASK) / "src" / "app.py")


def test_the_hook_snapshot_is_not_mistaken_for_lost_steps(repo: Repo) -> None:
    """Events appended without touching the snapshot (tool usage) leave it behind the store,
    which is normal: no exit 5, no "changed outside taskgate"."""
    repo.ok("start", TASK)
    seq_file = repo.path / ".taskgate" / "hook-snapshot.seq"
    seen = int(seq_file.read_text())
    snap_file = repo.path / ".taskgate" / "hook-snapshot.json"
    text = snap_file.read_text()
    for _ in range(3):
        repo.ok("say", TASK, "what is the status?")
    repo.ok("status", TASK)
    data = {"session_id": "s1", "cwd": str(repo.path), "hook_event_name": "SessionStart"}
    started = repo.run("hook", "SessionStart", session=None, stdin=json.dumps(data))
    assert started.code == 0 and "changed outside taskgate" not in started.out
    assert int(seq_file.read_text()) == seen and snap_file.read_text() == text  # not rewritten


def repository_event(repo: Repo) -> None:
    """An event on the repository's trail (engine/guard_trail.py), as taskgate appends one."""
    from taskgate.engine.guard_trail import REPOSITORY
    from taskgate.store.records import GENESIS_HASH, event_hash

    at, payload = "2026-01-01T00:00:00Z", {"rule": "R-LCK-09", "what": "a test record"}
    digest = event_hash(GENESIS_HASH, REPOSITORY, at, "guard", payload)
    conn = sqlite3.connect(repo.path / DB)
    conn.execute(
        "INSERT INTO events (task, at, kind, payload, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?)",
        (REPOSITORY, at, "guard", json.dumps(payload, separators=(",", ":")), GENESIS_HASH, digest),
    )
    conn.commit()
    conn.close()


def test_a_lost_wal_over_two_tasks_keeps_both(tmp_path: Path) -> None:
    """One task's steps survive in the old store, the other's only in its views: each comes
    from where it is newest, event numbers kept across tasks, nothing lost or made up."""
    from conftest import make_repo
    from flow import to_classified

    repo = make_repo(tmp_path / "repo")
    repo.ok("start", TASK, session="s1")
    to_classified(repo, "fix-typo", session="s2")
    repository_event(repo)  # a trail with no task row and no view: only the store has it
    checkpoint_copy(repo, tmp_path / "old.db")
    repo.ok("classify", TASK, session="s1", cwd=repo.worktree(TASK))  # only in the lost WAL
    before = dump(repo.path / DB)
    lose_wal(repo, tmp_path / "old.db")
    out = repo.run("recover", "--rebuild", "--json")
    assert out.code == 4, out.out + out.err  # nothing was anchored: no checkpoint yet
    tasks = {t["task"]: t for t in out.json()["tasks"]}
    assert tasks[TASK]["source"] == "views" and tasks["fix-typo"]["source"] == "store"
    assert any("holds no anchor" in p for p in tasks[TASK]["problems"])
    repo.ok("status")  # the rebuilt store serves every command again
    after = dump(repo.path / DB)
    for table in ("transitions", "agents", "verdicts", "presentations", "approvals"):
        assert after[table] == before[table], table
    restored = [e for e in after["events"] if e["kind"] != "recovery"]
    assert restored == before["events"]  # both tasks' events, numbers interleaved as before
    assert out.json()["kept_repository_events"] == 1  # the repository's trail too
    assert {t["name"]: t["state"] for t in after["tasks"]} == {
        TASK: "CLASSIFIED",
        "fix-typo": "CLASSIFIED",
    }
    audit = repo.run("audit", "--json")
    verdicts = {t["task"]: t["verdict"] for t in audit.json()["tasks"]}
    assert verdicts[TASK] == "FAILED"
    failed = {c["id"] for c in audit.json()["tasks"][0]["checks"] if not c["passed"]}
    assert "rebuild" in failed
    repo.ok("transition", TASK, "REQUIREMENTS", session="s1", cwd=repo.worktree(TASK))


def test_rebuild_is_for_the_embedded_store_only(repo: Repo) -> None:
    """A PostgreSQL store is restored from the database's own backups (docs/teams.md)."""
    from taskgate.store.select import ENV_VAR

    url = "postgresql://nobody@127.0.0.1:1/none"  # never contacted: refused before
    result = repo.run("recover", "--rebuild", env={ENV_VAR: url})
    assert result.code == 2 and "embedded store" in result.err and "backups" in result.err
    assert aside_dirs(repo) == []


def test_an_approval_added_to_the_views_is_restored_revoked(tmp_path: Path) -> None:
    """A view edited to hold an approval the chain never recorded (an unconfined agent can
    write the views) is kept, but revoked: after the rebuild it opens no gate, and audit says
    why."""
    from conftest import make_repo
    from flow import to_synthesis

    repo = make_repo(tmp_path / "repo")
    to_synthesis(repo, TASK)
    repo.ok("present", TASK)  # anchored: the chain up to the presentation is proven
    db = repo.path / DB
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    record = read_record(repo)
    shown = record["presentations"][-1]
    record["approvals"].append(
        {"task": TASK, "kind": "plan", "bound_to": shown["bound_to"], "id": 1,
         "presented_at": shown["at"], "approved_at": shown["at"], "provenance": "terminal",
         "message_hash": "", "revoked_at": None, "revoke_reason": ""}
    )  # fmt: skip
    write_record(repo, record)
    out = repo.run("recover", "--rebuild", "--json")
    assert out.code == 4, out.out + out.err
    (task,) = out.json()["tasks"]
    assert task["unproven_events"] == []  # the chain itself is intact and anchored
    assert any("recorded by no proven event" in p for p in task["problems"])
    (row,) = dump(db)["approvals"]  # kept, never dropped ...
    assert row["provenance"] == "terminal" and row["revoked_at"]  # ... but it approves nothing
    assert not (repo.task_dir(TASK) / "user-plan-approval-obtained.flag").exists()
    refused = repo.run("transition", TASK, "IMPLEMENTATION", cwd=repo.worktree(TASK))
    assert refused.code == 1, refused.err
    audit = repo.run("audit", TASK, "--json")
    checks = {c["id"]: c for c in audit.json()["tasks"][0]["checks"]}
    assert not checks["rebuild"]["passed"]
    assert "recorded by no proven event" in checks["rebuild"]["findings"][0]["evidence"]


# -- store-record.jsonl damaged as well (issue 18: the record appended, not rewritten) ----------


def lose_store(repo: Repo) -> None:
    db = repo.path / DB
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)


def record_lines(repo: Repo) -> list[bytes]:
    return record_path(repo).read_bytes().split(b"\n")[:-1]


def test_a_store_lost_with_its_record_is_not_made_up(arepo: Repo) -> None:
    lose_store(arepo)
    record_path(arepo).unlink()
    out = arepo.run("recover", "--rebuild", "--json")
    assert out.code == 4, out.out + out.err
    (task,) = out.json()["tasks"]
    assert task["source"] == "none" and not task["proven"]
    assert any(store_record.FILE_NAME in p and "missing" in p for p in task["problems"])
    # Nothing restored: its views stay the evidence of the lost steps (exit 5, with the way out).
    assert arepo.run("status", TASK).code == 5


@pytest.mark.parametrize("damage", ["torn", "garbled", "forged"])
def test_a_damaged_record_restores_what_verifies_and_says_what_not(
    arepo: Repo, damage: str
) -> None:
    """The store lost and its record damaged too: the lines up to the damage are restored
    and proven as far as git anchors them; the damage is named in the rebuild's output and
    in `audit`; task.json, rendered after what could be restored, is kept aside; the task
    carries on from there."""
    before = dump(arepo.path / DB)
    lines = record_lines(arepo)
    lose_store(arepo)
    if damage == "torn":  # a crash while appending the last line
        data = record_path(arepo).read_bytes()
        record_path(arepo).write_bytes(data[: len(data) - len(lines[-1]) // 2 - 1])
        where = "torn line"
    else:
        middle = len(lines) // 2
        if damage == "garbled":
            lines[middle] = b"\x00" * 40
        else:  # the task row edited, the line's hash left as it was
            entry = json.loads(lines[middle])
            entry["task"]["state"] = "COMPLETE"
            lines[middle] = json.dumps(entry, sort_keys=True, separators=(",", ":")).encode()
        record_path(arepo).write_bytes(b"\n".join(lines) + b"\n")
        where = f"line {middle + 1} of {len(lines)} does not verify"
    out = arepo.run("recover", "--rebuild", "--json")
    assert out.code == 4, out.out + out.err
    (task,) = out.json()["tasks"]
    assert task["source"] == "views" and not task["proven"]
    assert any(where in p for p in task["problems"]), task["problems"]
    after = dump(arepo.path / DB)
    kept = after["events"][:-1]  # the rebuild's own recovery event last
    assert kept == before["events"][: len(kept)]  # a prefix: nothing invented
    audit = arepo.run("audit", TASK, "--json")
    checks = {c["id"]: c for c in audit.json()["tasks"][0]["checks"]}
    assert not checks["rebuild"]["passed"]
    assert any(where in f["evidence"] for f in checks["rebuild"]["findings"])
    assert arepo.run("status", TASK).code == 0  # usable again, from what was restored


def test_a_record_behind_or_torn_with_the_store_intact_is_found_and_repaired(
    arepo: Repo,
) -> None:
    """No rebuild needed: `audit` names the damaged record (a view), `recover --repair`
    writes it again from the store."""
    old = record_path(arepo).read_bytes()
    arepo.ok("present", TASK)
    record_path(arepo).write_bytes(old)  # behind: an older copy put back
    audit = arepo.run("audit", TASK, "--json")
    assert audit.code == 1
    checks = {c["id"]: c for c in audit.json()["tasks"][0]["checks"]}
    assert any(store_record.FILE_NAME in f["evidence"] for f in checks["views"]["findings"])
    arepo.ok("recover", TASK, "--repair")
    arepo.ok("audit", TASK)
    data = record_path(arepo).read_bytes()
    record_path(arepo).write_bytes(data[:-5])  # torn
    audit = arepo.run("audit", TASK, "--json")
    checks = {c["id"]: c for c in audit.json()["tasks"][0]["checks"]}
    assert any("torn line" in f["evidence"] for f in checks["views"]["findings"])
    arepo.ok("recover", TASK, "--repair")
    arepo.ok("audit", TASK)
