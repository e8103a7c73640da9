"""Property (issue 15): random compositions of shell grammar around a write into the task
worktree are never allowed without detection. Hypothesis builds the line; the main agent is
in IMPLEMENTATION; PreToolUse must deny it, or the line really runs and the effect check
finds the change and puts the worktree back."""

# ruff: noqa: E501  (tables of shell fragments read better unwrapped)

from __future__ import annotations

import shlex
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_hooks_corpus_adversarial import attempt, build_world

TARGETS = ["f.py", "./f.py", "{W}/f.py", '"$PWD/f.py"', "$'\\x66'.py", "../code/f.py",
           "sub/../f.py", "README.md", "{LNK}/f.py", "f\\\n.py"]  # fmt: skip
WRITES = ["echo x > {P}", "touch {P}", "cp README.md {P}", "sed -i s/a/b/ {P}", "tee {P} </dev/null",
          "python3 -c \"open('{P}','w')\"", "rm -f {P}", "truncate -s0 {P}", "printf x >> {P}",
          "dd of={P} </dev/null 2>/dev/null", "sort -o {P} README.md", "ln -sf README.md {P}",
          "install /dev/null {P}", "find . -maxdepth 0 -fprint {P}", "awk 'BEGIN{print > \"{P}\"}'",
          "{ echo x; } > {P}", "exec 3> {P}", "mv README.md {P}"]  # fmt: skip
WRAPPERS = ["{{ {X}; }}", "( {X} )", "if true; then {X}; fi", "if false; then :; else {X}; fi",
            "while true; do {X}; break; done", "for i in 1; do {X}; done", "f() {{ {X}; }}; f",
            "true && {X}", "false || {X}", "{X} | cat", "echo $({X})", "bash -c {Q}", "eval {Q}",
            "case a in a) {X};; esac", "{X} 2>/dev/null", "timeout 5 bash -c {Q}",
            "nice sh -c {Q}", "env bash -c {Q}", ": ; {X}", "{X} & wait", "! {X}",
            "until {X}; do :; done", "cd . && {X}", "cd /tmp; cd - >/dev/null; {X}",
            "x=1; {X}", "[[ 1 ]] && {X}", "(( 1 )) && {X}", "if true\nthen\n{X}\nfi",
            "function g {{ {X}; }}; g", "set -e; {X}"]  # fmt: skip


@st.composite
def lines(draw: st.DrawFn) -> str:
    """A write into the task worktree, wrapped in up to four layers of shell grammar."""
    line = draw(st.sampled_from(WRITES)).replace("{P}", draw(st.sampled_from(TARGETS)))
    for _ in range(draw(st.integers(0, 4))):
        wrapper = draw(st.sampled_from(WRAPPERS))
        line = wrapper.replace("{Q}", shlex.quote(line)).replace("{X}", line)
        line = line.replace("{{", "{").replace("}}", "}")
    return line


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    yield from build_world(tmp_path_factory)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(line=lines())
def test_a_write_in_any_grammar_is_denied_or_detected(guarded: dict[str, str], line: str) -> None:
    command = line
    for key, value in guarded.items():
        if key.startswith("{"):
            command = command.replace(key, value)
    assert attempt(guarded, "Bash", {"command": command}, guarded["{W}"]) in ("denied", "detected")
