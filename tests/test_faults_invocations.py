"""An agent's verdict and its completion are one step; a dead invocation never blocks (issue 16).

`taskgate run` records the process of every invocation it opens. Killed at the old boundary
between a reviewer's verdict and its completion record (failpoint `agent:after-verdict`, now
inside the one transaction), the store holds neither; the person's next command — a manual
one, not `run` — closes the invocations whose process is provably gone as interrupted, with an
`agent_completed` event, and `recover` names them before that. On both stores (SQLite and a
real PostgreSQL server, tests/store_kinds.py; issue 20).
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

from conftest import Repo
from store_kinds import kind_fixture, query  # noqa: F401
from test_faults_resume import SLUG, _finished
from test_run import sample


def _events(repo: Repo, kind: str) -> list[dict[str, object]]:
    sql = "SELECT payload FROM events WHERE task = ? AND kind = ? ORDER BY seq"
    return [json.loads(r["payload"]) for r in query(repo.path, sql, SLUG, kind)]


def _kinds(repo: Repo) -> list[tuple[str, str]]:
    sql = "SELECT kind, payload FROM events WHERE task = ? ORDER BY seq"
    return [(r["kind"], r["payload"]) for r in query(repo.path, sql, SLUG)]


def _open(repo: Repo) -> dict[str, dict[str, object]]:
    """agent -> its open `agent_invoked` payload, read from the store."""
    rows = _kinds(repo)
    running: dict[str, dict[str, object]] = {}
    for kind, payload in rows:
        data = json.loads(payload)
        if kind == "agent_invoked":
            running[str(data["agent"])] = data
        elif kind == "agent_completed":
            running.pop(str(data["agent"]), None)
    return running


def _killed_in_review(tmp_path: Path) -> tuple[Repo, list[str]]:
    repo = sample(tmp_path)
    killed = repo.run("run", SLUG, "--yes", session="run",
                      env={"TASKGATE_FAILPOINT": "agent:after-verdict"})  # fmt: skip
    assert killed.code == -signal.SIGKILL
    status = repo.ok("status", SLUG, "--json", session="run").json()
    assert status["state"] == "REVIEW"
    return repo, list(status["required_agents"])


def test_a_kill_at_the_verdict_boundary_leaves_neither_verdict_nor_completion(
    tmp_path: Path, store_kind: str
) -> None:
    repo, reviewers = _killed_in_review(tmp_path)
    # The killed step wrote nothing: no verdict without its completion (before issue 16 the
    # first reviewer's verdict was committed with its invocation still running).
    assert repo.ok("status", SLUG, "--json", session="run").json()["verdicts"] == []
    assert not _events(repo, "verdict")
    running = _open(repo)
    assert sorted(running) == sorted(reviewers)
    assert all(isinstance(p.get("pid"), int) and p.get("pid_started") for p in running.values())
    # recover names the dead invocations (diagnosis only: nothing is written).
    diag = repo.run("recover", SLUG, "--json", session="run")
    assert "interrupted agent invocation" in diag.out, diag.out
    for agent in reviewers:
        assert agent in diag.out
    assert sorted(_open(repo)) == sorted(reviewers)


def test_the_next_manual_command_closes_dead_invocations_and_the_task_finishes(
    tmp_path: Path, store_kind: str
) -> None:
    repo, reviewers = _killed_in_review(tmp_path)
    first, *others = reviewers
    repo.ok("agent", "verdict", SLUG, first, "APPROVED", session="run")
    assert _open(repo) == {}  # closed by that command, before its own write
    closed = [e for e in _events(repo, "agent_completed") if e.get("interrupted")]
    assert sorted(str(e["agent"]) for e in closed) == sorted(reviewers)
    assert all("gone" in str(e["message"]) for e in closed)
    for agent in others:
        repo.ok("agent", "verdict", SLUG, agent, "APPROVED", session="run")
    repo.ok("transition", SLUG, "AWAITING_USER_APPROVAL", session="run")
    repo.ok("present", SLUG, session="run")
    repo.ok("approve", SLUG, "changes", session="run")
    repo.ok("complete", SLUG, session="run")
    repo.ok("cleanup", SLUG, session="run")
    _finished(repo, SLUG, commits=2)


def test_a_refused_command_still_closes_dead_invocations(tmp_path: Path, store_kind: str) -> None:
    """The closing stands on its own: a command refused for another reason keeps it."""
    repo, _reviewers = _killed_in_review(tmp_path)
    refused = repo.run("transition", SLUG, "COMPLETE", session="run")
    assert refused.code == 1, refused.out + refused.err  # no such move from REVIEW
    assert _open(repo) == {}
    assert repo.ok("status", SLUG, "--json", session="run").json()["state"] == "REVIEW"


def test_run_resumes_after_the_kill_and_records_verdicts_with_completions(
    tmp_path: Path, store_kind: str
) -> None:
    repo, _reviewers = _killed_in_review(tmp_path)
    repo.ok("run", SLUG, "--yes", session="run")
    _finished(repo, SLUG, commits=2)
    # Every verdict event is followed, in the same step, by its reviewer's completion.
    rows = _kinds(repo)
    for n, (kind, payload) in enumerate(rows):
        if kind == "verdict":
            agent = json.loads(payload)["agent"]
            following = [(k, json.loads(p)) for k, p in rows[n + 1 : n + 3]]
            assert ("agent_completed", agent) in [(k, p.get("agent")) for k, p in following]


def test_a_manual_invocation_is_never_closed_for_a_missing_process(
    tmp_path: Path, store_kind: str
) -> None:
    """`agent set WORKING` by hand names no process: only its session closes it."""
    repo, reviewers = _killed_in_review(tmp_path)
    repo.ok("agent", "verdict", SLUG, reviewers[0], "APPROVED", session="run")  # closes run's
    repo.ok("agent", "set", SLUG, reviewers[0], "WORKING", session="run")
    repo.ok("agent", "verdict", SLUG, reviewers[1], "APPROVED", session="run")
    assert list(_open(repo)) == [reviewers[0]]
    assert "pid" not in _open(repo)[reviewers[0]]
