"""process.end_sessions_until_done: Ctrl-C ends every child a pool of workers started with
`kill_group`, one still being started included (the agent pool, worktree setup's jobs).

Real processes and a real SIGINT, in a subprocess of its own (the helper ends the child
sessions of the process it runs in: here, never pytest's). The window is made exact with
TASKGATE_WAIT: one worker holds before it starts its child until the first clean-up pass is
done (`sessions:first-pass`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from conftest import SRC
from test_run import cmdlines

TIMEOUT_S = 60.0  # each child's timeout: what a caller without the fix waits for

SCRIPT = """
import sys, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from taskgate import process

gate, marker, timeout = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])

def job(kind):
    Path(f"{gate}.{kind}").touch()  # this worker is starting its child
    if kind == "held":
        while not gate.exists():
            time.sleep(0.01)
    sleep = [sys.executable, "-c", "import time; time.sleep(900)", marker]
    return process.run(sleep, kill_group=True, timeout=timeout)

with ThreadPoolExecutor(max_workers=3) as pool:
    futures = [pool.submit(job, k) for k in ("running-1", "running-2", "held", "queued")]
    try:
        for future in futures:
            future.result()
    except KeyboardInterrupt:
        process.end_sessions_until_done(futures)
        late = futures[2].result()  # the held worker's child: started after the first pass
        print(late.returncode, late.timed_out)
        sys.exit(130)
"""


def _with_marker(marker: str) -> list[int]:
    """Processes whose command line carries `marker`."""
    return [pid for pid, argv in cmdlines() if marker.encode() in b"\0".join(argv)]


def test_ctrl_c_ends_the_children_of_every_worker_even_one_still_starting(
    tmp_path: Path,
) -> None:
    script = tmp_path / "pool.py"
    script.write_text(SCRIPT)
    gate, first_pass = tmp_path / "held.go", tmp_path / "first-pass.go"
    marker = f"tg-sessions-{os.getpid()}-{tmp_path.name}"
    env = dict(os.environ, PYTHONPATH=str(SRC), TASKGATE_WAIT=f"sessions:first-pass={first_pass}")
    proc = subprocess.Popen(
        [sys.executable, str(script), str(gate), marker, str(TIMEOUT_S)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def until(what: str, check: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 120  # a bound for a loaded machine, not a speed claim
        while not check():
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"{what} never happened:\n" + "".join(proc.communicate()))
            time.sleep(0.02)

    def children() -> list[int]:  # the script itself carries the marker too
        return [pid for pid in _with_marker(marker) if pid != proc.pid]

    held = Path(f"{gate}.held")
    until("two children running, one worker held", lambda: held.exists() and
          len(children()) == 2)  # fmt: skip
    proc.send_signal(signal.SIGINT)
    until("the first pass", lambda: any(tmp_path.glob("first-pass.go.*.arrived")))
    gate.touch()  # the held worker starts its child only now
    first_pass.touch()
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S / 2)  # a ratio of the children's timeout
    except subprocess.TimeoutExpired:
        alive = children()
        proc.kill()
        proc.communicate()
        raise AssertionError(f"waited for a child's timeout; still running: {alive}") from None
    assert proc.returncode == 130, out + err
    assert out.split() == [str(-signal.SIGKILL), "False"]  # ended by the helper, no timeout
    until_gone = time.monotonic() + 30
    while children() and time.monotonic() < until_gone:
        time.sleep(0.05)
    assert not children()  # every child ended, the late one too
    assert not Path(f"{gate}.queued").exists()  # a queued job never started
