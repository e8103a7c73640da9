"""The CLI imports only the module of the command being run (issue 18); its table must say
where every command is registered, and each command must parse as with the whole parser."""

from __future__ import annotations

import importlib
import subprocess
import sys
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from taskgate.cli import main


class _Recorder:
    def __init__(self, module: str, seen: dict[str, str]) -> None:
        self.module, self.seen = module, seen

    def __call__(self, name: str, *args: Any, **kwargs: Any) -> Any:
        self.seen[name] = self.module
        return main._SINK

    def group(self, name: str, *args: Any, **kwargs: Any) -> Any:
        self.seen[name] = self.module
        return main._SINK


def test_the_table_names_the_module_that_registers_each_command() -> None:
    seen: dict[str, str] = {}
    for module in main.COMMAND_MODULES:
        importlib.import_module(module).register(_Recorder(module, seen))
    missing = {k: v for k, v in seen.items() if main.COMMAND_MODULE.get(k) != v}
    assert not missing, f"add these to cli/main.COMMAND_MODULE: {missing}"
    assert seen == main.COMMAND_MODULE


def test_one_command_parses_as_with_the_whole_parser() -> None:
    argv = ["transition", "t1", "REQUIREMENTS", "--reason", "why", "--json"]
    assert vars(main._parser("transition").parse_args(argv)) == vars(
        main._parser().parse_args(argv)
    )


def test_transition_imports_no_other_command_module() -> None:
    code = (
        "import sys\n"
        "from taskgate.cli import main\n"
        "main._parser('transition')\n"
        "print(sorted(m for m in sys.modules if m.startswith('taskgate.cli.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['taskgate.cli.commands', 'taskgate.cli.main']"


def test_help_is_as_wide_as_argparse_makes_it() -> None:
    import shutil

    for columns in ("", "57", "abc", "-3"):
        env = {"COLUMNS": columns} if columns else {}
        code = (
            "import argparse, shutil\n"
            "from taskgate.cli import main\n"
            "ours = main._parser('transition')._get_formatter()._width\n"
            "print(ours, argparse.HelpFormatter('x')._width)\n"
        )
        import os

        full = {k: v for k, v in os.environ.items() if k != "COLUMNS"} | env
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=full
        ).stdout.split()
        assert out[0] == out[1], (columns, out)
    assert shutil  # the reference above imports it; taskgate's own parser does not


def test_building_the_parser_imports_no_shutil() -> None:
    code = (
        "import sys\nfrom taskgate.cli import main\n"
        "main._parser('transition')\nprint('shutil' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# Tokens that matter to the reading without argparse: the command, values, every option of
# `transition` and the global ones, abbreviations, "--", help, values that start with "-".
TOKENS = [
    "transition", "t1", "REQUIREMENTS", "", "a b", "-1", "-x y", "--reason", "--reason=",
    "--reason=why", "--reason=-x", "--rea", "--rea=x", "--json", "--json=1", "--js", "--repo",
    "--repo=", "--repo=/tmp/r", "--session", "--session=s2", "--sess=x", "--", "-h", "--help",
    "-", "status", "--version",
]  # fmt: skip


def _argparse(argv: list[str]) -> dict[str, Any] | None:
    from taskgate.errors import UsageError

    try:
        return vars(main._parser(main._command_of(argv)).parse_args(argv))
    except (UsageError, SystemExit):
        return None


@settings(max_examples=4000, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from(["--repo", "--repo=x", "--session", "s", "--session=s"]), max_size=3),
    st.lists(st.sampled_from(TOKENS), max_size=7),
)
@example([], ["transition", "t1", "REQUIREMENTS"])
@example(["--repo", "/tmp/r", "--session=s"], ["transition", "--json", "t1", "REQUIREMENTS"])
@example([], ["transition", "t1", "--reason", "why", "CLASSIFIED", "--reason=again"])
@example([], ["transition", "t1", "-1"])
@example([], ["transition", "t1", "REQUIREMENTS", "--reason", "--json"])
@example([], ["transition", "t1", "REQUIREMENTS", "--reason", "-1"])
@example(["--repo"], ["--json", "transition", "t1", "REQUIREMENTS"])
@example(["--session"], ["--", "transition", "t1", "REQUIREMENTS"])
@example([], ["transition", "t1", "REQUIREMENTS", "--rea", "x"])
def test_the_plain_reading_is_what_argparse_reads(front: list[str], rest: list[str]) -> None:
    argv = front + rest
    fast = main.simple_args(argv)
    if fast is not None:
        assert vars(fast) == _argparse(argv), argv


def test_the_plain_reading_takes_the_usual_command_lines() -> None:
    for argv in (
        ["transition", "t1", "REQUIREMENTS"],
        ["transition", "t1", "CLASSIFIED", "--reason", "back", "--json"],
        ["--repo", "/tmp/r", "--session=s2", "transition", "--reason=x y", "t1", "SYNTHESIS"],
    ):
        fast = main.simple_args(argv)
        assert fast is not None and vars(fast) == _argparse(argv)
    for argv in (["transition", "t1"], ["transition", "t1", "A", "B"], ["transition", "-h"],
                 ["transition", "t1", "A", "--rea", "x"], ["status", "t1"], []):  # fmt: skip
        assert main.simple_args(argv) is None
