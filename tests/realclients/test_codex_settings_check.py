"""Hook settings checked at SessionStart, with the real Codex 0.169.0 (issue 14).

Taskgate's PreToolUse entry is removed from `$CODEX_HOME/hooks.json` after `hooks install
--client codex`. The next `codex exec` runs taskgate's (still trusted) SessionStart hook, which
reports it: the model sees it in its context, Codex takes the answer (with its
`systemMessage`), and the record is in the repository's trail (the Codex session holds no
task), where `taskgate audit` fails.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from conftest import Repo, make_repo
from realclients.codex_runner import Codex, codex_fixture  # noqa: F401
from realclients.mock_openai import shell
from taskgate.engine.guard_trail import HOOKS_CHANGED, REPOSITORY

TASK = "add-login"


def test_a_removed_entry_is_reported_at_codex_session_start(codex: Codex, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    repo.ok("start", TASK, session="owner")
    installed = codex.taskgate(repo, "hooks", "install", "--client", "codex")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    run = codex.exec(repo.path, shell("echo hi"))
    assert run.code == 0, run.err
    assert "hook settings changed" not in codex.mock.turns[0].user_text()

    hooks = codex.home / ".codex" / "hooks.json"
    data = json.loads(hooks.read_text())
    del data["hooks"]["PreToolUse"]
    hooks.write_text(json.dumps(data, indent=2))
    codex.mock.turns.clear()
    run = codex.exec(repo.path, shell("echo hi"))
    assert run.code == 0, run.err
    context = codex.mock.turns[0].user_text()
    assert f"{hooks}: the PreToolUse entry was removed" in context, context[-3000:]
    assert "[R-REC-14]" in context and "failed" not in run.err.lower()
    conn = sqlite3.connect(f"file:{repo.path / '.taskgate' / 'state.db'}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT task FROM events WHERE kind = ?", (HOOKS_CHANGED,)).fetchall()
    finally:
        conn.close()
    assert rows == [(REPOSITORY,)]
    audit = Repo(repo.path).run("audit", "--json")
    assert audit.code == 1
    assert any(t["task"] == REPOSITORY and t["verdict"] == "FAILED" for t in audit.json()["tasks"])
