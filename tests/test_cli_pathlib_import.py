"""cli/pathlib_import (issue 18): pathlib imported without urllib.parse must behave exactly as
pathlib imported the ordinary way -- `as_uri()` included, the one method that reaches
urllib.parse -- and leave every other importer the real urllib.parse."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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


# Fifth pass: re and fnmatch are lazy stand-ins while pathlib is imported, nt and _winapi are
# None (not Windows). What pathlib does with them must not change, and afterwards pathlib and
# everyone else hold the real modules.
GLOB_REPORT = (
    "import pathlib, sys\n"
    "loaded_before = sorted(m for m in ('re', 'fnmatch', 'nt', '_winapi') if m in sys.modules)\n"
    "root = pathlib.Path(sys.argv[1])\n"
    "P, W = pathlib.PurePosixPath, pathlib.PureWindowsPath\n"
    "out = {'before': loaded_before,\n"
    "    'glob': sorted(str(p.relative_to(root)) for p in root.glob('**/*.py')),\n"
    "    'rglob': sorted(str(p.relative_to(root)) for p in root.rglob('[ab]*')),\n"
    "    'match': [P('a/b.py').match('*.py'), W('A/B.PY').match('*.py'),\n"
    "              P('a/B.py').match('b.*'), P('x/y/z.txt').match('y/*.t?t'),\n"
    "              W('C:/a/b').match('c:/A/*')],\n"
    "    'win': [str(W('c:/a/../b')), W('//srv/share/x').drive, W('C:/x').is_absolute(),\n"
    "            W('nul').is_reserved(), str(W('a/b').with_suffix('.c'))]}\n"
    "import fnmatch, ntpath, re\n"
    "out['real'] = [pathlib.re is re, pathlib.fnmatch is fnmatch, hasattr(re, 'compile'),\n"
    "               sys.modules['re'] is re, sys.modules['fnmatch'] is fnmatch,\n"
    "               pathlib.ntpath is ntpath]\n"
    "out['left'] = [m for m in ('nt', '_winapi') if m in sys.modules]\n"
    "out['ntpath'] = sorted(vars(ntpath).keys() - {'__cached__', '__loader__', '__spec__'})\n"
    "out['abspath'] = [ntpath.abspath('a\\\\b'), ntpath.realpath('c:/x'),\n"
    "                  ntpath.isdir(sys.argv[1])]\n"
    "import json\n"
    "print(json.dumps(out))\n"
)


def _glob_run(prelude: str, root: Path) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run(
        [sys.executable, "-c", prelude + GLOB_REPORT, str(root)],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_pathlib_without_re_and_fnmatch_globs_and_matches_the_same(tmp_path: Path) -> None:
    for name in ("a.py", "b/c.py", "b/a.txt", "d/e/f.py", "ab", ".a.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    ordinary = _glob_run("", tmp_path)
    fast = _glob_run(
        "from taskgate.cli.pathlib_import import import_pathlib\nimport_pathlib()\n", tmp_path
    )
    assert ordinary["before"] == ["fnmatch", "re"]
    assert fast["before"] == []  # nothing of them loaded for pathlib itself
    for key in ("glob", "rglob", "match", "win", "ntpath", "abspath"):
        assert fast[key] == ordinary[key], key
    assert fast["real"] == ordinary["real"] == [True] * 6
    assert fast["left"] == ordinary["left"] == []


def test_a_stand_in_someone_else_took_answers_as_the_real_module() -> None:
    """Another module that took a stand-in while pathlib was imported (none does on 3.11)
    reads the real module's names from it once the real module is loaded."""
    import fnmatch

    from taskgate.cli.pathlib_import import _lazy

    stand_in = _lazy("fnmatch")
    assert stand_in.fnmatchcase("ab", "a*") is True
    assert vars(stand_in)["translate"] is fnmatch.translate
