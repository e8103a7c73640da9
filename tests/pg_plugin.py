"""Run any CLI test module against PostgreSQL instead of SQLite (issue 20):

    PYTHONPATH=tests .venv/bin/python -m pytest -p pg_plugin tests/test_checkpoints.py

Starts one throwaway cluster (tests/pgserver.py) for the session and gives every test its own
empty database through TASKGATE_DATABASE_URL, which every `taskgate` the test runs inherits.
Tests that open `.taskgate/state.db` themselves (SQLite-specific faults, sqlite3 probes) do
not apply and fail under it, and so do suites that copy a template repository built once
(test_complete.py's copy_repo: the copy's views are ahead of its fresh database, exit 5); the
plugin is for the protocol suites. On PostgreSQL at the time of writing: test_checkpoints.py
passes (22 tests); test_crash.py passes (8: its invariants read through the workspace's
store); test_concurrency.py (2) and test_http_hooks_parity.py (1) pass; test_cli.py and
test_faults_lease.py pass but for the four tests that open state.db with sqlite3 (36 passed),
test_server_hooks.py but for the one that fingerprints state.db.
"""

from __future__ import annotations

import pytest

import pgserver


@pytest.fixture(autouse=True)
def _on_postgres(pg: pgserver.PgServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASKGATE_DATABASE_URL", pg.fresh_database())  # conftest's cluster
