"""`run` records that the plan was written in the step that presents it (issue 18; a step of
its own before): the store holds what the two steps wrote, and when the presentation is
refused the fact is recorded on its own, as before."""

from __future__ import annotations

import json
import signal
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from conftest import Repo
from store_kinds import query
from taskgate.engine import checkpoints
from taskgate.engine.core import Engine
from taskgate.engine.workspace import find_workspace
from taskgate.errors import Refused
from taskgate.orchestrator import notes
from test_faults_resume import SLUG
from test_run import sample

AT = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
FACT = ("plan_written", {"plan_written_at": "2026-11-26T12:00:00Z"})


@pytest.fixture(autouse=True)
def _fixed_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASKGATE_FAKE_NOW", AT.isoformat())


def _in_synthesis(path: Path, plan: str) -> Repo:
    repo = sample(path)
    killed = repo.run("run", SLUG, "--yes", session="run",
                      env={"TASKGATE_FAILPOINT": "run:SYNTHESIS"})  # fmt: skip
    assert killed.code == -signal.SIGKILL
    if plan:
        (repo.task_dir(SLUG) / "task.md").write_text(plan)
    return repo


def _state(repo: Repo) -> dict[str, Any]:
    root = str(repo.path)

    def rows(sql: str) -> list[dict[str, Any]]:
        found = [dict(r) for r in query(repo.path, sql, SLUG)]
        text = json.dumps(found).replace(root, "<repo>")
        for sha in {r["base_sha"] for r in query(repo.path, "SELECT base_sha FROM tasks")}:
            text = text.replace(sha, "<base>")
        return json.loads(text)

    # a killed run's process, and the shown text's hash (the text names the repository's path)
    differ = ("pid", "pid_started", "text_sha256")
    events = [
        {k: v for k, v in e.items() if k not in ("hash", "prev_hash", "payload")}
        | {"payload": {k: v for k, v in json.loads(e["payload"]).items() if k not in differ}}
        for e in rows("SELECT * FROM events WHERE task = ? ORDER BY seq")
    ]
    task = [  # the killed run's process differs between the two repositories
        {k: v for k, v in t.items() if k not in ("owner_pid", "owner_started")}
        for t in rows("SELECT * FROM tasks WHERE name = ?")
    ]
    return {"task": task, "events": events,
            "presentations": rows("SELECT * FROM presentations WHERE task = ?")}  # fmt: skip


def _apply(repo: Repo, merged: bool) -> tuple[dict[str, Any], str]:
    engine = Engine(find_workspace(repo.path), session_id="run", cwd=repo.path,
                    clock=lambda: AT)  # fmt: skip
    error = ""
    try:
        if merged:
            checkpoints.present(engine, SLUG, facts=FACT)
        else:  # `run` before issue 18
            notes.set_extra(engine, SLUG, FACT[0], **FACT[1])
            checkpoints.present(engine, SLUG)
    except Refused as exc:
        error = exc.message
    finally:
        engine.close()
    return _state(repo), error


@pytest.mark.parametrize("with_plan", [True, False])
def test_the_fact_and_the_presentation_are_what_two_steps_wrote(
    tmp_path: Path, with_plan: bool
) -> None:
    plan = ""
    if with_plan:  # the scripted architect's plan, from a run stopped at the plan checkpoint
        source = sample(tmp_path / "source", auto=False)
        assert source.run("run", SLUG, session="run").code == 4
        plan = (source.task_dir(SLUG) / "task.md").read_text()
    one = _in_synthesis(tmp_path / "one", plan)
    two = _in_synthesis(tmp_path / "two", plan)
    merged, merged_error = _apply(one, merged=True)
    separate, separate_error = _apply(two, merged=False)
    assert merged_error == separate_error
    assert bool(merged_error) is not with_plan  # no plan: the presentation is refused
    for key in ("task", "events", "presentations"):
        assert merged[key] == separate[key], key
    kinds = [e["kind"] for e in merged["events"]]
    assert "plan_written" in kinds
    assert ("presentation" in kinds) is with_plan
