"""The dashboard's figures (issue 19): server time of the board with 1,000 tasks and of a task
page with 2,000 events, live-update latency from a store change to the SSE event, and the
memory of `taskgate serve` idle and during a 10-task `run --all`.

Run: python bench/dashboard.py [tasks] [events] [run_tasks]   (defaults 1000 2000 10)

Times are measured against a real `taskgate serve` over loopback: time to first byte (the
server's work: read, render, send headers) and the full response. Latency: an engine step
commits in this process, the clock starts when the step returns, and stops when the SSE
`change` event for that task arrives; a CLI command's exit -> event is shown too.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

from common import ROOT, env, git, scratch_repo, tg

sys.path.insert(0, str(ROOT / "src"))

from taskgate.engine.core import Engine
from taskgate.engine.workspace import find_workspace
from taskgate.store.records import AgentRow, TaskRow
from taskgate.store.sqlite import SqliteStore

AGENTS = ("architect", "quality", "style", "test", "build")
STATES = ("REQUIREMENTS", "SYNTHESIS", "IMPLEMENTATION", "VALIDATION", "REVIEW")


def todo(count: int) -> str:
    return "".join(
        f"## task-{i}: Task number {i}\n- Purpose: p\n- Scope: s\n- Components: c\n"
        f"- Files: src/m{i}.py\n" + (f"- Depends: task-{i - 1}\n" if i % 7 == 3 else "") + "\n"
        for i in range(count)
    )


def populate(repo: Path, count: int, events: int) -> str:
    """`count` todo.md tasks, two thirds of them in the store with agents; one task started for
    real (worktree) with `events` audit events. Returns that task's name."""
    big = "task-0"
    tg(repo, "start", big)
    store = SqliteStore(repo / ".taskgate" / "state.db")
    with store.write() as tx:
        for i in range(1, count * 2 // 3):
            name = f"task-{i}"
            tx.insert_task(TaskRow(name=name, state=STATES[i % len(STATES)], session_id=f"s{i}",
                                   host="bench", fence=1, created_at="2026-01-01T00:00:00Z",
                                   updated_at="2026-01-01T00:00:00Z", risk_level="MEDIUM",
                                   required_agents=AGENTS))  # fmt: skip
            for j, agent in enumerate(AGENTS):
                tx.put_agent(AgentRow(name, agent, status=("WORKING", "COMPLETE")[(i + j) % 2],
                                      phase="IMPLEMENTATION"))  # fmt: skip
        for k in range(events // 2):
            agent = AGENTS[k % len(AGENTS)]
            at = f"2026-01-01T{k // 3600 % 24:02d}:{k // 60 % 60:02d}:{k % 60:02d}Z"
            tx.append_event(big, "agent_invoked", {"agent": agent, "mode": "implementation"}, at)
            done = {"agent": agent, "mode": "implementation", "status": "COMPLETE"}
            tx.append_event(big, "agent_completed", done, at)
    store.close()
    return big


class Served:
    """A `taskgate serve --port 0` process for the bench."""

    def __init__(self, repo: Path) -> None:
        self.state = Path(tempfile.mkdtemp(prefix="taskgate-bench-state-"))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "taskgate", "--repo", str(repo), "serve", "--port", "0",
             "--state-dir", str(self.state)],
            env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        found = re.search(r"(http://[^/\s]+)/", line)
        assert found, line + (self.proc.stderr.read() if self.proc.stderr else "")
        self.base = found.group(1)
        token = next(self.state.glob("serve/*/secret")).read_text().strip()
        parts = urlsplit(self.base)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 0
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        conn.request("GET", f"/login?token={token}")
        response = conn.getresponse()
        response.read()
        self.cookie = response.getheader("set-cookie", "").split(";")[0]

    def get(self, path: str) -> tuple[float, float, int]:
        """(time to first byte, full time, bytes) in seconds for one GET."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
        start = time.perf_counter()
        conn.request("GET", path, headers={"Cookie": self.cookie})
        response = conn.getresponse()
        first = time.perf_counter() - start
        body = response.read()
        full = time.perf_counter() - start
        conn.close()
        assert response.status == 200, (path, response.status, body[:300])
        return first, full, len(body)

    def cpu_s(self) -> float:
        """User + system CPU seconds of the server and the git commands it waited for."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = sum(int(f) for f in fields[11:15])  # its own and its children's (git) time
        return ticks / os.sysconf("SC_CLK_TCK")

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)


def timing(server: Served, path: str, runs: int) -> str:
    server.get(path)  # warm
    cpu = server.cpu_s()
    samples = [server.get(path) for _ in range(runs)]
    cpu_ms = (server.cpu_s() - cpu) / runs * 1000
    first = statistics.median(s[0] for s in samples) * 1000
    full = statistics.median(s[1] for s in samples) * 1000
    return (f"server CPU {cpu_ms:.0f} ms per request; wall: TTFB median {first:.0f} ms, full "
            f"{full:.0f} ms; {samples[0][2] // 1024} KiB")  # fmt: skip


def latency(server: Served, repo: Path, task: str, runs: int) -> str:
    """Engine step commit -> SSE event, and CLI exit -> SSE event."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    conn.request("GET", "/events", headers={"Cookie": server.cookie})
    stream = conn.getresponse()
    arrivals: list[float] = []
    ready = threading.Event()
    done = threading.Event()

    def reader() -> None:
        while not done.is_set():
            try:
                line = stream.readline()
            except (OSError, AttributeError, ValueError):  # the stream was closed: the end
                return
            if not line:
                return
            if line.startswith(b"event: hello"):
                ready.set()
            if line.startswith(b"data: ") and task.encode() in line:
                arrivals.append(time.perf_counter())

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    ready.wait(10)
    engine = Engine(find_workspace(repo), session_id="bench", cwd=repo)
    after_start: list[float] = []
    step_ms: list[float] = []
    for _ in range(runs):
        before = len(arrivals)
        began = time.perf_counter()
        engine.step(task, lambda tx, snap: engine.touch(tx, snap))
        step_ms.append((time.perf_counter() - began) * 1000)
        deadline = began + 5
        while len(arrivals) == before and time.perf_counter() < deadline:
            time.sleep(0.0005)
        if len(arrivals) > before:
            after_start.append((arrivals[before] - began) * 1000)
        time.sleep(0.05)
    engine.close()
    store = SqliteStore(repo / ".taskgate" / "state.db")
    committed: list[float] = []
    for _ in range(runs):
        before = len(arrivals)
        with store.write() as tx:
            row = tx.task(task)
            assert row is not None
            tx.update_task(task, row.seq, updated_at=row.updated_at)
        done_at = time.perf_counter()  # the commit is visible from here on
        deadline = done_at + 5
        while len(arrivals) == before and time.perf_counter() < deadline:
            time.sleep(0.0005)
        if len(arrivals) > before:
            committed.append((arrivals[before] - done_at) * 1000)
        time.sleep(0.05)
    store.close()
    cli_event: list[float] = []
    cli_exit: list[float] = []
    for i in range(max(runs // 4, 2)):
        time.sleep(0.05)
        before = len(arrivals)
        began = time.perf_counter()
        tg(repo, "say", task, f"what is the status? ({i})")  # a person's message: one step
        cli_exit.append((time.perf_counter() - began) * 1000)
        deadline = began + 5
        while len(arrivals) == before and time.perf_counter() < deadline:
            time.sleep(0.0005)
        if len(arrivals) > before:
            cli_event.append((arrivals[before] - began) * 1000)
    done.set()
    conn.close()
    ms = sorted(committed)
    p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
    steps = sorted(after_start)
    return (
        f"commit -> SSE event: median {statistics.median(ms):.1f} ms, p95 {p95:.1f} ms, max "
        f"{ms[-1]:.1f} ms over {len(ms)} commits; "
        f"engine step began -> SSE event: median {statistics.median(steps):.1f} ms (the step "
        f"itself, commit + views: median "
        f"{statistics.median(step_ms):.1f} ms); CLI `say` started -> event: median "
        f"{statistics.median(cli_event):.0f} ms, -> the CLI exited: median "
        f"{statistics.median(cli_exit):.0f} ms"
    )


def cold_board(server: Served, repo: Path, task: str, runs: int, *, todo_md: bool = False) -> str:
    """The board right after a store change (a started task moved: the page cache cannot
    answer), or after an edit of todo.md (availability is computed again too)."""
    engine = Engine(find_workspace(repo), session_id="bench", cwd=repo)
    samples = []
    cpu = 0.0
    for i in range(runs):
        if todo_md:
            with (repo / "todo.md").open("a", encoding="utf-8") as handle:
                handle.write(f"\n<!-- edit {i} -->\n")
        else:
            engine.step(task, lambda tx, snap: engine.touch(tx, snap))
        time.sleep(0.1)  # let the watcher see it
        before = server.cpu_s()
        samples.append(server.get("/"))
        cpu += server.cpu_s() - before
    engine.close()
    first = statistics.median(s[0] for s in samples) * 1000
    full = statistics.median(s[1] for s in samples) * 1000
    return (f"server CPU {cpu / runs * 1000:.0f} ms per request; wall: TTFB median {first:.0f} "
            f"ms, full {full:.0f} ms")  # fmt: skip


def run_memory(tasks: int) -> str:
    """Peak RSS of `taskgate serve` while `run --all --yes` drives `tasks` scripted tasks."""
    from taskgate.orchestrator.demo import create_sample

    repo = Path(tempfile.mkdtemp(prefix="taskgate-bench-run-")) / "textkit"
    create_sample(repo, auto_approve=True)
    (repo / "todo.md").write_text("# Tasks\n\n" + "".join(
        f"## slug-{i}: Add helper {i}\n- Purpose: p\n- Scope: src/textkit/h{i}.py and its test\n"
        f"- Components: function, tests\n- Files: src/textkit/h{i}.py, tests/test_h{i}.py\n\n"
        for i in range(tasks)))  # fmt: skip
    git(repo, "add", "todo.md")
    git(repo, "commit", "-q", "-m", "todo")
    tg(repo, "init")
    server = Served(repo)
    idle = server.rss_kib()
    peak = idle
    proc = subprocess.Popen([sys.executable, "-m", "taskgate", "run", "--all", "--yes"],
                            cwd=repo, env=env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    pages = 0
    while proc.poll() is None:
        server.get("/")
        pages += 1
        peak = max(peak, server.rss_kib())
        time.sleep(0.2)
    board = json.loads(urllib.request.urlopen(urllib.request.Request(
        server.base + "/api/board", headers={"Cookie": server.cookie})).read())  # fmt: skip
    done = sum(len(c["tasks"]) for c in board["columns"] if c["state"] in ("COMPLETE", "CLEANUP"))
    server.stop()
    return (
        f"run --all --yes over {tasks} tasks (exit {proc.returncode}, {done} done): serve RSS "
        f"{idle / 1024:.0f} MiB at start, peak {peak / 1024:.0f} MiB ({pages} board loads)"
    )


def main() -> int:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    events = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    run_tasks = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    runs = 7
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (wall times grow "
          "with it; CPU times much less)")  # fmt: skip
    repo = scratch_repo(todo(count))
    git(repo, "add", "-A")
    big = populate(repo, count, events)
    server = Served(repo)
    try:
        idle = server.rss_kib()
        print(f"taskgate serve idle: RSS {idle / 1024:.1f} MiB")
        print(f"board, {count} tasks, after a task's step: {cold_board(server, repo, big, runs)}")
        edited = cold_board(server, repo, big, runs, todo_md=True)
        print(f"board, {count} tasks, after a todo.md edit: {edited}")
        print(f"board, {count} tasks, unchanged (cached): {timing(server, '/', runs)}")
        print(f"board JSON, {count} tasks: {timing(server, '/api/board', runs)}")
        print(f"task page, {events} events: {timing(server, f'/tasks/{big}', runs)}")
        print(f"task JSON, {events} events: {timing(server, f'/api/tasks/{big}', runs)}")
        print(f"live update: {latency(server, repo, big, 20)}")
        print(f"taskgate serve after these pages: RSS {server.rss_kib() / 1024:.1f} MiB")
    finally:
        server.stop()
    if run_tasks:
        print(run_memory(run_tasks))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
