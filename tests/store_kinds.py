"""Both stores for one test (issue 20): the store, concurrency, crash and torture suites run on
the embedded SQLite file and on a real PostgreSQL server (tests/pgserver.py), never a mock.

    from store_kinds import kind_fixture, store_fixture  # noqa: F401

`store_kind` is parametrized "sqlite" / "postgres": on PostgreSQL it puts a fresh database of
the run's throwaway cluster (conftest's `pg`) in TASKGATE_DATABASE_URL, which `make_repo`'s
`taskgate init` and every `taskgate` the test runs inherit; on SQLite it makes sure the
variable is unset. `store` (store_fixture) is an open Store of that kind (the interface
tests). A test about the SQLite file itself (WAL loss, PRAGMA, the file's permissions) does
not take these fixtures.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import pgserver
from taskgate.store.base import Store

KINDS = ("sqlite", "postgres")


@pytest.fixture(name="store_kind", params=KINDS)
def kind_fixture(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    kind = str(request.param)
    if kind == "postgres":
        cluster: pgserver.PgServer = request.getfixturevalue("pg")
        monkeypatch.setenv("TASKGATE_DATABASE_URL", cluster.fresh_database())
    else:
        monkeypatch.delenv("TASKGATE_DATABASE_URL", raising=False)
    return kind


@pytest.fixture(name="store")
def store_fixture(store_kind: str, tmp_path: Path) -> Iterator[Store]:
    """An open store of `store_kind` (PostgreSQL: the fresh database, this test's state dir)."""
    import os

    store: Store
    if store_kind == "postgres":
        from taskgate.store.postgres import PgStore

        store = PgStore(os.environ["TASKGATE_DATABASE_URL"], tmp_path)
    else:
        from taskgate.store.sqlite import SqliteStore

        store = SqliteStore(tmp_path / "state.db")
    try:
        yield store
    finally:
        store.close()


def query(repo: Path, sql: str, *params: object) -> list[dict[str, Any]]:
    """Run one statement (`?` placeholders) on the store of `repo`, behind taskgate's back as
    a person with the database shell would: the SQLite file, or the PostgreSQL database in
    TASKGATE_DATABASE_URL. The rows as dicts (none for a statement that returns none)."""
    import os

    url = os.environ.get("TASKGATE_DATABASE_URL")
    if url:
        import psycopg
        from psycopg.rows import dict_row

        with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
            cur = conn.execute(sql.replace("?", "%s"), params)  # type: ignore[arg-type]
            return list(cur.fetchall()) if cur.description else []
    import sqlite3

    db = sqlite3.connect(repo / ".taskgate" / "state.db")
    db.row_factory = sqlite3.Row
    try:
        rows = [dict(r) for r in db.execute(sql, params).fetchall()]
        db.commit()
        return rows
    finally:
        db.close()
