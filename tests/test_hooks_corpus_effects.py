"""The net (issue 15): whatever a command looked like, a change the main agent may not make is
found by comparing effects, moved aside into a quarantine ref, recorded, reported, and fails
`taskgate audit` until the person resolves it. Real hook processes, real git, the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Repo
from flow import agents_of, copy_repo, implementation_template
from test_hooks_dispatch import TASK, decision, fixture, hook


@pytest.fixture(scope="module")
def implementation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A repository with add-login in IMPLEMENTATION (session s1), fix-typo held by s2."""
    with implementation_template(tmp_path_factory, "impl", TASK, second=True) as repo:
        yield repo.path


@pytest.fixture
def impl(implementation: Path, tmp_path: Path) -> Repo:
    """A private copy of the IMPLEMENTATION repository."""
    return copy_repo(implementation, tmp_path / "repo")


def git(cwd: Path, *args: str) -> str:
    """stdout of a git command (it must succeed)."""
    out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def pre(repo: Repo, command: str, cwd: Path | None = None) -> tuple[str, str]:
    """PreToolUse of a Bash command (the decision)."""
    data = fixture("pre_tool_use_bash", repo, tool_input={"command": command},
                   cwd=str(cwd or repo.path))  # fmt: skip
    return decision(hook(repo, data))


def post(repo: Repo, command: str, cwd: Path | None = None) -> str:
    """PostToolUse of a Bash command: the context injected for the agent ("" when none)."""
    data = fixture("post_tool_use_write", repo, tool_name="Bash",
                   tool_input={"command": command}, cwd=str(cwd or repo.path))  # fmt: skip
    run = hook(repo, data)
    assert run.code == 0, run.err
    if not run.out.strip():
        return ""
    return str(run.json()["hookSpecificOutput"]["additionalContext"])


def run_bash(command: str, cwd: Path) -> None:
    """Run the command as Claude Code's Bash tool would (the hook allowed it)."""
    subprocess.run(["bash", "-c", command], cwd=cwd, check=False, capture_output=True)


def events(repo: Repo, kind: str) -> list[dict[str, Any]]:
    """The task's audit events of one kind (from the store)."""
    import sqlite3

    with sqlite3.connect(repo.path / ".taskgate" / "state.db") as db:
        rows = db.execute(
            "SELECT payload FROM events WHERE task = ? AND kind = ? ORDER BY seq", (TASK, kind)
        ).fetchall()
    return [json.loads(r[0]) for r in rows]


def audit_failed_on_effects(repo: Repo) -> bool:
    """Whether `taskgate audit` fails the task on the effects check."""
    run = repo.run("audit", TASK, "--json")
    [task] = run.json()["tasks"]
    failed = {c["id"] for c in task["checks"] if not c["passed"]}
    return "effects" in failed


def quarantine_refs(repo: Repo) -> list[str]:
    out = git(repo.path, "for-each-ref", "--format=%(refname)", f"refs/taskgate/quarantine/{TASK}")
    return [line for line in out.splitlines() if line]


def test_a_test_run_that_writes_the_worktree_is_caught_and_moved_aside(
    impl: Repo, tmp_path: Path
) -> None:
    """pytest is a test runner (allowed, read-only by prediction); the test it runs writes into
    the task worktree. PostToolUse finds it, moves it aside, restores, records, reports."""
    tree = impl.worktree(TASK)
    head = git(tree, "rev-parse", "HEAD")
    probe = tmp_path / "test_sneaky.py"
    probe.write_text(
        "from pathlib import Path\n"
        f"def test_x():\n    Path({str(tree / 'sneaky.py')!r}).write_text('x = 1\\n')\n"
        f"    Path({str(tree / 'README.md')!r}).write_text('rewritten\\n')\n"
    )
    command = f"cd {tree} && {sys.executable} -m pytest -q -p no:cacheprovider {probe}"
    assert pre(impl, command) == ("allow", "")
    run_bash(command, tree)
    assert (tree / "sneaky.py").exists()
    text = post(impl, command)
    assert text.startswith("[R-AGT-12]"), text
    assert "sneaky.py" in text and "taskgate violations" in text
    # on disk: restored exactly
    assert not (tree / "sneaky.py").exists()
    assert git(tree, "status", "--porcelain") == ""
    assert git(tree, "rev-parse", "HEAD") == head
    # moved aside, not lost
    [ref] = quarantine_refs(impl)
    assert git(impl.path, "show", f"{ref}:sneaky.py") == "x = 1"
    assert git(impl.path, "show", f"{ref}:README.md") == "rewritten"
    # in the store and in audit
    [violation] = events(impl, "effect_violation")
    assert violation["rule"] == "R-AGT-12" and ref == violation["quarantine"] + "/worktree"
    assert audit_failed_on_effects(impl)
    # the agent may not resolve it; the person does
    verdict, reason = pre(impl, f"taskgate violations {TASK} --resolve all")
    assert (verdict, reason[:10]) == ("deny", "[R-CKP-03]")
    listed = impl.ok("violations", TASK).out
    assert "OPEN" in listed and violation["id"] in listed
    impl.ok("violations", TASK, "--resolve", violation["id"], "--reason", "looked at it")
    assert not audit_failed_on_effects(impl)
    assert post(impl, "git status") == ""  # the baseline follows the restored worktree


def test_a_change_from_another_terminal_is_caught_by_the_next_taskgate_command(
    impl: Repo,
) -> None:
    """No hook ran around the change: the next taskgate step on the task finds it first."""
    tree = impl.worktree(TASK)
    assert pre(impl, "git status") == ("allow", "")  # the session is watched from now on
    (tree / "notes.txt").write_text("written outside any hook\n")
    git(tree, "add", "notes.txt")
    git(tree, "commit", "-qm", "sneaked in")
    agent = agents_of(impl, TASK)[0]
    impl.ok("agent", "set", TASK, agent, "WORKING")
    assert not (tree / "notes.txt").exists()
    [violation] = events(impl, "effect_violation")
    assert violation["source"] == "taskgate command"
    assert any("moved" in c for c in violation["changes"])
    [ref] = quarantine_refs(impl)
    assert git(impl.path, "show", f"{ref}:notes.txt") == "written outside any hook"
    assert audit_failed_on_effects(impl)


def test_moving_main_is_put_back(impl: Repo) -> None:
    """A ref write the prediction did not see (here: plumbing by hand) is restored."""
    main_before = git(impl.path, "rev-parse", "main")
    assert pre(impl, "git status") == ("allow", "")
    forged = git(impl.path, "commit-tree", "main^{tree}", "-p", "main", "-m", "not approved")
    git(impl.path, "update-ref", "refs/heads/main", forged)
    # In a guarded session even a plain read is compared (guardcmp): its own PostToolUse
    # finds the move (tests/test_effects_guarded_reads.py: reads that did write).
    text = post(impl, "git log -1")
    assert text.startswith("[R-CMP-01]"), text
    assert post(impl, "make -n") == ""  # put back: nothing left to find
    assert git(impl.path, "rev-parse", "main") == main_before
    [ref] = quarantine_refs(impl)
    assert ref.endswith("/refs/heads/main") and git(impl.path, "rev-parse", ref) == forged
    [violation] = events(impl, "effect_violation")
    assert "main" in violation["refs"]
    assert audit_failed_on_effects(impl)


def test_taskgate_merge_is_not_a_violation(impl: Repo) -> None:
    """taskgate's own work (merging the agents' branches) becomes the new baseline."""
    assert pre(impl, "git status") == ("allow", "")
    agent = agents_of(impl, TASK)[0]
    own = impl.task_dir(TASK) / "agents" / agent / "code"
    (own / "feature.py").write_text("print('feature')\n")
    git(own, "add", "feature.py")
    git(own, "commit", "-qm", f"[agent:{agent}] feature")
    assert pre(impl, f"taskgate merge {TASK}") == ("allow", "")
    impl.ok("merge", TASK)
    assert post(impl, f"taskgate merge {TASK}") == ""
    assert events(impl, "effect_violation") == []
    assert (impl.worktree(TASK) / "feature.py").exists()
    assert not audit_failed_on_effects(impl)
