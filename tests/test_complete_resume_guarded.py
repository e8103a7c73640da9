"""A crashed `taskgate complete` resumed in a guarded session (the effect check, issue 15).

The task waits at AWAITING_USER_APPROVAL with the change approved: the main agent may not
write its task worktree, so its session has a guarded effect baseline. `complete` is killed
at each of its git steps (TASKGATE_FAILPOINT); the crashed call's own PostToolUse and the
resumed `complete` must take taskgate's own archival commit, squash and main's fast-forward
for what they are: nothing quarantined, no `effect_violation`, main delivered, audit passing.
Real git, the real CLI, the installed hook commands.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import Repo
from test_complete import approved_repo, assert_completed
from test_hooks_corpus_effects import (
    audit_failed_on_effects,
    events,
    git,
    post,
    pre,
    quarantine_refs,
)
from test_hooks_dispatch import TASK


@pytest.fixture
def arepo(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Repo:
    """add-login approved at AWAITING_USER_APPROVAL."""
    return approved_repo(tmp_path_factory, tmp_path / "repo")


POINTS = [
    "complete:archival-committed",
    "complete:archival-staged",
    "complete:after-archival",
    "complete:squash-ref-moved",
    "complete:after-squash",
    "complete:main-merged",
]


@pytest.mark.parametrize("point", POINTS)
def test_resumed_complete_is_not_a_violation(arepo: Repo, point: str) -> None:
    tree = arepo.worktree(TASK)
    main_before = arepo.git("rev-parse", "main")
    assert pre(arepo, "git status", cwd=tree) == ("allow", "")  # guarded baseline
    assert (arepo.path / ".taskgate" / "effects" / "s1.json").is_file()
    assert pre(arepo, f"taskgate complete {TASK}") == ("allow", "")
    crashed = arepo.run("complete", TASK, env={"TASKGATE_FAILPOINT": point})
    assert crashed.code == -9, crashed.err
    assert post(arepo, f"taskgate complete {TASK}") == ""  # the killed call's PostToolUse
    assert pre(arepo, f"taskgate complete {TASK}") == ("allow", "")
    arepo.ok("complete", TASK)
    assert post(arepo, f"taskgate complete {TASK}") == ""
    assert_completed(arepo, main_before)
    assert events(arepo, "effect_violation") == []
    assert quarantine_refs(arepo) == []
    assert not audit_failed_on_effects(arepo)
    audit = arepo.run("audit", TASK, "--json")
    [task] = audit.json()["tasks"]
    assert [c["id"] for c in task["checks"] if not c["passed"]] == [], task
    assert audit.code == 0, audit.err
    assert git(tree, "status", "--porcelain") == ""


def test_an_agent_s_edit_of_the_staged_archival_files_is_caught(arepo: Repo) -> None:
    """Adversarial: killed with its archival edit staged, `complete` left todo.md and
    changelog.md changed; the agent adds a line to the changelog. Not the text `complete`
    writes: moved aside and recorded; the resumed `complete` redoes its edit from the approved
    commit and delivers it."""
    tree = arepo.worktree(TASK)
    main_before = arepo.git("rev-parse", "main")
    assert pre(arepo, "git status", cwd=tree) == ("allow", "")
    crashed = arepo.run("complete", TASK, env={"TASKGATE_FAILPOINT": "complete:archival-staged"})
    assert crashed.code == -9, crashed.err
    log = tree / "changelog.md"
    log.write_text(log.read_text() + "- Also: shipped a backdoor\n")
    assert post(arepo, "ls", cwd=tree).startswith("[R-CKP-14]")
    arepo.ok("complete", TASK)
    assert_completed(arepo, main_before)
    assert "backdoor" not in git(arepo.path, "show", "main:changelog.md")
    [ref] = quarantine_refs(arepo)
    assert "backdoor" in git(arepo.path, "show", f"{ref}:changelog.md")
    [violation] = events(arepo, "effect_violation")
    assert "changelog.md: changed" in violation["changes"]
    assert audit_failed_on_effects(arepo)


def test_a_forged_archival_commit_is_caught(arepo: Repo) -> None:
    """Adversarial: after a kill that left taskgate's archival commit, the agent amends it
    with a code change (same subject). Not what `complete` makes (it touches only todo.md and
    changelog.md): moved aside and recorded; the resumed `complete` delivers the approved
    change without it."""
    tree = arepo.worktree(TASK)
    main_before = arepo.git("rev-parse", "main")
    assert pre(arepo, "git status", cwd=tree) == ("allow", "")
    crashed = arepo.run("complete", TASK, env={"TASKGATE_FAILPOINT": POINTS[0]})
    assert crashed.code == -9, crashed.err
    (tree / "sneaky.py").write_text("x = 1\n")
    git(tree, "add", "sneaky.py")
    git(tree, "commit", "-q", "--amend", "--no-edit", "--no-verify")
    assert post(arepo, "ls", cwd=tree).startswith("[R-CKP-14]")
    arepo.ok("complete", TASK)
    assert_completed(arepo, main_before)
    assert "sneaky.py" not in git(arepo.path, "ls-tree", "-r", "--name-only", "main")
    [ref] = quarantine_refs(arepo)
    assert git(arepo.path, "show", f"{ref}:sneaky.py") == "x = 1"
    [violation] = events(arepo, "effect_violation")
    assert violation["rule"] == "R-CKP-14" and violation["source"] == "PostToolUse Bash"
    assert audit_failed_on_effects(arepo)
