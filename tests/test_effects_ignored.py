"""The net watches ignored files too (issue 15): while the main agent of add-login may not
write its worktree, an ignored file written there (`.env`, build output) is found, kept in the
quarantine commit, put back (its old content, when the baseline kept a copy) and fails audit;
disposable caches (`[cleanup] disposable`, test tools' caches) are not watched. Real hooks,
real git, the real CLI."""

from __future__ import annotations

from pathlib import Path

from conftest import Repo
from flow import agents_of, implementation_fixtures
from test_hooks_corpus_effects import (
    TASK,
    audit_failed_on_effects,
    events,
    git,
    post,
    pre,
    quarantine_refs,
)

implementation, impl = implementation_fixtures("ignored", TASK)


EXCLUDE = ".env\n*.log\nout/\ndata/\ngen/\nbig.bin\n__pycache__/\n.pytest_cache/\n.hypothesis/\n"


def ignoring(repo: Repo) -> Path:
    """The task worktree, with ignore patterns (info/exclude: every worktree) and an ignored
    `.env` and `data/` that exist before the baseline."""
    (repo.path / ".git" / "info").mkdir(exist_ok=True)
    (repo.path / ".git" / "info" / "exclude").write_text(EXCLUDE)
    tree = repo.worktree(TASK)
    (tree / ".env").write_text("SECRET=1\n")
    (tree / "data" / "sub").mkdir(parents=True)
    (tree / "data" / "sub" / "rows.csv").write_text("a,b\n")
    return tree


def test_ignored_files_written_are_caught_kept_and_put_back(impl: Repo) -> None:
    tree = ignoring(impl)
    assert pre(impl, "make -n") == ("allow", "")
    (tree / ".env").write_text("SECRET=2\n")
    (tree / "app.log").write_text("log\n")
    (tree / "out").mkdir()
    (tree / "out" / "bundle.js").write_text("shipped()\n")
    (tree / "data" / "sub" / "rows.csv").write_text("forged\n")
    text = post(impl, "make -n")
    assert text.startswith("[R-"), text
    assert ".env: ignored file changed" in text
    # on disk: put back as the baseline had it
    assert (tree / ".env").read_text() == "SECRET=1\n"
    assert (tree / "data" / "sub" / "rows.csv").read_text() == "a,b\n"
    assert not (tree / "app.log").exists() and not (tree / "out").exists()
    # kept, not lost: the quarantine commit holds what was found
    [ref] = quarantine_refs(impl)
    assert git(impl.path, "show", f"{ref}:.env") == "SECRET=2"
    assert git(impl.path, "show", f"{ref}:out/bundle.js") == "shipped()"
    assert git(impl.path, "show", f"{ref}:app.log") == "log"
    assert git(impl.path, "show", f"{ref}:data/sub/rows.csv") == "forged"
    # recorded, failing audit until the person resolves it
    [violation] = events(impl, "effect_violation")
    assert {".env: ignored file changed", "out/bundle.js: ignored file created",
            "app.log: ignored file created"} <= set(violation["changes"])  # fmt: skip
    assert audit_failed_on_effects(impl)
    impl.ok("violations", TASK, "--resolve", violation["id"], "--reason", "seen")
    assert not audit_failed_on_effects(impl)
    assert post(impl, "make -n") == ""  # the baseline follows the restored worktree


def test_a_removed_ignored_file_comes_back(impl: Repo) -> None:
    tree = ignoring(impl)
    assert pre(impl, "make -n") == ("allow", "")
    (tree / ".env").unlink()
    text = post(impl, "make -n")
    assert ".env: ignored file removed" in text
    assert (tree / ".env").read_text() == "SECRET=1\n"
    assert audit_failed_on_effects(impl)


def test_disposable_caches_are_not_watched(impl: Repo) -> None:
    """A test run's caches (`__pycache__`, `.pytest_cache`, `.hypothesis`) and configured
    disposable paths (`gen` here) may change freely: no violation, nothing moved."""
    tree = ignoring(impl)
    (impl.path / "taskgate.toml").write_text('[cleanup]\ndisposable = ["__pycache__", "gen"]\n')
    assert pre(impl, "make -n") == ("allow", "")
    for rel in ("__pycache__/m.cpython-311.pyc", ".pytest_cache/v/cache/lastfailed",
                ".hypothesis/examples/x", "gen/code.py", "src/__pycache__/n.pyc"):  # fmt: skip
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text("cache\n")
    assert post(impl, "make -n") == ""
    assert events(impl, "effect_violation") == []
    assert (tree / "gen" / "code.py").exists()
    assert not audit_failed_on_effects(impl)


def test_a_large_ignored_file_is_kept_and_left_as_found(impl: Repo) -> None:
    """The baseline keeps copies of small ignored files only: a large one that changed is in
    the quarantine and left as found, and the agent is told."""
    tree = ignoring(impl)
    (tree / "big.bin").write_bytes(b"a" * (1 << 20) + b"old")
    assert pre(impl, "make -n") == ("allow", "")
    (tree / "big.bin").write_bytes(b"b" * (1 << 20) + b"new")
    text = post(impl, "make -n")
    assert "big.bin: ignored file changed" in text and "Left as found" in text
    [ref] = quarantine_refs(impl)
    assert git(impl.path, "cat-file", "-s", f"{ref}:big.bin") == str((1 << 20) + 3)
    [violation] = events(impl, "effect_violation")
    assert violation["left"] == ["big.bin"]
    assert "left as found (no copy of the old content): big.bin" in impl.ok("violations", TASK).out
    assert audit_failed_on_effects(impl)


def test_an_ignored_file_written_outside_any_hook_is_caught_by_the_next_command(
    impl: Repo,
) -> None:
    """Another terminal rewrites `.env`: the next taskgate step on the task puts it back."""
    tree = ignoring(impl)
    assert pre(impl, "git status") == ("allow", "")
    (tree / ".env").write_text("SECRET=from another terminal\n")
    impl.ok("agent", "set", TASK, agents_of(impl, TASK)[0], "WORKING")
    assert (tree / ".env").read_text() == "SECRET=1\n"
    [violation] = events(impl, "effect_violation")
    assert violation["source"] == "taskgate command"
    assert ".env: ignored file changed" in violation["changes"]
    [ref] = quarantine_refs(impl)
    assert git(impl.path, "show", f"{ref}:.env") == "SECRET=from another terminal"
    assert audit_failed_on_effects(impl)
