"""A crashed `taskgate merge` resumed in a guarded session (the effect check, issue 15).

The main agent may not write its task worktree in IMPLEMENTATION, so its session has a guarded
effect baseline. A `taskgate merge` killed after its git merge (TASKGATE_FAILPOINT
merge:after-git) leaves its journal in the task row and taskgate's own merge commit in the
worktree. Neither the crashed call's own PostToolUse nor the resumed `taskgate merge` may take
that work for the agent's: nothing is quarantined, no `effect_violation` is recorded, the
merged files stay, `taskgate audit` passes. A change the agent really made while the merge was
crashed is still caught: moved aside, recorded, failing audit, and the merge's result is kept.
Real git, the real CLI, the installed hook commands.
"""

from __future__ import annotations

import json
import os
import subprocess

from conftest import Repo
from flow import agents_of, commit_in, implementation_fixtures
from taskgate.hooks.install import default_program, hook_command
from taskgate.hooks.quarantine import JOURNAL_WAIT
from test_hooks_corpus_effects import (
    audit_failed_on_effects,
    events,
    git,
    post,
    pre,
    quarantine_refs,
)
from test_hooks_dispatch import TASK, fixture

implementation, impl = implementation_fixtures("merge-resume", TASK)

CRASH = {"TASKGATE_FAILPOINT": "merge:after-git"}


def agent_commits(repo: Repo) -> dict[str, str]:
    """Every required agent commits one file on its branch; agent -> file name."""
    files: dict[str, str] = {}
    for agent in agents_of(repo, TASK):
        own = repo.task_dir(TASK) / "agents" / agent / "code"
        files[agent] = f"feature_{agent}.py"
        commit_in(own, files[agent], f"print({agent!r})\n", f"[agent:{agent}] feature")
    return files


def crash_merge(repo: Repo) -> str:
    """The agent's `taskgate merge` Bash call, killed after its first git merge; the HEAD it
    left in the task worktree."""
    assert pre(repo, f"taskgate merge {TASK}") == ("allow", "")
    stopped = repo.run("merge", TASK, env=CRASH)
    assert stopped.code == -9, stopped.err
    assert repo.ok("status", TASK, "--json").json()["pending"]["op"] == "merge"
    return git(repo.worktree(TASK), "rev-parse", "HEAD")


def assert_merged(repo: Repo, files: dict[str, str]) -> None:
    """Every agent branch is in T, its file on disk, the journal closed."""
    tree = repo.worktree(TASK)
    for agent, name in files.items():
        assert (tree / name).is_file(), name
        git(tree, "merge-base", "--is-ancestor", f"refs/heads/{TASK}-{agent}", "HEAD")
    assert git(tree, "status", "--porcelain") == ""
    assert not repo.ok("status", TASK, "--json").json().get("pending")


def assert_clean_record(repo: Repo) -> None:
    """No accusation: no event, no quarantine ref, audit passes on effects."""
    assert events(repo, "effect_violation") == []
    assert quarantine_refs(repo) == []
    assert not audit_failed_on_effects(repo)
    audit = repo.run("audit", TASK, "--json")
    [task] = audit.json()["tasks"]
    assert [c["id"] for c in task["checks"] if not c["passed"]] == [], task
    assert audit.code == 0, audit.err


def test_resumed_merge_keeps_its_own_merge(impl: Repo) -> None:
    """The reported defect: the resumed merge ran no comparison before its git work, and its
    first (at its last step) moved its own merge aside."""
    tree = impl.worktree(TASK)
    assert pre(impl, "git status", cwd=tree) == ("allow", "")  # the guarded baseline
    files = agent_commits(impl)
    crashed = crash_merge(impl)
    assert git(tree, "cat-file", "-t", crashed) == "commit"
    assert pre(impl, f"taskgate merge {TASK}") == ("allow", "")
    impl.ok("merge", TASK)
    assert post(impl, f"taskgate merge {TASK}") == ""
    assert_merged(impl, files)
    git(tree, "merge-base", "--is-ancestor", crashed, "HEAD")  # built on, not redone
    assert_clean_record(impl)


def test_the_crashed_call_s_own_post_tool_use_keeps_the_merge(impl: Repo) -> None:
    """Claude Code runs PostToolUse after the killed call too: the journal explains the moved
    HEAD, so that comparison takes it into the baseline instead of judging it."""
    tree = impl.worktree(TASK)
    assert pre(impl, "git status", cwd=tree) == ("allow", "")
    files = agent_commits(impl)
    crashed = crash_merge(impl)
    assert post(impl, f"taskgate merge {TASK}") == ""
    assert git(tree, "rev-parse", "HEAD") == crashed  # not moved aside
    assert post(impl, "ls", cwd=tree) == ""
    impl.ok("merge", TASK)
    assert post(impl, f"taskgate merge {TASK}") == ""
    assert_merged(impl, files)
    assert_clean_record(impl)


def test_a_resume_killed_after_its_last_step_committed_keeps_the_merge(impl: Repo) -> None:
    """The resumed merge is killed again, after its last step committed (the journal is closed,
    the `agent_merge` event names the head) and before it took the new baseline: that event
    tells the next comparison the moved HEAD is taskgate's."""
    tree = impl.worktree(TASK)
    assert pre(impl, "git status", cwd=tree) == ("allow", "")
    files = agent_commits(impl)
    crash_merge(impl)
    again = impl.run("merge", TASK, env={"TASKGATE_FAILPOINT": "step:after-commit"})
    assert again.code == -9, again.err
    assert not impl.ok("status", TASK, "--json").json().get("pending")
    [merge] = events(impl, "agent_merge")
    assert merge["head"] == git(tree, "rev-parse", "HEAD")
    assert post(impl, f"taskgate merge {TASK}") == ""
    assert git(tree, "rev-parse", "HEAD") == merge["head"]
    impl.ok("merge", TASK)  # the agents' worktrees are rebased onto it
    assert_merged(impl, files)
    assert_clean_record(impl)


def test_an_agent_write_while_the_merge_was_crashed_is_caught(impl: Repo) -> None:
    """Adversarial: between the crash and the resume the agent writes the guarded task
    worktree (a new file and an edit of a tracked one). The resumed merge's comparison moves
    exactly that aside and records it; the merge's own result is kept and completed."""
    tree = impl.worktree(TASK)
    assert pre(impl, "git status", cwd=tree) == ("allow", "")
    files = agent_commits(impl)
    crashed = crash_merge(impl)
    (tree / "sneaky.txt").write_text("x = 1\n")
    (tree / "README.md").write_text("rewritten by the main agent\n")
    impl.ok("merge", TASK)
    # on disk: the agent's change is gone from the worktree, the merge is there
    assert not (tree / "sneaky.txt").exists()
    assert "rewritten" not in (tree / "README.md").read_text()
    assert_merged(impl, files)
    git(tree, "merge-base", "--is-ancestor", crashed, "HEAD")
    # moved aside, not lost
    [ref] = quarantine_refs(impl)
    assert git(impl.path, "show", f"{ref}:sneaky.txt") == "x = 1"
    assert git(impl.path, "show", f"{ref}:README.md") == "rewritten by the main agent"
    # in the store: one violation, about the agent's change only (not the merge's HEAD)
    [violation] = events(impl, "effect_violation")
    assert violation["rule"] == "R-AGT-12"
    assert violation["source"] == "taskgate command"
    assert sorted(violation["changes"]) == ["README.md: changed", "sneaky.txt: created"]
    assert violation["refs"] == {}
    assert audit_failed_on_effects(impl)
    assert post(impl, "ls", cwd=tree) == ""  # the baseline follows the merged worktree


def test_a_forged_merge_under_taskgate_s_subject_is_caught(impl: Repo) -> None:
    """Adversarial: while the merge is crashed the agent merges the next agent's branch itself
    under taskgate's subject, with a file of its own in the merge. Its tree is not what
    merging its parents makes: the resumed merge moves it aside, records it, and merges the
    agents' branches itself."""
    tree = impl.worktree(TASK)
    assert pre(impl, "git status", cwd=tree) == ("allow", "")
    files = agent_commits(impl)
    crash_merge(impl)
    second = f"{TASK}-{list(files)[1]}"
    git(tree, "merge", "-q", "--no-ff", "--no-commit", f"refs/heads/{second}")
    (tree / "sneaky.py").write_text("x = 1\n")
    git(tree, "add", "sneaky.py")
    git(tree, "commit", "-q", "--no-verify", "-m", f"taskgate: merge {second} into {TASK}")
    forged = git(tree, "rev-parse", "HEAD")
    assert len(git(tree, "rev-list", "--parents", "-1", "HEAD").split()) == 3
    assert post(impl, "ls", cwd=tree).startswith("[R-AGT-12]")  # its PostToolUse finds it
    impl.ok("merge", TASK)
    assert not (tree / "sneaky.py").exists()
    assert_merged(impl, files)
    [ref] = quarantine_refs(impl)
    assert git(impl.path, "show", f"{ref}:sneaky.py") == "x = 1"
    assert git(impl.path, "rev-parse", f"{ref}^1") == forged
    assert forged not in git(tree, "rev-list", "HEAD").split()  # not delivered to T
    [violation] = events(impl, "effect_violation")
    assert violation["rule"] == "R-AGT-12" and violation["source"] == "PostToolUse Bash"
    assert any(c.startswith(f"{TASK} moved from") for c in violation["changes"])
    assert audit_failed_on_effects(impl)


def test_an_agent_write_after_a_killed_merge_is_judged_without_waiting(impl: Repo) -> None:
    """The killed merge's journal stays open, but its lock (journal_work.running) went with
    its process: the agent's next PostToolUse judges at once instead of waiting up to
    JOURNAL_WAIT for a step that will never come. The agent's file is moved aside and
    recorded; the merge it found is kept."""
    tree = impl.worktree(TASK)
    assert pre(impl, "git status", cwd=tree) == ("allow", "")
    agent_commits(impl)
    crashed = crash_merge(impl)
    (tree / "sneaky.txt").write_text("x = 1\n")
    data = fixture("post_tool_use_write", impl, tool_name="Bash",
                   tool_input={"command": "ls"}, cwd=str(tree))  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "TASKGATE_SESSION"}
    hook = subprocess.Popen(
        ["/bin/sh", "-c", hook_command(default_program(), "PostToolUse")],
        cwd=impl.path, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    out, err = hook.communicate(json.dumps(data), timeout=JOURNAL_WAIT * 0.75)
    assert hook.returncode == 0, err
    assert "[R-AGT-12]" in out and "sneaky.txt" in out
    assert not (tree / "sneaky.txt").exists()
    assert git(tree, "rev-parse", "HEAD") == crashed
    [ref] = quarantine_refs(impl)
    assert git(impl.path, "show", f"{ref}:sneaky.txt") == "x = 1"
    [violation] = events(impl, "effect_violation")
    assert violation["changes"] == ["sneaky.txt: created"]
    assert impl.ok("status", TASK, "--json").json()["pending"]["op"] == "merge"
