"""The README's examples keep working."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import SRC

ROOT = Path(__file__).resolve().parent.parent


def test_walkthrough_runs_the_whole_protocol() -> None:
    env = dict(os.environ, PYTHONPATH=str(SRC))
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "walkthrough.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert "audit add-greeting (CLEANUP): PASSED" in result.stdout
    assert "one squashed commit on main" in result.stdout
