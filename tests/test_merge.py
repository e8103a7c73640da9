"""`taskgate merge`: agent branches into the task branch, conflicts, rebases; worktree setup."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import SRC, Repo, git, make_repo
from flow import agents_of, commit_in, copy_repo, to_implementation

TASK = "add-login"
_TEMPLATE: dict[str, Path] = {}


@pytest.fixture
def irepo(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Repo:
    """add-login in IMPLEMENTATION with at least two agents (template built once)."""
    if "impl" not in _TEMPLATE:
        base = tmp_path_factory.mktemp("template-impl") / "repo"
        to_implementation(make_repo(base), TASK)
        _TEMPLATE["impl"] = base
    return copy_repo(_TEMPLATE["impl"], tmp_path / "repo")


def agent_wt(repo: Repo, agent: str) -> Path:
    """The agent's worktree."""
    return repo.task_dir(TASK) / "agents" / agent / "code"


def two_agents(repo: Repo) -> tuple[str, str]:
    """Two of the task's required agents."""
    agents = agents_of(repo, TASK)
    assert len(agents) >= 2
    return agents[0], agents[1]


def test_two_agents_merge_cleanly_and_are_rebased(irepo: Repo) -> None:
    a, b = two_agents(irepo)
    sha_a = commit_in(agent_wt(irepo, a), "src/a.py", "A = 1\n", f"[agent:{a}] add a")
    sha_b = commit_in(agent_wt(irepo, b), "src/b.py", "B = 1\n", f"[agent:{b}] add b")
    out = irepo.ok("merge", TASK, "--json").json()
    assert [m["agent"] for m in out["merged"]] == [a, b]
    assert out["conflict"] is None
    task_wt = irepo.worktree(TASK)
    assert (task_wt / "src/a.py").exists() and (task_wt / "src/b.py").exists()
    for sha in (sha_a, sha_b):
        git(task_wt, "merge-base", "--is-ancestor", sha, "HEAD")
    for agent in (a, b):  # next round starts from the merged task branch
        assert (agent_wt(irepo, agent) / "src/a.py").exists()
        assert (agent_wt(irepo, agent) / "src/b.py").exists()
    assert set(out["rebased"]) >= {a, b}  # fast-forwarded to the merged task branch
    trail = json.loads((irepo.task_dir(TASK) / "audit-trail.json").read_text())
    attributed = {c["sha"]: c["agent"] for c in trail["commits"]}
    assert attributed[sha_a] == a and attributed[sha_b] == b  # R-WTB-06
    assert git(task_wt, "status", "--porcelain") == ""
    again = irepo.ok("merge", TASK, "--json").json()
    assert again["merged"] == [] and set(again["up_to_date"]) >= {a, b}


def test_conflict_is_reported_and_aborted(irepo: Repo) -> None:
    a, b = two_agents(irepo)
    commit_in(agent_wt(irepo, a), "src/shared.py", "X = 'a'\n", f"[agent:{a}] shared a")
    commit_in(agent_wt(irepo, b), "src/shared.py", "X = 'b'\n", f"[agent:{b}] shared b")
    result = irepo.run("merge", TASK, "--json")
    assert result.code == 1
    out = result.json()
    conflict = out["conflict"]
    assert conflict["agent"] == b
    assert conflict["files"] == [{"path": "src/shared.py", "agents": sorted([a, b])}]
    task_wt = irepo.worktree(TASK)
    gitdir = Path(git(task_wt, "rev-parse", "--absolute-git-dir"))
    assert not (gitdir / "MERGE_HEAD").exists()  # nothing half-merged
    assert git(task_wt, "status", "--porcelain") == ""
    assert (task_wt / "src/shared.py").read_text() == "X = 'a'\n"
    assert b in out["not_rebased"]  # its rebase conflicts too: the agent resolves it
    human = irepo.run("merge", TASK)
    assert human.code == 1 and "src/shared.py" in human.out and "touched by" in human.out


def test_round_two_rebases_unmerged_agent(irepo: Repo) -> None:
    a, b = two_agents(irepo)
    commit_in(agent_wt(irepo, a), "src/a.py", "A = 1\n", f"[agent:{a}] round 1")
    irepo.ok("merge", TASK)
    commit_in(agent_wt(irepo, a), "src/a.py", "A = 2\n", f"[agent:{a}] round 2")
    sha_b = commit_in(agent_wt(irepo, b), "src/b.py", "B = 1\n", f"[agent:{b}] in progress")
    out = irepo.ok("merge", TASK, "--agent", a, "--json").json()
    assert [m["agent"] for m in out["merged"]] == [a]
    assert b in out["rebased"]  # replayed onto the updated task branch
    wt_b = agent_wt(irepo, b)
    assert (wt_b / "src/a.py").read_text() == "A = 2\n"
    assert git(wt_b, "log", "-1", "--format=%s") == f"[agent:{b}] in progress"
    assert git(wt_b, "rev-parse", "HEAD") != sha_b
    assert not (irepo.worktree(TASK) / "src/b.py").exists()


def test_untagged_agent_commit_is_refused(irepo: Repo) -> None:
    a, _ = two_agents(irepo)
    commit_in(agent_wt(irepo, a), "src/a.py", "A = 1\n", "no tag here")
    head = git(irepo.worktree(TASK), "rev-parse", "HEAD")
    result = irepo.run("merge", TASK)
    assert result.code == 1 and "R-WTB-06" in result.err and f"[agent:{a}]" in result.err
    assert git(irepo.worktree(TASK), "rev-parse", "HEAD") == head


def test_agent_branches_holding_old_copies_of_a_rebased_task_branch_still_merge(
    irepo: Repo,
) -> None:
    """Issue 16 (found by the torture): T rebased onto a moved main leaves the agents'
    branches holding the old copies of T's commits; the merge refused them for ever as
    untagged work ('reword them'). They are dropped (patch-identical on T), the agents' own
    commits merge."""
    a, b = two_agents(irepo)
    commit_in(agent_wt(irepo, a), "src/a.py", "A = 1\n", f"[agent:{a}] add a")
    irepo.ok("merge", TASK)  # both agents now hold a's commit
    commit_in(irepo.path, "MAIN.md", "moved on\n", "main moves on")
    task_wt = irepo.worktree(TASK)
    git(task_wt, "rebase", "-q", "main")  # the person rebases T (R-CMP-06's way)
    sha_b = commit_in(agent_wt(irepo, b), "src/b.py", "B = 1\n", f"[agent:{b}] add b")
    out = irepo.ok("merge", TASK, "--json").json()
    assert b in [m["agent"] for m in out["merged"]] and out["conflict"] is None
    assert (task_wt / "src/a.py").read_text() == "A = 1\n"
    assert (task_wt / "src/b.py").read_text() == "B = 1\n"
    subjects = git(task_wt, "log", "--format=%s", "main..HEAD").splitlines()
    assert subjects.count(f"[agent:{a}] add a") == 1  # no second copy came back with b
    assert git(task_wt, "merge-base", "--is-ancestor", "main", "HEAD") == ""
    assert sha_b not in git(task_wt, "log", "--format=%H", "main..HEAD")  # b was rebased
    assert irepo.ok("merge", TASK, "--json").json()["merged"] == []


def test_interrupted_rebase_left_by_someone_else(irepo: Repo) -> None:
    wt = irepo.worktree(TASK)
    gitdir = Path(git(wt, "rev-parse", "--absolute-git-dir"))
    (gitdir / "rebase-merge").mkdir()
    result = irepo.run("merge", TASK)
    assert result.code == 1 and "unfinished rebase" in result.err and "--abort" in result.err
    assert (gitdir / "rebase-merge").is_dir()


def test_detached_task_worktree_is_refused(irepo: Repo) -> None:
    git(irepo.worktree(TASK), "checkout", "-q", "--detach")
    result = irepo.run("merge", TASK)
    assert result.code == 1 and "R-WTB-01" in result.err and "git switch" in result.err


def test_unknown_agent_is_usage_error(irepo: Repo) -> None:
    result = irepo.run("merge", TASK, "--agent", "nobody")
    assert result.code == 2 and "nobody" in result.err


def test_merge_outside_implementation_is_refused(repo: Repo) -> None:
    repo.ok("start", TASK)
    result = repo.run("merge", TASK)
    assert result.code == 1 and "IMPLEMENTATION" in result.err


def test_kill_after_git_merge_then_resume(irepo: Repo) -> None:
    a, b = two_agents(irepo)
    sha_a = commit_in(agent_wt(irepo, a), "src/a.py", "A = 1\n", f"[agent:{a}] add a")
    commit_in(agent_wt(irepo, b), "src/b.py", "B = 1\n", f"[agent:{b}] add b")
    crashed = irepo.run("merge", TASK, env={"TASKGATE_FAILPOINT": "merge:after-git"})
    assert crashed.code == -signal.SIGKILL
    irepo.ok("merge", TASK)
    task_wt = irepo.worktree(TASK)
    assert (task_wt / "src/a.py").exists() and (task_wt / "src/b.py").exists()
    trail = json.loads((irepo.task_dir(TASK) / "audit-trail.json").read_text())
    assert [c["sha"] for c in trail["commits"]].count(sha_a) == 1
    assert irepo.ok("status", TASK, "--json").json()["pending"] is None


# -- worktree creation ---------------------------------------------------------------------

PARALLEL_TODO = "# Tasks\n\n" + "".join(
    f"## task-{i}: Task {i}\n- Purpose: p\n- Scope: s\n- Components: c\n- Files: src/f{i}.py\n\n"
    for i in range(4)
)


def test_parallel_starts_leave_git_consistent(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", todo=PARALLEL_TODO)
    errors: list[str] = []

    def run(i: int) -> None:
        task, session = f"task-{i}", f"s{i}"
        for args, cwd in ((("start", task), None), (("classify", task), repo.worktree(task))):
            result = repo.run(*args, session=session, cwd=cwd)
            if result.code != 0:
                errors.append(f"{task} {args[0]} exit {result.code}: {result.out} {result.err}")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    listed = repo.git("worktree", "list", "--porcelain")
    expected = 1
    for i in range(4):
        agents = agents_of(repo, f"task-{i}")
        expected += 1 + len(agents)
        for agent in agents:
            wt = repo.task_dir(f"task-{i}") / "agents" / agent / "code"
            assert git(wt, "status", "--porcelain") == ""
            assert git(wt, "branch", "--show-current") == f"task-{i}-{agent}"
    assert listed.count("worktree ") == expected
    assert "prunable" not in listed
    git(repo.path, "fsck", "--no-progress")


def _half_registered(repo: Repo, tmp_path: Path) -> tuple[Path, str]:
    """A worktree whose registration git is still writing (`git worktree add` writes
    .git/worktrees/ID/commondir empty first): `git worktree list` dies on it."""
    git(repo.path, "worktree", "add", "-q", "--detach", str(tmp_path / "inflight"))
    commondir = repo.path / ".git" / "worktrees" / "inflight" / "commondir"
    content = commondir.read_text()
    commondir.write_text("")
    listed = subprocess.run(["git", "worktree", "list"], cwd=repo.path, capture_output=True,
                            text=True)  # fmt: skip
    assert "failed to read" in listed.stderr
    return commondir, content


def _classify(repo: Repo, gate: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(SRC), TASKGATE_SESSION="s1",
               TASKGATE_WAIT=f"git:worktree-list-again={gate}")  # fmt: skip
    return subprocess.Popen([sys.executable, "-m", "taskgate", "classify", TASK],
                            cwd=repo.worktree(TASK), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip


def _classified(repo: Repo, proc: subprocess.Popen[str]) -> None:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    for agent in agents_of(repo, TASK):
        wt = agent_wt(repo, agent)
        assert git(wt, "branch", "--show-current") == f"{TASK}-{agent}"


def test_worktree_list_beside_a_registration_in_flight_is_read_again(
    repo: Repo, tmp_path: Path
) -> None:
    """A `git worktree add` outside taskgate (no repository lock) is half-written when
    classify lists the worktrees: taskgate reads again once it is complete, no exit 10."""
    repo.ok("start", TASK)
    commondir, content = _half_registered(repo, tmp_path)
    gate = tmp_path / "go"
    proc = _classify(repo, gate)
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob("go.*.arrived")):  # the first listing failed
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    commondir.write_text(content)  # the add finished
    gate.touch()
    _classified(repo, proc)


def _waits_for_flock(pid: int, lock: Path) -> bool:
    """`pid` is blocked on an flock of `lock` (/proc/locks lists waiters after '->')."""
    inode = f":{lock.stat().st_ino} "
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields and str(pid) in fields and inode in line + " ":
            return True
    return False


def test_classify_checks_agent_worktrees_under_the_repository_lock(
    repo: Repo, tmp_path: Path
) -> None:
    """Another session's `git worktree add` (under the repository lock) is half-written:
    classify's check of the agent worktrees waits for the lock instead of reading git's
    registrations meanwhile (it never needs to read them again)."""
    repo.ok("start", TASK)
    lock = repo.path / ".git" / "taskgate-repo.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # the other session's add holds it
        commondir, content = _half_registered(repo, tmp_path)
        gate = tmp_path / "go"
        proc = _classify(repo, gate)
        deadline = time.monotonic() + 120
        while not _waits_for_flock(proc.pid, lock):
            assert proc.poll() is None, proc.communicate()
            assert not list(tmp_path.glob("go.*.arrived")), "listed outside the lock"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        commondir.write_text(content)  # the add finished
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    gate.touch()
    _classified(repo, proc)
    assert not list(tmp_path.glob("go.*.arrived"))


def test_occupied_agent_worktree_path_is_refused(repo: Repo) -> None:
    repo.ok("start", TASK)
    occupied = repo.task_dir(TASK) / "agents" / "architect" / "code"
    occupied.mkdir(parents=True)
    (occupied / "precious.txt").write_text("mine\n")
    result = repo.run("classify", TASK, cwd=repo.worktree(TASK))
    assert result.code == 2 and "occupied" in result.err
    assert (occupied / "precious.txt").read_text() == "mine\n"
    assert repo.ok("status", TASK, "--json").json()["state"] == "INIT"  # nothing changed


def test_existing_foreign_agent_branch_is_refused(repo: Repo) -> None:
    commit_in(repo.path, "x.txt", "x\n", "before")
    repo.git("branch", f"{TASK}-architect", "HEAD~1")  # someone's branch with that name
    repo.ok("start", TASK)
    result = repo.run("classify", TASK, cwd=repo.worktree(TASK))
    assert result.code == 2 and "already exists" in result.err and "git branch -m" in result.err
    assert repo.ok("status", TASK, "--json").json()["state"] == "INIT"


def test_missing_agent_worktree_is_recreated_on_resume(repo: Repo) -> None:
    """Recovery recreates a worktree from its existing branch (R-WTB-09)."""
    import shutil

    from taskgate.engine.workspace import find_workspace
    from taskgate.git import repo as gitrepo

    repo.ok("start", TASK)
    repo.ok("classify", TASK, cwd=repo.worktree(TASK))
    agent = agents_of(repo, TASK)[0]
    wt = repo.task_dir(TASK) / "agents" / agent / "code"
    sha = commit_in(wt, "a.py", "a\n", f"[agent:{agent}] work")
    shutil.rmtree(wt)
    ws = find_workspace(repo.path)
    spec = gitrepo.WorktreeSpec(wt, f"{TASK}-{agent}", TASK)
    assert gitrepo.ensure_worktrees(ws.repo, ws.common_dir, [spec]) == [wt]
    assert git(wt, "rev-parse", "HEAD") == sha and (wt / "a.py").exists()
    assert git(wt, "status", "--porcelain") == ""


def test_registered_but_unpopulated_worktree_is_checked_out(repo: Repo) -> None:
    """A crash between `worktree add --no-checkout` and the checkout is finished next time."""
    from taskgate.engine.workspace import find_workspace
    from taskgate.git import repo as gitrepo

    wt = repo.task_dir(TASK) / "agents" / "architect" / "code"
    wt.parent.mkdir(parents=True)
    repo.git("worktree", "add", "-q", "--no-checkout", "-b", f"{TASK}-architect", str(wt), "main")
    assert not (wt / "README.md").exists()
    ws = find_workspace(repo.path)
    spec = gitrepo.WorktreeSpec(wt, f"{TASK}-architect", "main")
    assert gitrepo.ensure_worktrees(ws.repo, ws.common_dir, [spec]) == [wt]
    assert (wt / "README.md").read_text() == "sample\n"
    assert git(wt, "status", "--porcelain") == ""
    assert gitrepo.ensure_worktrees(ws.repo, ws.common_dir, [spec]) == []  # idempotent


def test_a_checkout_killed_midway_is_finished_next_time(repo: Repo) -> None:
    """SIGKILL during the parallel checkout leaves git's index.lock behind; the next resume
    (classify, recover) must finish the checkout instead of failing on the lock forever."""
    from taskgate.engine.workspace import find_workspace
    from taskgate.git import repo as gitrepo

    wt = repo.task_dir(TASK) / "agents" / "architect" / "code"
    wt.parent.mkdir(parents=True)
    repo.git("worktree", "add", "-q", "--no-checkout", "-b", f"{TASK}-architect", str(wt), "main")
    gitdir = gitrepo.git_dir(wt)
    assert gitdir is not None
    (gitdir / "index.lock").write_bytes(b"half-written index")
    ws = find_workspace(repo.path)
    spec = gitrepo.WorktreeSpec(wt, f"{TASK}-architect", "main")
    assert gitrepo.ensure_worktrees(ws.repo, ws.common_dir, [spec]) == [wt]
    assert (wt / "README.md").read_text() == "sample\n"
    assert git(wt, "status", "--porcelain") == ""
    assert not (gitdir / "index.lock").exists()


def test_skip_path_merges_in_synthesis(repo: Repo) -> None:
    """D-WFV-3: a LOW docs task has no IMPLEMENTATION; its agent's change is merged in SYNTHESIS."""
    from flow import to_synthesis

    to_synthesis(repo, "fix-typo", "--risk-level", "LOW")
    wt = repo.task_dir("fix-typo") / "agents" / "architect" / "code"
    sha = commit_in(wt, "docs/guide.md", "fixed\n", "[agent:architect] fix the typo")
    out = repo.ok("merge", "fix-typo", "--json").json()
    assert out["merged"] == [{"agent": "architect", "commits": 1}]
    git(repo.worktree("fix-typo"), "merge-base", "--is-ancestor", sha, "HEAD")


def test_agent_branch_checked_out_elsewhere_is_refused(repo: Repo, tmp_path: Path) -> None:
    repo.ok("start", TASK)
    elsewhere = tmp_path / "elsewhere"
    repo.git("worktree", "add", "-q", "-b", f"{TASK}-architect", str(elsewhere), TASK)
    (elsewhere / "wip.txt").write_text("someone's work\n")
    result = repo.run("classify", TASK, cwd=repo.worktree(TASK))
    assert result.code == 2 and "already checked out" in result.err
    assert "git worktree remove" in result.err
    assert (elsewhere / "wip.txt").read_text() == "someone's work\n"
    assert repo.ok("status", TASK, "--json").json()["state"] == "INIT"
