"""Confinement of `run`'s agents (agents/sandbox.py, DESIGN.md Trust): real bwrap, real git.

A command agent (a shell script) tries one way to reach a protected place per test; each
attempt fails at the OS level or lands in a private copy that is discarded and recorded, and
the store, main and every other ref are unchanged. The legitimate path (edit, commit on its
own branch, write its report) still works.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from conftest import Repo, git, make_repo
from taskgate.agents import sandbox
from taskgate.agents.base import AgentRequest, AgentResult, Mode, TaskBrief
from taskgate.agents.config import parse_agents_config
from taskgate.agents.invoke import build_request, invoke
from taskgate.engine.workspace import Workspace, find_workspace

pytestmark = pytest.mark.skipif(not sandbox.probe()[0], reason="bubblewrap does not work here")

TASK, OTHER = "add-login", "fix-typo"

# The attacker: runs $ATTACK with sh, keeps what happened in its worktree (allowed), and
# claims success whatever happened.
AGENT = """#!/bin/sh
out=$(sh -c "$ATTACK" 2>&1); code=$?
printf '%s\\n%s\\n' "$code" "$out" > attempt.log
if [ "$TASKGATE_MODE" = requirements ]; then
  python3 -c 'import os,sys; open(os.environ["TASKGATE_REPORT_PATH"], "w").write("r " * 80)'
fi
echo '{"status": "COMPLETE", "verdict": "APPROVED", "message": "done"}'
"""


def fingerprint(db: Path) -> str:
    """SHA-256 of the store's SQL dump: any row written changes it."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return hashlib.sha256("\n".join(conn.iterdump()).encode()).hexdigest()
    finally:
        conn.close()


def refs(repo: Path) -> dict[str, str]:
    """Every ref of the repository and its SHA."""
    out = git(repo, "for-each-ref", "--format=%(refname) %(objectname)")
    return dict(line.split(" ", 1) for line in out.splitlines())


def tree_digest(path: Path) -> str:
    """A digest of every file's path and bytes under `path` (symlinks by target)."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            item = Path(root, name)
            digest.update(str(item.relative_to(path)).encode())
            if item.is_symlink():
                digest.update(os.readlink(item).encode())
            else:
                digest.update(item.read_bytes())
    return digest.hexdigest()


@dataclass
class Arena:
    """Two started tasks with their agent worktrees, and the attacker configured."""

    repo: Repo
    ws: Workspace
    agent: str
    other_agent: str

    def request(
        self, attack: str, mode: Mode = Mode.IMPLEMENTATION, **settings: str
    ) -> AgentRequest:
        config = parse_agents_config(
            {"backend": "command", "command": {"command": [str(self.script)]}, **settings},
            self.repo.path,
        )
        request = build_request(
            self.ws, config, TaskBrief(TASK), self.agent, mode, team=(self.agent,)
        )
        return replace(request, env={**request.env, "ATTACK": attack, **self.vars})

    @property
    def script(self) -> Path:
        return self.repo.path.parent / "bin" / "agent"

    @property
    def vars(self) -> dict[str, str]:
        ws = self.ws
        return {
            "REPO": str(self.repo.path),
            "DB": str(ws.db_path),
            "TASK_DIR": str(ws.task_dir(TASK)),
            "TASK_WT": str(ws.task_worktree(TASK)),
            "OTHER_WT": str(ws.agent_worktree(OTHER, self.other_agent)),
            "SIBLING_WT": str(ws.agent_worktree(TASK, self.other_agent)),
            "BRANCH": f"{TASK}-{self.agent}",
            "PY": sys.executable,
        }

    def log(self) -> tuple[int, str]:
        text = (self.ws.agent_worktree(TASK, self.agent) / "attempt.log").read_text()
        code, _, out = text.partition("\n")
        return int(code), out


@pytest.fixture
def arena(tmp_path: Path) -> Arena:
    """A fresh arena, for the tests that change it."""
    return make_arena(tmp_path)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Arena]:
    """One arena for the corpus: each attempt must leave it as it was (asserted by Before)."""
    root = tmp_path_factory.mktemp("arena")
    home = root / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = T\n\temail = t@example.com\n")
    with pytest.MonkeyPatch.context() as mp:  # module scope: before conftest's hermetic HOME
        mp.setenv("HOME", str(home))
        mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
        yield make_arena(root)


def make_arena(tmp_path: Path) -> Arena:
    """Two started tasks with agent worktrees, hooks settings, and the attacker script."""
    repo = make_repo(tmp_path / "repo")
    (repo.path / ".claude").mkdir()
    (repo.path / ".claude" / "settings.json").write_text('{"hooks": {}}\n')
    git(repo.path, "add", ".claude")
    git(repo.path, "commit", "-qm", "hooks")
    for session, task in (("s1", TASK), ("s2", OTHER)):
        repo.ok("start", task, session=session)
        where = repo.worktree(task)
        repo.ok("classify", task, "--risk-level", "HIGH", cwd=where, session=session)
        repo.ok("transition", task, "REQUIREMENTS", cwd=where, session=session)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "agent").write_text(AGENT)
    (bin_dir / "agent").chmod(0o755)
    ws = find_workspace(repo.path)
    agents = json.loads(repo.ok("status", TASK, "--json").out)["required_agents"]
    return Arena(repo, ws, agents[0], agents[1])


class Before:
    """Everything a confined agent must leave as it was."""

    def __init__(self, arena: Arena) -> None:
        ws = arena.ws
        self.arena = arena
        self.store = fingerprint(ws.db_path)
        self.refs = refs(arena.repo.path)
        self.main_tree = tree_digest_main(arena.repo.path)
        self.task_dir = tree_digest(ws.task_dir(TASK))
        self.other = tree_digest(ws.task_dir(OTHER))
        self.git_config = (ws.common_dir / "config").read_bytes()
        self.hooks = tree_digest(ws.common_dir / "hooks")

    def assert_unchanged(self, *, own_branch_may_move: bool = False) -> None:
        ws = self.arena.ws
        assert fingerprint(ws.db_path) == self.store
        now = refs(self.arena.repo.path)
        own = f"refs/heads/{TASK}-{self.arena.agent}"
        assert {k: v for k, v in now.items() if k != own} == {
            k: v for k, v in self.refs.items() if k != own
        }
        if not own_branch_may_move:
            assert now[own] == self.refs[own]
        assert tree_digest_main(self.arena.repo.path) == self.main_tree
        assert tree_digest(ws.task_dir(OTHER)) == self.other
        assert (ws.common_dir / "config").read_bytes() == self.git_config
        assert tree_digest(ws.common_dir / "hooks") == self.hooks


def tree_digest_main(repo: Path) -> str:
    """The main worktree's files (not .git, not the task directories)."""
    digest = hashlib.sha256()
    for item in sorted(repo.rglob("*")):
        rel = item.relative_to(repo)
        if rel.parts[0] == ".git" or rel.parts[:2] in (
            (".taskgate", "tasks"),
            (".taskgate", "peers"),
        ):
            continue  # peers: run's own registration of the agent for the door (server/peers.py)
        digest.update(str(rel).encode())
        if item.is_file() and not item.is_symlink():
            digest.update(item.read_bytes())
    return digest.hexdigest()


def outcome(request: AgentRequest) -> dict[str, object]:
    """The recorded confinement of the invocation."""
    stem = f"{request.mode.value}-r{request.round}-a{request.attempt}"
    data: dict[str, object] = json.loads((request.agent_dir / f"{stem}.sandbox.json").read_text())
    return data


# --- the corpus: each attempt fails at the OS level ----------------------------------------

REFUSED = {
    "store-append": 'echo x >> "$DB"',
    "store-sqlite": '"$PY" -c "import sqlite3,os; c=sqlite3.connect(os.environ[\'DB\']); '
    'c.execute(\'UPDATE tasks SET state=\\"COMPLETE\\"\'); c.commit()"',
    "store-replace": 'cp "$DB" db2 && mv db2 "$DB"',
    "store-delete": 'rm -f "$DB"',
    "view-task-json": 'echo "{}" > "$TASK_DIR/task.json"',
    "view-replace": 'echo "{}" > t.json && mv t.json "$TASK_DIR/task.json"',
    "claude-settings": 'echo "{}" > "$REPO/.claude/settings.json"',
    "claude-dir-remove": 'rm -rf "$REPO/.claude"',
    "main-worktree-edit": 'echo evil >> "$REPO/README.md"',
    "main-worktree-new": 'echo evil > "$REPO/new.txt"',
    "config-remove": 'rm "$REPO/taskgate.toml"',
    "git-rm-config": 'cd "$REPO" && git rm -q taskgate.toml',
    "task-worktree": 'echo evil > "$TASK_WT/evil.txt"',
    "sibling-worktree": 'echo evil > "$SIBLING_WT/evil.txt"',
    "other-task-worktree": 'echo evil > "$OTHER_WT/evil.txt"',
    "governed-marker": 'rm "$REPO/.git/taskgate-governed"',
    "git-hooks": 'echo "#!/bin/sh" > "$REPO/.git/hooks/post-commit"',
    "git-config": "git config core.hooksPath /tmp",
    "git-objects": (
        'rm -rf "$REPO/.git/objects/pack" "$REPO/.git/objects/info"; ls "$REPO/.git/objects"'
    ),
    "proc-root": 'echo evil >> "/proc/self/root$REPO/README.md"',
    "proc-1-root": 'echo evil >> "/proc/1/root$REPO/README.md"',
    "symlink": 'ln -s "$REPO/README.md" link && echo evil >> link',
    "symlink-dir": 'ln -s "$REPO/.taskgate" st && echo x > st/state.db',
    "hardlink": 'ln "$DB" hard && echo x >> hard',
    "remount": 'mount -o remount,rw / 2>&1 || mount -o remount,rw "$REPO"; echo x >> "$DB"',
    "unshare": 'unshare -rm sh -c "umount \\"$REPO/.git\\" && echo x >> \\"$DB\\""',
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_confined_agent_cannot_write_protected_places(shared: Arena, name: str) -> None:
    arena = shared
    before = Before(arena)
    db_mode = stat.S_IMODE(arena.ws.db_path.stat().st_mode)
    request = arena.request(REFUSED[name])
    result = invoke(request)
    code, out = arena.log()
    assert code != 0 or name == "git-objects", out
    before.assert_unchanged()
    assert stat.S_IMODE(arena.ws.db_path.stat().st_mode) == db_mode
    assert (arena.repo.path / "taskgate.toml").is_file()
    assert (arena.ws.common_dir / "taskgate-governed").is_file()
    assert (arena.repo.path / ".claude" / "settings.json").read_text() == '{"hooks": {}}\n'
    assert outcome(request)["mode"] == sandbox.CONFINED
    assert isinstance(result, AgentResult)


# --- refs: the private namespace discards the move and records it --------------------------

NEW = 'git commit -q --allow-empty -m "[agent:$TASKGATE_AGENT] x" && '
MOVES = {
    "update-ref-main": NEW + "git update-ref refs/heads/main HEAD",
    "branch-f-main": NEW + "git branch -f main HEAD",
    "checkout-main": NEW + "git checkout -q main && git merge -q --ff-only $BRANCH",
    "delete-other-task": "git branch -D fix-typo",
    "push-main": NEW + "git push -q . HEAD:main",
    "push-force-other": NEW + "git push -q -f . HEAD:fix-typo",
    "move-sibling": (
        NEW + 'git update-ref "refs/heads/add-login-$(ls ../.. | grep -v "$TASKGATE_AGENT" | '
        'head -1)" HEAD'
    ),
    "new-tag": "git tag evil",
    "packed": "git pack-refs --all && git update-ref -d refs/heads/fix-typo",
}


@pytest.mark.parametrize("name", sorted(MOVES))
def test_ref_moves_are_discarded_and_recorded(shared: Arena, name: str) -> None:
    arena = shared
    before = Before(arena)
    request = arena.request(MOVES[name])
    result = invoke(request)
    code, out = arena.log()
    before.assert_unchanged(own_branch_may_move=True)
    recorded = outcome(request)
    assert recorded["mode"] == sandbox.CONFINED
    if code == 0:  # git did it, in the agent's private copy: discarded and recorded
        assert recorded["violations"], out
        assert not result.ok and "discarded" in result.reason


def test_head_moved_to_main_is_restored(arena: Arena) -> None:
    before = Before(arena)
    request = arena.request("git symbolic-ref HEAD refs/heads/main")
    result = invoke(request)
    before.assert_unchanged()
    wt = arena.ws.agent_worktree(TASK, arena.agent)
    assert git(wt, "symbolic-ref", "HEAD") == f"refs/heads/{TASK}-{arena.agent}"
    assert not result.ok and any("HEAD" in v for v in outcome(request)["violations"])  # type: ignore[attr-defined]


# --- the legitimate path -------------------------------------------------------------------


def test_commit_on_its_own_branch_and_report_are_kept(arena: Arena) -> None:
    before = Before(arena)
    attack = (
        'mkdir -p src && echo "def login(): pass" > src/login.py && git add src && '
        'git commit -q -m "[agent:$TASKGATE_AGENT] login" && git gc -q --auto && echo ok > /tmp/x'
    )
    request = arena.request(attack, Mode.REQUIREMENTS)
    result = invoke(request)
    code, out = arena.log()
    assert code == 0, out
    assert result.ok, result.reason
    before.assert_unchanged(own_branch_may_move=True)
    wt = arena.ws.agent_worktree(TASK, arena.agent)
    branch = f"{TASK}-{arena.agent}"
    assert (
        git(arena.repo.path, "log", "-1", "--format=%s", branch) == f"[agent:{arena.agent}] login"
    )
    assert git(wt, "status", "--porcelain") == "?? attempt.log"
    git(arena.repo.path, "fsck", "--strict", "--no-progress")
    assert [c.subject for c in result.commits] == [f"[agent:{arena.agent}] login"]
    report = arena.ws.report_path(TASK, arena.agent)
    assert report.read_text() == "r " * 80
    recorded = outcome(request)
    assert recorded == {"mode": "confined", "reason": "", "violations": [], "discarded": []}


def test_synthesis_edits_task_md(arena: Arena) -> None:
    task_md = arena.ws.task_md(TASK)
    old = task_md.read_text()
    request = arena.request('echo "## Implementation Plan" >> "$TASKGATE_TASK_MD"', Mode.SYNTHESIS)
    invoke(request)
    assert task_md.read_text() == old + "## Implementation Plan\n"


def test_writes_beside_the_outputs_are_discarded_and_listed(arena: Arena) -> None:
    before = Before(arena)
    request = arena.request(
        'echo x > "$TASK_DIR/stray.txt" && '
        'echo y > "$TASKGATE_TASK_DIR/agents/$TASKGATE_AGENT/n.txt"',
        Mode.REQUIREMENTS,  # the task directory holds its report: a private copy of it
    )
    invoke(request)
    assert arena.log()[0] == 0
    before.assert_unchanged()
    assert not (arena.ws.task_dir(TASK) / "stray.txt").exists()
    assert str(arena.ws.task_dir(TASK) / "stray.txt") in outcome(request)["discarded"]  # type: ignore[operator]


def test_the_real_home_is_not_writable(arena: Arena) -> None:
    home = Path(os.environ["HOME"])
    (home / ".claude").mkdir(exist_ok=True)
    (home / ".claude" / "settings.json").write_text("{}")
    request = arena.request(
        "cat ~/.gitconfig >/dev/null && "
        "echo '{\"disableAllHooks\": true}' > ~/.claude/settings.json"
    )
    invoke(request)
    assert arena.log()[0] == 0  # a private copy: the client can write its state
    assert (home / ".claude" / "settings.json").read_text() == "{}"


def test_other_processes_are_invisible(arena: Arena) -> None:
    request = arena.request("ls /proc | grep -c '^[0-9]'")
    invoke(request)
    code, out = arena.log()
    assert code == 0 and int(out.strip()) <= 6  # bwrap's init, sh, sh, ls, grep


def test_a_confined_agent_is_killed_at_the_timeout(arena: Arena) -> None:
    request = replace(arena.request("sleep 600"), timeout_s=1.0)
    result = invoke(request)
    assert result.status.value == "TIMEOUT"


def test_sandbox_none_runs_unconfined_and_says_so(arena: Arena) -> None:
    request = arena.request('echo x >> "$REPO/README.md"', sandbox="none")
    invoke(request)
    assert arena.log()[0] == 0  # unconfined: nothing stops it
    assert outcome(request)["mode"] == sandbox.UNCONFINED
    assert "none" in str(outcome(request)["reason"])


FAKE_CLAUDE = """#!/bin/sh
# Claude Code's habits: its state in ~/.claude.json and ~/.claude/, a temp dir, then the work.
echo '{"numStartups": 99}' > ~/.claude.json || exit 3
mkdir -p ~/.claude/projects /tmp/claude-0 && echo '{}' > ~/.claude/projects/s.jsonl || exit 4
echo 'def f(): pass' > f.py && git add f.py || exit 5
git commit -q -m "[agent:$TASKGATE_AGENT] f" || exit 6
echo '{"type": "result", "subtype": "success", "is_error": false, "session_id": "x",' \\
 '"result": "{\\"status\\": \\"COMPLETE\\", \\"message\\": \\"ok\\"}"}'
"""


def test_the_claude_backend_runs_confined_with_a_private_home(arena: Arena) -> None:
    home = Path(os.environ["HOME"])
    (home / ".claude.json").write_text('{"numStartups": 1}')
    fake = arena.repo.path.parent / "bin" / "claude"
    fake.write_text(FAKE_CLAUDE)
    fake.chmod(0o755)
    before = Before(arena)
    request = arena.request("true")
    config = parse_agents_config(
        {"backend": "claude", "claude": {"executable": str(fake)}}, arena.repo.path
    )
    request = replace(request, settings=config.settings(arena.agent))
    result = invoke(request)
    assert result.ok, result.reason
    assert result.meta["sandbox"]["mode"] == "confined"
    before.assert_unchanged(own_branch_may_move=True)
    assert [c.subject for c in result.commits] == [f"[agent:{arena.agent}] f"]
    assert (home / ".claude.json").read_text() == '{"numStartups": 1}'  # the copy was written
    assert not (home / ".claude" / "projects").exists()


def test_codex_runs_inside_the_sandbox_with_its_own_sandbox_off(arena: Arena) -> None:
    request = arena.request("true")
    fake = arena.repo.path.parent / "bin" / "codex"
    fake.write_text(
        "#!/bin/sh\n"
        'echo "$*" > "$TASKGATE_WORKTREE/argv.txt"\n'
        'echo \'{"type": "thread.started", "thread_id": "t"}\'\n'
        'echo \'{"type": "item.completed", "item": {"type": "agent_message", '
        '"text": "{\\"status\\": \\"COMPLETE\\"}"}}\'\n'
        'echo \'{"type": "turn.completed", "usage": {}}\'\n'
    )
    fake.chmod(0o755)
    config = parse_agents_config(
        {"backend": "codex", "codex": {"executable": str(fake)}}, arena.repo.path
    )
    request = replace(request, settings=config.settings(arena.agent))
    result = invoke(request)
    assert outcome(request)["mode"] == sandbox.CONFINED
    argv = (arena.ws.agent_worktree(TASK, arena.agent) / "argv.txt").read_text()
    assert "--sandbox danger-full-access" in argv  # ours is the boundary (CodexBackend.inner)
    assert "untracked files argv.txt" in result.reason  # it ran, and was judged as usual


def test_packed_objects_are_imported_through_index_pack(arena: Arena) -> None:
    attack = (
        'for i in 1 2 3; do echo "$i" > "f$i.txt"; git add "f$i.txt"; '
        'git commit -q -m "[agent:$TASKGATE_AGENT] $i"; done && git repack -q -a -d -l && '
        "ls $(git rev-parse --git-common-dir)/objects/pack | grep -c pack"
    )
    request = arena.request(attack)
    result = invoke(request)
    code, out = arena.log()
    assert code == 0 and int(out.split()[-1]) >= 2, out  # a .pack and its .idx in the copy
    branch = f"{TASK}-{arena.agent}"
    assert git(arena.repo.path, "log", "-1", "--format=%s", branch) == f"[agent:{arena.agent}] 3"
    git(arena.repo.path, "fsck", "--strict", "--no-progress")
    assert outcome(request)["violations"] == [], result.reason


def test_a_corrupt_object_is_not_imported_and_the_branch_stays(arena: Arena) -> None:
    before = Before(arena)
    attack = (
        'echo x > c.txt && git add c.txt && git commit -q -m "[agent:$TASKGATE_AGENT] c" && '
        "obj=$(git rev-parse --git-common-dir)/objects/$(git rev-parse HEAD | "
        'sed \'s#^\\(..\\)#\\1/#\') && chmod u+w "$obj" && echo garbage > "$obj"'
    )
    request = arena.request(attack)
    result = invoke(request)
    code, out = arena.log()
    assert code == 0, out
    before.assert_unchanged()  # the branch did not move to a commit that is not there
    violations = outcome(request)["violations"]
    assert any("corrupt" in v for v in violations), violations  # type: ignore[attr-defined]
    assert not result.ok
    git(arena.repo.path, "fsck", "--no-progress")


def test_a_tasks_root_outside_the_repository(tmp_path: Path) -> None:
    tasks = tmp_path / "workspace" / "tasks"
    config = f'[workspace]\ntasks_root = "{tasks}"\n'
    repo = make_repo(tmp_path / "repo", config=config)
    repo.ok("start", TASK)
    repo.ok("classify", TASK, "--risk-level", "HIGH", cwd=tasks / TASK / "code")
    repo.ok("transition", TASK, "REQUIREMENTS", cwd=tasks / TASK / "code")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "agent").write_text(AGENT)
    (bin_dir / "agent").chmod(0o755)
    ws = find_workspace(repo.path)
    agents = json.loads(repo.ok("status", TASK, "--json").out)["required_agents"]
    arena = Arena(repo, ws, agents[0], agents[1])
    store = fingerprint(ws.db_path)
    request = arena.request(
        'echo x > ok.txt && git add ok.txt && git commit -q -m "[agent:$TASKGATE_AGENT] ok" && '
        'echo evil > "$TASK_WT/evil.txt"',
        Mode.REQUIREMENTS,
    )
    result = invoke(request)
    code, out = arena.log()
    assert code != 0 and "Read-only" in out, out
    assert not (ws.task_worktree(TASK) / "evil.txt").exists()
    assert ws.report_path(TASK, arena.agent).read_text() == "r " * 80
    assert git(repo.path, "log", "-1", "--format=%s", f"{TASK}-{arena.agent}").endswith("ok")
    assert fingerprint(ws.db_path) == store and result.ok, result.reason


def test_private_copies_of_a_killed_run_are_reaped(arena: Arena) -> None:
    import subprocess
    import tempfile

    from taskgate.agents.sandbox import _scratch_root

    child = subprocess.Popen(["true"])
    child.wait()  # its pid is free now
    root = Path(_scratch_root() or tempfile.gettempdir())
    stale = Path(tempfile.mkdtemp(prefix="taskgate-sandbox-", dir=root))
    (stale / ".pid").write_text(str(child.pid))
    (stale / "git").mkdir()
    invoke(arena.request("true"))
    assert not stale.exists()
    assert not list(root.glob("taskgate-sandbox-*/.pid")) or all(
        int(p.read_text()) != os.getpid() for p in root.glob("taskgate-sandbox-*/.pid")
    )  # and the invocation removed its own


def test_the_private_home_switches_claude_code_s_own_sandbox_off(tmp_path: Path) -> None:
    """`hooks install` writes Claude Code's sandbox into the user's settings; inside taskgate's
    sandbox Claude Code's bubblewrap cannot start (no nested user namespaces), so the private
    copy has it off (taskgate's is the boundary) and keeps everything else."""
    real = tmp_path / "home"
    (real / ".claude").mkdir(parents=True)
    settings = {"hooks": {"Stop": []}, "sandbox": {"enabled": True, "failIfUnavailable": True},
                "permissions": {"deny": ["Write(//x)"]}}  # fmt: skip
    (real / ".claude" / "settings.json").write_text(json.dumps(settings))
    private = tmp_path / "private"
    sandbox._fill_home(real, private)
    copy = json.loads((private / ".claude" / "settings.json").read_text())
    assert copy["sandbox"] == {"enabled": False}
    assert copy["hooks"] == settings["hooks"] and copy["permissions"] == settings["permissions"]
    assert json.loads((real / ".claude" / "settings.json").read_text()) == settings
