"""A store written only by hook processes keeps its log small, and loses nothing (issue 18).

The command hook ends its process with its store connection open (store/hook_tx.py: closing
the last connection checkpoints the database, as long as the commit itself). With no other
process keeping the store's -shm alive, every new hook process rebuilds the log's index by
reading the whole log, and forgets what was checkpointed, so the log was never restarted: a
session that only prompts and edits grew state.db-wal by about 13 KB per prompt, and every
hook read all of it. Past hook_tx.LOG_LINGER bytes the hook now closes its connection instead.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from conftest import Repo
from taskgate.store import hook_tx
from test_hooks_dispatch import hook

TASK = "add-login"
PROMPTS = 40  # about 13 KB of log each: twice LOG_LINGER without the bound


def _prompt(repo: Repo, number: int) -> dict[str, str]:
    return {
        "session_id": "s1",
        "transcript_path": "",
        "cwd": str(repo.path),
        "permission_mode": "default",
        "hook_event_name": "UserPromptSubmit",
        "prompt": f"what is the status of step {number}?",
    }


def test_the_log_stays_bounded_across_hook_writes_and_every_prompt_is_kept(repo: Repo) -> None:
    repo.ok("start", TASK)
    db = repo.path / ".taskgate" / "state.db"
    wal = Path(f"{db}-wal")
    sizes = []
    for number in range(PROMPTS):
        run = hook(repo, _prompt(repo, number))
        assert run.code == 0, run.err
        assert "[QUESTION]" in run.out, run.out  # recorded by the hook, without the engine
        sizes.append(wal.stat().st_size if wal.exists() else 0)
    # One commit past the bound at most (the hook that finds it past LOG_LINGER closes).
    assert max(sizes) <= hook_tx.LOG_LINGER + 64 * 1024, sizes
    assert sizes[-1] < max(sizes) or max(sizes) <= hook_tx.LOG_LINGER, sizes
    conn = sqlite3.connect(db)
    try:
        kinds = [k for (k,) in conn.execute("SELECT kind FROM events WHERE task = ?", (TASK,))]
    finally:
        conn.close()
    assert kinds.count("interruption") == PROMPTS
    audit = repo.ok("audit", TASK)
    assert "FAIL" not in audit.out, audit.out
