"""cli/pathlib_import (issue 18): pathlib imported without urllib.parse must behave exactly as
pathlib imported the ordinary way -- `as_uri()` included, the one method that reaches
urllib.parse -- and leave every other importer the real urllib.parse."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import SRC

PATHS = [
    "/", "/tmp", "/a b/c", "/ü/é.txt", "/%41/#?;=&+", "/x\\y", "/tab\there", "/~user/.git",
    "/" + "".join(chr(c) for c in range(33, 127) if chr(c) != "/"),
]  # fmt: skip

REPORT = (
    "import json, pathlib, sys\n"
    "paths = json.loads(sys.argv[1])\n"
    "loaded_before = sorted(m for m in ('urllib.parse', 'ipaddress') if m in sys.modules)\n"
    "uris = [pathlib.PurePosixPath(p).as_uri() for p in paths]\n"
    "uris += [pathlib.PureWindowsPath('c:/' + p[1:]).as_uri() for p in paths]\n"
    "import urllib.parse\n"
    "print(json.dumps({'before': loaded_before, 'uris': uris,\n"
    "    'real': hasattr(urllib.parse, 'urlsplit')\n"
    "        and sys.modules['urllib.parse'] is urllib.parse,\n"
    "    'quote': urllib.parse.quote_from_bytes(b'a b/c', '')}))\n"
)


def _run(prelude: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run(
        [sys.executable, "-c", prelude + REPORT, json.dumps(PATHS)],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_pathlib_without_urllib_makes_the_same_uris_and_leaves_urllib_real() -> None:
    ordinary = _run("")
    fast = _run("from taskgate.cli.pathlib_import import import_pathlib\nimport_pathlib()\n")
    assert fast["before"] == []  # neither urllib.parse nor ipaddress was loaded for pathlib
    assert ordinary["before"] == ["ipaddress", "urllib.parse"]
    assert fast["uris"] == ordinary["uris"]
    assert fast["real"] is True and ordinary["real"] is True
    assert fast["quote"] == ordinary["quote"] == "a%20b%2Fc"


def test_when_pathlib_wants_more_it_is_imported_the_ordinary_way() -> None:
    """Another Python's pathlib asking urllib.parse for more than quote_from_bytes: the stand-in
    (here an empty one) is removed and both modules are imported as usual."""
    ordinary = _run("")
    fallback = _run(
        "import types\n"
        "from taskgate.cli import pathlib_import\n"
        "pathlib_import._stand_in = lambda: types.ModuleType('urllib.parse')\n"
        "pathlib_import.import_pathlib()\n"
    )
    assert fallback["before"] == ["ipaddress", "urllib.parse"]
    assert fallback["uris"] == ordinary["uris"] and fallback["real"] is True


def test_nothing_is_done_when_pathlib_or_urllib_is_already_loaded() -> None:
    code = (
        "import sys, urllib.parse\n"
        "real = sys.modules['urllib.parse']\n"
        "from taskgate.cli.pathlib_import import import_pathlib\n"
        "import_pathlib()\n"
        "import pathlib\n"
        "assert sys.modules['urllib.parse'] is real\n"
        "assert pathlib.urlquote_from_bytes is real.quote_from_bytes\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
