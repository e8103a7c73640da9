"""The store's schema as named migrations, applied in order and recorded in `migrations`.

A migration is never edited once released: a change is a new entry. The SQL stays portable
(no SQLite-only functions) so that a PostgreSQL store can apply the same statements.
"""

from __future__ import annotations

MIGRATIONS: tuple[tuple[str, str], ...] = (
    (
        "0001_initial",
        """
        CREATE TABLE tasks (
            name TEXT PRIMARY KEY,
            state TEXT NOT NULL,
            session_id TEXT NOT NULL,
            host TEXT NOT NULL,
            fence INTEGER NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            seq INTEGER NOT NULL,
            owner_pid INTEGER,
            owner_started TEXT,
            risk_level TEXT,
            change_type TEXT,
            required_agents TEXT NOT NULL,
            classification TEXT NOT NULL,
            checkpoint TEXT,
            lock_released_at TEXT,
            cleanup_timestamp TEXT,
            pending TEXT,
            base_branch TEXT NOT NULL,
            base_sha TEXT NOT NULL,
            extra TEXT NOT NULL
        );
        -- R-LCK-19: a session holds at most one unreleased task lock.
        CREATE UNIQUE INDEX one_lock_per_session ON tasks (session_id)
            WHERE lock_released_at IS NULL;
        CREATE TABLE transitions (
            task TEXT NOT NULL REFERENCES tasks (name),
            idx INTEGER NOT NULL,
            source TEXT NOT NULL,
            target TEXT NOT NULL,
            at TEXT NOT NULL,
            reason TEXT NOT NULL,
            evidence TEXT NOT NULL,
            PRIMARY KEY (task, idx)
        );
        CREATE TABLE agents (
            task TEXT NOT NULL REFERENCES tasks (name),
            agent TEXT NOT NULL,
            ord INTEGER NOT NULL,
            status TEXT,
            phase TEXT,
            updated_at TEXT,
            message TEXT NOT NULL,
            work_remaining INTEGER NOT NULL,
            retry_count INTEGER NOT NULL,
            initial INTEGER NOT NULL,
            added_at_state TEXT,
            added_at TEXT,
            justification TEXT NOT NULL,
            invoked_at TEXT,
            PRIMARY KEY (task, agent)
        );
        CREATE TABLE verdicts (
            task TEXT NOT NULL REFERENCES tasks (name),
            agent TEXT NOT NULL,
            round INTEGER NOT NULL,
            head_sha TEXT NOT NULL,
            decision TEXT NOT NULL,
            reason TEXT NOT NULL,
            at TEXT NOT NULL,
            PRIMARY KEY (task, agent, round)
        );
        CREATE TABLE presentations (
            id INTEGER PRIMARY KEY,
            task TEXT NOT NULL REFERENCES tasks (name),
            kind TEXT NOT NULL,
            bound_to TEXT NOT NULL,
            at TEXT NOT NULL
        );
        CREATE TABLE approvals (
            id INTEGER PRIMARY KEY,
            task TEXT NOT NULL REFERENCES tasks (name),
            kind TEXT NOT NULL,
            bound_to TEXT NOT NULL,
            presented_at TEXT NOT NULL,
            approved_at TEXT NOT NULL,
            provenance TEXT NOT NULL,
            message_hash TEXT NOT NULL,
            revoked_at TEXT,
            revoke_reason TEXT NOT NULL
        );
        CREATE TABLE validations (
            id INTEGER PRIMARY KEY,
            task TEXT NOT NULL REFERENCES tasks (name),
            head_sha TEXT NOT NULL,
            command TEXT NOT NULL,
            exit_code INTEGER NOT NULL,
            success INTEGER NOT NULL,
            at TEXT NOT NULL,
            output_tail TEXT NOT NULL,
            failure_class TEXT NOT NULL,
            tests TEXT NOT NULL
        );
        CREATE TABLE events (
            seq INTEGER PRIMARY KEY,
            task TEXT NOT NULL,
            at TEXT NOT NULL,
            kind TEXT NOT NULL,
            payload TEXT NOT NULL,
            prev_hash TEXT NOT NULL,
            hash TEXT NOT NULL
        );
        CREATE INDEX events_by_task ON events (task, seq);
        """,
    ),
)

SCHEMA_VERSION = len(MIGRATIONS)
