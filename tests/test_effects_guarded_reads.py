"""PostToolUse compares after every Bash call of a guarded session, "pure" reads included
(guardcmp): the analyser's judgement that a line only reads is a prediction, and what the line
runs can come from something the analyser cannot see. Here: an executable earlier in PATH
shadowing `cat` (a program on the read list), and `core.fsmonitor` in the repository's own
config, which plain `git status` runs. The write is found by the very PostToolUse of that
call: moved aside, restored, recorded, failing `taskgate audit`. Real hook processes, real
git, the real CLI; the command runs in the task worktree as Claude Code's Bash tool runs it.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
from pathlib import Path

from conftest import Repo
from flow import agents_of, implementation_fixtures
from taskgate.engine.core import Engine
from taskgate.engine.merge import merge_agents
from taskgate.engine.workspace import find_workspace
from taskgate.hooks.dispatch import guard_marker
from taskgate.hooks.install import default_program, hook_command
from taskgate.hooks.shell import analyse
from test_hooks_corpus_effects import (
    audit_failed_on_effects,
    events,
    git,
    post,
    pre,
    quarantine_refs,
)
from test_hooks_dispatch import TASK, decision, fixture, hook

implementation, impl = implementation_fixtures("guarded-reads", TASK)


def judged_pure(command: str, cwd: Path) -> bool:
    """The analyser's judgement PostToolUse used to skip the comparison on."""
    found = analyse(command, str(cwd))
    return found.reads_only and not found.runs_code


def write_tool(repo: Repo, path: Path, content: str) -> None:
    """The Write tool, as Claude Code runs it: PreToolUse must allow it, then the file is
    written (the write itself is Claude Code's, not a hook's)."""
    data = fixture("pre_tool_use_write", repo, tool_input={"file_path": str(path),
                                                           "content": content})  # fmt: skip
    assert decision(hook(repo, data)) == ("allow", "")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)


def run_bash(command: str, cwd: Path, path_first: Path | None = None) -> None:
    """Run the command as Claude Code's Bash tool would, with the session's PATH (whose first
    entry, here, is a directory of the user's where an earlier call left a program)."""
    env = dict(os.environ)
    if path_first is not None:
        env["PATH"] = f"{path_first}{os.pathsep}{env['PATH']}"
    subprocess.run(["bash", "-c", command], cwd=cwd, env=env, check=False, capture_output=True)


def shim(repo: Repo, name: str) -> Path:
    """An executable `name` in ~/.local/bin that appends to the task worktree's README.md and
    creates sneaky.txt, then runs the real program: left by allowed calls (Write, chmod)."""
    bin_dir = Path(os.environ["HOME"]) / ".local" / "bin"
    program = bin_dir / name
    body = (
        "#!/bin/sh\n"
        'printf "appended by a shadowing program\\n" >> README.md\n'
        'printf "x = 1\\n" > sneaky.txt\n'
        f'exec /bin/{name} "$@"\n'
    )
    write_tool(repo, program, body)
    assert pre(repo, f"chmod +x {program}") == ("allow", "")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def assert_quarantined(repo: Repo, text: str, tree: Path, head: str) -> None:
    """The change was found by this PostToolUse: moved aside, restored, recorded, audited."""
    assert text.startswith("[R-AGT-12]"), text
    assert "sneaky.txt" in text and "README.md" in text
    # on disk: the worktree is back to the baseline
    assert not (tree / "sneaky.txt").exists()
    assert "shadowing" not in (tree / "README.md").read_text()
    assert git(tree, "status", "--porcelain") == ""
    assert git(tree, "rev-parse", "HEAD") == head
    # moved aside into the quarantine ref, not lost
    [ref] = quarantine_refs(repo)
    assert git(repo.path, "show", f"{ref}:sneaky.txt") == "x = 1"
    assert "appended by a shadowing program" in git(repo.path, "show", f"{ref}:README.md")
    # in the store and in audit
    [violation] = events(repo, "effect_violation")
    assert violation["rule"] == "R-AGT-12" and ref == violation["quarantine"] + "/worktree"
    assert violation["source"] == "PostToolUse Bash"
    assert audit_failed_on_effects(repo)


def test_a_shadowed_read_program_is_caught_by_its_own_post_tool_use(impl: Repo) -> None:
    tree = impl.worktree(TASK)
    head = git(tree, "rev-parse", "HEAD")
    assert pre(impl, "git status", cwd=tree) == ("allow", "")  # the baseline: guarded
    assert Path(guard_marker("s1")).is_file()
    bin_dir = shim(impl, "cat")
    command = "cat README.md"
    assert judged_pure(command, tree)  # the line PostToolUse used to return at once after
    assert pre(impl, command, cwd=tree) == ("allow", "")
    run_bash(command, tree, path_first=bin_dir)
    assert (tree / "sneaky.txt").exists()  # it did write the worktree
    assert "shadowing" in (tree / "README.md").read_text()
    assert_quarantined(impl, post(impl, command, cwd=tree), tree, head)


def test_core_fsmonitor_in_the_repository_config_is_caught_after_git_status(
    impl: Repo,
) -> None:
    """`git status` is a plain read for the analyser, which does not read the repository's
    config; git runs the configured fsmonitor program (set, here, before the task was guarded:
    the analyser denies `git config` only while the agent may not write)."""
    tree = impl.worktree(TASK)
    head = git(tree, "rev-parse", "HEAD")
    monitor = Path(os.environ["HOME"]) / "fsmonitor.sh"
    monitor.write_text(
        "#!/bin/sh\n"
        'printf "appended by a shadowing program\\n" >> README.md\n'
        'printf "x = 1\\n" > sneaky.txt\n'
        "exit 1\n"
    )
    monitor.chmod(0o755)
    git(impl.path, "config", "core.fsmonitor", str(monitor))
    assert pre(impl, "ls", cwd=tree) == ("allow", "")  # the baseline (the hook's git ignores it)
    assert (tree / "README.md").read_text().count("shadowing") == 0
    command = "git status"
    assert judged_pure(command, tree)
    assert pre(impl, command, cwd=tree) == ("allow", "")
    run_bash(command, tree)
    assert (tree / "sneaky.txt").exists()
    git(impl.path, "config", "--unset", "core.fsmonitor")  # the test's own git stays plain
    assert_quarantined(impl, post(impl, command, cwd=tree), tree, head)


def test_without_the_marker_a_pure_read_is_found_only_by_the_next_comparison(
    impl: Repo,
) -> None:
    """What PostToolUse did before (and still does when the marker cannot be written, e.g. a
    read-only home): the plain read returns at once, the change stays in the worktree until
    the next call that is compared; that call writes the marker back."""
    tree = impl.worktree(TASK)
    assert pre(impl, "git status", cwd=tree) == ("allow", "")
    marker = Path(guard_marker("s1"))
    marker.unlink()
    bin_dir = shim(impl, "cat")
    assert pre(impl, "cat README.md", cwd=tree) == ("allow", "")
    run_bash("cat README.md", tree, path_first=bin_dir)
    assert post(impl, "cat README.md", cwd=tree) == ""
    assert (tree / "sneaky.txt").exists()  # not found by that call
    assert events(impl, "effect_violation") == []
    text = post(impl, "make -n", cwd=tree)  # may run code: compared
    assert text.startswith("[R-AGT-12]") and "sneaky.txt" in text
    assert not (tree / "sneaky.txt").exists()
    assert marker.is_file()  # written back by that comparison


def test_the_marker_follows_the_baseline(impl: Repo) -> None:
    """Made with a guarded baseline, removed when the session's baseline goes: a session
    whose main agent may write (or that holds no task) keeps the one-stat fast return."""
    tree = impl.worktree(TASK)
    marker = Path(guard_marker("s1"))
    assert not marker.exists()
    assert pre(impl, "git status", cwd=tree) == ("allow", "")
    baseline = impl.path / ".taskgate" / "effects" / "s1.json"
    assert marker.read_text().strip() == str(baseline.resolve())
    impl.ok(
        "release", TASK, "--force", "--reason", "r", session="s1"
    )  # the lease goes: the baseline and marker with it
    assert not baseline.exists()
    assert not marker.exists()
    # s2 holds fix-typo, whose main agent may still write: a marker baseline, no guard marker
    data = fixture("pre_tool_use_bash", impl, session_id="s2", tool_input={"command": "ls"})
    assert decision(hook(impl, data)) == ("allow", "")
    assert (impl.path / ".taskgate" / "effects" / "s2.json").is_file()
    assert not Path(guard_marker("s2")).exists()


def test_a_read_during_taskgate_s_own_merge_does_not_quarantine_it(impl: Repo) -> None:
    """Now that plain reads are compared, one can land between the two steps of a journaled
    `taskgate merge` (the merge commit made, the step that takes it into the baseline not
    yet run): a sub-agent's `ls`, or the person's terminal. PostToolUse waits for
    taskgate's own step instead of moving its work aside."""
    tree = impl.worktree(TASK)
    assert pre(impl, "git status", cwd=tree) == ("allow", "")
    agent = agents_of(impl, TASK)[0]
    own = impl.task_dir(TASK) / "agents" / agent / "code"
    (own / "feature.py").write_text("print('feature')\n")
    git(own, "add", "feature.py")
    git(own, "commit", "-qm", f"[agent:{agent}] feature")
    # The merge stopped between its git merge and its last step (its journal is pending):
    # the state a concurrent read sees; the rest of the command is run below, in-process.
    stopped = impl.run("merge", TASK, env={"TASKGATE_FAILPOINT": "merge:after-git"})
    assert stopped.code == -9 and (tree / "feature.py").exists()
    merged = git(tree, "rev-parse", "HEAD")
    data = fixture("post_tool_use_write", impl, tool_name="Bash",
                   tool_input={"command": "ls"}, cwd=str(tree))  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "TASKGATE_SESSION"}
    reader = subprocess.Popen(
        ["/bin/sh", "-c", hook_command(default_program(), "PostToolUse")],
        cwd=impl.path, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert reader.stdin is not None
    reader.stdin.write(json.dumps(data))
    reader.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        reader.wait(timeout=3)  # without the wait it has quarantined the merge by now
    engine = Engine(find_workspace(impl.path), session_id="s1", cwd=impl.path)
    try:  # the merge command's last step: its first step already compared (before_step)
        vars(engine).setdefault("_effects_seen", set()).add(TASK)
        merge_agents(engine, TASK)
    finally:
        engine.close()
    reader.wait(timeout=60)
    assert reader.stdout is not None and reader.stderr is not None
    out, err = reader.stdout.read(), reader.stderr.read()
    assert reader.returncode == 0, err
    assert out.strip() == "", out
    assert events(impl, "effect_violation") == []
    assert quarantine_refs(impl) == []
    assert git(tree, "rev-parse", "HEAD") == merged and (tree / "feature.py").exists()
    assert not audit_failed_on_effects(impl)
    assert post(impl, "ls", cwd=tree) == ""  # the merge is the baseline now
