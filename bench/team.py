"""A team on PostgreSQL against one machine on SQLite, in the same run (issue 20 Measure):

1. claims per second: 50 sessions (`taskgate next`, all started at once) across 3 simulated
   machines (clones of one bare remote, own HOME and TASKGATE_HOST, one database) racing for
   50 tasks, against the same 50 sessions on one SQLite clone; each claim includes the task
   worktree (and, on the team, the fetch of main). Every task must end with exactly one owner.
2. `status --json` over 10,000 tasks, PostgreSQL vs SQLite (the same rows), interleaved.
3. one guarded transition (CLASSIFIED -> REQUIREMENTS and back), interleaved.

The PostgreSQL server is a throwaway cluster on a unix socket (tests/pgserver.py): same
machine, so the network costs nothing here; over a LAN add a round trip per statement.

Run: python bench/team.py [sessions] [tasks-for-status] [rounds]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, compile_sources, env, git

sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

import pgserver
from taskgate.store.base import Store
from taskgate.store.postgres import PgStore
from taskgate.store.records import TaskRow
from taskgate.store.sqlite import SqliteStore


def todo(count: int) -> str:
    return "".join(
        f"## t{i:05d}: Task {i}\n- Purpose: p\n- Scope: s\n- Components: c\n"
        f"- Files: src/m{i}.py\n\n"
        for i in range(count)
    )


def machine_env(home: Path, host: str, url: str | None, session: str = "bench") -> dict[str, str]:
    e = env(session)
    e.update(HOME=str(home), TASKGATE_HOST=host, GIT_CONFIG_NOSYSTEM="1")
    e.pop("TASKGATE_DATABASE_URL", None)
    if url:
        e["TASKGATE_DATABASE_URL"] = url
    return e


def make_home(root: Path, name: str) -> Path:
    home = root / f"home-{name}"
    home.mkdir()
    (home / ".gitconfig").write_text(
        f"[user]\n\tname = {name}\n\temail = {name}@example.com\n[init]\n\tdefaultBranch = main\n"
    )
    return home


def seeded_remote(root: Path, count: int) -> Path:
    seed = root / "seed"
    seed.mkdir()
    git(seed, "init", "-q", "-b", "main")
    git(seed, "config", "user.email", "bench@example.com")
    git(seed, "config", "user.name", "bench")
    (seed / "todo.md").write_text(todo(count))
    git(seed, "add", ".")
    git(seed, "commit", "-q", "-m", "init")
    remote = root / "remote.git"
    git(root, "clone", "-q", "--bare", str(seed), str(remote))
    return remote


def clone(root: Path, remote: Path, name: str, url: str | None) -> tuple[Path, dict[str, str]]:
    home = make_home(root, name)
    path = root / name
    e = machine_env(home, f"{name}.bench", url)
    subprocess.run(["git", "clone", "-q", str(remote), str(path)], env=e, check=True)
    subprocess.run([sys.executable, "-m", "taskgate", "init"], cwd=path, env=e, check=True,
                   capture_output=True)  # fmt: skip
    return path, e


def race(machines: list[tuple[Path, dict[str, str]]], sessions: int) -> tuple[float, list[int]]:
    """All sessions run `taskgate next` at once; wall time to the last exit, exit codes."""
    start = time.perf_counter()
    procs = []
    for i in range(sessions):
        path, e = machines[i % len(machines)]
        procs.append(subprocess.Popen([sys.executable, "-m", "taskgate", "next", "--json"],
                                      cwd=path, env={**e, "TASKGATE_SESSION": f"s{i}"},
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))  # fmt: skip
    codes = []
    for p in procs:
        _, err = p.communicate(timeout=900)
        codes.append(p.returncode)
        if p.returncode != 0:
            print(f"  a session failed (exit {p.returncode}): {err.decode()[-600:]}")
    return time.perf_counter() - start, codes


def owners(store: Store) -> dict[str, str]:
    with store.read() as tx:
        return {r.name: r.session_id for r in tx.tasks()}


def claims(server: pgserver.PgServer, root: Path, sessions: int) -> None:
    (root / "team").mkdir()
    remote = seeded_remote(root / "team", sessions)
    url = server.fresh_database()
    team = [clone(root / "team", remote, name, url) for name in ("alpha", "beta", "gamma")]
    (root / "solo").mkdir()
    solo_remote = seeded_remote(root / "solo", sessions)
    solo = [clone(root / "solo", solo_remote, "solo", None)]
    results = {}
    for label, machines, store in (
        ("PostgreSQL, 3 machines", team, PgStore(url, root / "probe")),
        ("SQLite, 1 machine", solo, SqliteStore(solo[0][0] / ".taskgate" / "state.db")),
    ):
        wall, codes = race(machines, sessions)
        held = owners(store)
        store.close()
        assert codes.count(0) == sessions, codes
        assert len(held) == sessions and len(set(held.values())) == sessions, held
        results[label] = wall
        print(f"  {label:24} {sessions} claims in {wall:6.2f} s = {sessions / wall:6.1f} claims/s"
              f" (each task one owner: yes)")  # fmt: skip
    ratio = results["PostgreSQL, 3 machines"] / results["SQLite, 1 machine"]
    print(f"  wall-time ratio PostgreSQL team / SQLite solo: {ratio:.2f}")


def populate(store: Store, count: int) -> None:
    with store.write() as tx:
        for i in range(count):
            tx.insert_task(TaskRow(
                name=f"t{i:05d}", state="REQUIREMENTS", session_id=f"s{i}", host="bench",
                fence=1, created_at="2026-01-01T00:00:00Z", updated_at="2026-01-01T00:00:00Z",
                risk_level="HIGH", required_agents=("architect", "quality", "style", "build"),
            ))  # fmt: skip


def timed(argv: list[str], cwd: Path, e: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=e, check=True, capture_output=True)
    return time.perf_counter() - start


def scale(server: pgserver.PgServer, root: Path, count: int, rounds: int) -> None:
    """status --json over `count` tasks and one guarded transition, both stores, interleaved."""
    url = server.fresh_database()
    repos = {}
    for label, db in (("PostgreSQL", url), ("SQLite", None)):
        folder = root / f"scale-{label}"
        folder.mkdir()
        remote = seeded_remote(folder, count)
        path, e = clone(folder, remote, label.lower(), db)
        store: Store = PgStore(url, path / ".taskgate") if db else SqliteStore(
            path / ".taskgate" / "state.db")  # fmt: skip
        start = time.perf_counter()
        populate(store, count - 1)  # the last task is claimed through the CLI below
        store.close()
        print(f"  populated {count - 1} tasks in {label} in {time.perf_counter() - start:.1f} s")
        last = f"t{count - 1:05d}"
        subprocess.run([sys.executable, "-m", "taskgate", "start", last], cwd=path, env=e,
                       check=True, capture_output=True)  # fmt: skip
        wt = path / ".taskgate" / "tasks" / last / "code"
        subprocess.run([sys.executable, "-m", "taskgate", "classify", last], cwd=wt, env=e,
                       check=True, capture_output=True)  # fmt: skip
        repos[label] = (path, wt, e, last)
    samples: dict[str, list[float]] = {}
    for _ in range(rounds):
        for label, (path, wt, e, last) in repos.items():
            cli = [sys.executable, "-m", "taskgate"]
            samples.setdefault(f"status {label}", []).append(
                timed([*cli, "status", "--json"], path, e))  # fmt: skip
            samples.setdefault(f"transition {label}", []).append(
                timed([*cli, "transition", last, "REQUIREMENTS"], wt, e))  # fmt: skip
            samples.setdefault(f"transition {label}", []).append(
                timed([*cli, "transition", last, "CLASSIFIED", "--reason", "bench"], wt, e)
            )
    med = {k: statistics.median(v) * 1000 for k, v in samples.items()}
    for what in ("status", "transition"):
        pg, lite = med[f"{what} PostgreSQL"], med[f"{what} SQLite"]
        name = f"status --json over {count} tasks" if what == "status" else "one transition"
        print(f"  {name:32} PostgreSQL {pg:7.0f} ms   SQLite {lite:7.0f} ms   "
              f"ratio {pg / lite:5.2f}")  # fmt: skip


def main() -> int:
    args = [int(a) for a in sys.argv[1:]]
    sessions = args[0] if args else 50
    count = args[1] if len(args) > 1 else 10_000
    rounds = args[2] if len(args) > 2 else 5
    compile_sources()
    server = pgserver.start_server()
    root = Path(tempfile.mkdtemp(prefix="taskgate-bench-team-"))
    try:
        print(f"claims: {sessions} sessions, `taskgate next` at once ({os.cpu_count()} cores)")
        claims(server, root, sessions)
        print(f"scale: {rounds} rounds, medians (interleaved)")
        scale(server, root, count, rounds)
    finally:
        pgserver.remove(server)
        subprocess.run(["rm", "-rf", str(root)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
