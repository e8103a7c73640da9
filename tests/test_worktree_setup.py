"""Worktrees ready to work in (issue 21): .worktreeinclude copies, shared directories, setup
commands, port blocks, cleanup. Real git, the real CLI and real commands."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from conftest import Repo, git, make_repo
from flow import PASSING_BUILD, agents_of, to_classified, to_complete
from taskgate.agents.base import Mode
from taskgate.agents.command import agent_env
from taskgate.agents.config import parse_agents_config
from taskgate.agents.invoke import build_request
from taskgate.engine import worktree_files as wf
from taskgate.engine.workspace import find_workspace
from taskgate.engine.worktree_config import WorktreeConfig, parse_worktree
from taskgate.errors import UsageError
from test_agents_backends import BRIEF

SECRET = "API_KEY=s3cr3t-4f9c2e71"
TASK = "add-login"

# Appends the port block and index to a file in the worktree: one line per run, so a command
# that ran twice is visible.
MARKER_CMD = [
    sys.executable,
    "-c",
    "import os; open('setup-marker.txt', 'a').write(os.environ['TASKGATE_PORT_BASE'] + ' ' "
    "+ os.environ['TASKGATE_WORKTREE_INDEX'] + ' ' + os.environ.get('TASKGATE_SESSION', '-')"
    " + '\\n')",
]


def failing_cmd(flag: Path) -> list[str]:
    """Fails (exit 3) until `flag` exists: the fix a person makes."""
    code = f"import os, sys; sys.exit(0 if os.path.exists({str(flag)!r}) else 3)"
    return [sys.executable, "-c", code]


def toml_list(cmds: list[list[str]]) -> str:
    return json.dumps(cmds)


def project(path: Path, worktree: str, *, validation: str = PASSING_BUILD) -> Repo:
    """A repository with an ignored .env (0600) named by .worktreeinclude and a node_modules
    directory in the main worktree; taskgate.toml with `worktree` as its [worktree] table."""
    repo = make_repo(path, config=validation + "\n[worktree]\n" + worktree)
    (path / ".gitignore").write_text(".env\nnode_modules/\n")
    (path / ".worktreeinclude").write_text(".env\n")
    git(path, "add", ".gitignore", ".worktreeinclude")
    git(path, "commit", "-q", "-m", "ignore local files")
    env = path / ".env"
    env.write_text(SECRET + "\n")
    env.chmod(0o600)
    (path / "node_modules" / "left-pad").mkdir(parents=True)
    (path / "node_modules" / "left-pad" / "index.js").write_text("module.exports = 1\n")
    return repo


def worktrees(repo: Repo, task: str) -> dict[str, Path]:
    """'task' and each agent name -> worktree path."""
    result = {"task": repo.worktree(task)}
    for agent in agents_of(repo, task):
        result[agent] = repo.task_dir(task) / "agents" / agent / "code"
    return result


def store_events(repo: Repo, kind: str) -> list[dict[str, Any]]:
    conn = sqlite3.connect(repo.path / ".taskgate" / "state.db")
    try:
        rows = conn.execute("SELECT payload FROM events WHERE kind = ? ORDER BY seq", (kind,))
        return [json.loads(r[0]) for r in rows]
    finally:
        conn.close()


def files_containing(root: Path, needle: bytes, skip: set[Path]) -> list[Path]:
    """Every file under root (not under `skip`) whose bytes contain needle."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if Path(dirpath, d) not in skip]
        for name in filenames:
            path = Path(dirpath, name)
            if not path.is_symlink() and needle in path.read_bytes():
                found.append(path)
    return found


def test_classify_prepares_every_worktree(tmp_path: Path) -> None:
    repo = project(tmp_path / "repo", f"setup = {toml_list([MARKER_CMD])}\n")
    base = repo.git("rev-parse", "main")
    started = repo.ok("start", TASK)
    assert "setup [task] created setup-marker.txt: kept out of git" in started.err
    classify = repo.ok("classify", TASK, cwd=repo.worktree(TASK))
    assert "setup [architect]" in classify.err and "ok in" in classify.err  # a line per command
    trees = worktrees(repo, TASK)
    assert len(trees) >= 3
    bases = {}
    for name, wt in trees.items():
        copy = wt / ".env"
        assert copy.read_text() == SECRET + "\n", name
        assert stat.S_IMODE(copy.stat().st_mode) == 0o600, name
        lines = (wt / "setup-marker.txt").read_text().splitlines()
        assert len(lines) == 1, (name, lines)  # run once
        port, index, session = lines[0].split()
        assert session == "-"  # setup commands never act as the task's owner
        bases[name] = (int(port), int(index))
        # nothing staged, nothing new, nothing committed
        assert git(wt, "status", "--porcelain", "--untracked-files=all") == "", name
        assert git(wt, "rev-parse", "HEAD") == base, name
        env = json.loads((repo.task_dir(TASK) / ("setup" if name == "task" else
                          f"agents/{name}/setup") / "env.json").read_text())  # fmt: skip
        assert env["TASKGATE_PORT_BASE"] == port and env["TASKGATE_WORKTREE_INDEX"] == index
    ports = [p for p, _ in bases.values()]
    assert len(set(ports)) == len(ports) and len({i for _, i in bases.values()}) == len(ports)
    assert all(abs(a - b) >= 20 for a in ports for b in ports if a != b)  # whole blocks
    assert git(repo.path, "status", "--porcelain") == "?? taskgate.toml"  # main untouched
    # the setup's output is kept beside the agent's transcripts
    log = (
        repo.task_dir(TASK)
        / "agents"
        / "architect"
        / "setup"
        / f"1-{Path(sys.executable).name}.log"
    )
    assert "# exit 0" in log.read_text()
    # the audit trail lists the copied file by path only; the secret is nowhere in the store,
    # the views or the logs
    prepared = store_events(repo, "worktree_prepared")
    assert {e["branch"] for e in prepared} == {TASK} | {f"{TASK}-{a}" for a in trees if a != "task"}
    assert all(e["copied"] == [".env"] and e["result"] == "SUCCESS" for e in prepared)
    assert SECRET.encode() not in (repo.path / ".taskgate" / "state.db").read_bytes()
    skip = set(trees.values()) | {repo.path / ".git"}
    assert files_containing(repo.path / ".taskgate", SECRET.encode(), skip) == []

    # the agents' processes get their worktree's block (the command/claude/codex backends)
    ws = find_workspace(repo.path)
    agents = parse_agents_config({}, repo.path)
    for name, (port, index) in bases.items():
        if name != "task":
            request = build_request(ws, agents, BRIEF, name, Mode.REQUIREMENTS)
            env = agent_env(request)
            assert env["TASKGATE_PORT_BASE"] == str(port), name
            assert env["TASKGATE_WORKTREE_INDEX"] == str(index), name

    # a second task, live at the same time, gets other blocks (recorded in the store)
    repo.ok("start", "fix-typo", session="s2")
    other = json.loads((repo.task_dir("fix-typo") / "setup" / "env.json").read_text())
    assert int(other["TASKGATE_PORT_BASE"]) not in ports


def test_failing_setup_names_the_command_and_resumes(tmp_path: Path) -> None:
    flag = tmp_path / "fixed"
    cmds = [MARKER_CMD, failing_cmd(flag)]
    # the flag is outside the repository: readable in the sandbox once listed (issue 14)
    readable = f'{PASSING_BUILD}\n[agents]\nsandbox_readable = ["{tmp_path}"]\n'
    repo = project(tmp_path / "repo", f"setup = {toml_list(cmds)}\n", validation=readable)
    wt = repo.worktree(TASK)

    started = repo.run("start", TASK)
    assert started.code == 4, started.err  # needs a person, not an agent failure
    assert "setup command" in started.err and "sys.exit(0 if os.path.exists" in started.err
    assert "the worktree of the task (exit 3)" in started.err
    assert f"hint: fix the cause (see the log), then run 'taskgate start {TASK}'" in started.err
    status = repo.ok("status", TASK, "--json").json()
    assert status["pending"]["op"] == "create_task_worktree"  # journaled: resumable
    refused = repo.run("classify", TASK, cwd=wt)
    assert refused.code != 0  # the state does not move past an unprepared worktree

    flag.touch()
    repo.ok("start", TASK)  # the same command resumes...
    assert (wt / "setup-marker.txt").read_text().count("\n") == 1  # ...without redoing step 1
    assert repo.ok("status", TASK, "--json").json()["pending"] is None

    flag.unlink()
    failed = repo.run("classify", TASK, cwd=wt)
    assert failed.code == 4
    agents = agents_of(repo, TASK)
    names = ", ".join(f"'{a}'" for a in agents)  # one paragraph for the same failure
    assert f"failed in the worktrees of {names} (exit 3)" in failed.err
    assert failed.err.count("\n    log: ") == len(agents)
    assert failed.err.count("setup command '") == 1
    assert f"then run 'taskgate classify {TASK}' again" in failed.err
    events = store_events(repo, "worktree_prepared")
    assert any(e.get("result") == "FAILURE" and e["agent"] == "architect" for e in events)
    assert repo.run("transition", TASK, "REQUIREMENTS", cwd=wt).code == 1  # still pending

    flag.touch()
    diagnosis = repo.ok("recover", TASK, "--repair", "--json")  # or rerun classify
    assert "create_agent_worktrees" in diagnosis.out
    for name, path in worktrees(repo, TASK).items():
        assert (path / "setup-marker.txt").read_text().count("\n") == 1, name
        assert (path / ".env").read_text() == SECRET + "\n"
    repo.ok("transition", TASK, "REQUIREMENTS", cwd=wt)


def test_recover_recreates_a_deleted_worktree_ready(tmp_path: Path) -> None:
    repo = project(tmp_path / "repo", f"setup = {toml_list([MARKER_CMD])}\n")
    to_classified(repo, TASK)
    # an agent added later gets its worktree ready too (R-AGT-16)
    repo.ok("transition", TASK, "REQUIREMENTS", cwd=repo.worktree(TASK))
    repo.ok("agent", "add", TASK, "performance", "--why", "login must stay fast under load")
    added = repo.task_dir(TASK) / "agents" / "performance" / "code"
    assert (added / ".env").read_text() == SECRET + "\n"
    assert len((added / "setup-marker.txt").read_text().splitlines()) == 1
    agent = agents_of(repo, TASK)[0]
    path = repo.task_dir(TASK) / "agents" / agent / "code"
    before = (path / "setup-marker.txt").read_text()
    shutil.rmtree(path)
    repo.ok("recover", TASK, "--repair")
    assert (path / ".env").read_text() == SECRET + "\n"
    assert stat.S_IMODE((path / ".env").stat().st_mode) == 0o600
    assert (path / "setup-marker.txt").read_text() == before  # setup ran afresh, same block
    assert git(path, "status", "--porcelain", "--untracked-files=all") == ""


def test_cleanup_keeps_the_main_worktree_originals(tmp_path: Path) -> None:
    seen = tmp_path / "validation-ports.txt"
    probe = (
        f"import os; open({str(seen)!r}, 'a').write(os.environ.get('TASKGATE_PORT_BASE', '-') "
        "+ ' ' + str(os.path.exists('.env')) + ' ' + str(os.path.islink('node_modules')) + '\\n')"
    )
    # the probe writes outside the repository: a write the agents' sandbox refuses (issue 14)
    validation = '[agents]\nsandbox = "none"\n\n'
    validation += f"[validation]\ncommands = [{json.dumps([sys.executable, '-c', probe])}]\n"
    validation += 'rebuild_on_main = "always"\n'  # build main although it is the validated tree
    worktree = f'symlink = ["node_modules"]\nsetup = {toml_list([MARKER_CMD])}\n'
    repo = project(tmp_path / "repo", worktree, validation=validation)
    main_env = repo.path / ".env"
    original = main_env.stat()
    to_complete(repo, TASK)
    trees = worktrees(repo, TASK)
    for wt in trees.values():
        link = wt / "node_modules"
        assert link.is_symlink() and os.readlink(link) == str(repo.path / "node_modules")
    task_base = json.loads((repo.task_dir(TASK) / "setup" / "env.json").read_text())
    assert seen.read_text().splitlines() == [f"{task_base['TASKGATE_PORT_BASE']} True True"]
    repo.ok("cleanup", TASK)
    # the build on main (R-CMP-08) ran in a worktree prepared the same way
    assert seen.read_text().splitlines() == [f"{task_base['TASKGATE_PORT_BASE']} True True"] * 2
    for wt in trees.values():
        assert not wt.exists() and not wt.is_symlink()
    assert main_env.read_text() == SECRET + "\n"
    assert main_env.stat().st_ino == original.st_ino
    assert stat.S_IMODE(main_env.stat().st_mode) == 0o600
    assert (
        repo.path / "node_modules" / "left-pad" / "index.js"
    ).read_text() == "module.exports = 1\n"
    assert git(repo.path, "ls-files", "--others", "--exclude-standard") == "taskgate.toml"
    # the copies were disposable: no quarantine snapshot holds the secret or setup's output
    refs = git(repo.path, "for-each-ref", "--format=%(objecttype) %(refname)").splitlines()
    for kind, ref in (line.split() for line in refs):
        if kind != "commit":  # e.g. the audit chain's anchor (a blob)
            assert SECRET not in git(repo.path, "cat-file", "-p", ref), ref
            continue
        grep = subprocess.run(["git", "grep", "-F", "-l", SECRET, ref], cwd=repo.path,
                              capture_output=True, text=True)  # fmt: skip
        assert grep.returncode == 1, (ref, grep.stdout)
        names = git(repo.path, "ls-tree", "-r", "--name-only", ref)
        assert "setup-marker.txt" not in names and ".env" not in names.split(), ref
    # the finished task's blocks are free again
    repo.ok("start", "fix-typo")
    again = json.loads((repo.task_dir("fix-typo") / "setup" / "env.json").read_text())
    assert again["TASKGATE_WORKTREE_INDEX"] == "1"


# -- the pieces, against real git -------------------------------------------------------------


def sample(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(main worktree, a fresh worktree, common dir)."""
    main = tmp_path / "main"
    main.mkdir()
    git(main, "init", "-q", "-b", "main")
    (main / ".gitignore").write_text("*.local\n!keep.local\nbuild/\n")
    (main / "app.py").write_text("print(1)\n")
    git(main, "add", ".")
    git(main, "commit", "-q", "-m", "init")
    wt = tmp_path / "wt"
    git(main, "worktree", "add", "-q", "-b", "topic", str(wt))
    return main, wt, main / ".git"


def test_patterns_are_matched_by_git_and_placed_files_stay_ignored(tmp_path: Path) -> None:
    main, wt, common = sample(tmp_path)
    (main / "db.local").write_text("x")
    (main / "keep.local").write_text("re-included by .gitignore")
    (main / "config").mkdir()
    (main / "config" / "dev.json").write_text("{}")
    (main / "config" / "other.txt").write_text("not matched")
    (main / ".worktreeinclude").write_text("*.local\n/config/*.json\n# a comment\n")
    cfg = WorktreeConfig(include=("app.py",))  # tracked: never listed
    found = wf.included_files(main, cfg, [".taskgate"])
    assert found == ["config/dev.json", "db.local", "keep.local"]
    placed = wf.place(main, wt, cfg, found, common)
    assert placed.copied == ["config/dev.json", "db.local"]
    assert "/config/dev.json" in placed.excluded  # not ignored by .gitignore: excluded
    assert any(s.startswith("keep.local: removed again") for s in placed.skipped)
    assert not (wt / "keep.local").exists()  # a .gitignore re-includes it: never left behind
    assert git(wt, "status", "--porcelain", "--untracked-files=all") == ""
    assert git(wt, "add", "-A", "--dry-run") == ""


def test_links_are_ignored_and_existing_paths_are_left_alone(tmp_path: Path) -> None:
    main, wt, common = sample(tmp_path)
    (main / "build").mkdir()
    (main / "build" / "out.bin").write_text("big")
    (main / "vendor").mkdir()
    (main / "vendor" / "lib.txt").write_text("lib")
    (wt / "db.local").write_text("the agent's own")
    (main / "db.local").write_text("main's")
    cfg = WorktreeConfig(symlink=("build",), copy=("vendor",))
    placed = wf.place(main, wt, cfg, ["db.local"], common)
    assert placed.linked == ["build"] and placed.copied_dirs == ["vendor"]
    assert (wt / "db.local").read_text() == "the agent's own"  # never overwritten
    assert any(s.startswith("db.local: the worktree already has") for s in placed.skipped)
    assert git(wt, "status", "--porcelain", "--untracked-files=all") == ""  # link ignored
    # removing the worktree removes the link, not the directory it points at
    git(main, "worktree", "remove", "--force", str(wt))
    assert (main / "build" / "out.bin").read_text() == "big"


def test_copy_keeps_mode_and_disposable_lists_only_unedited_copies(tmp_path: Path) -> None:
    main, wt, common = sample(tmp_path)
    for name, mode in (("a.local", 0o600), ("b.local", 0o640)):
        (main / name).write_text(name)
        (main / name).chmod(mode)
    placed = wf.place(main, wt, WorktreeConfig(), ["a.local", "b.local"], common)
    assert stat.S_IMODE((wt / "a.local").stat().st_mode) == 0o600
    assert stat.S_IMODE((wt / "b.local").stat().st_mode) == 0o640
    (wt / "b.local").write_text("edited by an agent")
    assert wf.disposable(main, wt, placed.paths()) == ["a.local"]


def test_a_path_through_a_link_out_of_the_worktree_is_refused(tmp_path: Path) -> None:
    main, wt, common = sample(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (main / "conf").mkdir()
    (main / "conf" / "x.local").write_text("x")
    (wt / "conf").symlink_to(outside)
    placed = wf.place(main, wt, WorktreeConfig(), ["conf/x.local"], common)
    assert placed.copied == [] and not (outside / "x.local").exists()


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"symlink": ["/abs"]}, "must be a path inside the repository"),
        ({"copy": ["../up"]}, "must be a path inside the repository"),
        ({"symlink": ["a"], "copy": ["a"]}, "both symlink and copy"),
        ({"copy_mode": "magic"}, "copy_mode must be one of"),
        ({"setup": "npm ci"}, "setup must be a list"),
        ({"setup": [[]]}, "empty setup command"),
        ({"ports_per_worktree": 0}, "ports_per_worktree must be an integer"),
        ({"links": []}, "unknown key(s) links"),
    ],
)
def test_bad_worktree_config_is_a_usage_error(table: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=r".*") as info:
        parse_worktree(table, "taskgate.toml [worktree]")
    assert message in info.value.message


def test_config_parses_string_and_list_commands() -> None:
    cfg = parse_worktree(
        {"setup": ["npm ci", ["python", "-m", "pip", "install", "-e", "."]], "symlink": ["x/"]},
        "w",
    )
    assert cfg.setup == (("npm", "ci"), ("python", "-m", "pip", "install", "-e", "."))
    assert cfg.symlink == ("x",)


def test_bench_script_runs() -> None:
    """bench/worktree_setup.py's setup measurement still runs (tiny sizes, no timing asserted)."""
    root = Path(__file__).resolve().parent.parent
    result = subprocess.run(
        [sys.executable, str(root / "bench" / "worktree_setup.py"), "setup", "1", "2"],
        cwd=root / "bench",
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "taskgate parallel / plain ratio" in result.stdout


def test_the_init_template_documents_a_valid_worktree_table() -> None:
    """`taskgate init` writes [worktree] commented; uncommented, its examples parse."""
    from taskgate.engine.config import DEFAULT_CONFIG_TEXT, parse_config

    assert parse_config(DEFAULT_CONFIG_TEXT).worktree == WorktreeConfig()
    block = DEFAULT_CONFIG_TEXT.split("# [worktree]")[1].split("\n\n")[0]
    lines = ["[worktree]"] + [
        line[2:] for line in block.splitlines() if line.startswith("# ") and " = " in line
    ]
    cfg = parse_config("\n".join(lines) + "\n").worktree
    assert cfg.symlink == ("node_modules", ".venv") and cfg.include == (
        ".env",
        "config/*.local.json",
    )
    assert cfg.setup == (("npm", "ci"), ("python", "-m", "pip", "install", "-e", "."))
    assert (cfg.port_start, cfg.ports_per_worktree, cfg.jobs) == (20000, 20, 0)


def test_concurrent_tasks_never_share_a_port_block(tmp_path: Path) -> None:
    """Four sessions start and classify four tasks at the same time: every worktree's index
    (and so its block of ports) is unique, as recorded in the store and seen by setup."""
    todo = "# Tasks\n\n" + "".join(
        f"## task-{i}: Task {i}\n- Purpose: p\n- Scope: s\n- Components: c\n- Risk: MEDIUM\n\n"
        for i in range(4)
    )
    repo = make_repo(
        tmp_path / "r", todo=todo, config=f"[worktree]\nsetup = {toml_list([MARKER_CMD])}\n"
    )
    errors: list[str] = []

    def run(i: int) -> None:
        task, session = f"task-{i}", f"s{i}"
        for args, cwd in ((("start", task), None), (("classify", task), repo.worktree(task))):
            result = repo.run(*args, session=session, cwd=cwd)
            if result.code != 0:
                errors.append(f"{task}: {result.err}")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    seen: dict[str, str] = {}
    for i in range(4):
        for name, wt in worktrees(repo, f"task-{i}").items():
            line = (wt / "setup-marker.txt").read_text().strip()
            seen[f"task-{i}/{name}"] = line.split()[1]
    assert len(seen) >= 12 and len(set(seen.values())) == len(seen), seen
    recorded = [s for e in store_events(repo, "worktree_ports") for s in e["slots"].values()]
    assert sorted(str(s["index"]) for s in recorded) == sorted(seen.values())


ESCAPE_CMD = [
    sys.executable,
    "-c",
    "import os, pathlib\n"
    "pathlib.Path('setup-marker.txt').write_text('in')\n"
    "name = 'escape-' + os.environ['TASKGATE_WORKTREE_INDEX']\n"
    "try:\n"
    "    pathlib.Path(os.environ['MAIN_REPO'], name).write_text('x')\n"
    "    print('wrote')\n"
    "except OSError as exc:\n"
    "    print('denied', exc)\n"
    "fixed = pathlib.Path(os.environ['MAIN_REPO'], '.setup-fixed').exists()\n"
    "raise SystemExit(0 if fixed or '/agents/' not in os.getcwd() else 5)\n",
]


def test_agent_worktree_setup_runs_in_the_agents_sandbox(tmp_path: Path) -> None:
    """Setup may write its worktree only (issue 14): under `taskgate run` the agents' setup
    runs in their sandbox, and the task worktree's setup (started by `start` or `run`) in the
    same confinement, like validation: the write into the main worktree fails everywhere."""
    from taskgate.agents import sandbox

    if not sandbox.probe()[0]:
        pytest.skip(sandbox.probe()[1])
    repo = make_repo(tmp_path / "repo", config=f"[worktree]\nsetup = {toml_list([ESCAPE_CMD])}\n")
    env = {"MAIN_REPO": str(repo.path)}
    first = repo.run("run", TASK, env=env)  # the agents' setup fails until the fix
    assert first.code == 4 and "setup command" in first.err and "(exit 5)" in first.err
    (repo.path / ".setup-fixed").touch()
    result = repo.run("run", TASK, env=env)  # resumes the classification, still confined
    assert result.code == 4, result.err  # stops at the plan checkpoint, worktrees ready
    assert "waits for your plan approval" in result.err + result.out
    task_env = json.loads((repo.task_dir(TASK) / "setup" / "env.json").read_text())
    assert task_env["TASKGATE_WORKTREE_INDEX"] is not None
    assert sorted(p.name for p in repo.path.glob("escape-*")) == []  # nobody escaped
    log = next((repo.task_dir(TASK) / "setup").glob("1-*.log")).read_text()
    assert "denied" in log and "Read-only file system" in log, log
    agents = agents_of(repo, TASK)
    for agent in agents:
        wt = repo.task_dir(TASK) / "agents" / agent / "code"
        assert (wt / "setup-marker.txt").read_text() == "in", agent
        log = next((repo.task_dir(TASK) / "agents" / agent / "setup").glob("1-*.log")).read_text()
        assert "denied" in log and "Read-only file system" in log, log
    ran = [(e["agent"], s["sandbox"]) for e in store_events(repo, "worktree_prepared")
           for s in e.get("setup", [])]  # fmt: skip
    assert sorted(set(ran), key=str) == sorted({(None, "bwrap")} | {(a, "bwrap") for a in agents},
                                              key=str)  # fmt: skip
    assert len(ran) == 1 + 2 * len(agents)  # the agents' setups ran twice: failed, then fixed


def test_tree_state_reads_one_git_status(tmp_path: Path) -> None:
    _, wt, _ = sample(tmp_path)
    git(wt, "mv", "app.py", "main.py")  # a staged rename: two paths in one -z entry
    (wt / "new.txt").write_text("n")
    (wt / "db.local").write_text("ignored")
    (wt / "build").mkdir()
    (wt / "build" / "out.o").write_text("o")
    state = wf.tree_state(wt)
    assert state.untracked == {"new.txt"}
    assert state.ignored == {"db.local", "build/"}  # an ignored directory is one entry
    assert state.changed == ("main.py",)
