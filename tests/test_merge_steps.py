"""`merge` journals its git merges in the store (begin, then done), and takes the journal step
only when a git merge will run (issue 18): with every agent branch already in T it is one
step, and the trail is as before (an `agent_merge` event naming nothing merged)."""

from __future__ import annotations

import json
import signal

from conftest import Repo
from flow import commit_in
from store_kinds import query
from test_merge import TASK, agent_wt, irepo, two_agents  # noqa: F401


def _seq(repo: Repo) -> int:
    return int(query(repo.path, "SELECT seq FROM tasks WHERE name = ?", TASK)[0]["seq"])


def _kinds_after(repo: Repo, seq: int) -> list[str]:
    sql = "SELECT kind FROM events WHERE task = ? AND seq > ? ORDER BY seq"
    return [r["kind"] for r in query(repo.path, sql, TASK, seq)]


def _last_event(repo: Repo) -> int:
    sql = "SELECT MAX(seq) AS top FROM events WHERE task = ?"
    return int(query(repo.path, sql, TASK)[0]["top"])


def test_nothing_to_merge_is_one_step_with_the_same_trail(irepo: Repo) -> None:  # noqa: F811
    a, b = two_agents(irepo)
    seq, top = _seq(irepo), _last_event(irepo)
    out = irepo.ok("merge", TASK, "--json").json()
    assert out["merged"] == [] and {a, b} <= set(out["up_to_date"])
    assert _seq(irepo) == seq + 1  # no journal step: no git merge ran
    assert _kinds_after(irepo, top) == ["agent_merge"]
    status = irepo.ok("status", TASK, "--json").json()
    assert status["pending"] is None
    event = query(irepo.path, "SELECT payload FROM events WHERE seq = ?", top + 1)[0]
    assert json.loads(event["payload"])["merged"] == []


def test_a_merge_is_journaled_before_git_and_resumed_after_a_kill(irepo: Repo) -> None:  # noqa: F811
    a, b = two_agents(irepo)
    # a's branch is in T already, b's is not: the first branch to merge is b's.
    sha_b = commit_in(agent_wt(irepo, b), "src/b.py", "B = 1\n", f"[agent:{b}] add b")
    seq = _seq(irepo)
    crashed = irepo.run("merge", TASK, env={"TASKGATE_FAILPOINT": "merge:after-git"})
    assert crashed.code == -signal.SIGKILL
    journal = irepo.ok("status", TASK, "--json").json()["pending"]
    assert journal["op"] == "merge" and _seq(irepo) == seq + 1  # journaled before the merge
    out = irepo.ok("merge", TASK, "--json").json()
    assert a in out["up_to_date"]
    assert irepo.ok("status", TASK, "--json").json()["pending"] is None
    trail = json.loads((irepo.task_dir(TASK) / "audit-trail.json").read_text())
    assert [c["sha"] for c in trail["commits"]].count(sha_b) == 1
    assert (irepo.worktree(TASK) / "src/b.py").exists()
