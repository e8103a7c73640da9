"""A batch of agents is recorded in one store step (issue 18): `run` marks a batch WORKING with
`agentops.set_working` and records its outcomes with `agentops.finish_many`, one step each
instead of one per agent. Each writes exactly what the step per agent wrote (the same rows,
events and facts; only the task's sequence moves once instead of once per agent), and a
refused batch falls back to a step per agent, so the refusal is the same and the agents before
the refused one stand as they did. Killed inside the step nothing of the batch is written;
killed after it, nothing is lost and no agent is invoked again.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from conftest import Repo, make_repo
from store_kinds import query
from taskgate.engine import agentops
from taskgate.engine.core import Engine
from taskgate.engine.workspace import find_workspace
from taskgate.errors import Refused
from test_faults_resume import SLUG, _finished
from test_run import sample

TASK = "add-login"
AT = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _fixed_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's clock too, so that both repositories hold the same times."""
    monkeypatch.setenv("TASKGATE_FAKE_NOW", AT.isoformat())


def _in_requirements(path: Path, *, working: bool) -> tuple[Repo, list[str]]:
    repo = make_repo(path)
    repo.ok("start", TASK)
    wt = repo.worktree(TASK)
    repo.ok("classify", TASK, cwd=wt)
    repo.ok("transition", TASK, "REQUIREMENTS", cwd=wt)
    agents = list(repo.ok("status", TASK, "--json").json()["required_agents"])[:4]
    for agent in agents:
        if working:
            repo.ok("agent", "set", TASK, agent, "WORKING", cwd=wt)
    return repo, agents


def _engine(repo: Repo) -> Engine:
    return Engine(find_workspace(repo.path), session_id="s1", cwd=repo.path, clock=lambda: AT)


def _report(repo: Repo, agent: str) -> None:
    engine = _engine(repo)
    try:
        path = engine.ws.report_path(TASK, agent)
    finally:
        engine.close()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"# {agent}\n\n" + f"Requirements of {agent}: the login form needs tests.\n" * 8
    )


def _state(repo: Repo) -> dict[str, Any]:
    """Everything the store holds for the task, with the repository's path and the hashes
    (which cover the path) taken out; `seq` separately."""
    root = str(repo.path)
    base = query(repo.path, "SELECT base_sha FROM tasks WHERE name = ?", TASK)[0]["base_sha"]

    def rows(sql: str) -> list[dict[str, Any]]:
        found = [dict(r) for r in query(repo.path, sql, TASK)]
        return json.loads(json.dumps(found).replace(root, "<repo>").replace(base, "<base>"))

    task = rows("SELECT * FROM tasks WHERE name = ?")[0]
    seq = task.pop("seq")
    events = [
        {k: v for k, v in e.items() if k not in ("hash", "prev_hash")}
        for e in rows("SELECT * FROM events WHERE task = ? ORDER BY seq")
    ]
    return {
        "seq": seq,
        "task": task,
        "agents": rows("SELECT * FROM agents WHERE task = ? ORDER BY ord"),
        "verdicts": rows("SELECT * FROM verdicts WHERE task = ?"),
        "events": events,
    }


def _apply(repo: Repo, write: Callable[[Engine], object]) -> tuple[dict[str, Any], str]:
    """The store state after `write` and the message of the error it raised ('' if none)."""
    engine = _engine(repo)
    error = ""
    try:
        write(engine)
    except Refused as exc:
        error = exc.message
    finally:
        engine.close()
    return _state(repo), error


def _sequential(outcomes: list[agentops.Outcome]) -> Callable[[Engine], None]:
    def write(engine: Engine) -> None:
        for o in outcomes:  # `run` before issue 18: a step per agent, stopping at a refusal
            agentops.finish(engine, TASK, o.agent, o.status, message=o.message,
                            work_remaining=o.work_remaining, no_change=o.no_change,
                            commits=o.commits, decision=o.decision, extra=o.extra,
                            uncount=o.uncount)  # fmt: skip

    return write


def _outcomes(agents: list[str]) -> list[agentops.Outcome]:
    # Facts from several agents: each outcome must see the ones recorded before it.
    return [
        agentops.Outcome(
            a,
            "COMPLETE",
            message=f"{a} wrote its report",
            extra={f"scope_{a}": {"n": i}, "last": a},
        )
        for i, a in enumerate(agents)
    ]


@pytest.mark.parametrize("refused", [False, True])
def test_finish_many_writes_what_a_step_per_agent_wrote(tmp_path: Path, refused: bool) -> None:
    one, agents = _in_requirements(tmp_path / "one", working=True)
    each, _ = _in_requirements(tmp_path / "each", working=True)
    for repo in (one, each):
        for agent in agents:
            if not (refused and agent == agents[2]):  # no report: COMPLETE is refused (R-DOC-05)
                _report(repo, agent)
    outcomes = _outcomes(agents)
    before = _state(one)["seq"]
    assert before == _state(each)["seq"]
    batched, batch_error = _apply(one, lambda e: agentops.finish_many(e, TASK, outcomes))
    stepwise, step_error = _apply(each, _sequential(outcomes))
    assert batch_error == step_error
    assert bool(batch_error) is refused
    for key in ("task", "agents", "verdicts", "events"):
        assert batched[key] == stepwise[key], key
    statuses = [a["status"] for a in batched["agents"] if a["agent"] in agents]
    if refused:  # the two before the refused one stand, the one after it was not recorded
        assert statuses == ["COMPLETE", "COMPLETE", "WORKING", "WORKING"]
        assert batched["seq"] == stepwise["seq"] == before + 2
    else:
        assert statuses == ["COMPLETE"] * 4
        assert stepwise["seq"] == before + 4
        assert batched["seq"] == before + 1  # one step for the batch
        assert batched["task"]["extra"].count('"scope_') == 4


def test_set_working_writes_what_a_step_per_agent_wrote(tmp_path: Path) -> None:
    one, agents = _in_requirements(tmp_path / "one", working=False)
    each, _ = _in_requirements(tmp_path / "each", working=False)
    # A retry of an agent already in the phase counts it (R-AST-07); one not yet there does not.
    for repo in (one, each):
        repo.ok("agent", "set", TASK, agents[0], "ERROR", cwd=repo.worktree(TASK))
    retries = {agents[0]: True, agents[1]: False, agents[2]: True}
    before = _state(one)["seq"]

    def stepwise(engine: Engine) -> None:
        for agent, retry in retries.items():
            agentops.set_status(engine, TASK, agent, "WORKING", retry=retry)

    batched, _ = _apply(one, lambda e: agentops.set_working(e, TASK, retries))
    sequential, _ = _apply(each, stepwise)
    assert {k: v for k, v in batched.items() if k != "seq"} == {
        k: v for k, v in sequential.items() if k != "seq"
    }
    rows = {a["agent"]: a for a in batched["agents"]}
    assert [rows[a]["status"] for a in retries] == ["WORKING"] * 3
    assert rows[agents[0]]["retry_count"] == 1
    assert batched["seq"] == before + 1 and sequential["seq"] == before + 3


def _invocations(repo: Repo, mode: str) -> list[str]:
    sql = "SELECT payload FROM events WHERE task = ? AND kind = 'agent_invoked' ORDER BY seq"
    found = [json.loads(r["payload"]) for r in query(repo.path, sql, SLUG)]
    return [str(p["agent"]) for p in found if p.get("mode") == mode]


def test_killed_after_the_reviews_step_nothing_is_lost_and_no_reviewer_runs_again(
    tmp_path: Path,
) -> None:
    repo = sample(tmp_path)
    killed = repo.run("run", SLUG, "--yes", session="run",
                      env={"TASKGATE_FAILPOINT": "run:AWAITING_USER_APPROVAL"})  # fmt: skip
    assert killed.code == -signal.SIGKILL
    status = repo.ok("status", SLUG, "--json", session="run").json()
    reviewers = sorted(status["required_agents"])
    assert sorted(v["agent"] for v in status["verdicts"]) == reviewers  # all committed
    assert sorted(_invocations(repo, "review")) == reviewers
    repo.ok("run", SLUG, "--yes", session="run")
    _finished(repo, SLUG, commits=2)
    assert sorted(_invocations(repo, "review")) == reviewers  # none invoked again


def test_killed_inside_the_reviews_step_no_reviewer_is_recorded_and_each_runs_again(
    tmp_path: Path,
) -> None:
    repo = sample(tmp_path)
    killed = repo.run("run", SLUG, "--yes", session="run",
                      env={"TASKGATE_FAILPOINT": "agent:after-verdict"})  # fmt: skip
    assert killed.code == -signal.SIGKILL
    status = repo.ok("status", SLUG, "--json", session="run").json()
    reviewers = sorted(status["required_agents"])
    assert len(reviewers) > 1 and status["verdicts"] == []  # the batch: all or nothing
    assert [a["status"] for a in status["agents"]] == ["WORKING"] * len(reviewers)
    repo.ok("run", SLUG, "--yes", session="run")
    _finished(repo, SLUG, commits=2)
    assert sorted(_invocations(repo, "review")) == sorted(reviewers * 2)
