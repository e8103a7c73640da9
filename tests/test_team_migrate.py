"""`taskgate migrate` (issue 20): the schema version of either store, pending migrations applied
on PostgreSQL, and a team that started on one machine copying its embedded store into the
team's database: same rows, same hash chain, the views still valid, new steps continue."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

import pgserver
from conftest import make_repo
from flow import to_requirements
from taskgate.store.schema import MIGRATIONS

NAMES = [name for name, _ in MIGRATIONS]


def test_migrate_reports_applies_and_copies_an_embedded_store(
    pg: pgserver.PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "r")
    to_requirements(repo, "add-login")
    repo.ok("start", "fix-typo", session="s2")
    lite = repo.ok("migrate", "--json").json()
    assert lite["store"] == "sqlite" and lite["version"] == len(NAMES) == lite["latest"]
    assert lite["applied_before"] == NAMES and lite["applied_now"] == []
    embedded = repo.ok("status", "add-login", "--json").json()
    # Without a database configured, a copy has nowhere to go: exit 2, says what to set.
    nowhere = repo.run("migrate", "--from-sqlite")
    assert nowhere.code == 2 and "TASKGATE_DATABASE_URL" in nowhere.err
    url = pg.fresh_database()
    monkeypatch.setenv("TASKGATE_DATABASE_URL", url)
    first = repo.ok("migrate", "--json").json()  # an empty database: the schema is applied
    assert first["store"] == "postgresql" and first["applied_before"] == []
    assert first["applied_now"] == NAMES and first["version"] == len(NAMES)
    assert repo.ok("migrate", "--json").json()["applied_now"] == []  # nothing pending now
    copied = repo.ok("migrate", "--from-sqlite", "--json").json()["copied"]
    with psycopg.connect(url) as conn:
        tasks = conn.execute("SELECT name, state, session_id FROM tasks ORDER BY name").fetchall()
        events = conn.execute("SELECT COUNT(*), MAX(seq) FROM events").fetchone()
    assert tasks == [("add-login", "REQUIREMENTS", "s1"), ("fix-typo", "INIT", "s2")]
    assert events is not None and copied["events"] == events[0] > 5
    assert copied["tasks"] == 2 and copied["transitions"] >= 2
    # The same task as the embedded store had it (its views here stay valid: same seqs).
    assert repo.ok("status", "add-login", "--json").json() == embedded
    audit = repo.run("audit", "add-login")
    assert audit.code == 0, audit.out + audit.err
    # New steps continue the copied ids and the hash chain.
    repo.ok(
        "transition", "add-login", "CLASSIFIED", "--reason", "back", cwd=repo.worktree("add-login")
    )
    with psycopg.connect(url) as conn:
        after = conn.execute("SELECT MIN(seq) FROM events WHERE seq > %s", (events[1],)).fetchone()
    assert after is not None and after[0] == events[1] + 1
    assert repo.run("audit", "add-login").code == 0
    # A second copy would mix two stores: refused, nothing changed.
    again = repo.run("migrate", "--from-sqlite", "--json")
    assert again.code == 1 and "empty database only" in again.out, again.out + again.err
    with psycopg.connect(url) as conn:
        count = conn.execute("SELECT COUNT(*) FROM tasks").fetchone()
    assert count == (2,)


def test_migrate_on_a_database_written_by_a_newer_taskgate_is_exit_5(
    pg: pgserver.PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = pg.fresh_database()
    monkeypatch.setenv("TASKGATE_DATABASE_URL", url)
    repo = make_repo(tmp_path / "r")
    with psycopg.connect(url) as conn:
        conn.execute("INSERT INTO migrations (name, applied_at) VALUES ('9999_future', 'x')")
    done = repo.run("migrate", "--json")
    assert done.code == 5, done.out + done.err
    assert "newer taskgate" in done.out
