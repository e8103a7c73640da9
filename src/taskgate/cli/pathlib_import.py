"""`pathlib` for the CLI without `urllib.parse` and the `ipaddress` it imports (issue 18).

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
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any


def import_pathlib() -> None:
    """Import pathlib, without urllib.parse when neither is loaded yet."""
    if "pathlib" in sys.modules or "urllib.parse" in sys.modules:
        return
    stand_in = _stand_in()
    sys.modules["urllib.parse"] = stand_in
    try:
        import pathlib
    except Exception:  # pathlib wanted more of urllib.parse: import both the ordinary way
        _remove(stand_in)
        sys.modules.pop("pathlib", None)
        import pathlib  # noqa: F401
    finally:
        _remove(stand_in)


def _remove(stand_in: ModuleType) -> None:
    if sys.modules.get("urllib.parse") is stand_in:
        del sys.modules["urllib.parse"]


def quote_from_bytes(*args: Any, **kwargs: Any) -> str:
    """urllib.parse.quote_from_bytes, imported on the first call."""
    from urllib.parse import quote_from_bytes as real

    return real(*args, **kwargs)


def _stand_in() -> ModuleType:
    """The `urllib.parse` pathlib sees while it is imported: quote_from_bytes alone."""
    module = type(sys)("urllib.parse")
    module.quote_from_bytes = quote_from_bytes  # type: ignore[attr-defined]
    return module
