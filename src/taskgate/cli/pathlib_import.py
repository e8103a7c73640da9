"""`pathlib` for the CLI without the modules it loads but a command does not use (issue 18).

pathlib asks `urllib.parse` for one function at import time, `quote_from_bytes`, which only
`PurePath.as_uri()` calls; loading it costs about 2.5 ms of a transition's CPU (a quarter of
what taskgate adds to a bare interpreter on that path), and no command on the CLI's plain
paths makes a URI. So, where nothing has loaded pathlib or urllib.parse yet, a stand-in is in
`sys.modules["urllib.parse"]` while pathlib is imported and removed right after it: pathlib
keeps the stand-in's `quote_from_bytes`, which imports the real urllib.parse on its first call
and passes the call on unchanged, so `as_uri()` returns the same string; every other importer
gets the real module. If pathlib asks the stand-in for anything else (another Python), it is
removed and pathlib imported the ordinary way (store/hook_tx.sqlite_module does the same for
`_sqlite3`; tests/test_cli_pathlib_import.py compares both).

Fifth pass: pathlib also imports `re` and `fnmatch` (about 1 ms of CPU together, with re's
compiler) for `glob`, `match` and friends, none of which a plain transition calls, and
`ntpath`, whose optional imports of Windows' `nt` and `_winapi` each search the whole of
`sys.path` before failing (0.2 ms). While pathlib is imported, `re` and `fnmatch` (where not
loaded yet) are lazy stand-ins: the first attribute pathlib reads from one imports the real
module, puts it in pathlib's namespace in the stand-in's place, and answers from it, so every
call after that is pathlib's ordinary code on the real modules; nothing else ever sees a
stand-in (they are out of `sys.modules` when pathlib's import ends). On a platform without
`nt` (not Windows), `nt` and `_winapi` are `None` in `sys.modules` meanwhile: the import
fails at once, with the ImportError ntpath expects, instead of after the search.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any

# Modules pathlib keeps a reference to but uses only inside methods a plain command does not
# call (glob, rglob, match, ...): lazy stand-ins while it is imported.
LAZY = ("re", "fnmatch")
# Modules ntpath tries to import and that only Windows has: None while pathlib is imported.
WINDOWS_ONLY = ("nt", "_winapi")


def import_pathlib() -> None:
    """Import pathlib, without urllib.parse, re and fnmatch when none is loaded yet."""
    if "pathlib" in sys.modules or "urllib.parse" in sys.modules:
        return
    stand_ins = {"urllib.parse": _stand_in()}
    stand_ins.update({name: _lazy(name) for name in LAZY if name not in sys.modules})
    absent: tuple[str, ...] = ()
    if "nt" not in sys.builtin_module_names and "ntpath" not in sys.modules:
        absent = tuple(name for name in WINDOWS_ONLY if name not in sys.modules)
    sys.modules.update(stand_ins)
    for name in absent:
        sys.modules[name] = None  # type: ignore[assignment]  # import fails at once
    try:
        import pathlib
    except Exception:  # pathlib wanted more of urllib.parse: import it the ordinary way
        _remove(stand_ins, absent)
        sys.modules.pop("pathlib", None)
        import pathlib  # noqa: F401
    finally:
        _remove(stand_ins, absent)


def _remove(stand_ins: dict[str, ModuleType], absent: tuple[str, ...]) -> None:
    for name, stand_in in stand_ins.items():
        if sys.modules.get(name) is stand_in:
            del sys.modules[name]
    for name in absent:
        if name in sys.modules and sys.modules[name] is None:
            del sys.modules[name]


def quote_from_bytes(*args: Any, **kwargs: Any) -> str:
    """urllib.parse.quote_from_bytes, imported on the first call."""
    from urllib.parse import quote_from_bytes as real

    return real(*args, **kwargs)


def _stand_in() -> ModuleType:
    """The `urllib.parse` pathlib sees while it is imported: quote_from_bytes alone."""
    module = type(sys)("urllib.parse")
    module.quote_from_bytes = quote_from_bytes  # type: ignore[attr-defined]
    return module


def _lazy(name: str) -> ModuleType:
    """A stand-in for the module `name`: its first attribute read imports the real module."""
    module = type(sys)(name)

    def __getattr__(attribute: str) -> Any:
        return getattr(_real(name, module), attribute)

    module.__getattr__ = __getattr__  # type: ignore[method-assign]  # PEP 562
    return module


def _real(name: str, stand_in: ModuleType) -> ModuleType:
    """Import the real module `name` and put it wherever pathlib holds `stand_in`; the
    stand-in then holds the real module's names too (for anyone else that took it)."""
    if sys.modules.get(name) is stand_in:
        del sys.modules[name]
    __import__(name)
    real = sys.modules[name]
    pathlib = sys.modules.get("pathlib")
    if pathlib is not None:
        namespace = vars(pathlib)
        for key, value in list(namespace.items()):
            if value is stand_in:
                namespace[key] = real
    vars(stand_in).update(vars(real))
    return real
