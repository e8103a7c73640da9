"""`--json` output of long record lists through the C encoder (issue 18).

`json.dumps(indent=2)` falls back to the pure-Python encoder: at 10,000 tasks that is most of
`taskgate status --json`. `dumps_records` writes the same bytes as
`json.dumps(rows, indent=2, sort_keys=True, default=str)` for a list of flat records (values:
str, int, float, bool, None, or a list of those), each scalar through the C encoder; anything
else goes to `json.dumps` unchanged. tests/test_jsonout.py checks the bytes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

_SCALARS = (str, int, float, bool, type(None))
_scalar = json.JSONEncoder(sort_keys=True).encode  # C-accelerated for scalars
_escape = json.encoder.encode_basestring_ascii  # what _scalar runs for a str (ensure_ascii)


def _flat(rows: Sequence[Any]) -> bool:
    for row in rows:
        if type(row) is not dict:
            return False
        for key, value in row.items():
            if type(key) is not str:
                return False
            if isinstance(value, list):
                if not all(isinstance(v, _SCALARS) for v in value):
                    return False
            elif not isinstance(value, _SCALARS):
                return False
    return True


_CONSTANTS = {None: "null", True: "true", False: "false"}


def _one(value: Any) -> str:
    """One scalar as json.dumps writes it; exact str and None/bool skip the encoder object."""
    kind = type(value)
    if kind is str:
        return _escape(value)
    if kind is bool or value is None:
        return _CONSTANTS[value]
    return _scalar(value)


def _value(value: Any) -> str:
    if isinstance(value, list):
        if not value:
            return "[]"
        return "[\n      " + ",\n      ".join(map(_one, value)) + "\n    ]"
    return _one(value)


def dumps_records(rows: Sequence[Any]) -> str:
    """Byte-identical to json.dumps(rows, indent=2, sort_keys=True, default=str)."""
    if not isinstance(rows, list) or not _flat(rows):
        return json.dumps(rows, indent=2, sort_keys=True, default=str)
    if not rows:
        return "[]"
    parts = []
    keys: list[str] = []
    template = ""
    for row in rows:
        if not row:
            parts.append("{}")
            continue
        order = sorted(row)
        if order != keys:  # rows of one shape share the text around their values
            keys = order
            template = (
                "{\n    "
                + ",\n    ".join(_escape(k).replace("%", "%%") + ": %s" for k in keys)
                + "\n  }"
            )
        parts.append(template % tuple(map(_value, map(row.__getitem__, keys))))
    return "[\n  " + ",\n  ".join(parts) + "\n]"
