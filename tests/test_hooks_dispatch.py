"""`taskgate hook EVENT` end to end: documented JSON in (tests/fixtures/hooks), the real CLI
process, real git repositories in every protocol state (issue 7)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Repo, Run, edit_store, make_repo
from flow import (
    agents_of,
    approve_plan,
    copy_repo,
    implementation_template,
    to_synthesis,
    to_validation,
)
from taskgate.hooks.install import default_program, hook_command

FIXTURES = Path(__file__).parent / "fixtures" / "hooks"
TASK = "add-login"


def fixture(name: str, repo: Repo, **changes: Any) -> dict[str, Any]:
    """A documented hook input with REPO replaced by the repository path."""
    text = (FIXTURES / f"{name}.json").read_text().replace("REPO", str(repo.path))
    data: dict[str, Any] = json.loads(text)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return data


def hook(
    repo: Repo,
    data: dict[str, Any] | str,
    event: str = "",
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> Run:
    """Run the hook command `taskgate hooks install` writes, with the input on stdin, the way
    Claude Code does (a shell; the session's environment has no TASKGATE_SESSION)."""
    raw = data if isinstance(data, str) else json.dumps(data)
    name = event or (data["hook_event_name"] if isinstance(data, dict) else "PreToolUse")
    full_env = {k: v for k, v in os.environ.items() if k != "TASKGATE_SESSION"}
    full_env.update(env or {})
    proc = subprocess.run(
        ["/bin/sh", "-c", hook_command(default_program(), name)],
        cwd=cwd or repo.path,
        env=full_env,
        input=raw,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def decision(run: Run) -> tuple[str, str]:
    """(permissionDecision or "allow", reason) of a PreToolUse answer."""
    assert run.code == 0, run.err
    if not run.out.strip():
        return "allow", ""
    out = run.json()["hookSpecificOutput"]
    assert out["hookEventName"] == "PreToolUse"
    return out["permissionDecision"], out["permissionDecisionReason"]


def bash(repo: Repo, command: str, **changes: Any) -> tuple[str, str]:
    """The decision on a Bash command run from the repository root."""
    data = fixture("pre_tool_use_bash", repo, tool_input={"command": command}, **changes)
    return decision(hook(repo, data))


def write(repo: Repo, path: Path | str, **changes: Any) -> tuple[str, str]:
    """The decision on a Write of `path`."""
    data = fixture("pre_tool_use_write", repo, tool_input={"file_path": str(path)}, **changes)
    return decision(hook(repo, data))


def context(run: Run, event: str) -> str:
    """The additionalContext a SessionStart / UserPromptSubmit answer injects."""
    assert run.code == 0, run.err
    out = run.json()["hookSpecificOutput"]
    assert out["hookEventName"] == event
    return str(out["additionalContext"])


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A repository with add-login in IMPLEMENTATION (session s1), fix-typo held by s2."""
    with implementation_template(tmp_path_factory, "impl", TASK, second=True) as repo:
        yield repo.path


@pytest.fixture
def impl(template: Path, tmp_path: Path) -> Repo:
    """A private copy of the IMPLEMENTATION template."""
    return copy_repo(template, tmp_path / "repo")


@pytest.fixture(scope="module")
def shared(template: Path) -> Repo:
    """The template itself, for tests that only read (PreToolUse never writes the store)."""
    return Repo(template)


# -- PreToolUse: the store, views, flags and configuration -----------------------------------


def test_read_only_tools_are_always_allowed(shared: Repo) -> None:
    assert decision(hook(shared, fixture("pre_tool_use_read", shared))) == ("allow", "")


@pytest.mark.parametrize(
    ("relative", "rule"),
    [
        (".taskgate/state.db", "R-LCK-09"),
        (f".taskgate/tasks/{TASK}/task.json", "R-LCK-09"),
        (f".taskgate/tasks/{TASK}/user-plan-approval-obtained.flag", "R-CKP-03"),
        (f".taskgate/tasks/{TASK}/audit-trail.json", "R-AUD-01"),
        (f".taskgate/tasks/{TASK}/store-record.jsonl", "R-AUD-01"),
        (f".taskgate/tasks/{TASK}/agents/quality/status.json", "R-AST-01"),
        ("taskgate.toml", "R-CKP-02"),
        (".claude/settings.json", "R-CKP-02"),
        (".git/refs/heads/main", "R-WTB-09"),
    ],
)
def test_writes_to_taskgate_files_are_denied_for_everyone(
    shared: Repo, relative: str, rule: str
) -> None:
    for agent in ("", "quality"):
        verdict, reason = write(shared, shared.path / relative, agent_type=agent)
        assert verdict == "deny"
        assert reason.startswith(f"[{rule}]")
    verdict, reason = write(shared, shared.path / relative, session_id="nobody")
    assert (verdict, reason[:10]) == ("deny", f"[{rule}]")


def test_the_plan_and_reports_stay_writable(shared: Repo) -> None:
    assert write(shared, shared.task_dir(TASK) / "task.md")[0] == "allow"
    report = shared.task_dir(TASK) / f"{TASK}-quality-requirements.md"
    assert write(shared, report, agent_type="quality")[0] == "allow"


@pytest.mark.parametrize(
    "command",
    [
        "echo '{}' > .taskgate/tasks/add-login/task.json",
        "python3 -c \"open('.taskgate/state.db', 'w').write('')\"",
        "python3 -c 'import os; os.remove(\"/x/.taskgate/state.db\")'",
        "node -e \"require('fs').writeFileSync('.taskgate/state.db', '')\"",
        "cd .taskgate/tasks/add-login && touch user-plan-approval-obtained.flag",
        'echo hi > "my dir/../.taskgate/state.db"',
        "D=.taskgate; echo > $D/state.db",
        'touch "$(echo .taskgate)/tasks/add-login/user-approval-obtained.flag"',
        "bash -c 'rm -f .taskgate/state.db'",
        "sqlite3 .taskgate/state.db 'update tasks set state=1' > .taskgate/x",
        "git clean -fdx",
        "find . -name '*.db' -delete",
        "jq '.state=\"COMPLETE\"' t.json | tee .taskgate/tasks/add-login/task.json",
        "ln -s .taskgate/state.db innocent && echo x > innocent",
        "python3 <<'EOF'\nopen('.taskgate/state.db', 'w')\nEOF",
        "echo \"open('.taskgate/state.db','w')\" | python3",
    ],
)
def test_store_evasions_through_bash_are_denied(shared: Repo, command: str) -> None:
    verdict, reason = bash(shared, command)
    assert verdict == "deny", command
    assert reason.startswith("[R-"), reason


def test_a_symlink_into_the_state_dir_is_followed(shared: Repo, tmp_path: Path) -> None:
    link = tmp_path / "innocent"
    link.symlink_to(shared.path / ".taskgate")
    assert write(shared, link / "state.db")[0] == "deny"
    verdict, reason = bash(shared, f"echo x > {link}/tasks/{TASK}/task.json")
    assert verdict == "deny"
    assert "[R-LCK-09]" in reason


# -- PreToolUse: who may write where (Guard 7, R-AGT-12/13, R-LCK-15, C-27) ------------------


def test_main_agent_may_not_implement_during_implementation(shared: Repo) -> None:
    target = shared.worktree(TASK) / "src" / "auth" / "login.py"
    verdict, reason = write(shared, target)
    assert verdict == "deny"
    assert reason.startswith("[R-AGT-12] Guard 7")
    edit = fixture("pre_tool_use_edit", shared, tool_input={"file_path": str(target)})
    assert decision(hook(shared, edit))[0] == "deny"
    assert bash(shared, f"cd {shared.worktree(TASK)} && echo x > src/a.py")[0] == "deny"
    assert bash(shared, f"sed -i s/a/b/ {target}")[0] == "deny"
    assert bash(shared, "echo x > src/a.py", cwd=str(shared.worktree(TASK)))[0] == "deny"
    code = "python3 -c \"open('src/a.py','w').write('x')\""
    assert bash(shared, code, cwd=str(shared.worktree(TASK)))[0] == "deny"


def test_sub_agents_write_only_in_their_own_worktree(shared: Repo) -> None:
    agents = agents_of(shared, TASK)
    own = shared.task_dir(TASK) / "agents" / agents[0] / "code" / "src" / "x.py"
    assert write(shared, own, agent_type=agents[0])[0] == "allow"
    verdict, reason = write(shared, shared.worktree(TASK) / "x.py", agent_type=agents[0])
    assert (verdict, reason[:10]) == ("deny", "[R-AGT-13]")
    if len(agents) > 1:
        assert write(shared, own, agent_type=agents[1])[0] == "deny"
    assert write(shared, own)[0] == "deny"  # the main agent does not edit an agent's worktree


def test_other_tasks_and_the_main_worktree_are_off_limits(shared: Repo, tmp_path: Path) -> None:
    verdict, reason = write(shared, shared.worktree("fix-typo") / "docs" / "guide.md")
    assert (verdict, reason[:10]) == ("deny", "[R-LCK-04]")
    verdict, reason = write(shared, shared.path / "README.md")
    assert (verdict, reason[:10]) == ("deny", "[R-LCK-15]")
    assert write(shared, tmp_path / "scratch.txt")[0] == "allow"  # outside the repository
    assert write(shared, shared.path / "README.md", session_id="idle")[0] == "allow"


def test_harmless_bash_is_allowed(shared: Repo) -> None:
    for command in (
        "git status && ls -la",
        "pytest -q 2>&1 | tail -5",
        "cat README.md",
        f"git -C {shared.worktree(TASK)} log --oneline",
        "echo hi > /dev/null",
    ):
        assert bash(shared, command) == ("allow", ""), command


def test_main_agent_may_fix_in_validation_only_for_its_failure_classes(tmp_path: Path) -> None:
    # C-27 / R-VAL-10: missing imports are the main agent's to fix; anything else is not.
    build = (
        "[validation]\ncommands = [\"python3 -c \\\"print('COMPILATION ERROR'); "
        "print('cannot find symbol'); raise SystemExit(1)\\\"\"]\n"
    )
    repo = make_repo(tmp_path / "repo", config=build)
    to_validation(repo, TASK)
    target = repo.worktree(TASK) / "src" / "auth" / "login.py"
    verdict, reason = write(repo, target)
    assert (verdict, reason[:10]) == ("deny", "[R-VAL-10]")
    assert repo.run("validate", TASK).code == 1
    assert write(repo, target)[0] == "allow"


# -- PreToolUse: taskgate and git commands ---------------------------------------------------


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        (f"taskgate approve {TASK} plan", "R-CKP-03"),
        (f"taskgate --session s1 approve {TASK} changes", "R-CKP-03"),
        (f"python3 -m taskgate approve {TASK} plan", "R-CKP-03"),
        (f"taskgate say {TASK} 'LGTM, approved'", "R-CKP-03"),
        (f"taskgate release {TASK} --force", "R-LCK-21"),
        ("taskgate hooks uninstall", "R-CKP-02"),
        ("git merge add-login", "R-CMP-07"),
        ("git push origin main", "R-CMP-01"),
        ("git push origin HEAD:refs/heads/main", "R-CMP-01"),
        ("git push --force origin add-login", "R-CMP-06"),
        ("git push origin +add-login", "R-CMP-06"),
        ("git branch -D fix-typo", "R-LCK-09"),
        ("git push origin --delete fix-typo", "R-LCK-09"),
        ("git branch -D main", "R-LCK-15"),
        ("git reset --hard HEAD~1", "R-LCK-15"),
        ("git reflog expire --expire=now --all", "R-WTB-09"),
    ],
)
def test_protocol_bypasses_from_bash_are_denied(shared: Repo, command: str, rule: str) -> None:
    verdict, reason = bash(shared, command)
    assert verdict == "deny", command
    assert reason.startswith(f"[{rule}]"), reason


def test_own_branches_are_deleted_only_by_cleanup(shared: Repo) -> None:
    branch = f"{TASK}-{agents_of(shared, TASK)[0]}"
    verdict, reason = bash(shared, f"git branch -d {branch}")
    assert (verdict, reason[:10]) == ("deny", "[R-CLN-03]")
    assert bash(shared, "git branch -d some-unrelated-branch")[0] == "allow"


def test_allowed_taskgate_and_git_commands(shared: Repo) -> None:
    agent = agents_of(shared, TASK)[0]
    for command in (
        f"taskgate status {TASK}",
        f"taskgate say {TASK} 'what is the status?'",
        f"taskgate transition {TASK} VALIDATION",
        f"git -C {shared.worktree(TASK)} push origin {TASK}",
        f"git -C {shared.worktree(TASK)} log --oneline {TASK}-{agent}",
    ):
        assert bash(shared, command) == ("allow", ""), command
    # The main agent merges its agents' work through taskgate, which re-takes the baseline
    # of the effect check; a merge by hand would move the task branch under the check.
    verdict, reason = bash(shared, f"git -C {shared.worktree(TASK)} merge {TASK}-{agent}")
    assert (verdict, reason[:10]) == ("deny", "[R-AGT-12]")
    assert f"taskgate merge {TASK}" in reason


def test_git_commands_that_rewrite_worktree_files_are_writes(shared: Repo) -> None:
    """checkout/restore/switch/stash/reset --hard/clean -f change files like an Edit does:
    the main agent may not run them in the task worktree during IMPLEMENTATION (Guard 7); a
    stakeholder agent may in its own worktree; read-only and index-only forms stay allowed."""
    tree = shared.worktree(TASK)
    for command in (
        "git checkout -- src/app.py",
        "git checkout HEAD~1 -- .",
        "git checkout main",
        "git checkout -",
        "git switch main",
        "git restore src/app.py",
        "git restore --source HEAD~1 --worktree --staged .",
        "git stash",
        "git stash pop",
        "git stash apply stash@{0}",
        "git reset --hard HEAD",
        "git clean -fd",
        "git restore --staged src/app.py",  # the index is the worktree's too
        "git checkout -b spike",  # HEAD leaves the task branch
        "git switch -c spike",
        "git reset HEAD~1",  # the task branch moves
        "git reset --har HEAD",  # a prefix git accepts
        "git add -A",
        "git commit -qm x",
    ):
        verdict, reason = bash(shared, f"cd {tree} && {command}")
        assert (verdict, reason[:10]) == ("deny", "[R-AGT-12]"), command
    assert bash(shared, f"git -C {tree} restore .")[0] == "deny"
    for command in (
        "git status",
        "git stash list",
        "git stash show -p",
        "git clean -n",
        "git diff",
        "git log --oneline -5",
        "/usr/bin/git status",
    ):
        assert bash(shared, f"cd {tree} && {command}") == ("allow", ""), command
    agent = agents_of(shared, TASK)[0]
    own = shared.task_dir(TASK) / "agents" / agent / "code"
    assert bash(shared, f"cd {own} && git checkout -- .", agent_type=agent) == ("allow", "")
    assert bash(shared, f"cd {tree} && git stash", agent_type=agent)[0] == "deny"  # R-AGT-13


def test_scripts_on_disk_are_judged_by_what_they_do(shared: Repo, tmp_path: Path) -> None:
    """A script file is no way around the rules: shell scripts are analysed like the command
    line, other interpreters' scripts are refused when they name taskgate's files."""
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "reset.sh").write_text("#!/bin/sh\necho '{}' > .taskgate/state.db\n")
    (tools / "forge.py").write_text("open('.taskgate/hook-snapshot.json', 'w').write('{}')\n")
    (tools / "gen.sh").write_text("#!/bin/bash\necho 'x = 1' > src/generated.py\n")
    (tools / "hello.py").write_text("print('hello')\n")
    (tools / "reset.sh").chmod(0o755)
    for command in (f"bash {tools}/reset.sh", f"{tools}/reset.sh", f"python3 {tools}/forge.py"):
        verdict, reason = bash(shared, command)
        assert (verdict, reason[:10]) == ("deny", "[R-LCK-09]"), command
    verdict, reason = bash(shared, f"cd {shared.worktree(TASK)} && bash {tools}/gen.sh")
    assert (verdict, reason[:10]) == ("deny", "[R-AGT-12]")  # Guard 7 through a script
    assert bash(shared, f"python3 {tools}/hello.py") == ("allow", "")
    assert bash(shared, f"cd {shared.worktree(TASK)} && python3 {tools}/hello.py")[0] == "allow"


def test_stash_all_would_take_the_store_with_it(shared: Repo) -> None:
    verdict, reason = bash(shared, "git stash --all")
    assert (verdict, reason[:10]) == ("deny", "[R-LCK-09]")
    assert bash(shared, "git stash -a -m x")[0] == "deny"


def test_force_removing_a_worktree_with_unsaved_work_is_denied(impl: Repo, tmp_path: Path) -> None:
    spare = tmp_path / "spare"
    subprocess.run(["git", "worktree", "add", "-q", "-b", "spare", str(spare)], cwd=impl.path,
                   check=True)  # fmt: skip
    assert bash(impl, f"git worktree remove --force {spare}")[0] == "allow"
    (spare / "draft.py").write_text("work in progress\n")
    verdict, reason = bash(impl, f"git worktree remove --force {spare}")
    assert (verdict, reason[:10]) == ("deny", "[R-CLN-04]")
    # taskgate's own worktrees are removed by 'taskgate cleanup' only (issue 15)
    agent_tree = impl.task_dir(TASK) / "agents" / agents_of(impl, TASK)[0] / "code"
    verdict, reason = bash(impl, f"git worktree remove -ff {agent_tree}")
    assert (verdict, reason[:10]) == ("deny", "[R-CLN-03]")
    verdict, reason = bash(impl, f"git worktree remove {impl.worktree('fix-typo')}")
    assert (verdict, reason[:10]) == ("deny", "[R-LCK-04]")


# -- PreToolUse: sub-agent launches (R-CKP-14) -----------------------------------------------


def test_implementation_agents_wait_for_plan_approval(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    to_synthesis(repo, TASK)
    repo.ok("present", TASK)
    verdict, reason = decision(hook(repo, fixture("pre_tool_use_task", repo)))
    assert (verdict, reason[:10]) == ("deny", "[R-CKP-14]")
    agent = fixture("pre_tool_use_task", repo, tool_name="Agent")
    assert decision(hook(repo, agent))[0] == "deny"
    review = fixture(
        "pre_tool_use_task",
        repo,
        tool_input={
            "description": "Summarise the requirement reports",
            "prompt": "Read the reports.",
        },
    )
    assert decision(hook(repo, review))[0] == "allow"
    target = repo.worktree(TASK) / "src" / "x.py"
    assert write(repo, target)[0] == "deny"  # R-CKP-14: only task.md while waiting
    assert write(repo, repo.task_dir(TASK) / "task.md")[0] == "allow"


def test_implementation_agents_run_in_implementation(shared: Repo) -> None:
    assert decision(hook(shared, fixture("pre_tool_use_task", shared))) == ("allow", "")


# -- PreToolUse: fail closed -----------------------------------------------------------------


def test_malformed_input_denies(shared: Repo) -> None:
    for raw in (
        "not json",
        "[]",
        json.dumps({"tool_name": "Write"}),
        json.dumps({"session_id": "s1", "cwd": "relative", "tool_name": "Bash"}),
    ):
        verdict, reason = decision(hook(shared, raw, "PreToolUse"))
        assert verdict == "deny", raw
        assert "[R-REC-14]" in reason
    no_input = fixture("pre_tool_use_write", shared)
    del no_input["tool_input"]
    assert decision(hook(shared, no_input))[0] == "deny"


def test_event_names_may_be_written_in_kebab_case(shared: Repo) -> None:
    data = fixture("pre_tool_use_write", shared, tool_input={"file_path": ".taskgate/state.db"})
    for name in ("pre-tool-use", "pre_tool_use", "PreToolUse"):
        run = shared.run("hook", name, stdin=json.dumps(data), session=None)
        assert decision(run)[0] == "deny", name


def test_unknown_event_is_a_usage_error(shared: Repo) -> None:
    run = hook(shared, fixture("stop", shared), "NoSuchEvent")
    assert run.code == 2
    assert "unknown event" in run.err


def test_a_corrupt_store_denies_guarded_calls_but_not_reads(impl: Repo) -> None:
    (impl.path / ".taskgate" / "state.db").write_bytes(b"this is not sqlite" * 100)
    for name in ("-wal", "-shm"):
        (impl.path / ".taskgate" / f"state.db{name}").unlink(missing_ok=True)
    verdict, reason = write(impl, impl.worktree(TASK) / "x.py")
    assert (verdict, reason[:10]) == ("deny", "[R-LCK-08]")
    assert "taskgate recover" in reason
    assert bash(impl, "git push origin main")[0] == "deny"
    assert decision(hook(impl, fixture("pre_tool_use_read", impl)))[0] == "allow"


def test_an_unknown_state_denies(impl: Repo) -> None:
    edit_store(impl, "UPDATE tasks SET state = 'AUDITING' WHERE name = ?", TASK)
    # The edit went around taskgate, so the PreToolUse snapshot still has the old state until
    # the next hook event that opens the store finds the difference and reports it.
    after_tool = fixture("post_tool_use_write", impl)
    assert "[R-LCK-09]" in context(hook(impl, after_tool), "PostToolUse")
    verdict, reason = write(impl, impl.worktree(TASK) / "x.py")
    assert (verdict, reason[:10]) == ("deny", "[R-REC-07]")


# -- the PreToolUse snapshot (store/snapshot.py) ---------------------------------------------


def snapshot_file(repo: Repo) -> Path:
    """The file PreToolUse reads instead of the store."""
    return repo.path / ".taskgate" / "hook-snapshot.json"


def on_disk(repo: Repo) -> dict[str, Any] | None:
    """The snapshot file's content in collect()'s shape."""
    from taskgate.store import snapshot

    return snapshot.parse(snapshot_file(repo).read_text(), json.loads)


def store_snapshot(repo: Repo) -> dict[str, Any]:
    """What the store says the snapshot should hold."""
    from taskgate.store import snapshot

    with sqlite3.connect(repo.path / ".taskgate" / "state.db") as db:
        return snapshot.collect(db, json.loads)


def test_the_snapshot_follows_every_protocol_step(repo: Repo) -> None:
    """Written under the store's write lock by each step that changes what it holds, so the
    file always equals the store (never stale) and PreToolUse needs no SQLite."""
    to_synthesis(repo, TASK)
    assert on_disk(repo) == store_snapshot(repo)
    [mine] = [t for t in store_snapshot(repo)["tasks"] if t["name"] == TASK]
    assert (mine["state"], mine["session"], mine["plan_approved"]) == ("SYNTHESIS", "s1", False)
    approve_plan(repo, TASK)
    repo.ok("transition", TASK, "IMPLEMENTATION")
    [mine] = [t for t in on_disk(repo)["tasks"] if t["name"] == TASK]  # type: ignore[index]
    assert (mine["state"], mine["plan_approved"]) == ("IMPLEMENTATION", True)
    assert mine["agents"] == list(agents_of(repo, TASK))
    assert on_disk(repo) == store_snapshot(repo)
    repo.ok("release", TASK, "--force", "--reason", "handing over")
    assert on_disk(repo) == store_snapshot(repo)
    [mine] = [t for t in store_snapshot(repo)["tasks"] if t["name"] == TASK]
    assert mine["session"] is None


def test_without_a_usable_snapshot_the_hook_reads_the_store(impl: Repo) -> None:
    main_edit = impl.worktree(TASK) / "src" / "app.py"
    for damage in ("missing", "garbage", "wrong shape"):
        if damage == "missing":
            snapshot_file(impl).unlink()
        else:
            snapshot_file(impl).write_text("{not json" if damage == "garbage" else '{"tasks": 1}')
        verdict, reason = write(impl, main_edit)
        assert (verdict, reason[:10]) == ("deny", "[R-AGT-12]"), damage  # Guard 7, from the store


def test_a_forged_snapshot_is_found_and_rebuilt_by_the_next_hook_event(impl: Repo) -> None:
    """An agent that got around PreToolUse and rewrote the snapshot to let the main agent edit
    (VALIDATION, C-27) gets one call at most: the next PostToolUse compares the file with the
    store under the write lock, rebuilds it, reports it and records it in the audit trail."""
    main_edit = impl.worktree(TASK) / "src" / "app.py"
    assert write(impl, main_edit)[0] == "deny"
    forged = on_disk(impl)
    assert forged is not None
    for t in forged["tasks"]:
        if t["name"] == TASK:
            t.update(state="VALIDATION", main_may_fix=True)
    from taskgate.store import snapshot

    snapshot_file(impl).write_text(snapshot.render(forged))
    assert write(impl, main_edit)[0] == "allow"  # the limit of a file-based fast path
    text = context(hook(impl, fixture("post_tool_use_write", impl)), "PostToolUse")
    assert "[R-LCK-09]" in text and "taskgate audit" in text
    assert write(impl, main_edit)[0] == "deny"
    assert on_disk(impl) == store_snapshot(impl)
    with sqlite3.connect(impl.path / ".taskgate" / "state.db") as db:
        kinds = [r[0] for r in db.execute("SELECT kind FROM events WHERE task = ?", (TASK,))]
    assert "snapshot_mismatch" in kinds


def test_a_write_to_the_snapshot_is_denied(impl: Repo) -> None:
    verdict, reason = write(impl, snapshot_file(impl))
    assert (verdict, reason[:10]) == ("deny", "[R-LCK-09]")
    assert bash(impl, f"echo '{{}}' > {snapshot_file(impl)}")[0] == "deny"


# -- SessionStart ----------------------------------------------------------------------------


def test_session_start_resumes_the_sessions_task_and_exports_the_session(
    shared: Repo, tmp_path: Path
) -> None:
    env_file = tmp_path / "claude-env.sh"
    run = hook(shared, fixture("session_start", shared), env={"CLAUDE_ENV_FILE": str(env_file)})
    text = context(run, "SessionStart")
    assert text.startswith(f"=== RESUMING TASK: {TASK} (State: IMPLEMENTATION) ===")
    assert "resume" in text.lower()
    assert env_file.read_text() == "export TASKGATE_SESSION=s1\n"


def test_session_start_without_a_task(shared: Repo) -> None:
    run = hook(shared, fixture("session_start", shared, session_id="fresh"))
    assert context(run, "SessionStart").startswith("No active tasks for current session")


def test_session_start_recovers_a_checkpoint_after_compaction(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    to_synthesis(repo, TASK)
    repo.ok("present", TASK)
    run = hook(repo, fixture("session_start", repo, source="compact"))
    assert "CHECKPOINT RECOVERY: Task waiting for PLAN APPROVAL" in context(run, "SessionStart")


def test_session_start_reports_several_locks_as_corruption(impl: Repo) -> None:
    edit_store(impl, "DROP INDEX one_lock_per_session")
    edit_store(impl, "UPDATE tasks SET session_id = 's1' WHERE name = 'fix-typo'")
    text = context(hook(impl, fixture("session_start", impl)), "SessionStart")
    assert "[R-LCK-20] CORRUPTION" in text
    assert decision(hook(impl, fixture("pre_tool_use_write", impl)))[0] == "deny"


# -- UserPromptSubmit ------------------------------------------------------------------------


def test_the_persons_approval_is_recorded_with_its_provenance(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    to_synthesis(repo, TASK)
    early = context(hook(repo, fixture("user_prompt_submit", repo)), "UserPromptSubmit")
    assert "approval" not in early.lower() or "Recorded" not in early  # R-CKP-04: not presented
    repo.ok("present", TASK)
    text = context(hook(repo, fixture("user_prompt_submit", repo)), "UserPromptSubmit")
    assert "Recorded the person's plan approval (provenance human-prompt)" in text
    approvals = repo.ok("status", TASK, "--json").json()["approvals"]
    assert [(a["kind"], a["provenance"]) for a in approvals] == [("plan", "human-prompt")]


def test_a_question_is_an_interruption_that_keeps_the_state(impl: Repo) -> None:
    data = fixture("user_prompt_submit", impl, prompt="What architecture are you using?")
    text = context(hook(impl, data), "UserPromptSubmit")
    assert f"task '{TASK}'" in text
    assert "IMPLEMENTATION" in text
    assert impl.ok("status", TASK, "--json").json()["state"] == "IMPLEMENTATION"


def test_prompts_of_a_session_without_a_task_inject_nothing(shared: Repo) -> None:
    run = hook(shared, fixture("user_prompt_submit", shared, session_id="idle"))
    assert (run.code, run.out) == (0, "")


# -- PostToolUse, Stop, SubagentStop, SessionEnd ---------------------------------------------


def test_post_tool_use_records_tool_usage(impl: Repo) -> None:
    """Issue 18: appended without the engine (hooks/quick.py), to the same hash chain that
    `taskgate audit` verifies; the views are left for the next reader to re-render."""
    target = impl.worktree(TASK) / "notes.md"
    data = fixture("post_tool_use_write", impl, tool_input={"file_path": str(target)})
    seq_before = impl.ok("status", TASK, "--json").json()["_seq"]
    view_before = json.loads((impl.task_dir(TASK) / "task.json").read_text())["_seq"]
    assert hook(impl, data).code == 0
    with sqlite3.connect(impl.path / ".taskgate" / "state.db") as db:
        kind, payload = db.execute(
            "SELECT kind, payload FROM events WHERE task = ? ORDER BY seq DESC LIMIT 1", (TASK,)
        ).fetchone()
        seq_after = db.execute("SELECT seq FROM tasks WHERE name = ?", (TASK,)).fetchone()[0]
    assert (kind, json.loads(payload)) == (
        "tool_usage",
        {"session": "s1", "tool": "Write", "file_path": str(target), "agent": "main", "note": ""},
    )
    assert seq_after == seq_before + 1  # compare-and-swap on seq: the views are now stale
    assert json.loads((impl.task_dir(TASK) / "task.json").read_text())["_seq"] == view_before
    audit = impl.run("audit", TASK, "--json")
    checks = {c["id"]: c for c in audit.json()["tasks"][0]["checks"]}
    assert checks["hash-chain"]["passed"] and checks["views"]["passed"], checks
    assert impl.ok("status", TASK).code == 0  # a reader re-renders the stale views
    trail = json.loads((impl.task_dir(TASK) / "audit-trail.json").read_text())
    assert {"tool": "Write", "file_path": str(target), "agent": "main", "note": ""}.items() <= (
        trail["tool_usage"][-1].items()
    )
    assert trail["_seq"] == seq_after


def _trail_check(repo: Repo, check: str) -> dict[str, Any]:
    checks = {c["id"]: c for c in repo.run("audit", TASK, "--json").json()["tasks"][0]["checks"]}
    return dict(checks[check])


def test_hook_appended_events_are_the_chain_audit_verifies(impl: Repo) -> None:
    """Issue 18: eight PostToolUse hooks at once (each its own write transaction), paths with
    non-ASCII characters and quotes, then an engine step on top: one linear chain that
    `taskgate audit` recomputes; an edited hook-appended event breaks it."""
    names = [f'n\u00e9-{i} "q".md' for i in range(8)]
    procs = []
    argv = shlex.split(default_program())
    for name in names:
        data = fixture("post_tool_use_write", impl,
                       tool_input={"file_path": str(impl.worktree(TASK) / name)})  # fmt: skip
        procs.append(subprocess.Popen(
            [*argv, "PostToolUse"], cwd=impl.path, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        ))  # fmt: skip
        assert procs[-1].stdin is not None
        procs[-1].stdin.write(json.dumps(data))
        procs[-1].stdin.close()
    for proc in procs:
        assert proc.wait(timeout=120) == 0
        assert proc.stdout is not None and proc.stdout.read() == ""
    impl.ok("say", TASK, "what is the plan?")  # an engine step appends after the hooks
    assert _trail_check(impl, "hash-chain")["passed"]
    assert _trail_check(impl, "views")["passed"]
    with sqlite3.connect(impl.path / ".taskgate" / "state.db") as db:
        found = sorted(json.loads(p)["file_path"] for (p,) in db.execute(
            "SELECT payload FROM events WHERE kind = 'tool_usage'"))  # fmt: skip
    assert found == sorted(str(impl.worktree(TASK) / n) for n in names)
    edit_store(impl, "UPDATE events SET payload = replace(payload, 'n\\u00e9-3', 'x') "
               "WHERE kind = 'tool_usage'")  # fmt: skip
    assert not _trail_check(impl, "hash-chain")["passed"]


def test_audit_tells_a_lazily_rendered_view_from_an_edited_one(impl: Repo) -> None:
    """A SubagentStop recorded without the engine appends an event without a sequence bump:
    the views are behind by one event, which audit accepts; an edit to the same stale view
    (anything but what an append changes) is still reported."""
    shutil.rmtree(impl.path / ".taskgate" / "effects", ignore_errors=True)
    view = impl.task_dir(TASK) / "task.json"
    before = json.loads(view.read_text())
    assert hook(impl, fixture("subagent_stop", impl)).out == ""
    assert json.loads(view.read_text()) == before  # not rendered: one event behind
    assert _trail_check(impl, "views")["passed"]
    view.write_text(json.dumps({**before, "state": "COMPLETE"}))
    evidence = [f["evidence"] for f in _trail_check(impl, "views")["findings"]]
    assert any("'state' is \"COMPLETE\" in the view" in e for e in evidence), evidence


def test_post_tool_use_detects_and_repairs_an_edited_view(impl: Repo) -> None:
    view = impl.task_dir(TASK) / "task.json"
    edited = json.loads(view.read_text())
    edited["state"] = "COMPLETE"
    view.write_text(json.dumps(edited))
    data = fixture(
        "post_tool_use_write",
        impl,
        tool_name="Bash",
        tool_input={"command": f"echo edited > {view}"},
    )
    run = hook(impl, data)
    out = run.json()["hookSpecificOutput"]
    assert "changed outside taskgate" in out["additionalContext"]
    assert json.loads(view.read_text())["state"] == "IMPLEMENTATION"


def test_post_tool_use_after_a_command_that_writes_nothing_skips_the_engine(impl: Repo) -> None:
    """Most Bash calls write no file: PostToolUse then has nothing to record and answers
    without loading the engine; a command that writes still goes the full way."""
    argv = shlex.split(default_program())

    def loaded(command: str) -> tuple[str, set[str]]:
        data = fixture("post_tool_use_write", impl, tool_name="Bash",
                       tool_input={"command": command})  # fmt: skip
        proc = subprocess.run(
            [argv[0], "-X", "importtime", *argv[1:], "PostToolUse"],
            cwd=impl.path, input=json.dumps(data), capture_output=True, text=True, check=True,
        )  # fmt: skip
        return proc.stdout, {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()}

    before = json.loads((impl.task_dir(TASK) / "audit-trail.json").read_text())["tool_usage"]
    for quiet in ("git status && git log -1", "grep -rn TODO src | head"):
        out, modules = loaded(f"cd {impl.worktree(TASK)} && {quiet}")
        assert out == "" and "taskgate.engine.core" not in modules, quiet
    out, modules = loaded(f"cd {impl.worktree(TASK)} && echo x > notes.txt")
    assert out == "" and "taskgate.engine.core" not in modules  # recorded without it
    impl.ok("status", TASK)  # the next reader renders the views the hook left stale
    trail = json.loads((impl.task_dir(TASK) / "audit-trail.json").read_text())["tool_usage"]
    assert len(trail) == len(before) + 1
    assert trail[-1]["file_path"] == str(impl.worktree(TASK) / "notes.txt")
    out, modules = loaded(f"cd {impl.worktree(TASK)} && python3 gen.py > notes.txt")
    assert "taskgate.engine.core" in modules  # runs code: the engine checks the views too
    trail = json.loads((impl.task_dir(TASK) / "audit-trail.json").read_text())["tool_usage"]
    assert len(trail) == len(before) + 2


def test_stop_warns_when_a_lock_is_held_mid_phase(impl: Repo) -> None:
    run = hook(impl, fixture("stop", impl))
    assert f"still holds task '{TASK}' in IMPLEMENTATION" in run.json()["systemMessage"]
    run = hook(impl, fixture("session_end", impl))
    assert "R-LCK-21" in run.json()["systemMessage"]
    assert hook(impl, fixture("subagent_stop", impl)).out == ""
    events = impl.ok("status", TASK, "--json").json()
    assert events["state"] == "IMPLEMENTATION"


def test_stop_is_quiet_without_a_task(shared: Repo) -> None:
    run = hook(shared, fixture("stop", shared, session_id="idle"))
    assert (run.code, run.out) == (0, "")


def test_default_tasks_root_matches_the_configuration() -> None:
    from taskgate.engine.config import WorkspaceConfig
    from taskgate.hooks.context import DEFAULT_TASKS_ROOT

    assert WorkspaceConfig().tasks_root == DEFAULT_TASKS_ROOT


def test_hook_states_match_the_protocol() -> None:
    from taskgate.hooks.policy import STATES
    from taskgate.protocol.states import State

    assert set(State.__members__) == STATES


def test_cli_hook_answers_like_the_installed_command(shared: Repo) -> None:
    """`taskgate hook EVENT` (the console script) and the `python -S launch.py` command that
    `hooks install` writes are one dispatcher: same answers, allow and deny."""
    cases = [
        fixture("pre_tool_use_write", shared, tool_input={"file_path": ".taskgate/state.db"}),
        fixture("pre_tool_use_bash", shared, tool_input={"command": "git status"}),
        fixture("session_start", shared),
    ]
    for data in cases:
        installed = hook(shared, data)
        cli = shared.run("hook", data["hook_event_name"], stdin=json.dumps(data), session=None)
        assert (cli.code, cli.out) == (installed.code, installed.out)
    assert decision(hook(shared, cases[0]))[0] == "deny"


def test_the_hook_process_loads_no_heavy_module(shared: Repo) -> None:
    """Issue 7 speed: a PreToolUse decision imports neither `re` nor the json package (nor
    typing, enum, dataclasses, argparse), and the installed command skips site; a regression
    here costs every tool call milliseconds."""
    heavy = {"re", "json", "sqlite3", "argparse", "typing", "dataclasses", "enum", "site",
             "ast", "subprocess", "hashlib", "contextlib"}  # fmt: skip  # issue 15's analyser too
    # The first guarded call after the configuration changed reads it (the effect check's
    # unwatched patterns, kept per worktree: the test below); this one is not the first.
    _loaded_by(shared, fixture("pre_tool_use_bash", shared))
    for data in (
        fixture("pre_tool_use_write", shared, tool_input={"file_path": ".taskgate/state.db"}),
        fixture("pre_tool_use_bash", shared, tool_input={"command": "git status && ls"}),
        fixture("pre_tool_use_edit", shared),
    ):
        argv = shlex.split(default_program())
        proc = subprocess.run(
            [argv[0], "-X", "importtime", *argv[1:], "PreToolUse"],
            cwd=shared.path,
            input=json.dumps(data),
            capture_output=True,
            text=True,
            check=True,
        )
        loaded = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()}
        assert "taskgate.hooks.dispatch" in loaded
        assert not heavy & loaded, sorted(heavy & loaded)


def _loaded_by(repo: Repo, data: dict[str, Any]) -> set[str]:
    argv = shlex.split(default_program())
    proc = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:], data["hook_event_name"]],
        cwd=repo.path,
        input=json.dumps(data),
        capture_output=True,
        text=True,
        check=True,
    )
    return {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()}


def test_a_new_baseline_reads_no_configuration(shared: Repo) -> None:
    """Issue 15/18: the effect check's unwatched patterns come from taskgate.toml (tomllib,
    re: ~35 ms); they are kept per worktree, so a new baseline (a new owner session, a new
    state) reads them only when the configuration or the worktree's setup changed."""
    config = {"re", "tomllib", "taskgate.engine.config", "taskgate.engine.worktree_files"}
    effects_dir = shared.path / ".taskgate" / "effects"
    cache = effects_dir / ".unwatched.json"

    def fresh_baseline() -> set[str]:
        for baseline in effects_dir.glob("*"):
            if baseline != cache and baseline.is_file():
                baseline.unlink()
        loaded = _loaded_by(shared, fixture("pre_tool_use_bash", shared))
        assert "taskgate.hooks.effects" in loaded  # it did take a guarded baseline
        return loaded

    fresh_baseline()
    assert cache.is_file()
    loaded = fresh_baseline()
    assert not config & loaded, sorted(config & loaded)
    before = cache.read_bytes()
    toml = shared.path / "taskgate.toml"
    text = toml.read_text()
    toml.write_text(text + "\n")  # a changed configuration is read again
    try:
        # read again: the configuration module (tomllib only for a file holding more than
        # comments, engine/config.comments_only)
        assert "taskgate.engine.config" in fresh_baseline()
    finally:
        toml.write_text(text)
    assert cache.read_bytes() != before  # the new signature was kept


def test_the_engine_path_events_load_no_heavy_module_in_their_usual_case(impl: Repo) -> None:
    """Issue 18: PostToolUse after an Edit (the tool usage recorded), SessionStart of a new
    session, a prompt of a session holding no task, Stop, SubagentStop and SessionEnd (their
    events recorded) answer without the engine, and without what the PreToolUse path avoids
    (sqlite3's wrapper, json, re, typing, hashlib...)."""
    heavy = {"re", "json", "sqlite3", "argparse", "typing", "dataclasses", "enum", "site",
             "ast", "subprocess", "hashlib", "contextlib", "taskgate.engine.core",
             "taskgate.store.records", "datetime", "shlex"}  # fmt: skip
    target = impl.worktree(TASK) / "notes.md"
    # No effect-check baseline (the template's earlier PreToolUse calls may have left one):
    # comparing one loads the configuration (hooks/ignored.py), the effect check's own cost.
    shutil.rmtree(impl.path / ".taskgate" / "effects", ignore_errors=True)
    cases = [
        fixture("post_tool_use_write", impl, tool_input={"file_path": str(target)}),
        fixture("session_start", impl, session_id="fresh-session", source="startup"),
        fixture("user_prompt_submit", impl, session_id="fresh-session"),
        fixture("stop", impl),
        fixture("subagent_stop", impl),
        fixture("session_end", impl),
    ]
    argv = shlex.split(default_program())
    for data in cases:
        proc = subprocess.run(
            [argv[0], "-X", "importtime", *argv[1:], data["hook_event_name"]],
            cwd=impl.path, input=json.dumps(data), capture_output=True, text=True, check=True,
            env={**os.environ, "TASKGATE_DEBUG": "1"},
        )  # fmt: skip
        loaded = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()}
        assert "taskgate.hooks.quick" in loaded, data["hook_event_name"]
        why = [line for line in proc.stderr.splitlines() if not line.startswith("import time")]
        assert not heavy & loaded, (data["hook_event_name"], why, sorted(heavy & loaded))
    with sqlite3.connect(impl.path / ".taskgate" / "state.db") as db:
        query = "SELECT payload FROM events WHERE task = ? AND kind = 'tool_usage'"
        paths = [json.loads(p)["file_path"] for (p,) in db.execute(query, (TASK,))]
        kinds = [k for (k,) in db.execute("SELECT kind FROM events WHERE task = ?", (TASK,))]
    assert paths == [str(target)]
    assert kinds[-2:] == ["subagent_stop", "session_end"]  # Stop records nothing
    assert "No active tasks" in context(hook(impl, cases[1]), "SessionStart")
    assert (
        f"still holds task '{TASK}' in IMPLEMENTATION"
        in hook(impl, cases[3]).json()["systemMessage"]
    )
    assert _trail_check(impl, "hash-chain")["passed"] and _trail_check(impl, "views")["passed"]


def test_hook_help_lists_the_events(shared: Repo) -> None:
    run = shared.run("hook", "--help")
    assert run.code == 0
    assert "PreToolUse" in run.out
    assert os.path.exists(FIXTURES / "pre_tool_use_bash.json")


def test_fast_discovery_agrees_with_the_git_layer(shared: Repo, tmp_path: Path) -> None:
    from taskgate.git.repo import discover as git_discover
    from taskgate.hooks.context import discover

    agent = agents_of(shared, TASK)[0]
    for start in (
        shared.path,
        shared.worktree(TASK) / "src",
        shared.task_dir(TASK) / "agents" / agent / "code",
    ):
        paths = git_discover(start)
        assert discover(str(start)) == (str(paths.common_dir), str(paths.main_worktree))
    assert discover(str(tmp_path)) is None


def test_a_write_through_proc_or_a_descriptor_is_denied(shared: Repo) -> None:
    """/proc/self/cwd/f and /dev/fd/N/f name what the process that opens them sees: the hook's
    process is not Claude Code's, so taskgate cannot tell which file the tool would write."""
    worktree = shared.worktree(TASK)
    for path in (f"/proc/self/cwd/{worktree.relative_to(shared.path)}/README.md",
                 "/dev/fd/3/README.md", "/proc/1/root/tmp/x"):  # fmt: skip
        verdict, reason = write(shared, path)
        assert verdict == "deny" and reason.startswith("[R-REC-14]"), (path, reason)
    assert write(shared, "/tmp/taskgate-outside-ok.txt")[0] == "allow"


def test_a_tool_that_saves_into_a_directory_is_judged_by_it(shared: Repo) -> None:
    """Claude Code's Artifact tool saves an asset into `out_dir` (sdk-tools.d.ts, 2.1.332):
    into the store it is denied like a Write there; elsewhere it is allowed."""

    def artifact(**tool_input: object) -> tuple[str, str]:
        data = fixture("pre_tool_use_write", shared, tool_name="Artifact")
        data["tool_input"] = {"action": "read_asset", "url": "https://x", **tool_input}
        return decision(hook(shared, data))

    store = str(shared.path / ".taskgate")
    for key, value in (("out_dir", store), ("output_dir", store), ("local_path", store),
                       ("file_paths", [store])):  # fmt: skip
        verdict, reason = artifact(**{key: value})
        assert verdict == "deny" and reason.startswith("[R-"), (key, reason)
    assert artifact(out_dir="/tmp") == ("allow", "")
