"""JSON for the hook path without the `json` package (issue 7 speed).

`import json` costs about 8 ms on CPython 3.11 because json.decoder and json.encoder import
`re`; a hook process is budgeted at about 3 ms beyond the interpreter's start. CPython's C
accelerator `_json` (the same scanner and string encoder `json` itself uses) needs neither, so
this module drives it directly and falls back to `json` where it is missing (other
interpreters). Decoding is strict RFC 8259: NaN and Infinity are refused, like Claude Code
never sends them.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_WHITESPACE = " \t\n\r"


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class _Context:
    """The attributes `_json.make_scanner` reads from a JSONDecoder."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_no_constants)


try:
    from _json import encode_basestring_ascii as _quote
    from _json import make_scanner as _make_scanner
except ImportError:  # pragma: no cover - other interpreters
    from json import dumps as _dumps
    from json import loads as _loads

    def loads(text: str) -> Any:
        """Parse one JSON document (ValueError when it is not one)."""
        return _loads(text, parse_constant=_no_constants)

    def dumps(value: Any) -> str:
        """Compact ASCII JSON for dicts, lists, strings, numbers, booleans and None."""
        return _dumps(value)

else:
    _scan = _make_scanner(_Context())  # type: ignore[arg-type]  # stub wants a JSONDecoder

    def loads(text: str) -> Any:
        """Parse one JSON document (ValueError when it is not one)."""
        start = len(text) - len(text.lstrip(_WHITESPACE))
        try:
            value, end = _scan(text, start)
        except StopIteration as stop:
            raise ValueError(f"Expecting value: char {stop.value}") from None
        except SystemError:
            # CPython 3.11's scanner raises json.decoder.JSONDecodeError only once that module
            # is loaded (else "returned NULL without setting an exception"): load it, rescan.
            import json.decoder  # noqa: F401

            value, end = _scan(text, start)
        if text[end:].strip(_WHITESPACE):
            raise ValueError(f"Extra data: char {end}")
        return value

    def dumps(value: Any) -> str:
        """Compact ASCII JSON for dicts, lists, strings, numbers, booleans and None."""
        return "".join(_encode(value))

    def _encode(value: Any) -> Any:
        if isinstance(value, str):
            yield _quote(value)
        elif value is None:
            yield "null"
        elif value is True:
            yield "true"
        elif value is False:
            yield "false"
        elif isinstance(value, int):
            yield int.__repr__(value)
        elif isinstance(value, float):
            if value != value or value in (float("inf"), float("-inf")):
                raise ValueError(f"{value!r} is not JSON")
            yield float.__repr__(value)
        elif isinstance(value, dict):
            yield "{"
            for index, (key, item) in enumerate(value.items()):
                if not isinstance(key, str):
                    raise TypeError(f"JSON object keys must be str, not {type(key).__name__}")
                yield (", " if index else "") + _quote(key) + ": "
                yield from _encode(item)
            yield "}"
        elif isinstance(value, list | tuple):
            yield "["
            for index, item in enumerate(value):
                if index:
                    yield ", "
                yield from _encode(item)
            yield "]"
        else:
            raise TypeError(f"{type(value).__name__} is not JSON serializable")
