"""A team on several machines (issue 20): clones of one repository with a shared bare remote,
each with its own HOME and host name (TASKGATE_HOST), one PostgreSQL database (a real server,
tests/pgserver.py). Everything runs through the real CLI in subprocesses.

What must hold: one owner per task across machines; main on the remote gets each task's
squash exactly once, whichever machine completes it; a push that loses the race for main is a
resumable refusal that loses nothing; a machine killed mid-complete resumes, on itself or on
another machine after a hand-over; a database restarted mid-complete resumes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

import pgserver
from conftest import SRC, Repo, Run, git
from flow import PLAN, REPORT

TASKS = 6
TODO = "# Tasks\n\n" + "".join(
    f"## t{i}: Task {i}\n- Purpose: say {i}\n- Scope: docs/t{i}.md only\n"
    f"- Components: documentation\n- Files: docs/t{i}.md\n\n"
    for i in range(1, TASKS + 1)
)
EXIT_MAIN_MOVED = 1  # a refusal (R-CMP-06) of kind "main-moved"


class Machine(Repo):
    """One simulated machine: a clone, its own HOME and host name, the team's database."""

    def __init__(self, path: Path, home: Path, host: str, url: str) -> None:
        super().__init__(path)
        self.env = {"HOME": str(home), "TASKGATE_HOST": host, "TASKGATE_DATABASE_URL": url,
                    "XDG_CONFIG_HOME": str(home / ".config")}  # fmt: skip
        self.host = host

    def run(self, *args: str, session: str | None = "s1", cwd: Path | None = None,
            env: dict[str, str] | None = None, stdin: str | None = None) -> Run:  # fmt: skip
        return super().run(*args, session=session, cwd=cwd, env={**self.env, **(env or {})},
                           stdin=stdin)  # fmt: skip

    def popen(self, *args: str, session: str, env: dict[str, str] | None = None) -> Any:
        full = dict(os.environ, PYTHONPATH=str(SRC), TASKGATE_SESSION=session, **self.env)
        full.update(env or {})
        return subprocess.Popen([sys.executable, "-m", "taskgate", *args], cwd=self.path,
                                env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)  # fmt: skip


@pytest.fixture
def team(pg: pgserver.PgServer, tmp_path: Path) -> tuple[Path, list[Machine], str]:
    """A bare remote seeded with todo.md and three machines cloned from it."""
    return make_team(pg, tmp_path)


def _wait_arrival(gate: Path, proc: Any) -> None:
    """Until the process reached its TASKGATE_WAIT point (failpoints.wait)."""
    deadline = time.monotonic() + 120
    while not list(gate.parent.glob(f"{gate.name}.*.arrived")):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)


def make_team(pg: pgserver.PgServer, tmp_path: Path) -> tuple[Path, list[Machine], str]:
    """A bare remote seeded with todo.md and three machines cloned from it, one database."""
    url = pg.fresh_database()
    seed = tmp_path / "seed"
    seed.mkdir()
    git(seed, "init", "-q", "-b", "main")
    (seed / "todo.md").write_text(TODO)
    (seed / "README.md").write_text("team\n")
    git(seed, "add", ".")
    git(seed, "commit", "-q", "-m", "initial")
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(remote))
    machines = []
    for name in ("alpha", "beta", "gamma"):
        home = tmp_path / f"home-{name}"
        home.mkdir()
        (home / ".gitconfig").write_text(
            f"[user]\n\tname = {name}\n\temail = {name}@example.com\n[init]\n"
            "\tdefaultBranch = main\n[commit]\n\tgpgsign = false\n"
        )
        path = tmp_path / name
        subprocess.run(["git", "clone", "-q", str(remote), str(path)], check=True,
                       env=dict(os.environ, HOME=str(home)))  # fmt: skip
        machine = Machine(path, home, f"{name}.example", url)
        machine.ok("init")
        machines.append(machine)
    return remote, machines, url


# -- driving one task through the streamlined workflow (docs only: LOW risk) -------------------


def to_awaiting(m: Machine, task: str, session: str, *, claimed: bool = False) -> None:
    """start (unless claimed) ... AWAITING_USER_APPROVAL with the change approved."""
    if not claimed:
        m.ok("start", task, session=session)
    wt = m.worktree(task)
    m.ok("classify", task, session=session, cwd=wt)
    m.ok("transition", task, "REQUIREMENTS", session=session, cwd=wt)
    (m.task_dir(task) / f"{task}-architect-requirements.md").write_text(REPORT)
    m.ok("agent", "set", task, "architect", "COMPLETE", session=session)
    m.ok("transition", task, "SYNTHESIS", session=session, cwd=wt)
    task_md = m.task_dir(task) / "task.md"
    task_md.write_text(task_md.read_text() + PLAN)
    m.ok("present", task, session=session)
    m.ok("approve", task, "plan", session=None)
    commit_doc(m, task, f"{task} written on {m.host}\n")
    m.ok("transition", task, "AWAITING_USER_APPROVAL", session=session, cwd=wt)
    m.ok("present", task, session=session)
    m.ok("approve", task, "changes", session=None)


def commit_doc(m: Machine, task: str, text: str) -> None:
    wt = m.worktree(task)
    (wt / "docs").mkdir(exist_ok=True)
    (wt / "docs" / f"{task}.md").write_text(text)
    git(wt, "add", "docs")
    subprocess.run(["git", "commit", "-q", "-m", f"[agent:architect] {task}"], cwd=wt,
                   check=True, env=dict(os.environ, **m.env))  # fmt: skip


def rebase_and_complete(m: Machine, task: str, session: str) -> None:
    """The documented way out of R-CMP-06: back to SYNTHESIS (the streamlined path's working
    phase), rebase onto main, plan and change approved again, complete."""
    wt = m.worktree(task)
    m.ok("transition", task, "SYNTHESIS", "--reason", "rebase onto main", session=session,
         cwd=wt)  # fmt: skip
    git(wt, "rebase", "-q", "main")
    m.ok("present", task, session=session)  # re-entering SYNTHESIS voids the plan approval
    m.ok("approve", task, "plan", session=None)
    m.ok("transition", task, "AWAITING_USER_APPROVAL", session=session, cwd=wt)
    m.ok("present", task, session=session)
    m.ok("approve", task, "changes", session=None)
    m.ok("complete", task, session=session)


def remote_subjects(remote: Path) -> list[str]:
    return git(remote, "log", "--format=%s", "main").splitlines()


def squashes(remote: Path) -> dict[str, int]:
    """How often each task's squash ("tN: Task N") is on the remote's main."""
    counts: dict[str, int] = {}
    for subject in remote_subjects(remote):
        name = subject.split(":")[0]
        if name.startswith("t") and name[1:].isdigit():
            counts[name] = counts.get(name, 0) + 1
    return counts


def db(url: str, sql: str, *params: object) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return list(conn.execute(sql, params).fetchall())  # type: ignore[arg-type]


def state(m: Machine, task: str) -> str:
    return str(m.ok("status", task, "--json", session=None).json()["state"])


# -- the tests ---------------------------------------------------------------------------------


def test_R_LCK_01_thirty_sessions_on_three_machines_one_owner_per_task(
    team: tuple[Path, list[Machine], str],
) -> None:
    """30 `taskgate next` processes, 10 per machine, race for 6 tasks: each task gets exactly
    one owner, no session holds two, the 24 losers are told there is nothing left."""
    _, machines, url = team
    procs = [machines[i % 3].popen("next", "--json", session=f"s{i}") for i in range(30)]
    results = [(*p.communicate(timeout=600), p.returncode) for p in procs]
    codes = [code for _, _, code in results]
    assert codes.count(0) == TASKS and codes.count(1) == 30 - TASKS, results
    for out, err, code in results:
        if code == 1:
            assert "No available tasks" in out + err, out + err
    owners = db(url, "SELECT name, session_id, host, fence FROM tasks ORDER BY name")
    assert [o[0] for o in owners] == [f"t{i}" for i in range(1, TASKS + 1)]
    assert len({o[1] for o in owners}) == TASKS and all(o[3] == 1 for o in owners)
    claims = db(url, "SELECT task, COUNT(*) FROM events WHERE kind = 'claimed' GROUP BY task")
    assert sorted(claims) == [(f"t{i}", 1) for i in range(1, TASKS + 1)]
    for name, session, host, _ in owners:  # the lease names the winner's machine
        winner = machines[int(session[1:]) % 3]
        assert host == winner.host
        for m in machines:  # only the winner's machine made the task's worktree
            assert m.worktree(name).exists() == (m is winner)


def test_tasks_complete_on_different_machines_each_squash_once_on_the_remote(
    team: tuple[Path, list[Machine], str],
) -> None:
    """alpha completes t1 and pushes main; beta claims t2 afterwards (its main is fetched
    first, so t2 starts on t1); gamma claimed t3 before t1 landed, so its complete refuses
    (R-CMP-06) until t3 is rebased through the protocol. The remote's main holds each squash
    once, and every machine's main ends equal to it."""
    remote, (alpha, beta, gamma), url = team
    gamma.ok("start", "t3", session="g1")  # based on the initial main
    to_awaiting(alpha, "t1", "a1")
    done = alpha.ok("complete", "t1", "--json", session="a1").json()
    assert done["state"] == "COMPLETE"
    assert git(remote, "rev-parse", "main") == done["merged_sha"] == alpha.git("rev-parse", "main")
    assert squashes(remote) == {"t1": 1}
    # beta: claiming fetched main first, so t2's branch starts on the squash of t1.
    to_awaiting(beta, "t2", "b1")
    assert beta.git("rev-parse", "main") == done["merged_sha"]
    assert beta.ok("complete", "t2", session="b1").code == 0
    assert squashes(remote) == {"t1": 1, "t2": 1}
    # gamma: t3 was branched before either landed; complete fetches, then refuses.
    to_awaiting(gamma, "t3", "g1", claimed=True)
    refused = gamma.run("complete", "t3", "--json", session="g1")
    assert refused.code == 1, refused.out + refused.err
    assert any(v["rule"] == "R-CMP-06" for v in refused.json()["violations"])
    assert gamma.git("rev-parse", "main") == git(remote, "rev-parse", "main")  # fetched
    assert squashes(remote) == {"t1": 1, "t2": 1}  # nothing pushed
    rebase_and_complete(gamma, "t3", "g1")
    assert squashes(remote) == {"t1": 1, "t2": 1, "t3": 1}
    tip = git(remote, "rev-parse", "main")
    assert gamma.git("rev-parse", "main") == tip
    for m in (alpha, beta):  # a machine behind catches up when it next claims
        m.ok("start", "t4" if m is alpha else "t5", session=m.host)
        assert m.git("rev-parse", "main") == tip
    assert db(url, "SELECT COUNT(*) FROM tasks WHERE state = 'COMPLETE'") == [(3,)]
    for m, task in ((alpha, "t1"), (beta, "t2"), (gamma, "t3")):
        audit = m.run("audit", task)
        assert audit.code == 0, audit.out + audit.err
    # ...and on a machine where the task never ran: documents from the shared remote
    for m, task in ((beta, "t1"), (gamma, "t2"), (alpha, "t3")):
        assert not m.task_dir(task).exists()
        audit = m.run("audit", task)
        assert audit.code == 0, audit.out + audit.err
        assert "ran on another machine" in audit.out


def test_push_that_loses_the_race_for_main_is_a_resumable_refusal_nothing_lost(
    team: tuple[Path, list[Machine], str],
) -> None:
    """beta's complete is killed after its squash; resumed, it fetches main (unchanged) and
    stops just before its push while alpha completes and pushes main. beta's push carries a
    lease on the main it fetched: git rejects it; taskgate says main-moved (exit 1,
    R-CMP-06), ends the journal, fetches main; alpha's squash is on the remote exactly once.
    beta rebases through the protocol and completes."""
    remote, (alpha, beta, _), url = team
    to_awaiting(alpha, "t1", "a1")
    to_awaiting(beta, "t2", "b1")
    killed = beta.run("complete", "t2", session="b1",
                      env={"TASKGATE_FAILPOINT": "complete:after-squash"})  # fmt: skip
    assert killed.code == -9
    gate = beta.path.parent / "go"
    proc = beta.popen("complete", "t2", "--json", session="b1",
                      env={"TASKGATE_WAIT": f"complete:before-push={gate}"})  # fmt: skip
    _wait_arrival(gate, proc)
    alpha.ok("complete", "t1", session="a1")  # wins the race for main
    gate.write_text("")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_MAIN_MOVED, out + err
    data = json.loads(out)
    assert data["error"] == "main-moved" and "rebase" in data["hint"]
    assert any(v["rule"] == "R-CMP-06" for v in data["violations"])
    assert squashes(remote) == {"t1": 1}
    [(pending, st)] = db(url, "SELECT pending, state FROM tasks WHERE name = 't2'")
    assert pending in (None, "null") and st == "AWAITING_USER_APPROVAL"  # the journal ended cleanly
    assert beta.git("rev-parse", "main") == git(remote, "rev-parse", "main")
    kinds = [k for (k,) in db(url, "SELECT kind FROM events WHERE task = 't2' ORDER BY seq")]
    assert "complete_stopped" in kinds and "main_pushed" not in kinds
    rebase_and_complete(beta, "t2", "b1")
    assert squashes(remote) == {"t1": 1, "t2": 1}
    assert "t2 written on beta.example" in git(remote, "show", "main:docs/t2.md")


def test_machine_killed_after_pushing_main_resumes_with_one_squash(
    team: tuple[Path, list[Machine], str],
) -> None:
    """Killed between the push of main and its journal entry: the re-run sees its squash on
    the remote, journals it, fast-forwards this machine's main, enters COMPLETE."""
    remote, (alpha, _, _), _ = team
    to_awaiting(alpha, "t1", "a1")
    killed = alpha.run("complete", "t1", session="a1",
                       env={"TASKGATE_FAILPOINT": "complete:main-pushed"})  # fmt: skip
    assert killed.code == -9
    assert squashes(remote) == {"t1": 1}
    before = alpha.git("rev-parse", "main")
    assert before != git(remote, "rev-parse", "main")  # this machine's main not merged yet
    done = alpha.ok("complete", "t1", "--json", session="a1").json()
    assert done["state"] == "COMPLETE" and squashes(remote) == {"t1": 1}
    assert alpha.git("rev-parse", "main") == git(remote, "rev-parse", "main")


@pytest.mark.parametrize("killed_at", ["complete:after-squash", "complete:main-pushed"])
def test_hand_over_a_task_killed_mid_complete_to_another_machine(
    team: tuple[Path, list[Machine], str], killed_at: str
) -> None:
    """alpha dies mid-complete. beta cannot take it (alpha's lease is on another host: not
    provably dead from here); a person releases it; beta adopts it: branch and documents
    fetched, worktree recreated, the journal resumed. Main gets exactly one squash, with
    alpha's work."""
    remote, (alpha, beta, _), url = team
    to_awaiting(alpha, "t1", "a1")
    assert alpha.run("complete", "t1", session="a1",
                     env={"TASKGATE_FAILPOINT": killed_at}).code == -9  # fmt: skip
    # alpha's `run` owner is dead (no such pid), but on another host: foreign, exit 3.
    with psycopg.connect(url) as conn:
        conn.execute("UPDATE tasks SET owner_pid = 999999, owner_started = '1' WHERE name = 't1'")
    assert beta.run("start", "t1", session="b1").code == 3
    beta.ok("release", "t1", "--force", "--reason", "alpha is gone", session=None)
    beta.ok("start", "t1", "--adopt", session="b1")
    wt = beta.worktree("t1")
    assert (wt / "docs" / "t1.md").read_text() == "t1 written on alpha.example\n"
    assert "## Implementation Plan" in (beta.task_dir("t1") / "task.md").read_text()
    done = beta.ok("complete", "t1", "--json", session="b1").json()
    assert done["state"] == "COMPLETE"
    assert squashes(remote) == {"t1": 1}
    assert git(remote, "show", "main:docs/t1.md") == "t1 written on alpha.example"
    assert beta.git("rev-parse", "main") == git(remote, "rev-parse", "main")
    kinds = [k for (k,) in db(url, "SELECT kind FROM events WHERE task = 't1' ORDER BY seq")]
    assert ("complete_restarted" in kinds) == (killed_at == "complete:after-squash")
    audit = beta.run("audit", "t1")
    assert audit.code == 0, audit.out + audit.err
    beta.ok("cleanup", "t1", session="b1")  # the whole lifecycle ends on the other machine
    assert state(beta, "t1") == "CLEANUP"
    heads = git(remote, "for-each-ref", "--format=%(refname)", "refs/heads").split()
    assert heads == ["refs/heads/main"]  # T and T-A deleted on the remote too
    assert git(remote, "rev-parse", "refs/taskgate/docs/t1")  # the documents are kept


def test_hand_over_mid_work_a_release_on_the_owners_machine_pushes_what_it_has(
    team: tuple[Path, list[Machine], str],
) -> None:
    """alpha is in REQUIREMENTS with a report written and a commit made since its last
    checkpoint; a person releases the task on alpha (which pushes T, T-A and the documents);
    gamma picks it up with its worktrees, the report and the commit, and finishes it."""
    remote, (alpha, _, gamma), url = team
    alpha.ok("start", "t1", session="a1")
    wt = alpha.worktree("t1")
    alpha.ok("classify", "t1", session="a1", cwd=wt)
    alpha.ok("transition", "t1", "REQUIREMENTS", session="a1", cwd=wt)
    (alpha.task_dir("t1") / "t1-architect-requirements.md").write_text(REPORT)
    commit_doc(alpha, "t1", "draft from alpha\n")
    head = git(wt, "rev-parse", "HEAD")
    alpha.ok("release", "t1", "--force", "--reason", "alpha goes home", session=None)
    [(payload,)] = db(url, "SELECT payload FROM events WHERE task = 't1' AND kind = "
                           "'force_release'")  # fmt: skip
    shared = json.loads(payload)
    assert shared["shared_to"] == "origin" and "refs/taskgate/docs/t1" in shared["shared"]
    assert git(remote, "rev-parse", "t1") == head
    assert gamma.ok("start", "t1", "--json", session="g1").json()["state"] == "REQUIREMENTS"
    assert git(gamma.worktree("t1"), "rev-parse", "HEAD") == head
    assert (gamma.task_dir("t1") / "t1-architect-requirements.md").read_text() == REPORT
    agent_wt = gamma.task_dir("t1") / "agents" / "architect" / "code"
    assert git(agent_wt, "rev-parse", "--abbrev-ref", "HEAD") == "t1-architect"
    gamma.ok("agent", "set", "t1", "architect", "COMPLETE", session="g1")
    gamma.ok("transition", "t1", "SYNTHESIS", session="g1", cwd=gamma.worktree("t1"))
    task_md = gamma.task_dir("t1") / "task.md"
    task_md.write_text(task_md.read_text() + PLAN)
    gamma.ok("present", "t1", session="g1")
    gamma.ok("approve", "t1", "plan", session=None)
    commit_doc(gamma, "t1", "draft from alpha, finished on gamma\n")
    gamma.ok("transition", "t1", "AWAITING_USER_APPROVAL", session="g1", cwd=gamma.worktree("t1"))
    gamma.ok("present", "t1", session="g1")
    gamma.ok("approve", "t1", "changes", session=None)
    gamma.ok("complete", "t1", session="g1")
    assert squashes(remote) == {"t1": 1}
    assert git(remote, "show", "main:docs/t1.md") == "draft from alpha, finished on gamma"


def test_a_dead_owner_on_this_host_is_taken_over_on_another_it_is_not(
    team: tuple[Path, list[Machine], str],
) -> None:
    """Leases record the host (R-LCK-01): a dead pid means a dead owner only on its own host."""
    _, (alpha, beta, _), url = team
    alpha.ok("start", "t1", session="a1")
    with psycopg.connect(url) as conn:
        conn.execute("UPDATE tasks SET owner_pid = 999999, owner_started = '1' WHERE name = 't1'")
    assert beta.run("start", "t1", session="b1").code == 3
    assert db(url, "SELECT session_id FROM tasks WHERE name = 't1'") == [("a1",)]
    took = alpha.ok("start", "t1", "--json", session="a2").json()
    assert took["action"] == "took-over"
    assert db(url, "SELECT session_id, host FROM tasks WHERE name = 't1'") == [
        ("a2", "alpha.example")
    ]


def test_database_restarted_mid_complete_resumes(tmp_path: Path) -> None:
    """The database goes down after the squash reached the remote's main and before the
    journal recorded it: complete exits 6 (store unreachable); once the server is back the
    same command resumes; one squash on main."""
    server = pgserver.start_server()
    try:
        remote, (alpha, _, _), _ = make_team(server, tmp_path)
        to_awaiting(alpha, "t1", "a1")
        gate = tmp_path / "go"
        proc = alpha.popen("complete", "t1", session="a1",
                           env={"TASKGATE_WAIT": f"complete:main-pushed={gate}"})  # fmt: skip
        _wait_arrival(gate, proc)
        assert squashes(remote) == {"t1": 1}
        server.stop("immediate")
        gate.write_text("")
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 6, out + err
        assert "cannot reach PostgreSQL" in err
        server.start()
        done = alpha.ok("complete", "t1", "--json", session="a1").json()
        assert done["state"] == "COMPLETE" and squashes(remote) == {"t1": 1}
        assert alpha.git("rev-parse", "main") == git(remote, "rev-parse", "main")
    finally:
        pgserver.remove(server)


def test_embedded_store_pushes_no_main(tmp_path: Path) -> None:
    """One machine with SQLite and an origin: complete merges locally and pushes nothing but
    the checkpoint's branch, as before issue 20."""
    remote = tmp_path / "remote.git"
    seed = tmp_path / "seed"
    seed.mkdir()
    git(seed, "init", "-q", "-b", "main")
    (seed / "todo.md").write_text(TODO)
    git(seed, "add", ".")
    git(seed, "commit", "-q", "-m", "initial")
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(remote))
    subprocess.run(["git", "clone", "-q", str(remote), str(tmp_path / "solo")], check=True)
    home = Path(os.environ["HOME"])
    solo = Machine(tmp_path / "solo", home, "solo.example", "")
    solo.env.pop("TASKGATE_DATABASE_URL")
    solo.ok("init")
    to_awaiting(solo, "t1", "s1")
    solo.ok("complete", "t1", session="s1")
    assert squashes(remote) == {}  # main was not pushed
    assert solo.git("log", "-1", "--format=%s", "main") == "t1: Task 1"
    refs = git(remote, "for-each-ref", "--format=%(refname)")
    assert "refs/heads/t1" in refs and "refs/taskgate/" not in refs  # T only, as before


def test_a_new_empty_remote_gets_main_from_the_first_complete(
    pg: pgserver.PgServer, tmp_path: Path
) -> None:
    """A team whose shared remote is still empty: claims need nothing from it, the first
    complete creates main there (a lease on 'no main yet')."""
    url = pg.fresh_database()
    path = tmp_path / "first"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "todo.md").write_text(TODO)
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "initial")
    remote = tmp_path / "empty.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(path, "remote", "add", "origin", str(remote))
    first = Machine(path, Path(os.environ["HOME"]), "first.example", url)
    first.ok("init")
    to_awaiting(first, "t1", "f1")
    first.ok("complete", "t1", session="f1")
    assert squashes(remote) == {"t1": 1}
    assert git(remote, "rev-parse", "main") == first.git("rev-parse", "main")
