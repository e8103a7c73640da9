"""taskgate.spawn: the hooks' way to run git without subprocess (issue 18)."""

from __future__ import annotations

import os

import pytest

from taskgate.spawn import output


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_output_gives_the_exit_code_and_stdout_and_discards_stderr() -> None:
    env = {"PATH": os.environ["PATH"]}
    code, out = output(["sh", "-c", "echo out; echo err >&2; exit 3"], env)
    assert (code, out) == (3, b"out\n")


def test_stdin_is_the_bytes_given_or_empty() -> None:
    env = {"PATH": os.environ["PATH"]}
    assert output(["cat"], env, b"a\nb\n") == (0, b"a\nb\n")
    assert output(["cat"], env) == (0, b"")  # /dev/null: never the hook's own stdin


def test_the_environment_is_exactly_the_one_given() -> None:
    code, out = output(["env"], {"PATH": os.environ["PATH"], "ONLY": "1"})
    assert code == 0
    assert sorted(out.decode().split()) == sorted([f"PATH={os.environ['PATH']}", "ONLY=1"])


def test_a_program_that_cannot_start_raises_and_leaks_no_descriptor() -> None:
    before = _open_fds()
    with pytest.raises(OSError):
        output(["taskgate-no-such-program"], {"PATH": os.environ["PATH"]}, b"x")
    assert _open_fds() == before
    output(["cat"], {"PATH": os.environ["PATH"]}, b"x")
    assert _open_fds() == before
