"""git's environment is built from a cached clean copy of os.environ (issue 18): it must be
exactly `process.clean_env` whatever changed in os.environ since the last git command."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import git as plain_git
from taskgate.git import cmd
from taskgate.process import clean_env


@pytest.mark.parametrize("extra", [None, {}, {"GIT_INDEX_FILE": "/tmp/i", "LC_ALL": "C.UTF-8"}])
def test_the_cached_environment_is_clean_env_after_every_change(
    monkeypatch: pytest.MonkeyPatch, extra: dict[str, str] | None
) -> None:
    assert cmd._environment(extra) == clean_env(extra)
    monkeypatch.setenv("GIT_DIR", "/elsewhere")  # inherited GIT_* never reach git
    assert cmd._environment(extra) == clean_env(extra)
    assert "GIT_DIR" not in cmd._environment(extra)
    monkeypatch.setenv("TG_PROBE", "one")
    assert cmd._environment(extra)["TG_PROBE"] == "one"
    monkeypatch.setenv("TG_PROBE", "two")  # same keys, same length: another value
    assert cmd._environment(extra) == clean_env(extra)
    assert cmd._environment(extra)["TG_PROBE"] == "two"
    monkeypatch.delenv("TG_PROBE")
    assert "TG_PROBE" not in cmd._environment(extra)
    assert cmd._environment(extra) == clean_env(extra)


def test_a_caller_changing_the_result_changes_no_later_one() -> None:
    first = cmd._environment(None)
    first["TG_LEAK"] = "x"
    assert "TG_LEAK" not in cmd._environment(None)


def test_git_sees_the_current_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain_git(tmp_path, "init", "-q")
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.delenv("GIT_EDITOR", raising=False)
    monkeypatch.setenv("EDITOR", "probe-editor")
    assert cmd.git("var", "GIT_EDITOR", cwd=tmp_path).stdout.strip() == "probe-editor"
    monkeypatch.setenv("EDITOR", "other-editor")  # the same length, another value
    assert cmd.git("var", "GIT_EDITOR", cwd=tmp_path).stdout.strip() == "other-editor"
    monkeypatch.setenv("GIT_EDITOR", "leaked")  # inherited GIT_*: dropped
    assert cmd.git("var", "GIT_EDITOR", cwd=tmp_path).stdout.strip() == "other-editor"
    shown = cmd.git("var", "GIT_EDITOR", cwd=tmp_path, env={"GIT_EDITOR": "on-purpose"})
    assert shown.stdout.strip() == "on-purpose"
    assert os.environ["GIT_EDITOR"] == "leaked"
