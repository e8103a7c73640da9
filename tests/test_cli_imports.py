"""What a transition through the CLI imports (issue 18): run for real, its command path must
not load the modules the third pass took off it. Each was milliseconds of every command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import SRC, Repo

# dataclasses (and what it imports): taskgate.dataclass_lite builds the records; argparse,
# gettext, locale: cli/main.simple_args reads a plain transition; tomllib: a taskgate.toml of
# comments only (engine/config.comments_only); typing: imported for mypy only; datetime and
# sqlite3 (whose dbapi2 imports datetime): engine/clock and store/sqlite use the C modules
# (_datetime, _sqlite3) those re-export; signal, shlex: imported where used.
# Fourth pass: urllib.parse and ipaddress: pathlib is imported through cli/pathlib_import; the
# effect check's modules: no baseline can exist without <state>/effects (engine/core.step).
# encodings.ascii: the store's and the views' key files are read as bytes (ascii_text);
# taskgate.git.cmd: imported by git/repo.py on the first git command.
# Fifth pass: json (taskgate.json_lite drives json's C scanner), re and fnmatch (pathlib through
# cli/pathlib_import, protocol/taskmd reads the plan section with str methods, guards load
# protocol/substance and filekinds on the first diff check); enum: the protocol's enums are
# taskgate.enum_lite StrEnums; _datetime: Engine.now stamps a step through clock.now_iso.
NOT_IMPORTED = (
    "dataclasses", "inspect", "ast", "dis", "tokenize", "argparse", "gettext", "locale",
    "tomllib", "typing", "datetime", "sqlite3", "signal", "shlex",
    "urllib.parse", "ipaddress", "taskgate.hooks.quarantine", "taskgate.hooks.effects",
    "taskgate.hooks.context", "taskgate.hooks.policy", "taskgate.hooks.ignored",
    "encodings.ascii", "taskgate.git.cmd",
    "json", "json.decoder", "json.encoder", "re", "fnmatch", "taskgate.protocol.substance",
    "taskgate.protocol.filekinds", "enum", "_datetime",
)  # fmt: skip


def test_a_transition_through_the_cli_imports_none_of_them(repo: Repo) -> None:
    repo.ok("start", "add-login")
    wt = repo.worktree("add-login")
    repo.ok("classify", "add-login", cwd=wt)
    code = (  # records which taskgate module asked for each of them, for the message
        "import sys\n"
        f"watched, by = {NOT_IMPORTED!r}, {{}}\n"
        "class Spy:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        frame = sys._getframe(1)\n"
        "        while frame and '/taskgate/' not in frame.f_code.co_filename:\n"
        "            frame = frame.f_back\n"
        "        if name in watched and name not in by and frame:\n"
        "            by[name] = f'{frame.f_code.co_filename}:{frame.f_lineno}'\n"
        "sys.meta_path.insert(0, Spy())\n"
        "from taskgate.cli.main import main\n"
        "code = main(['transition', 'add-login', 'REQUIREMENTS'])\n"
        "code += main(['transition', 'add-login', 'CLASSIFIED', '--reason', 'back'])\n"
        "print(by, file=sys.stderr)\n"
        "print(code, sorted(m for m in watched if m in sys.modules))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC), "TASKGATE_SESSION": "s1"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=wt, env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.splitlines()[-1] == "0 []", (
        "a transition imports what the command path left out (issue 18); imported by: "
        + out.stderr  # use taskgate.dataclass_lite, typing under TYPE_CHECKING, or import late
    )
    assert "CLASSIFIED" in repo.ok("status", "add-login", cwd=wt).out


def test_the_c_modules_are_the_ones_the_stdlib_wrappers_reexport() -> None:
    """engine/clock and store/sqlite skip datetime.py and sqlite3's dbapi2: what they use must
    be the very objects those modules export, so nothing behaves differently."""
    import datetime
    import sqlite3

    from taskgate.engine import clock
    from taskgate.store import sqlite as store_sqlite

    assert clock.datetime is datetime.datetime and clock.UTC is datetime.UTC
    for name in ("connect", "Connection", "Row", "Error", "DatabaseError", "IntegrityError",
                 "OperationalError"):  # fmt: skip
        assert getattr(store_sqlite.sqlite3, name) is getattr(sqlite3, name), name
    assert sqlite3.OperationalError.__module__ == "sqlite3"  # errors.classify reads it


def test_the_effect_check_is_left_out_only_where_no_baseline_can_be() -> None:
    """engine/core.step loads the effect check only when `<state>/effects` exists: every
    baseline hooks/effects.py reads or writes is a file in that directory."""
    from taskgate.engine.core import EFFECTS_DIR
    from taskgate.hooks import effects

    for session in ("s1", "0b5c-uuid", ".hidden", "a/b", "x" * 300, "ü"):
        path = effects.baseline_path("/repo/.taskgate", session)
        assert os.path.dirname(path) == os.path.join("/repo/.taskgate", EFFECTS_DIR), session


def test_a_plain_command_in_its_own_process_runs_without_the_cyclic_collector(
    repo: Repo,
) -> None:
    """cli/main pauses the collector for a plain command (simple_args) when the process ends
    with it (`own_process`, as the console script and `python -m taskgate` call it), done or
    refused; any other command line runs with it; an in-process main() leaves it alone."""
    repo.ok("start", "add-login")
    wt = repo.worktree("add-login")
    repo.ok("classify", "add-login", cwd=wt)
    code = (
        "import gc\n"
        "from taskgate.cli import commands\n"
        "from taskgate.cli.main import main\n"
        "seen = []\n"
        "def spy(name):\n"
        "    real = getattr(commands, name)\n"
        "    def handler(args):\n"
        "        seen.append(f'{name}:{gc.isenabled()}')\n"
        "        return real(args)\n"
        "    setattr(commands, name, handler)\n"
        "spy('cmd_transition'); spy('cmd_status')\n"
        "def run(*argv, own=True):\n"
        "    gc.enable()\n"
        "    seen.append(str(main(list(argv), own_process=own)))\n"
        "    seen.append(f'after:{gc.isenabled()}')\n"
        "run('transition', 'add-login', 'REQUIREMENTS')\n"
        "run('transition', 'add-login', 'REQUIREMENTS')\n"
        "run('status', 'add-login')\n"
        "run('transition', '--json', 'add-login', 'CLASSIFIED', '--reason=r', own=False)\n"
        "print(*seen)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC), "TASKGATE_SESSION": "s1"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=wt, env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.splitlines()[-1].split() == [
        "cmd_transition:False", "0", "after:False",  # done
        "cmd_transition:False", "1", "after:False",  # refused
        "cmd_status:True", "0", "after:True",  # not a plain command
        "cmd_transition:True", "0", "after:True",  # in-process main()
    ], out.stderr  # fmt: skip
    assert "CLASSIFIED" in repo.ok("status", "add-login", cwd=wt).out


def test_the_name_check_is_the_regex_it_replaced() -> None:
    """protocol/names._well_formed is re.fullmatch of the pattern it replaced, on every string of
    one or two characters from U+0000..U+00FF and on lengths around the limit of 64."""
    import re

    from taskgate.protocol.names import _well_formed

    pattern = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
    chars = [chr(c) for c in range(256)] + ["\u0131", "\u212a", "\uff41"]
    names = ["", *chars, *(a + b for a in chars for b in chars)]
    names += [c * n for c in "a0.-_A" for n in (62, 63, 64, 65, 66)]
    names += ["a" * 63 + "\n", "a\n", "ab" * 40, "x" * 64 + "y"]
    wrong = [n for n in names if _well_formed(n) != (pattern.fullmatch(n) is not None)]
    assert wrong == []


def test_the_key_files_read_as_bytes_read_as_text_mode_did(tmp_path: Path) -> None:
    """snapshot_splice.ascii_text (and read_generation) against open(encoding="ascii"): the same
    text, universal newlines included, and the same UnicodeDecodeError on a non-ASCII byte."""
    from taskgate.store.snapshot_splice import GEN_FILE, ascii_text, read_generation

    cases = [
        b"", b"12 key", b"12 key\n", b"12 key\r\n", b"12\r34 key", b"12 k\rey\r",
        b"\r\n" * 150 + b"7 k", b"\r" * 199 + b"\n9 k", b" 3 a b\n", b"x" * 9000, b"5 k\xe9",
        b"\xff", b"5 " + b"k" * 300,
    ]  # fmt: skip
    path = tmp_path / GEN_FILE
    for data in cases:
        path.write_bytes(data)
        try:
            with open(path, encoding="ascii") as handle:
                whole: str | None = handle.read()
            with open(path, encoding="ascii") as handle:
                clock, _, key = handle.read(200).strip().partition(" ")
            old = (int(clock), key) if clock.isdigit() and key else None
        except UnicodeDecodeError:
            whole = old = None
        try:
            new: str | None = ascii_text(data)
        except UnicodeDecodeError:
            new = None
        assert (new, read_generation(str(tmp_path))) == (whole, old), data


def test_now_iso_is_iso_of_the_system_clock_in_any_time_zone() -> None:
    """engine/core's Engine.now stamps steps with clock.now_iso (no datetime): the text
    iso(system_clock()) gives, whatever the local time zone (POSIX TZ strings: no tzdata
    needed), and TASKGATE_FAKE_NOW still pins it."""
    code = (
        "import sys\n"
        "from taskgate.engine.clock import iso, now_iso, system_clock\n"
        "loaded = '_datetime' in sys.modules or 'datetime' in sys.modules\n"
        "same = []\n"
        "for _ in range(300):\n"
        "    before, text, after = iso(system_clock()), now_iso(), iso(system_clock())\n"
        "    same.append(before <= text <= after)  # ISO text orders as time\n"
        "print(loaded, all(same), text)\n"
    )
    for tz in ("UTC0", "XST-12:45", "NST+03:30", "EST5EDT,M3.2.0,M11.1.0", "ABC-14"):
        env = {**os.environ, "PYTHONPATH": str(SRC), "TZ": tz}
        env.pop("TASKGATE_FAKE_NOW", None)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True).stdout.split()  # fmt: skip
        assert out[:2] == ["False", "True"] and out[2].endswith("Z"), (tz, out)
    env = {**os.environ, "PYTHONPATH": str(SRC), "TZ": "XST-12:45",
           "TASKGATE_FAKE_NOW": "2030-02-03T04:05:06+02:00"}  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()  # fmt: skip
    assert out == ["False", "True", "2030-02-03T02:05:06Z"]
