"""The build and the setup commands run the agents' code confined (issue 14): a test suite an
agent committed tries to write the store, `main`'s ref, the main worktree and another task's
worktree; each write fails at the OS level (the suite's own tests assert the OSError, so a
confined build passes), nothing changed on disk, in git or in the store, and the build's
report is read back as usual. The same suite unconfined (`sandbox = "none"`) escapes: that is
what the confined runs are compared against, and it is said on every such run.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
from pathlib import Path

import pytest

from conftest import TODO, Repo, git, make_repo
from flow import commit_in, to_classified, to_validation
from taskgate.agents import sandbox

pytestmark = pytest.mark.skipif(not sandbox.probe()[0], reason="bubblewrap does not work here")

TASK = "add-login"
OTHER = "fix-typo"

# The agent's "tests": each one attempts one write outside its worktree and passes only when
# the operating system refuses it. Paths come from the environment the test sets up.
ATTACK = """
import os, pathlib, sqlite3, subprocess

REPO = pathlib.Path({repo!r})
OTHER = pathlib.Path({other!r})


def _refused(write):
    try:
        write()
    except OSError:
        return True
    return False


def test_store():
    db = REPO / ".taskgate" / "state.db"
    assert _refused(lambda: db.open("ab").write(b"PWNED"))


def test_store_by_sql():
    def update():
        conn = sqlite3.connect(REPO / ".taskgate" / "state.db")
        conn.execute("UPDATE tasks SET state = 'COMPLETE'")
        conn.commit()
    try:
        update()
        escaped = True
    except (OSError, sqlite3.Error):
        escaped = False
    assert not escaped


def test_main_ref():
    # refs live in a private copy inside the sandbox: these writes "succeed" there, and
    # taskgate reports and discards them afterwards (the repository's main never moves)
    ref = REPO / ".git" / "refs" / "heads" / "main"
    _refused(lambda: ref.write_text(subprocess.run(
        ["git", "rev-parse", "HEAD~1"], capture_output=True, text=True).stdout))
    subprocess.run(["git", "update-ref", "refs/heads/main", "HEAD"], check=False)


def test_main_worktree():
    assert _refused(lambda: (REPO / "PWNED").write_text("x"))
    assert _refused(lambda: (REPO / "README.md").open("a").write("PWNED"))


def test_other_task_worktree():
    assert _refused(lambda: (OTHER / "PWNED").write_text("x"))


def test_own_worktree_is_writable():
    pathlib.Path("build-output.txt").write_text("ok")
"""


def _config(setting: str) -> str:
    return (
        f'[agents]\nsandbox = "{setting}"\n\n'
        f'[validation]\ncommands = [["{sys.executable}", "-m", "pytest", "-q", '
        '"-p", "no:cacheprovider", "test_attack.py"]]\n'
    )


def _repo(tmp_path: Path, setting: str) -> Repo:
    repo = make_repo(tmp_path / "repo", TODO, _config(setting))
    to_classified(repo, OTHER, session="s2")
    other = repo.worktree(OTHER)
    to_validation(repo, TASK)
    code = ATTACK.format(repo=str(repo.path), other=str(other))
    commit_in(repo.worktree(TASK), "test_attack.py", code, "[agent:quality] tests")
    return repo


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tree(path: Path) -> list[str]:
    """Every path under `path` (git's and taskgate's own directories aside) with its digest."""
    skip = {".git", ".taskgate"}
    return sorted(
        f"{p.relative_to(path)} {_digest(p) if p.is_file() else ''}"
        for p in path.rglob("*")
        if not skip & set(p.relative_to(path).parts)
    )


def _state(repo: Repo) -> dict[str, object]:
    """What the suite attacks: the main ref, the main worktree, the other task's worktree,
    the store's bytes and its task rows (the validation's own record aside)."""
    conn = sqlite3.connect(f"file:{repo.path / '.taskgate' / 'state.db'}?mode=ro", uri=True)
    try:
        states = conn.execute("SELECT name, state FROM tasks ORDER BY name").fetchall()
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    return {
        "main": git(repo.path, "rev-parse", "refs/heads/main"),
        "main tree": _tree(repo.path),
        "other": _tree(repo.worktree(OTHER)),
        "states": states,
    }


def _validation_event(repo: Repo) -> dict[str, object]:
    conn = sqlite3.connect(f"file:{repo.path / '.taskgate' / 'state.db'}?mode=ro", uri=True)
    try:
        row = conn.execute(
            "SELECT payload FROM events WHERE kind = 'validation' ORDER BY rowid DESC LIMIT 1"
        ).fetchone()
    finally:
        conn.close()
    data = json.loads(row[0])
    assert isinstance(data, dict)
    return data


def test_a_confined_build_cannot_write_outside_its_worktree(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "auto")
    before = _state(repo)
    result = repo.run("validate", TASK)
    assert result.code == 0, result.out + result.err  # every attempt refused: the suite passes
    assert "unconfined" not in result.err
    assert _state(repo) == before
    assert b"PWNED" not in (repo.path / ".taskgate" / "state.db").read_bytes()
    # the worktree itself was writable, and the report was read back
    assert (repo.worktree(TASK) / "build-output.txt").read_text() == "ok"
    event = _validation_event(repo)
    assert event["result"] == "SUCCESS"
    tests = event["tests"]
    assert isinstance(tests, dict) and tests["tests_run"] == 6 and tests["tests_passed"] == 6
    how = event["sandbox"]
    assert isinstance(how, dict) and how["mode"] == "confined"
    # git's own ref move was caught in the private copy, reported and discarded
    assert any("refs/heads/main" in line for line in how["refused"]), how
    audit = repo.run("audit", TASK)
    assert "FAIL" not in audit.out.replace("FAILURE", ""), audit.out


def test_unconfined_the_same_suite_escapes_and_it_is_said(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "none")
    before = _state(repo)
    result = repo.run("validate", TASK)
    assert result.code != 0  # the attempts succeeded, so the suite's assertions failed
    assert "runs unconfined" in result.err and 'sandbox = "none"' in result.err
    assert (repo.path / "PWNED").exists() and _state(repo) != before
    # the suite rewrote the task's state in the store behind taskgate's back
    assert repo.ok("status", TASK, "--json").json()["state"] == "COMPLETE"


def test_sandbox_bwrap_refuses_to_build_unconfined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _repo(tmp_path, "bwrap")
    # without bwrap on PATH the probe fails in the CLI's process: nothing may run unconfined
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").symlink_to(_which("git"))
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}")
    before = _state(repo)
    result = repo.run("validate", TASK)
    assert result.code == 2 and "bubblewrap" in result.err, result.err
    assert _state(repo) == before and not (repo.worktree(TASK) / "build-output.txt").exists()


def _which(tool: str) -> str:
    import shutil

    found = shutil.which(tool)
    assert found is not None
    return found


def test_cli_started_setup_runs_confined(tmp_path: Path) -> None:
    attack = tmp_path / "attack.py"
    attack.write_text(
        "import pathlib, sys\n"
        "repo = pathlib.Path(sys.argv[1])\n"
        "for target in (repo / 'PWNED', repo / '.taskgate' / 'state.db', "
        "repo / '.git' / 'refs' / 'heads' / 'main'):\n"
        "    try:\n"
        "        target.open('ab').write(b'PWNED')\n"
        "        print('ESCAPED', target)\n"
        "    except OSError as exc:\n"
        "        print('refused', target, exc.strerror)\n"
        "pathlib.Path('setup-done').write_text('ok')\n"
    )
    repo_path = tmp_path / "repo"
    config = (
        f'[worktree]\nsetup = [["{sys.executable}", "{attack}", "{repo_path}"]]\n'
        f'[agents]\nsandbox_readable = ["{tmp_path}"]\n'
    )
    repo = make_repo(repo_path, TODO, config)
    main = git(repo.path, "rev-parse", "main")
    result = repo.run("start", TASK)
    assert result.code == 0, result.err
    assert (repo.worktree(TASK) / "setup-done").read_text() == "ok"
    [log] = (repo.path / ".taskgate" / "tasks" / TASK / "setup").glob("1-*.log")
    text = log.read_text()
    # the store and the main worktree: read-only; main's ref: a private copy, discarded
    assert text.count("refused") == 2 and "Read-only file system" in text, text
    assert "refs/heads/main moved by the agent: discarded" in text, text
    assert not (repo.path / "PWNED").exists()
    assert git(repo.path, "rev-parse", "main") == main
    assert b"PWNED" not in (repo.path / ".taskgate" / "state.db").read_bytes()
