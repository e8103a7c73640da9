"""Hook settings checked at SessionStart, with the real Claude Code 2.1.332 (issue 14).

An agent (or anyone) removes taskgate's PreToolUse entry from the user's settings. The next
session's SessionStart hook, which the client itself runs, reports it: the model sees it in its
context, and Claude Code accepts the answer (with its `systemMessage`) without a hook error;
the event is in the audit trail of the session's task and `taskgate audit` fails. The same
hook registered the client process for the agent door under the session's id.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from realclients.conftest import OWNER, TASK, Claude, copy_template
from realclients.mock_anthropic import say
from taskgate.engine.guard_trail import HOOKS_CHANGED
from taskgate.server import peers

REPORT = "taskgate's hook settings changed"


def _recorded(db: Path) -> list[tuple[str, dict[str, object]]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT task, payload FROM events WHERE kind = ? ORDER BY seq", (HOOKS_CHANGED,)
        ).fetchall()
    finally:
        conn.close()
    return [(t, json.loads(p)) for t, p in rows]


def test_a_removed_entry_is_reported_at_session_start_and_recorded(
    claude: Claude, hooks_installed: Path, templates: dict[str, Path], tmp_path: Path
) -> None:
    repo = copy_template(templates, "implementation", tmp_path / "repo")
    wt = repo.worktree(TASK)
    db = repo.path / ".taskgate" / "state.db"
    # In place: no report, nothing recorded; the client is registered for the door.
    run = claude.run("where were we?", wt, [say("ok")], session=OWNER, output="stream-json")
    assert REPORT not in claude.mock.main[0].all_text()
    assert _recorded(db) == []
    registry = Path(peers.registry(repo.path / ".taskgate"))
    sessions = [json.loads(f.read_text()) for f in registry.glob("*.json")]
    assert [(s["kind"], s["session"]) for s in sessions] == [("client", OWNER)]

    data = json.loads(hooks_installed.read_text())
    del data["hooks"]["PreToolUse"]  # what `hooks uninstall` in pieces, or an editor, leaves
    hooks_installed.write_text(json.dumps(data, indent=2))
    claude.mock.requests.clear()
    run = claude.run("go on", wt, [say("ok")], "--resume", OWNER, output="stream-json")
    context = claude.mock.main[0].all_text()
    assert REPORT in context and "the PreToolUse entry was removed" in context
    assert str(hooks_installed) in context and "[R-REC-14]" in context
    # The client took the answer (systemMessage included) as a successful hook response.
    responses = [
        e
        for e in map(json.loads, run.out.splitlines())
        if e.get("subtype") == "hook_response" and e.get("hook_event") == "SessionStart"
    ]
    assert [r["outcome"] for r in responses] == ["success"], responses
    answer = json.loads(responses[0]["output"])
    assert "the PreToolUse entry was removed" in answer["systemMessage"]
    [(trail, payload)] = _recorded(db)
    assert trail == TASK and payload["session"] == OWNER and payload["source"] == "resume"
    audit = repo.run("audit", TASK, "--json")
    assert audit.code == 1
    guards = next(c for c in audit.json()["tasks"][0]["checks"] if c["id"] == "guards")
    assert "the PreToolUse entry was removed" in guards["findings"][0]["evidence"]
    assert os.path.isdir(registry)
