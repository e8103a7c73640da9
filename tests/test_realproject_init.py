"""`taskgate init`'s taskgate.toml reads right for a new user (issue 17 rough edges)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import git


def test_init_config_takes_the_sections_the_docs_promise(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("x\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    subprocess.run([sys.executable, "-m", "taskgate", "init"], cwd=repo, check=True,
                   capture_output=True)  # fmt: skip
    config = repo / "taskgate.toml"
    text = config.read_text()
    first = text.splitlines()[0]
    assert "https://" not in first and "README.md" in first  # no bare URL
    for table in ("[agents]", "[agents.claude]", "[spec]", "[validation]", "[protocol]"):
        assert f"# {table}\n" in text  # documented, and left to the person to add
    # Following docs/guide.md: append the tables; the file still parses and means them.
    config.write_text(
        text + '\n[validation]\ncommands = ["python -m pytest -q"]\n\n'
        '[agents]\nbackend = "command"\n\n[agents.command]\ncommand = ["./bin/agent"]\n\n'
        "[protocol]\nallow_auto_approve = true\n"
    )  # fmt: skip
    status = subprocess.run([sys.executable, "-m", "taskgate", "todo"], cwd=repo,
                            capture_output=True, text=True)  # fmt: skip
    assert status.returncode == 0, status.stderr
    from taskgate.engine.config import load_config

    loaded = load_config(repo)
    assert loaded.validation.commands == (("python", "-m", "pytest", "-q"),)
    assert loaded.protocol.allow_auto_approve is True


def test_init_writes_no_changelog_and_the_docs_say_so(tmp_path: Path) -> None:
    """Issue 17: docs/cli.md promised a changelog.md from init; init deliberately writes none
    (an untracked copy stands in the way of the first merge): the docs now say what happens."""
    import json

    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("x\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    out = subprocess.run([sys.executable, "-m", "taskgate", "init", "--json"], cwd=repo,
                         check=True, capture_output=True, text=True).stdout  # fmt: skip
    assert not any("changelog" in c for c in json.loads(out)["created"])
    assert not (repo / "changelog.md").exists()
    docs = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text()
    assert "written by `taskgate init`" not in docs
    init_row = next(line for line in docs.splitlines() if line.startswith("| `init` |"))
    assert "not changelog.md" in init_row
    assert "The first\n   task's archival commit creates changelog.md" in docs
