"""Codex as an interactive client: `taskgate hooks install --client codex` with the real Codex
CLI (0.169.0) against the mock Responses API server.

Codex runs its hooks in `codex exec` as in its terminal UI (same hook engine, same trust
check). The runs here use `--sandbox danger-full-access`, so that nothing but taskgate's hook
stands between the model's tool call and the file: what is not on disk was stopped by the hook.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from conftest import Repo, make_repo
from realclients.clients import codex_bin
from realclients.codex_runner import MCP_SERVER, Codex, codex_fixture  # noqa: F401
from realclients.conftest import lease, status, to_implementation, to_plan_presented
from realclients.mock_openai import (
    Turn,
    add_file_patch,
    custom_tool_call,
    function_call,
    mcp_call,
    shell,
)
from taskgate.hooks.codex_adapter import translate
from taskgate.hooks.codex_install import EVENTS

TASK = "add-login"


@pytest.fixture
def guarded(codex: Codex, tmp_path: Path) -> Repo:
    """A repository with a started task and taskgate's Codex hooks installed and trusted."""
    repo = make_repo(tmp_path / "repo")
    repo.ok("start", TASK, session="owner")
    installed = codex.taskgate(repo, "hooks", "install", "--client", "codex")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return repo


def test_install_writes_and_trusts_every_entry(codex: Codex, guarded: Repo) -> None:
    hooks = json.loads((codex.home / ".codex" / "hooks.json").read_text())["hooks"]
    assert sorted(hooks) == sorted(EVENTS)
    config = tomllib.loads((codex.home / ".codex" / "config.toml").read_text())
    trusted = config["hooks"]["state"]
    assert len(trusted) == len(EVENTS)
    assert all(v["trusted_hash"].startswith("sha256:") for v in trusted.values())
    status = codex.taskgate(guarded, "hooks", "status", "--client", "codex", "--json")
    assert status.returncode == 0, status.stdout + status.stderr
    changes = json.loads(status.stdout)["changes"]
    assert changes.pop("profile") == "ok"
    assert set(changes.values()) == {"ok, trusted"}
    again = codex.taskgate(guarded, "hooks", "install", "--client", "codex", "--json")
    changes = json.loads(again.stdout)["changes"]
    assert changes.pop("profile") == "unchanged (start sessions with: codex -p taskgate)"
    assert set(changes.values()) == {"unchanged, trusted"}


def test_the_taskgate_profile_keeps_the_store_read_only_without_the_hooks(
    codex: Codex, guarded: Repo
) -> None:
    """`codex -p taskgate`: Codex's own sandbox keeps .taskgate/ read-only at the OS level,
    so a write there fails even when no hook runs (here: none is installed any more); the
    rest of the workspace stays writable."""
    (codex.home / ".codex" / "hooks.json").write_text('{"hooks": {}}')
    store = guarded.path / ".taskgate" / "state.db"
    before = store.read_bytes()
    run = codex.exec(
        guarded.path,
        shell(f"echo forged >> {store}; echo exit=$?"),
        shell("echo notes > notes.txt; echo exit=$?"),
        sandbox="",
        extra=("-p", "taskgate"),
    )
    assert run.code == 0, run.err
    forged, notes = codex.mock.all_outputs()
    assert "Read-only file system" in forged and "exit=1" in forged, forged
    assert "exit=0" in notes, notes
    assert store.read_bytes() == before
    assert (guarded.path / "notes.txt").read_text() == "notes\n"


def test_without_codex_on_path_the_hooks_are_written_but_reported_untrusted(
    codex: Codex, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    env = {**codex.env(), "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2] / "src")
    done = subprocess.run([sys.executable, "-m", "taskgate", "hooks", "install", "--client",
                           "codex"], cwd=repo.path, env=env, capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "codex is not on PATH" in done.stdout and "/hooks" in done.stdout
    assert sorted(json.loads((codex.home / ".codex" / "hooks.json").read_text())["hooks"]) == (
        sorted(EVENTS)
    )


def test_an_untrusted_hook_is_reported(codex: Codex, guarded: Repo) -> None:
    """Codex silently skips a hook whose definition changed since it was trusted."""
    path = codex.home / ".codex" / "hooks.json"
    data = json.loads(path.read_text())
    data["hooks"]["PreToolUse"][0]["hooks"][0]["timeout"] = 29
    path.write_text(json.dumps(data))
    status = codex.taskgate(guarded, "hooks", "status", "--client", "codex")
    assert status.returncode == 1
    assert "PreToolUse: differs from this taskgate" in status.stdout
    assert "PreToolUse: Codex skips this hook (modified)" in status.stdout


def test_writes_to_the_store_are_denied(codex: Codex, guarded: Repo) -> None:
    store = guarded.path / ".taskgate" / "state.db"
    before = store.read_bytes()
    run = codex.exec(
        guarded.path,
        shell(f"echo forged >> {store}"),
        custom_tool_call("apply_patch", add_file_patch(".taskgate/forged.txt", "x")),
    )
    assert run.code == 0, run.err
    bash, patch = codex.mock.all_outputs()
    assert bash.startswith("Command blocked by PreToolUse hook: [R-"), bash
    assert patch.startswith("Command blocked by PreToolUse hook: [R-"), patch
    assert store.read_bytes() == before
    assert not (guarded.path / ".taskgate" / "forged.txt").exists()
    assert guarded.ok("audit", TASK, session="owner")


def test_an_mcp_write_tool_is_denied(codex: Codex, guarded: Repo, tmp_path: Path) -> None:
    """An MCP server's write tool (`mcp__fs__write_file`, its path in `path`) cannot write
    the store's directory; the same tool writes elsewhere."""
    server = tmp_path / "mcp_fs.py"
    server.write_text(MCP_SERVER)
    config = codex.home / ".codex" / "config.toml"
    config.write_text(
        config.read_text()
        + f"\n[mcp_servers.fs]\ncommand = {json.dumps(sys.executable)}\n"
        + f"args = [{json.dumps(str(server))}]\n"
    )
    forged = guarded.path / ".taskgate" / "forged.md"
    elsewhere = tmp_path / "notes.md"
    run = codex.exec(
        guarded.path,
        mcp_call("fs", "write_file", {"path": str(forged), "content": "x"}),
        mcp_call("fs", "write_file", {"path": str(elsewhere), "content": "x"}),
    )
    assert run.code == 0, run.err
    denied, written = codex.mock.all_outputs()
    assert denied.startswith("Tool call blocked by PreToolUse hook: [R-LCK-09]"), denied
    assert not forged.exists()
    assert "wrote" in written and elsewhere.read_text() == "x"


def test_a_session_that_does_not_own_the_task_cannot_write_its_worktree(
    codex: Codex, guarded: Repo
) -> None:
    """The task belongs to another session: this Codex session's apply_patch into the task
    worktree is denied and nothing lands; a file outside taskgate's places is written."""
    worktree = guarded.worktree(TASK)
    run = codex.exec(
        worktree,
        custom_tool_call("apply_patch", add_file_patch("src/login.py", "def login(): ...")),
        shell("echo ok > /dev/null"),
    )
    assert run.code == 0, run.err
    patch, harmless = codex.mock.all_outputs()
    assert patch.startswith("Command blocked by PreToolUse hook: [R-"), patch
    assert "Process exited with code 0" in harmless
    assert not (worktree / "src" / "login.py").exists()


def test_the_codex_session_owns_its_task_and_its_main_agent_cannot_implement(
    codex: Codex, tmp_path: Path
) -> None:
    """The flow a person follows: codex started in the repository claims the task itself
    (`taskgate start` falls back to CODEX_SESSION_ID, the id Codex hands its hooks); later, in
    IMPLEMENTATION, the main agent's own edits to the task worktree are denied (the
    stakeholder agents implement) and not on disk."""
    repo = make_repo(tmp_path / "repo")
    assert codex.taskgate(repo, "hooks", "install", "--client", "codex").returncode == 0
    run = codex.exec(repo.path, shell(f"taskgate start {TASK}"))
    assert run.code == 0, run.err
    session = codex.mock.turns[-1].headers["session-id"]
    (started,) = codex.mock.all_outputs()
    assert "Process exited with code 0" in started, started
    assert lease(repo) == session
    to_implementation(repo, TASK, session=session)
    worktree = repo.worktree(TASK)
    patch = add_file_patch("src/auth/login.py", "def login(): ...")
    run = codex.exec(worktree, custom_tool_call("apply_patch", patch), resume=session)
    assert run.code == 0, run.err
    assert codex.mock.turns[-1].headers["session-id"] == session
    assert f"=== RESUMING TASK: {TASK} (State: IMPLEMENTATION)" in json.dumps(
        codex.mock.turns[-1].input
    )  # SessionStart (source resume): the hook's context reached the model
    denied = codex.mock.all_outputs()[-1]
    assert denied.startswith("Command blocked by PreToolUse hook: [R-AGT-12]"), denied
    assert not (worktree / "src" / "auth" / "login.py").exists()


def test_an_interactive_shell_is_denied_since_its_input_reaches_no_hook(
    codex: Codex, guarded: Repo
) -> None:
    """Codex 0.169 sends the text the model types into a running command (`write_stdin`) to no
    hook. So a shell started with a terminal would run anything unseen: in a taskgate
    repository the hook denies starting it, and nothing it would have typed lands."""
    worktree = guarded.worktree(TASK)  # owned by another session

    def type_into_it(turn: Turn) -> dict[str, object]:
        running = re.search(r"session ID (\d+)", turn.outputs()[-1]["output"])
        chars = {"session_id": int(running.group(1)) if running else 0,
                 "chars": "echo x > evil.py\n", "yield_time_ms": 500}  # fmt: skip
        return function_call("write_stdin", chars)

    run = codex.exec(
        worktree,
        function_call("exec_command", {"cmd": "bash --norc", "tty": True, "yield_time_ms": 500}),
        type_into_it,
    )
    assert run.code == 0, run.err
    started = codex.mock.all_outputs()[0]
    assert started.startswith("Command blocked by PreToolUse hook: [R-REC-14]"), started
    assert "write_stdin" in started
    assert not (worktree / "evil.py").exists()


def test_a_prompt_an_agent_hands_to_codex_approves_nothing(codex: Codex, tmp_path: Path) -> None:
    """At PLAN APPROVAL the agent resumes its own session from its shell with "approved": that
    Codex runs inside the agent's command, so its prompt is the agent's, not the person's, and
    no approval is recorded. The same words typed by the person approve the plan."""
    repo = make_repo(tmp_path / "repo")
    assert codex.taskgate(repo, "hooks", "install", "--client", "codex").returncode == 0
    assert codex.exec(repo.path, shell(f"taskgate start {TASK}")).code == 0
    session = codex.mock.turns[-1].headers["session-id"]
    to_plan_presented(repo, TASK, session=session)
    nested = (f"{codex_bin()} exec --json --sandbox danger-full-access resume {session} "
              "approved < /dev/null > /dev/null; echo exit=$?")  # fmt: skip
    run = codex.exec(repo.path, shell(nested))
    assert run.code == 0, run.err
    assert "exit=0" in codex.mock.all_outputs()[-1]
    prompts = [t for t in codex.mock.turns if t.headers.get("session-id") == session]
    assert "approved" in prompts[-1].user_text()  # the nested Codex did hand it over
    assert "approves nothing" in json.dumps(prompts[-1].input)
    assert not status(repo)["approvals"] or not any(
        a["kind"] == "plan" and a["approved_at"] for a in status(repo)["approvals"]
    )
    assert codex.exec(repo.path, prompt="approved", resume=session).code == 0  # the person
    (plan,) = [a for a in status(repo)["approvals"] if a["kind"] == "plan"]
    assert plan["approved_at"] and plan["provenance"] == "human-prompt"


def test_a_patch_is_judged_as_a_write_per_file() -> None:
    """Codex checks the patch grammar before its hooks run; taskgate reads the same headers."""
    patch = (
        "*** Begin Patch\n*** Add File: a.py\n+x\n*** Update File: b.py\n*** Move to: c.py\n"
        "@@\n-x\n+y\n*** Delete File: d.py\n*** End Patch\n"
    )
    data = {"session_id": "s", "cwd": "/r", "tool_name": "apply_patch",
            "tool_input": {"command": patch}}  # fmt: skip
    calls = translate(data) or []
    assert [c["tool_input"]["file_path"] for c in calls] == ["a.py", "b.py", "c.py", "d.py"]
    assert {c["tool_name"] for c in calls} == {"Write"}
    assert translate({**data, "tool_input": {"command": "rm -rf ."}}) == []  # denied
    typed = translate({**data, "tool_name": "write_stdin", "tool_input": {"chars": "rm x\n"}})
    assert typed == [{**data, "tool_name": "Bash", "tool_input": {"command": "rm x\n"}}]
    assert translate({**data, "tool_name": "Bash"}) is None  # as it is


def test_a_patch_header_with_padding_is_read_as_codex_reads_it() -> None:
    """Codex trims a hunk's first line before matching its marker and splits lines at "\\n"
    only: padded headers, CRLF lines and lenient heredoc wrappers name their files too."""
    patch = ("<<'EOF'\n*** Begin Patch\r\n*** Add File: a.py\r\n+x\r\n   *** Add File: b.py\n+y\n"
             "\t*** Delete File: c.py \n*** Update File: d.py\n*** Move to: e.py\n@@\n-x\n+y\n"
             "*** End Patch\nEOF\n")  # fmt: skip
    data = {"session_id": "s", "cwd": "/r", "tool_name": "apply_patch",
            "tool_input": {"command": patch}}  # fmt: skip
    paths = [c["tool_input"]["file_path"] for c in translate(data) or []]
    assert paths == ["a.py", "b.py", "c.py", "d.py", "e.py"]


def test_a_padded_header_in_a_real_patch_is_judged(
    codex: Codex, guarded: Repo, tmp_path: Path
) -> None:
    """The real Codex applies a hunk whose header is indented; taskgate sees its file: the
    patch adding a file outside the repository and, indented, one in the store is blocked."""
    outside = tmp_path / "outside.txt"
    patch = (f"*** Begin Patch\n*** Add File: {outside}\n+ok\n"
             "  *** Add File: .taskgate/forged.txt\n+x\n*** End Patch\n")  # fmt: skip
    run = codex.exec(guarded.path, custom_tool_call("apply_patch", patch))
    assert run.code == 0, run.err
    [answer] = codex.mock.all_outputs()
    assert answer.startswith("Command blocked by PreToolUse hook: [R-"), answer
    assert not (guarded.path / ".taskgate" / "forged.txt").exists()
    assert not outside.exists()


def test_uninstall_leaves_foreign_hooks(codex: Codex, guarded: Repo) -> None:
    path = codex.home / ".codex" / "hooks.json"
    data = json.loads(path.read_text())
    foreign = {"hooks": [{"type": "command", "command": "true"}]}
    data["hooks"]["Stop"].insert(0, foreign)
    path.write_text(json.dumps(data))
    done = codex.taskgate(guarded, "hooks", "uninstall", "--client", "codex")
    assert done.returncode == 0, done.stderr
    assert json.loads(path.read_text()) == {"hooks": {"Stop": [foreign]}}
    assert not (codex.home / ".codex" / "taskgate.config.toml").exists()


def test_a_foreign_profile_file_is_never_overwritten(tmp_path: Path) -> None:
    from taskgate.hooks.codex_install import PROFILE_TEXT, Report, profile_path, sync_profile

    path = profile_path(tmp_path)
    path.write_text('model = "mine"\n')
    report = Report(tmp_path / "hooks.json")
    sync_profile(report, tmp_path, verb="install")
    assert report.changes["profile"] == "foreign" and "move it away" in report.problems[0]
    assert path.read_text() == 'model = "mine"\n'
    path.unlink()
    for verb, change in (("status", "missing"), ("install", "added"), ("status", "ok"),
                         ("install", "unchanged"), ("uninstall", "removed")):  # fmt: skip
        report = Report(tmp_path / "hooks.json")
        sync_profile(report, tmp_path, verb=verb)
        assert report.changes["profile"].split(" (")[0] == change, (verb, report)
        if verb == "install":
            assert path.read_text() == PROFILE_TEXT
    assert not path.exists()


@pytest.mark.parametrize(
    ("command", "denied"),
    [("bash", True), ("bash --norc", True), ("env FOO=1 node", True), ("python3 -i", True),
     ("vim src/app.py", True), ("sqlite3", True), ("cat | sh", True),
     ("python3 script.py", False), ("bash -c 'echo hi'", False), ("node -e 'x'", False),
     ("python3 - <<'EOF'\nprint(1)\nEOF", False), ("git status", False)],
)  # fmt: skip
def test_which_commands_could_be_driven_unseen(tmp_path: Path, command: str, denied: bool) -> None:
    from taskgate.hooks.codex_adapter import feeds_stdin

    repo = make_repo(tmp_path / "repo")
    data = {"tool_name": "Bash", "session_id": "nobody", "tool_input": {"command": command}}
    assert bool(feeds_stdin({**data, "cwd": str(repo.path)})) is denied
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    assert feeds_stdin({**data, "cwd": str(outside)}) == ""  # not taskgate's business


def test_a_run_agent_may_write_its_private_directory_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the adapter lets through for an agent of `taskgate run` before the dispatcher."""
    from taskgate.agents.codex_sandbox import SANDBOX_DIR
    from taskgate.hooks.codex_adapter import PRIVATE_DIR, writes_only_private

    assert PRIVATE_DIR == SANDBOX_DIR
    task_dir = tmp_path / "tasks" / "t"
    private = task_dir / "agents" / "quality" / "codex"
    private.mkdir(parents=True)
    report = private / "out" / "t-quality-requirements.md"

    def bash(command: str) -> bool:
        data = {"tool_name": "Bash", "cwd": str(tmp_path), "tool_input": {"command": command}}
        return writes_only_private(data, None)

    assert not bash(f"echo x > {report}")  # not a run agent: the dispatcher decides
    monkeypatch.setenv("TASKGATE_AGENT", "quality")
    monkeypatch.setenv("TASKGATE_TASK_DIR", str(task_dir))
    assert bash(f"echo x > {report}")
    assert not bash(f"echo x > {report} && echo y > {task_dir / 'task.md'}")
    assert not bash(f"echo x > {private}/../../test/codex/out/r.md")
    assert not bash("git status")  # writes nothing: nothing to let through early
    patch = {"tool_name": "apply_patch", "cwd": str(private)}
    assert writes_only_private(patch, [{"tool_input": {"file_path": "out/r.md"}}])
    assert not writes_only_private(patch, [{"tool_input": {"file_path": "../../../task.md"}}])
    monkeypatch.setenv("TASKGATE_AGENT", "../quality")
    assert not bash(f"echo x > {report}")
