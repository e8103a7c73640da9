"""PreToolUse denials with the real Claude Code (issue 13): Write, Edit and Bash writes are
stopped (nothing on disk, an is_error tool result naming the rule), sub-agents are confined to
their own worktree, a hook that cannot start, crashes or times out blocks the call, and the
plugin layout (`claude --plugin-dir`) wires the same hooks."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from flow import agents_of
from realclients.conftest import OWNER, TASK, Claude, OwnedRepo, copy_template
from realclients.mock_anthropic import Request, Turn, call, say


def _denied(claude: Claude, rule: str) -> list[dict[str, object]]:
    results = [r for r in claude.mock.last().tool_results() if r.get("is_error")]
    assert results, claude.mock.last().tool_results()
    for result in results:
        assert f"[{rule}]" in str(result["text"]), result
    return results


@pytest.fixture
def impl(templates: dict[str, Path], tmp_path: Path) -> OwnedRepo:
    return copy_template(templates, "implementation", tmp_path / "repo")


def test_write_edit_and_bash_writes_are_stopped(
    claude: Claude, hooks_installed: Path, impl: OwnedRepo
) -> None:
    wt = impl.worktree(TASK)
    readme = wt / "README.md"
    before = readme.read_text()
    script = [
        call("Write", file_path=str(wt / "src" / "login.py"), content="x = 1\n"),
        call("Read", file_path=str(readme)),
        call("Edit", file_path=str(readme), old_string=before.strip(), new_string="changed"),
        call("Bash", command="mkdir -p src && echo x > src/auth.py", description="write"),
        call("Bash", command="sed -i s/sample/changed/ README.md", description="edit"),
        say("all denied"),
    ]
    run = claude.run("implement it", wt, script, session=OWNER)
    assert len(_denied(claude, "R-AGT-12")) == 4  # Guard 7 for each write
    assert not (wt / "src" / "login.py").exists()
    assert not (wt / "src" / "auth.py").exists()
    assert readme.read_text() == before
    tools = [d["tool_name"] for d in run.result["permission_denials"]]
    assert tools == ["Write", "Edit", "Bash", "Bash"]
    assert impl.git("-C", str(wt), "status", "--porcelain") == ""


def test_a_sub_agent_is_confined_to_its_own_worktree(
    claude: Claude, hooks_installed: Path, impl: OwnedRepo
) -> None:
    agent = agents_of(impl, TASK)[0]
    own = impl.task_dir(TASK) / "agents" / agent / "code"
    task_file = impl.worktree(TASK) / "src" / "by-agent.py"
    mine = own / "src" / "by-agent.py"
    marker = f"SUBAGENT {agent}: implement your part"
    sub_turns = [
        call("Write", file_path=str(task_file), content="x = 1\n"),
        call("Write", file_path=str(mine), content="x = 2\n"),
        say("implemented in my worktree"),
    ]
    main_turns = [
        call(
            "Agent",
            description="implement",
            prompt=marker,
            subagent_type=agent,
            run_in_background=False,
        ),
        say("done"),
    ]

    def script(request: Request) -> Turn:
        if marker in json.dumps(request.messages[:1]):
            return sub_turns.pop(0) if sub_turns else say("done")
        return main_turns.pop(0) if main_turns else say("done")

    agents = {agent: {"description": f"the {agent} stakeholder", "prompt": "You implement."}}
    claude.run(
        "delegate", impl.worktree(TASK), script, "--agents", json.dumps(agents), session=OWNER
    )
    sub = [r for r in claude.mock.main if marker in json.dumps(r.messages[:1])]
    results = sub[-1].tool_results()
    assert [r.get("is_error", False) for r in results] == [True, False], results
    assert "[R-AGT-13]" in str(results[0]["text"])
    assert not task_file.exists()
    assert mine.read_text() == "x = 2\n"


def _break_pre_tool_use(settings: Path, how: str) -> None:
    data = json.loads(settings.read_text())
    [group] = [g for g in data["hooks"]["PreToolUse"] if "taskgate-hook" in json.dumps(g)]
    entry = group["hooks"][0]
    assert entry["onFailure"] == "block"
    if how == "missing-interpreter":
        entry["command"] = entry["command"].replace(shlex.quote(sys.executable), "/nowhere/py")
    elif how == "crash":  # no `|| exit 2`: the client's onFailure alone must block
        entry["command"] = "echo not-json; exit 1 # taskgate-hook"
    else:
        entry["command"], entry["timeout"] = "sleep 20 # taskgate-hook", 1
    settings.write_text(json.dumps(data))


@pytest.mark.parametrize("how", ["missing-interpreter", "crash", "timeout"])
def test_a_hook_that_cannot_judge_blocks_the_call(
    how: str, claude: Claude, hooks_installed: Path, templates: dict[str, Path], tmp_path: Path
) -> None:
    repo = copy_template(templates, "fresh", tmp_path / "repo")
    _break_pre_tool_use(hooks_installed, how)
    target = repo.path / "notes.txt"  # a write the rules would allow: only the failure blocks
    claude.run(
        "write notes",
        repo.path,
        [call("Write", file_path=str(target), content="x\n"), say("blocked")],
        session=OWNER,
    )
    result = claude.mock.last().last_tool_result()
    assert result is not None and result.get("is_error"), result
    assert not target.exists()


def test_the_plugin_wires_the_same_hooks(claude: Claude, impl: OwnedRepo) -> None:
    from taskgate.hooks.install import plugin_dir

    wt = impl.worktree(TASK)
    target = wt / "src" / "login.py"
    script = [call("Write", file_path=str(target), content="x = 1\n"), say("denied")]
    run = claude.run("implement", wt, script, "--plugin-dir", str(plugin_dir()), session=OWNER)
    _denied(claude, "R-AGT-12")
    assert not target.exists()
    assert [d["tool_name"] for d in run.result["permission_denials"]] == ["Write"]
    # and the plugin's SessionStart context reached the model
    assert "=== RESUMING TASK" in claude.mock.main[0].all_text()


def test_an_mcp_write_tool_is_denied(
    claude: Claude, hooks_installed: Path, impl: OwnedRepo, tmp_path: Path
) -> None:
    """A real MCP server's write tool (`mcp__fs__write_file`, its path in `path`) is judged like
    Write: into the task worktree in IMPLEMENTATION it is Guard 7, into `.taskgate/` the store
    rule; nothing lands, and the same tool still writes outside taskgate's places."""
    from realclients.codex_runner import MCP_SERVER

    server = tmp_path / "mcp_fs.py"
    server.write_text(MCP_SERVER)
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps({"mcpServers": {"fs": {"command": sys.executable, "args": [str(server)]}}})
    )
    wt = impl.worktree(TASK)
    elsewhere = tmp_path / "notes.md"
    script = [
        call("mcp__fs__write_file", path=str(wt / "src" / "login.py"), content="x = 1\n"),
        call("mcp__fs__write_file", path=str(impl.path / ".taskgate" / "forged.md"), content="x"),
        call("mcp__fs__write_file", path=str(elsewhere), content="x"),
        say("done"),
    ]
    claude.run("write", wt, script, "--mcp-config", str(config), session=OWNER)
    results = claude.mock.last().tool_results()
    denied = [r for r in results if r.get("is_error")]
    assert len(denied) == 2, results
    assert "[R-AGT-12]" in str(denied[0]["text"]) and "[R-" in str(denied[1]["text"]), denied
    assert not (wt / "src" / "login.py").exists()
    assert not (impl.path / ".taskgate" / "forged.md").exists()
    assert elsewhere.read_text() == "x"  # the server is live: the denials are the hook's
