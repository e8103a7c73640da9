"""`taskgate cleanup`: never loses work; quarantine; idempotent (RULES §14, R-CMP-08)."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from conftest import Repo, git, make_repo
from flow import agents_of, commit_in, to_complete
from test_complete import TASK, approved_repo


@pytest.fixture
def crepo(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Repo:
    """add-login in COMPLETE (merged into main)."""
    repo = approved_repo(tmp_path_factory, tmp_path / "repo")
    repo.ok("complete", TASK)
    return repo


def branches(repo: Repo) -> set[str]:
    """Local branch names."""
    return set(repo.git("for-each-ref", "--format=%(refname:short)", "refs/heads").split())


def assert_cleaned(repo: Repo, agents: list[str]) -> None:
    """R-CLN-03/04/06: worktrees and branches gone, the task directory kept, lock released."""
    assert repo.git("worktree", "list", "--porcelain").count("worktree ") == 1
    assert branches(repo) == {"main"}
    task_dir = repo.task_dir(TASK)
    for kept in ("task.md", "task.json", "audit-trail.json", "archival-complete.flag"):
        assert (task_dir / kept).exists(), kept
    assert list(task_dir.glob(f"{TASK}-*-requirements.md"))
    assert not (task_dir / "code").exists()
    for agent in agents:
        assert not (task_dir / "agents" / agent / "code").exists()
    view = json.loads((task_dir / "task.json").read_text())
    assert view["state"] == "CLEANUP" and view["lock_released_at"] and view["cleanup_timestamp"]
    git(repo.path, "fsck", "--no-progress")


def test_cleanup_end_to_end_and_idempotent(crepo: Repo) -> None:
    agents = agents_of(crepo, TASK)
    out = crepo.ok("cleanup", TASK, "--json").json()
    assert out["state"] == "CLEANUP"
    assert set(out["deleted_branches"]) == {TASK, *(f"{TASK}-{a}" for a in agents)}
    # R-CMP-08: main is the validated tree plus the archival edit, so that validation stands
    # (issue 17: one suite run per task, not two)
    assert out["main_build"]["result"] == "UNCHANGED"
    assert set(out["main_build"]["differs_only_in"]) <= {"todo.md", "changelog.md"}
    assert_cleaned(crepo, agents)
    again = crepo.ok("cleanup", TASK, "--json").json()
    assert again["already_clean"] is True
    todo = {r["task"]: r["availability"] for r in crepo.ok("todo", "--json").json()}
    assert todo["needs-login"] == "available"
    trail = json.loads((crepo.task_dir(TASK) / "audit-trail.json").read_text())
    assert any(v.get("on_main") for v in trail["build_verifications"])


def test_cleanup_refuses_unmerged_agent_commit(crepo: Repo) -> None:
    agent = agents_of(crepo, TASK)[0]
    wt = crepo.task_dir(TASK) / "agents" / agent / "code"
    sha = commit_in(wt, "late.py", "x = 1\n", f"[agent:{agent}] late work")
    result = crepo.run("cleanup", TASK)
    assert result.code == 1 and "R-CLN-03" in result.err
    assert f"{TASK}-{agent}: unmerged commit {sha[:7]}" in result.err
    assert "--quarantine" in result.err
    assert f"{TASK}-{agent}" in branches(crepo) and (wt / "late.py").exists()
    assert crepo.ok("status", TASK, "--json").json()["state"] == "COMPLETE"


def test_cleanup_refuses_dirty_worktree(crepo: Repo) -> None:
    agent = agents_of(crepo, TASK)[-1]
    wt = crepo.task_dir(TASK) / "agents" / agent / "code"
    (wt / "notes.txt").write_text("uncommitted thoughts\n")
    result = crepo.run("cleanup", TASK)
    assert result.code == 1 and "uncommitted notes.txt" in result.err
    assert (wt / "notes.txt").read_text() == "uncommitted thoughts\n"
    assert crepo.ok("status", TASK, "--json").json()["state"] == "COMPLETE"


def test_quarantine_keeps_the_work(crepo: Repo) -> None:
    agents = agents_of(crepo, TASK)
    first, last = agents[0], agents[-1]
    wt1 = crepo.task_dir(TASK) / "agents" / first / "code"
    sha = commit_in(wt1, "late.py", "x = 1\n", f"[agent:{first}] late work")
    wt2 = crepo.task_dir(TASK) / "agents" / last / "code"
    (wt2 / "notes.txt").write_text("uncommitted thoughts\n")
    out = crepo.ok("cleanup", TASK, "--quarantine", "--json").json()
    refs = out["quarantined"]
    assert set(refs) == {f"{TASK}-{first}", f"{TASK}-{last}"}
    assert refs[f"{TASK}-{first}"].startswith(f"refs/taskgate/quarantine/{TASK}-{first}-")
    assert crepo.git("rev-parse", refs[f"{TASK}-{first}"]) == sha
    kept = crepo.git("show", f"{refs[f'{TASK}-{last}']}:notes.txt")
    assert kept == "uncommitted thoughts"
    assert_cleaned(crepo, agents)


@pytest.mark.parametrize(
    "point",
    [
        "cleanup:after-transition",
        "cleanup:after-quarantine",
        "cleanup:after-worktree",
        "cleanup:after-branches",
        "step:after-commit",
    ],
)
def test_kill_during_cleanup_then_resume(crepo: Repo, point: str) -> None:
    agents = agents_of(crepo, TASK)
    crashed = crepo.run("cleanup", TASK, env={"TASKGATE_FAILPOINT": point})
    assert crashed.code == -signal.SIGKILL
    crepo.ok("cleanup", TASK)
    assert_cleaned(crepo, agents)


def test_cleanup_before_complete_is_refused(tmp_path_factory: pytest.TempPathFactory,
                                            tmp_path: Path) -> None:  # fmt: skip
    repo = approved_repo(tmp_path_factory, tmp_path / "r")
    result = repo.run("cleanup", TASK)
    assert result.code == 1 and "R-TRN-19" in result.err and "taskgate complete" in result.err
    assert TASK in branches(repo)


def test_failing_build_on_main_blocks_cleanup(tmp_path: Path) -> None:
    """R-CMP-08 / C-83: a build that breaks only after the merge escalates (exit 4). Here
    only the archival edit breaks it, so the project declares it part of the build."""
    script = (
        "import os, sys; sys.exit(os.path.exists('changelog.md') "
        "and 'add-login' in open('changelog.md').read())"
    )
    config = (
        f'[validation]\ncommands = [["python3", "-c", "{script}"]]\nrebuild_on_main = "always"\n'
    )
    repo = make_repo(tmp_path / "r", config=config)
    to_complete(repo, TASK)
    result = repo.run("cleanup", TASK)
    assert result.code == 4 and "R-CMP-08" in result.err and "Please advise" in result.err
    status = repo.ok("status", TASK, "--json").json()
    assert status["state"] == "COMPLETE"
    assert TASK in branches(repo)


def _counting(tmp_path: Path) -> tuple[str, Path]:
    """A [validation] that counts its runs outside the repository and fails on main/BROKEN."""
    runs = tmp_path / "runs.log"
    script = (
        f"import os, sys; open({str(runs)!r}, 'a').write('run '); "
        "sys.exit(os.path.exists('BROKEN'))"
    )
    # counting outside the repository is a write the agents' sandbox refuses (issue 14)
    unconfined = '[agents]\nsandbox = "none"\n\n'
    return f'{unconfined}[validation]\ncommands = [["python3", "-c", "{script}"]]\n', runs


def test_main_as_validated_costs_no_second_suite_run(tmp_path: Path) -> None:
    """Issue 17 (Measure): main is the validated commit plus todo.md/changelog.md, so cleanup
    records that validation instead of running the whole suite again."""
    config, runs = _counting(tmp_path)
    repo = make_repo(tmp_path / "r", config=config)
    to_complete(repo, TASK)
    before = runs.read_text().count("run")
    assert before >= 1
    out = repo.ok("cleanup", TASK, "--json").json()
    assert runs.read_text().count("run") == before  # no run on main
    build = out["main_build"]
    assert build["result"] == "UNCHANGED" and build["on_main"] is True
    validated = [
        e for e in _events(repo, "validation") if not e.get("on_main") and e["result"] == "SUCCESS"
    ]
    assert build["validated_sha"] == validated[-1]["head_sha"]
    assert build["head_sha"] == git(repo.path, "rev-parse", "main")
    trail = json.loads((repo.task_dir(TASK) / "audit-trail.json").read_text())
    assert [v["result"] for v in trail["build_verifications"] if v.get("on_main")] == ["UNCHANGED"]


def test_a_change_on_main_after_complete_is_still_built(tmp_path: Path) -> None:
    """The guarantee stays where it matters: any other difference from the validated tree (a
    person's commit, another task merged) runs the build on main, which can fail."""
    config, runs = _counting(tmp_path)
    repo = make_repo(tmp_path / "r", config=config)
    to_complete(repo, TASK)
    before = runs.read_text().count("run")
    (repo.path / "BROKEN").write_text("x\n")
    git(repo.path, "add", "BROKEN")
    git(repo.path, "commit", "-qm", "a person's change on main")
    result = repo.run("cleanup", TASK)
    assert result.code == 4 and "R-CMP-08" in result.err
    assert runs.read_text().count("run") == before + 1
    assert repo.ok("status", TASK, "--json").json()["state"] == "COMPLETE"


def test_rebuild_on_main_always_runs_the_suite_again(tmp_path: Path) -> None:
    config, runs = _counting(tmp_path)
    repo = make_repo(tmp_path / "r", config=config + 'rebuild_on_main = "always"\n')
    to_complete(repo, TASK)
    before = runs.read_text().count("run")
    assert repo.ok("cleanup", TASK, "--json").json()["main_build"]["result"] == "SUCCESS"
    assert runs.read_text().count("run") == before + 1
    bad = make_repo(tmp_path / "bad", config=config + 'rebuild_on_main = "never"\n')
    wrong = bad.run("todo")
    assert wrong.code == 2 and "rebuild_on_main" in wrong.err


def _events(repo: Repo, kind: str) -> list[dict[str, Any]]:
    """Payloads of `kind` events (from the store), oldest first."""
    import sqlite3

    db = repo.path / ".taskgate" / "state.db"
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT payload FROM events WHERE kind = ? ORDER BY seq", (kind,))
        return [json.loads(r[0]) for r in rows]
    finally:
        con.close()


def test_a_commit_on_t_after_complete_has_a_way_out(crepo: Repo) -> None:
    """Issue 16: a commit on T after COMPLETE got R-CLN-01 "run taskgate complete", and
    complete says it is done: a circle. Cleanup now names the commit and the hint works."""
    late = commit_in(crepo.worktree(TASK), "late.txt", "after the merge\n", "[agent:main] late")
    merged = crepo.git("rev-parse", "main")
    refused = crepo.run("cleanup", TASK)
    assert refused.code == 1, refused.err
    text = " ".join(refused.err.split())
    assert late[:7] in text and "R-CLN-03" in text
    assert "taskgate complete" not in text  # not the circle
    assert f"taskgate cleanup {TASK} --quarantine" in text
    assert crepo.ok("status", TASK, "--json").json()["state"] == "COMPLETE"
    assert git(crepo.worktree(TASK), "rev-parse", "HEAD") == late  # nothing was touched
    crepo.ok("cleanup", TASK, "--quarantine")  # follow the hint
    assert crepo.ok("status", TASK, "--json").json()["state"] == "CLEANUP"
    refs = f"refs/taskgate/quarantine/{TASK}-*"
    kept = crepo.git("for-each-ref", "--format=%(objectname)", refs).split()
    assert kept and git(crepo.path, "merge-base", "--is-ancestor", late, kept[0]) == ""
    assert git(crepo.path, "merge-base", "--is-ancestor", merged, "main") == ""
    crepo.ok("audit", TASK)
