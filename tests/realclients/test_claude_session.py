"""Sessions with the real Claude Code (issue 13): SessionStart context and CLAUDE_ENV_FILE reach
the model and later Bash commands, `--resume` keeps the session, the agent claims its task from
inside the session (the lease names Claude Code's own session id, also without the hooks'
TASKGATE_SESSION), and a session that does not own a task cannot write in its worktrees."""

from __future__ import annotations

from pathlib import Path

from realclients.conftest import (
    OTHER,
    OWNER,
    TASK,
    Claude,
    captured,
    copy_template,
    lease,
    new_session,
    status,
    to_implementation,
)
from realclients.mock_anthropic import call, say

ECHO = 'echo "tg=${TASKGATE_SESSION:-unset} cc=${CLAUDE_CODE_SESSION_ID:-unset}"'


def test_session_start_context_and_env_file_reach_the_model_and_bash(
    claude: Claude, capture: Path, templates: dict[str, Path], tmp_path: Path
) -> None:
    repo = copy_template(templates, "implementation", tmp_path / "repo")
    wt = repo.worktree(TASK)
    script = [call("Bash", command=ECHO, description="who am I"), say("ok")]
    first = claude.run("where were we?", wt, script, session=OWNER)
    assert first.session_id == OWNER
    request = claude.mock.main[0]
    context = "SessionStart hook additional context: === RESUMING TASK"
    assert context in request.all_text()
    assert f"=== RESUMING TASK: {TASK} (State: IMPLEMENTATION) ===" in request.all_text()
    echoed = claude.mock.last().last_tool_result()
    assert echoed is not None and f"tg={OWNER} cc={OWNER}" in echoed["text"]

    claude.mock.requests.clear()
    again = claude.run("go on", wt, list(script), "--resume", OWNER)
    assert again.session_id == OWNER  # --resume keeps the session (and so the lease)
    assert context in claude.mock.main[0].all_text()
    echoed = claude.mock.last().last_tool_result()
    assert echoed is not None and f"tg={OWNER} cc={OWNER}" in echoed["text"]
    sources = [e["source"] for e in captured(capture, "SessionStart")]
    assert sources == ["startup", "resume"]
    assert lease(repo) == OWNER


def _claim_and_implement(claude: Claude, repo_dir: Path, session: str) -> None:
    """The agent claims TASK from its own Bash; the lease names the Claude session."""
    from realclients.conftest import OwnedRepo

    repo = OwnedRepo(repo_dir)
    script = [call("Bash", command=f"taskgate start {TASK}", description="claim"), say("mine")]
    claude.run(f"work on {TASK}", repo.path, script, session=session)
    result = claude.mock.last().last_tool_result()
    assert result is not None and not result.get("is_error"), result
    assert lease(repo) == session
    to_implementation(repo, TASK, session=session)  # the protocol up to IMPLEMENTATION
    # Guard 7 for the very session that claimed it, started in the task worktree
    target = repo.worktree(TASK) / "src" / "login.py"
    claude.run(
        "implement it yourself",
        repo.worktree(TASK),
        [call("Write", file_path=str(target), content="x = 1\n"), say("denied")],
        "--resume",
        session,
    )
    denied = claude.mock.last().last_tool_result()
    assert denied is not None and denied["is_error"] and "[R-AGT-12]" in denied["text"]
    assert not target.exists()


def test_the_agent_claims_its_task_from_inside_claude_code(
    claude: Claude, hooks_installed: Path, templates: dict[str, Path], tmp_path: Path
) -> None:
    repo = copy_template(templates, "fresh", tmp_path / "repo")
    _claim_and_implement(claude, repo.path, new_session())


def test_without_the_hooks_env_the_claude_session_id_is_used(
    claude: Claude, templates: dict[str, Path], tmp_path: Path
) -> None:
    """No SessionStart hook, so no TASKGATE_SESSION in Bash: `taskgate start` falls back to
    CLAUDE_CODE_SESSION_ID, which Claude Code exports to every Bash command."""
    repo = copy_template(templates, "fresh", tmp_path / "repo")
    session = new_session()
    script = [call("Bash", command=f"{ECHO}; taskgate start {TASK}", description="c"), say("x")]
    claude.run(f"work on {TASK}", repo.path, script, session=session)
    result = claude.mock.last().last_tool_result()
    assert result is not None and f"tg=unset cc={session}" in result["text"], result
    assert lease(repo) == session


def test_a_session_that_does_not_own_the_task_cannot_write_its_worktrees(
    claude: Claude, hooks_installed: Path, templates: dict[str, Path], tmp_path: Path
) -> None:
    repo = copy_template(templates, "implementation", tmp_path / "repo")
    wt = repo.worktree(TASK)
    agent_wt = next((repo.task_dir(TASK) / "agents").iterdir()) / "code"
    task_md = repo.task_dir(TASK) / "task.md"
    before = task_md.read_text()
    head = repo.git("rev-parse", TASK)
    script = [
        call("Write", file_path=str(wt / "intruder.py"), content="x = 1\n"),
        call("Bash", command=f"echo x > {agent_wt}/intruder.txt", description="w"),
        call("Bash", command="git commit -q --allow-empty -m intruder", description="c"),
        call("Read", file_path=str(task_md)),
        call("Edit", file_path=str(task_md), old_string=before.splitlines()[0], new_string="#"),
        say("blocked"),
    ]
    run = claude.run("help out", wt, script, session=OTHER)
    results = [r for r in claude.mock.last().tool_results() if r.get("is_error")]
    assert len(results) == 4, claude.mock.last().tool_results()
    assert all("[R-LCK-04]" in r["text"] for r in results), results
    assert not (wt / "intruder.py").exists()
    assert not (agent_wt / "intruder.txt").exists()
    assert task_md.read_text() == before
    assert repo.git("rev-parse", TASK) == head  # no commit on the task's branch
    assert len(run.result["permission_denials"]) == 4
    data = status(repo)
    assert (data["state"], data["lock"]["session_id"]) == ("IMPLEMENTATION", OWNER)
