"""Cleanup never makes anything unreachable (issue 16): detached HEADs, reflogs, staged work,
stashes, ignored files and nested repositories are kept under a quarantine ref first.

The property test builds random worktree states on a task in COMPLETE and checks that every
object git could reach before cleanup (refs, reflogs, every worktree's HEAD and index) is
still reachable after it, and that every kept file's content is in the quarantine snapshot.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import Repo, git
from flow import agents_of, commit_in, copy_repo
from test_complete import TASK, approved_repo

_TEMPLATE: dict[str, Path] = {}


def complete_template(factory: pytest.TempPathFactory) -> Path:
    """add-login in COMPLETE with `*.secret` ignored, built once per session."""
    if "t" not in _TEMPLATE:
        base = factory.mktemp("faults-template") / "repo"
        repo = approved_repo(factory, base)
        repo.ok("complete", TASK)
        exclude = repo.path / ".git" / "info" / "exclude"
        exclude.write_text(exclude.read_text() + "*.secret\n__pycache__/\n")
        _TEMPLATE["t"] = base
    return _TEMPLATE["t"]


@pytest.fixture
def crepo(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Repo:
    """A fresh copy of the COMPLETE template."""
    return copy_repo(complete_template(tmp_path_factory), tmp_path / "repo")


def reachable(path: Path) -> set[str]:
    """Every object git keeps: refs, reflogs, all worktrees' HEADs and indexes (like gc)."""
    out = git(path, "rev-list", "--objects", "--all", "--reflog", "--indexed-objects")
    return {line.split()[0] for line in out.splitlines() if line}


def blob(path: Path, file: Path) -> str:
    """The blob id a file's content would have."""
    return git(path, "hash-object", str(file))


def _worktrees(repo: Repo) -> list[Path]:
    return [repo.task_dir(TASK) / "agents" / a / "code" for a in agents_of(repo, TASK)] + [
        repo.worktree(TASK)
    ]


def test_detached_head_commit_is_kept(crepo: Repo) -> None:
    """The issue's data loss: a detached HEAD on a commit no branch holds, status clean."""
    wt = _worktrees(crepo)[0]
    sha = commit_in(wt, "lost.py", "x = 1\n", "[agent:a] work")
    git(wt, "checkout", "-q", "--detach")
    git(wt, "branch", "-f", f"{TASK}-{agents_of(crepo, TASK)[0]}", "HEAD~1")
    assert git(wt, "status", "--porcelain") == ""
    refused = crepo.run("cleanup", TASK)
    assert refused.code == 1 and sha[:7] in refused.err and "--quarantine" in refused.err
    assert git(crepo.path, "cat-file", "-t", sha) == "commit"
    out = crepo.ok("cleanup", TASK, "--quarantine", "--json").json()
    ref = next(iter(out["quarantined"].values()))
    git(crepo.path, "merge-base", "--is-ancestor", sha, ref)  # check=True: raises if not kept
    assert crepo.git("show", f"{ref}:lost.py") == "x = 1"


def test_reflog_only_commit_and_ignored_file_are_kept_without_asking(crepo: Repo) -> None:
    """An amended-away commit (only in the reflog) and an ignored `.secret` file are kept
    automatically; a disposable __pycache__ is not."""
    wt = _worktrees(crepo)[-1]  # the task worktree, on the squash (delivered)
    old = commit_in(wt, "draft.py", "draft = 1\n", "draft")
    git(wt, "reset", "-q", "--hard", "HEAD~1")
    (wt / "keys.secret").write_text("token=1\n")
    (wt / "__pycache__").mkdir()
    (wt / "__pycache__" / "m.pyc").write_bytes(b"\0cache")
    secret = blob(crepo.path, wt / "keys.secret")
    out = crepo.ok("cleanup", TASK, "--json").json()
    ref = out["quarantined"][TASK]
    git(crepo.path, "merge-base", "--is-ancestor", old, ref)
    assert crepo.git("rev-parse", f"{ref}:keys.secret") == secret
    assert crepo.git("ls-tree", ref, "__pycache__") == ""
    message = crepo.git("log", "-1", "--format=%B", ref)
    assert "Ignored, kept: keys.secret" in message
    assert not wt.exists()


def test_delivered_history_stays_reachable(crepo: Repo) -> None:
    """The squashed agent commits stay reachable under refs/taskgate/history/<task>."""
    before = reachable(crepo.path)
    crepo.ok("cleanup", TASK)
    after = reachable(crepo.path)
    assert before - after == set()
    assert crepo.git("rev-parse", "--verify", f"refs/taskgate/history/{TASK}")


# -- the property -----------------------------------------------------------------------------

ACTIONS = st.sampled_from(
    ["commit", "detach", "reflog-only", "stash", "staged", "untracked", "ignored", "disposable",
     "nested", "worktree-ref"]
)  # fmt: skip


def _act(repo: Repo, wt: Path, action: str, n: int) -> list[Path]:
    """Apply one random change; returns files whose content must survive."""
    name = f"f{n}"
    if action == "commit":
        commit_in(wt, f"{name}.py", f"v = {n}\n", f"c{n}")
    elif action == "detach":
        commit_in(wt, f"{name}.py", f"d = {n}\n", f"d{n}")
        git(wt, "checkout", "-q", "--detach")
        commit_in(wt, f"{name}b.py", f"e = {n}\n", f"e{n}")
    elif action == "reflog-only":
        commit_in(wt, f"{name}.py", f"r = {n}\n", f"r{n}")
        git(wt, "reset", "-q", "--hard", "HEAD~1")
    elif action == "stash":
        (wt / "README.md").write_text(f"stashed {n}\n")
        git(wt, "stash", "-q")
    elif action == "staged":
        (wt / f"{name}.txt").write_text(f"staged {n}\n")
        git(wt, "add", f"{name}.txt")
        (wt / f"{name}.txt").write_text(f"changed after staging {n}\n")
        return [wt / f"{name}.txt"]
    elif action == "untracked":
        (wt / "notes").mkdir(exist_ok=True)
        (wt / "notes" / f"{name}.md").write_text(f"note {n}\n")
        return [wt / "notes" / f"{name}.md"]
    elif action == "ignored":
        (wt / f"{name}.secret").write_text(f"secret {n}\n")
        return [wt / f"{name}.secret"]
    elif action == "disposable":
        (wt / "__pycache__").mkdir(exist_ok=True)
        (wt / "__pycache__" / f"{name}.pyc").write_bytes(b"\0")
    elif action == "nested":
        nested = wt / f"vendor{n}"
        nested.mkdir()
        git(nested, "init", "-q")
        commit_in(nested, "lib.py", f"lib = {n}\n", "nested")
    elif action == "worktree-ref":
        sha = commit_in(wt, f"{name}.py", f"w = {n}\n", f"w{n}")
        git(wt, "update-ref", f"refs/worktree/keep{n}", sha)
        git(wt, "reset", "-q", "--hard", "HEAD~1")
    return []


def _nested_objects(wt: Path) -> dict[str, set[str]]:
    found = {}
    for top, dirs, _files in os.walk(wt):
        if Path(top) != wt and ".git" in dirs:
            found[Path(top).relative_to(wt).as_posix()] = reachable(Path(top))
            dirs[:] = []
    return found


@settings(
    max_examples=int(os.environ.get("TASKGATE_PROPERTY_EXAMPLES", "12")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plan=st.lists(st.tuples(st.integers(0, 10), ACTIONS), min_size=1, max_size=6))
def test_cleanup_keeps_every_reachable_object(
    tmp_path_factory: pytest.TempPathFactory, plan: list[tuple[int, str]]
) -> None:
    template = complete_template(tmp_path_factory)
    workdir = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
    try:
        repo = copy_repo(template, workdir / "repo")
        wts = _worktrees(repo)
        files: list[Path] = []
        for n, (which, action) in enumerate(plan):
            wt = wts[which % len(wts)]
            if wt == wts[-1] and action in ("commit", "detach", "worktree-ref"):
                # A new commit in the task worktree is refused by R-CLN-01 before anything is
                # removed (tested on its own): keep T's HEAD where complete left it.
                action = "reflog-only"
            files += _act(repo, wt, action, n)
        # What must survive is each file as the last action left it (a later reset in the
        # same worktree may legitimately have changed or removed it).
        kept = [(f, blob(repo.path, f)) for f in files if f.exists()]
        nested = {wt: _nested_objects(wt) for wt in wts}
        before = reachable(repo.path)
        result = repo.run("cleanup", TASK, "--quarantine", "--json")
        assert result.code == 0, result.err
        after = reachable(repo.path)
        assert before - after == set(), f"lost objects after {plan}"
        for _f, sha in kept:
            assert sha in after
        for wt, repos in nested.items():
            for rel, objects in repos.items():
                moved = list(repo.task_dir(TASK).glob(f"kept/*/{rel}"))
                assert len(moved) == 1, (wt, rel)
                assert objects <= reachable(moved[0])
        assert len(git(repo.path, "worktree", "list", "--porcelain").split("worktree ")) == 2
        subprocess.run(["git", "fsck", "--no-progress"], cwd=repo.path, check=True,
                       capture_output=True)  # fmt: skip
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
