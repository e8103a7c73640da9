"""Cost of the hook-settings check in the SessionStart hook (issue 14, hooks/settings_check.py).

The SessionStart command `taskgate hooks install` writes, run the way Claude Code runs it
(`/bin/sh -c COMMAND` with the hook JSON on stdin, a new session holding no task), in two
HOMEs, interleaved in the same run: one whose ~/.claude/settings.json holds taskgate's
entries (every event's entry is read and compared with what install writes) and one whose
settings hold none (nothing to compare). Both HOMEs are scratch directories.

Run: python bench/session_start_check.py [rounds]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import env, scratch_repo


def home_env(home: Path) -> dict[str, str]:
    e = env()
    e["HOME"] = str(home)
    e.pop("TASKGATE_SESSION", None)
    e.pop("CODEX_HOME", None)
    return e


def main(rounds: int) -> None:
    repo = scratch_repo()
    installed, empty = (Path(tempfile.mkdtemp(prefix="taskgate-bench-home-")) for _ in "ab")
    subprocess.run([sys.executable, "-m", "taskgate", "hooks", "install"], cwd=repo,
                   env=home_env(installed), check=True, capture_output=True)  # fmt: skip
    (empty / ".claude").mkdir()
    (empty / ".claude" / "settings.json").write_text('{"hooks": {}}\n')
    settings = json.loads((installed / ".claude" / "settings.json").read_text())
    command = settings["hooks"]["SessionStart"][0]["hooks"][-1]["command"]
    data = json.dumps({"session_id": "fresh", "cwd": str(repo), "source": "startup",
                       "hook_event_name": "SessionStart", "transcript_path": ""})  # fmt: skip
    samples: dict[str, list[float]] = {"entries installed": [], "no entries": []}
    homes = {"entries installed": installed, "no entries": empty}
    for _ in range(rounds):
        for name, home in homes.items():
            start = time.perf_counter()
            proc = subprocess.run(["/bin/sh", "-c", command], input=data, cwd=repo,
                                  env=home_env(home), capture_output=True, text=True)  # fmt: skip
            samples[name].append(time.perf_counter() - start)
            if proc.returncode != 0 or "hook settings changed" in proc.stdout:
                raise SystemExit(f"unexpected hook answer: {proc.stdout} {proc.stderr}")
    medians = {name: statistics.median(s) * 1000 for name, s in samples.items()}
    print(f"SessionStart hook, new session, {rounds} rounds interleaved (median ms):")
    for name, ms in medians.items():
        print(f"  {name:<18} {ms:7.1f}")
    ratio = medians["entries installed"] / medians["no entries"]
    print(f"  ratio (check reading and comparing the entries / nothing to compare): {ratio:.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
