"""The effect check's git ignores the configuration the agent can write (effectcfg).

An unconfined agent can write git's configuration outside the worktree (`.git/config`, a
worktree's `config.worktree`, `.git/info/attributes`, `~/.gitconfig` and what it includes) at a
time it was allowed to, and git honours it inside taskgate's own comparison. Each test plants
one piece of such configuration, makes an edit it hides from a plain `git status` (checked
first, so the test shows the hole is real), and asserts that the PostToolUse of the installed
hook command still finds it: moved aside into the quarantine ref, the worktree put back on
disk, an `effect_violation` in the store, `taskgate audit` failing the task on `effects`.

Where the configuration lives in the repository's git dir the test writes it itself (PreToolUse
denies those paths to the agent while it may not write; the agent could have written them
earlier, or through a hole the analyser does not see); `~/.gitconfig` is written through the
Write tool, which PreToolUse allows.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import Repo
from flow import implementation_fixtures
from taskgate import spawn
from taskgate.hooks import gitsafe
from test_effects_guarded_reads import write_tool
from test_hooks_corpus_effects import (
    audit_failed_on_effects,
    events,
    git,
    post,
    pre,
    quarantine_refs,
    run_bash,
)
from test_hooks_dispatch import TASK

implementation, impl = implementation_fixtures("effects-config", TASK)

OLD = 1_600_000_000  # an mtime well before the baseline: git trusts the index's stat data


def plain_status(tree: Path) -> str:
    """What the agent's own `git status` (every configuration honoured) reports."""
    return git(tree, "status", "--porcelain", "--untracked-files=all")


def baseline(repo: Repo, tree: Path) -> tuple[str, str]:
    """(HEAD, README.md's content) when the session's baseline is taken (guarded)."""
    os.utime(tree / "README.md", (OLD, OLD))
    assert pre(repo, "ls", cwd=tree) == ("allow", "")
    assert (repo.path / ".taskgate" / "effects" / "s1.json").is_file()
    return git(tree, "rev-parse", "HEAD"), (tree / "README.md").read_text()


def same_size_edit(tree: Path) -> str:
    """README.md rewritten in place, same size, its mtime kept (`touch -r`), by a Bash line."""
    text = (tree / "README.md").read_text()
    edited = text.swapcase()
    assert edited != text and len(edited) == len(text)
    (tree.parent / "edited").write_text(edited)
    run_bash("touch ../stamp && touch -r README.md ../stamp && cat ../edited > README.md && "
             "touch -r ../stamp README.md", tree)  # fmt: skip
    assert (tree / "README.md").read_text() == edited
    return edited


def assert_caught(repo: Repo, text: str, tree: Path, head: str, path: str, found: str | None,
                  readme: str) -> None:  # fmt: skip
    """This PostToolUse found the change: moved aside, put back, recorded, audited."""
    assert text.startswith("[R-AGT-12]"), text
    assert path in text
    # on disk: put back as the baseline had it
    assert (tree / "README.md").read_text() == readme
    assert os.stat(tree / "README.md").st_mode & 0o111 == 0
    assert git(tree, "rev-parse", "HEAD") == head
    # moved aside, not lost
    [ref] = quarantine_refs(repo)
    if found is not None:
        shown = subprocess.run(
            ["git", "cat-file", "-p", f"{ref}:{path}"],
            cwd=repo.path,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert shown == found
    # in the store and in audit
    [violation] = events(repo, "effect_violation")
    assert violation["rule"] == "R-AGT-12" and ref == violation["quarantine"] + "/worktree"
    assert any(path in change for change in violation["changes"])
    assert audit_failed_on_effects(repo)


def test_a_clean_filter_of_the_agent_s_does_not_hide_an_edit(impl: Repo) -> None:
    """`filter.hide.clean = git show :README.md`, `README.md filter=hide` in info/attributes:
    git filters the edited file back to the index's blob. `required`, so a git that merely
    switched the filter off would die, and the comparison with it."""
    tree = impl.worktree(TASK)
    head, readme = baseline(impl, tree)
    git(impl.path, "config", "filter.hide.clean", "git show :README.md")
    git(impl.path, "config", "filter.hide.required", "true")
    (impl.path / ".git" / "info" / "attributes").write_text("README.md filter=hide\n")
    edited = same_size_edit(tree)
    os.utime(tree / "README.md")  # a new mtime: git re-reads it, through the filter
    assert plain_status(tree) == ""  # hidden from git status as configured
    text = post(impl, "cat README.md", cwd=tree)
    assert_caught(impl, text, tree, head, "README.md", edited, readme)


def test_a_filter_defined_in_an_included_file_is_switched_off_too(impl: Repo) -> None:
    """The driver is defined in a file `~/.gitconfig` includes (through the Write tool,
    which PreToolUse allows), under a condition: every include is read, whatever it says."""
    tree = impl.worktree(TASK)
    head, readme = baseline(impl, tree)
    home = Path(os.environ["HOME"])
    write_tool(impl, home / ".config" / "sneaky", '[filter "hideme"]\n\tclean = git show '
               ":README.md\n")  # fmt: skip
    own = (home / ".gitconfig").read_text()  # the person's identity: kept
    write_tool(impl, home / ".gitconfig", own + '[includeIf "gitdir:/nowhere/"]\n\tpath = x\n'
               "[include]\n\tpath = ~/.config/sneaky ; the agent's\n")  # fmt: skip
    (impl.path / ".git" / "info" / "attributes").write_text("README.md filter=hideme\n")
    edited = same_size_edit(tree)
    os.utime(tree / "README.md")
    assert plain_status(tree) == ""
    assert "hideme" in gitsafe.filter_names(str(tree))
    text = post(impl, "cat README.md", cwd=tree)
    assert_caught(impl, text, tree, head, "README.md", edited, readme)


def test_stat_trust_switched_off_does_not_hide_a_same_size_edit(impl: Repo) -> None:
    """core.trustctime=false and core.checkStat=minimal: an edit that keeps the size and
    restores the mtime is never re-read by a git that trusts those settings."""
    tree = impl.worktree(TASK)
    head, readme = baseline(impl, tree)
    git(impl.path, "config", "core.trustctime", "false")
    git(impl.path, "config", "core.checkStat", "minimal")
    time.sleep(1.1)  # a later second: git compares ctime to the second unless built with NSEC
    edited = same_size_edit(tree)
    assert plain_status(tree) == ""
    text = post(impl, "cat README.md", cwd=tree)
    assert_caught(impl, text, tree, head, "README.md", edited, readme)


def test_core_filemode_false_does_not_hide_a_chmod(impl: Repo) -> None:
    tree = impl.worktree(TASK)
    head, readme = baseline(impl, tree)
    git(impl.path, "config", "core.fileMode", "false")
    run_bash("chmod +x README.md", tree)
    assert os.stat(tree / "README.md").st_mode & 0o100
    assert plain_status(tree) == ""
    text = post(impl, "ls", cwd=tree)
    assert_caught(impl, text, tree, head, "README.md", readme, readme)


def test_core_ignorecase_does_not_hide_a_new_file(impl: Repo) -> None:
    tree = impl.worktree(TASK)
    head, readme = baseline(impl, tree)
    git(impl.path, "config", "core.ignoreCase", "true")
    run_bash("echo 'import os' > readme.md", tree)
    assert plain_status(tree) == ""
    text = post(impl, "ls", cwd=tree)
    assert_caught(impl, text, tree, head, "readme.md", "import os\n", readme)
    assert not (tree / "readme.md").exists()


def test_core_worktree_in_the_worktree_s_config_does_not_point_git_elsewhere(
    impl: Repo, tmp_path: Path
) -> None:
    """`core.worktree` in the task worktree's own config.worktree: git would compare a copy
    of the baseline the agent made, not the worktree."""
    tree = impl.worktree(TASK)
    head, readme = baseline(impl, tree)
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(tree), str(copy)], check=True)
    git(impl.path, "config", "extensions.worktreeConfig", "true")
    git(tree, "config", "--worktree", "core.worktree", str(copy))
    run_bash("echo 'appended' >> README.md", tree)
    assert plain_status(tree) == ""
    text = post(impl, "ls", cwd=tree)
    git(tree, "config", "--worktree", "--unset", "core.worktree")  # the test's own git
    assert_caught(impl, text, tree, head, "README.md", readme + "appended\n", readme)


def test_without_such_configuration_nothing_changes(impl: Repo) -> None:
    """An ordinary repository: its own filters' names only, no false alarm."""
    tree = impl.worktree(TASK)
    assert gitsafe.filter_names(str(tree)) == set()
    baseline(impl, tree)
    assert post(impl, "ls", cwd=tree) == ""
    assert events(impl, "effect_violation") == []


def test_assume_unchanged_set_before_the_baseline_does_not_hide_an_edit(impl: Repo) -> None:
    """The bit set while the agent could still write (its own `git update-index`), the edit
    made once it may not: the comparison's copy of the index has the bit cleared."""
    tree = impl.worktree(TASK)
    run_bash("git update-index --assume-unchanged README.md", tree)
    head, readme = baseline(impl, tree)
    run_bash("echo 'appended' >> README.md", tree)
    assert plain_status(tree) == ""
    text = post(impl, "ls", cwd=tree)
    assert_caught(impl, text, tree, head, "README.md", readme + "appended\n", readme)


def test_skip_worktree_set_after_the_baseline_does_not_hide_a_deletion(impl: Repo) -> None:
    tree = impl.worktree(TASK)
    head, readme = baseline(impl, tree)
    run_bash("git update-index --skip-worktree README.md && rm README.md", tree)
    assert not (tree / "README.md").exists()
    assert plain_status(tree) == ""
    text = post(impl, "ls", cwd=tree)
    assert_caught(impl, text, tree, head, "README.md", None, readme)


def test_an_index_refreshed_through_a_one_off_filter_does_not_hide_an_edit(
    impl: Repo, tmp_path: Path
) -> None:
    """No configuration left anywhere: the agent's own git, told on its command line to
    filter README.md back to the index's blob, refreshes the index with the edited file's
    stat data, so a git that trusts the worktree's index never re-reads it."""
    tree = impl.worktree(TASK)
    head, readme = baseline(impl, tree)
    time.sleep(1.1)
    attributes = tmp_path / "attrs"
    attributes.write_text("README.md filter=once\n")
    edited = same_size_edit(tree)
    os.utime(tree / "README.md")
    time.sleep(1.1)  # the index written a second later: its entry is not racily clean
    run_bash(f"git -c filter.once.clean='git show :README.md' -c core.attributesFile={attributes}"
             " update-index --refresh", tree)  # fmt: skip
    assert plain_status(tree) == ""
    text = post(impl, "ls", cwd=tree)
    assert_caught(impl, text, tree, head, "README.md", edited, readme)


def test_a_change_of_the_index_alone_is_still_found(impl: Repo) -> None:
    """What the worktree's own index stages is read when that index changed since the
    baseline: `git rm --cached` leaves the files as they were."""
    tree = impl.worktree(TASK)
    baseline(impl, tree)
    run_bash("git rm -q --cached README.md", tree)
    assert "README.md" not in git(tree, "ls-files")
    text = post(impl, "ls", cwd=tree)
    assert text.startswith("[R-AGT-12]") and "README.md: changed in the index" in text, text
    assert "README.md" in git(tree, "ls-files")  # put back
    assert git(tree, "status", "--porcelain") == ""
    [violation] = events(impl, "effect_violation")
    assert "README.md: changed in the index" in violation["changes"]
    assert audit_failed_on_effects(impl)


def test_a_submodule_the_configuration_ignores_is_still_compared(
    impl: Repo, tmp_path: Path
) -> None:
    """`submodule.<name>.ignore = all` (or `diff.ignoreSubmodules`): git status says nothing
    of a submodule's edited files; `--ignore-submodules=none`, git's own default, on the
    comparison's command line. The submodule is added by the person before the baseline.
    Found and recorded; the quarantine keeps the gitlink only and does not put a
    submodule's own files back (docs/security.md)."""
    tree = impl.worktree(TASK)
    sub = tmp_path / "sub"
    sub.mkdir()
    git(sub, "init", "-q")
    (sub / "f.txt").write_text("x\n")
    git(sub, "add", ".")
    git(sub, "commit", "-qm", "x")
    git(tree, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "s")
    git(tree, "commit", "-qm", "the person's submodule")
    baseline(impl, tree)
    git(impl.path, "config", "submodule.s.ignore", "all")
    run_bash("echo edit >> s/f.txt", tree)
    assert plain_status(tree) == ""
    text = post(impl, "ls", cwd=tree)
    assert text.startswith("[R-AGT-12]") and "s: changed" in text, text
    assert quarantine_refs(impl)
    [violation] = events(impl, "effect_violation")
    assert "s: changed" in violation["changes"]
    assert audit_failed_on_effects(impl)
    assert (tree / "s" / "f.txt").read_text() == "x\nedit\n"  # left as found: a limit


def test_a_configuration_git_cannot_read_fails_closed(impl: Repo) -> None:
    """A syntax error in `.git/config` makes every git fail in the repository, the
    comparison's included: the first call of a session is denied (R-REC-14) instead of
    leaving a marker baseline, a guarded session's PostToolUse says it could not compare and
    moves nothing, and once the configuration is repaired the next one finds the edit."""
    tree = impl.worktree(TASK)
    config = impl.path / ".git" / "config"
    good = config.read_text()
    config.write_text(good + "[broken\n")
    verdict, text = pre(impl, "ls", cwd=tree)
    assert verdict == "deny" and "[R-REC-14]" in text and "git cannot read" in text, text
    assert not (impl.path / ".taskgate" / "effects" / "s1.json").exists()
    config.write_text(good)
    head, readme = baseline(impl, tree)
    config.write_text(good + "[broken\n")
    run_bash("echo 'appended' >> README.md", tree)
    text = post(impl, "ls", cwd=tree)
    assert "[R-REC-14]" in text and "git cannot read" in text, text
    assert (tree / "README.md").read_text() == readme + "appended\n"  # nothing moved
    assert events(impl, "effect_violation") == []
    config.write_text(good)
    text = post(impl, "ls", cwd=tree)
    assert_caught(impl, text, tree, head, "README.md", readme + "appended\n", readme)


def test_the_options_git_lfs_and_odd_driver_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What gitsafe.options gives git, for the cases the end-to-end tests do not reach: Git
    LFS with only a `git-lfs` the agent could have planted (under $HOME) is switched off like
    any filter; a driver name `-c` cannot carry goes through GIT_CONFIG_COUNT; an ordinary
    repository gets the safe values and nothing else."""
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    home = Path(os.environ["HOME"])
    env: dict[str, str] = {}
    plain = gitsafe.options(str(repo), env)
    assert plain[0] == f"--work-tree={repo}" and "core.checkStat=default" in plain
    assert not any(o.startswith("filter.") for o in plain) and env == {}
    planted = home / ".local" / "bin" / "git-lfs"
    planted.parent.mkdir(parents=True, exist_ok=True)
    planted.write_text("#!/bin/sh\nexit 0\n")
    planted.chmod(0o755)
    with (repo / ".git" / "config").open("a") as handle:
        handle.write('[filter "lfs"]\n\tclean = git-lfs clean -- %f\n\tprocess = git-lfs '
                     "filter-process\n\trequired = true\n")  # fmt: skip
        handle.write('[filter "a=b"]\n\tclean = cat\n')
    monkeypatch.setenv("PATH", f"{planted.parent}{os.pathsep}{os.environ['PATH']}")
    assert spawn.trusted_program("git-lfs") == ""  # only the planted one
    found = gitsafe.options(str(repo), env)
    assert found[-6:-2] == ["-c", "filter.lfs.clean=", "-c", "filter.lfs.process="]
    assert found[-2:] == ["-c", "filter.lfs.required=false"]
    assert env["GIT_CONFIG_COUNT"] == "3"
    assert {env[f"GIT_CONFIG_KEY_{i}"] for i in range(3)} == {
        "filter.a=b.clean", "filter.a=b.process", "filter.a=b.required"}  # fmt: skip
    git_path = spawn.trusted_program("git")
    assert git_path and os.path.isabs(git_path)  # the rule takes the system's git
