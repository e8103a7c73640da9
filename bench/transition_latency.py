"""Median latency of one guarded `taskgate transition` through the CLI, as a ratio to a bare
`python3 -c pass` measured in the same run (issue 2), plus the CLI's import time.

Run: python bench/transition_latency.py [rounds]
"""

from __future__ import annotations

import re
import subprocess
import sys

from common import env, median_ms, scratch_repo, tg, timed

IMPORT_ROW = re.compile(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)")


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    repo = scratch_repo()
    tg(repo, "start", "task-0")
    wt = repo / ".taskgate" / "tasks" / "task-0" / "code"
    tg(wt, "classify", "task-0")
    base: list[float] = []
    forward: list[float] = []
    backward: list[float] = []
    cli = [sys.executable, "-m", "taskgate", "transition", "task-0"]
    for _ in range(rounds):  # interleaved, so machine noise hits both sides alike
        base.append(timed([sys.executable, "-c", "pass"], wt))
        forward.append(timed([*cli, "REQUIREMENTS"], wt))
        base.append(timed([sys.executable, "-c", "pass"], wt))
        backward.append(timed([*cli, "CLASSIFIED", "--reason", "bench round trip"], wt))
    both = forward + backward
    print(f"rounds: {rounds} (each: one forward + one backward transition)")
    print(f"python3 -c pass           median {median_ms(base):7.1f} ms")
    print(f"transition (forward)      median {median_ms(forward):7.1f} ms")
    print(f"transition (backward)     median {median_ms(backward):7.1f} ms")
    print(f"transition / python ratio {median_ms(both) / median_ms(base):7.2f}")
    parser_cost()
    for label, argv in (
        ("taskgate --help", ["--help"]),
        ("taskgate transition", ["transition", "task-0", "REQUIREMENTS"]),
    ):
        out = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "taskgate", *argv],
            cwd=wt,
            env=env(),
            capture_output=True,
            text=True,
            check=True,
        ).stderr
        rows = [IMPORT_ROW.match(line) for line in out.splitlines()]
        total = sum(int(m.group(1)) for m in rows if m)
        ours = sum(int(m.group(1)) for m in rows if m and m.group(2).startswith("taskgate"))
        print(
            f"imports of {label:<20} {total / 1000:6.1f} ms self-time in total "
            f"({ours / 1000:.1f} ms in taskgate modules)"
        )
    return 0


def parser_cost() -> None:
    """In-process: building the whole CLI parser vs only the command being run (issue 18)."""

    code = (
        "import statistics, time\n"
        "from taskgate.cli import main as m\n"
        "m._parser()\n"
        "for label, only in (('whole parser', None), ('transition only', 'transition')):\n"
        "    ts = []\n"
        "    for _ in range(30):\n"
        "        t = time.perf_counter(); m._parser(only); ts.append(time.perf_counter() - t)\n"
        "    print(f'parser construction, {label:16} {statistics.median(ts) * 1000:6.2f} ms')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env(), capture_output=True, text=True, check=False
    )
    print(out.stdout.rstrip() or f"parser construction: not measured ({out.stderr[-200:]})")


if __name__ == "__main__":
    sys.exit(main())
