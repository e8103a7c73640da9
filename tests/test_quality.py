"""Lint, format and strict typing run as part of the test suite, so they never drift."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from taskgate import reference

ROOT = Path(__file__).resolve().parent.parent


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize(
    "cmd",
    [
        ("ruff", "check", "src", "tests", "bench", "examples"),
        ("ruff", "format", "--check", "src", "tests", "bench", "examples"),
        (sys.executable, "-m", "mypy"),
    ],
    ids=["ruff-check", "ruff-format", "mypy-strict"],
)
def test_tool_passes(cmd: tuple[str, ...]) -> None:
    if cmd[0] == "ruff" and shutil.which("ruff") is None:
        cmd = (sys.executable, "-m", "ruff", *cmd[1:])
    result = _run(*cmd)
    assert result.returncode == 0, result.stdout + result.stderr


def test_reference_doc_is_generated_from_the_table() -> None:
    text = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    assert text == reference.render(), "run: python -m taskgate.reference > docs/reference.md"
