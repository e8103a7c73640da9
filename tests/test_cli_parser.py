"""The CLI imports only the module of the command being run (issue 18); its table must say
where every command is registered, and each command must parse as with the whole parser."""

from __future__ import annotations

import importlib
import subprocess
import sys
from typing import Any

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
