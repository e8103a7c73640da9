"""`json.loads` and json's string escaper for the command path without the `json` package
(issue 18, fifth pass).

`import json` costs about 1.2 ms of CPU on CPython 3.11 beyond `re` -- json.decoder,
json.scanner and json.encoder compile six regexes at import -- and json is one of the reasons
a transition imported `re` at all (1 ms more). The work itself is done by CPython's C
accelerator `_json` either way: `json.loads` of a `str` is `JSONDecoder().decode`, which calls
the C scanner `_json.make_scanner` builds from the decoder's settings. Here the same scanner is
built from the same settings (`_Decoder`: `json.JSONDecoder()`'s defaults), so a document that
decodes gives the same value; anything else -- bytes, a BOM, a syntax error, trailing data,
nesting too deep -- is handed to `json.loads` itself, which decodes it or raises its own
error, as before. Where `_json` is missing (other interpreters) json's own scanner and escaper
are used. tests/test_json_lite.py compares both on generated documents and on every failure.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

# json.decoder.WHITESPACE: what decode() skips before and after the value.
_WHITESPACE = " \t\n\r"


class _Decoder:
    """What `_json.make_scanner` reads from `json.JSONDecoder()`: its default settings."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    # json.decoder._CONSTANTS.__getitem__: NaN and the infinities, as json.loads accepts them
    parse_constant = {
        "-Infinity": float("-inf"),
        "Infinity": float("inf"),
        "NaN": float("nan"),
    }.__getitem__


def _scanner() -> Callable[[str, int], tuple[Any, int]]:
    try:
        from _json import make_scanner
    except ImportError:  # pragma: no cover - other interpreters
        import json

        scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
        return scan
    return make_scanner(_Decoder())  # type: ignore[arg-type]  # the stub wants a JSONDecoder


# `json.JSONDecoder().scan_once`: (value, end) of the JSON value at `text[index:]`;
# StopIteration when there is none. An error it raises may be a SystemError on CPython 3.11
# while json.decoder is not loaded: callers hand the text to `loads` on any error.
scan_once = _scanner()

try:
    from _json import encode_basestring as escape  # json.encoder.encode_basestring
except ImportError:  # pragma: no cover - other interpreters
    from json.encoder import encode_basestring as escape

__all__ = ["detect_encoding", "escape", "loads", "scan_once"]


def _json_loads(text: Any) -> Any:
    import json

    return json.loads(text)


def detect_encoding(data: bytes | bytearray) -> str:
    """`json.detect_encoding`: the encoding json.loads decodes `data` with (RFC 8259: UTF-8,
    UTF-16 or UTF-32, told by a BOM or by where the first characters' zero bytes are)."""
    if data.startswith((b"\x00\x00\xfe\xff", b"\xff\xfe\x00\x00")):  # UTF-32 BOMs
        return "utf-32"
    if data.startswith((b"\xfe\xff", b"\xff\xfe")):  # UTF-16 BOMs
        return "utf-16"
    if data.startswith(b"\xef\xbb\xbf"):  # the UTF-8 BOM
        return "utf-8-sig"
    if len(data) >= 4:
        if not data[0]:
            return "utf-16-be" if data[1] else "utf-32-be"
        if not data[1]:
            return "utf-16-le" if data[2] or data[3] else "utf-32-le"
    elif len(data) == 2:
        if not data[0]:
            return "utf-16-be"
        if not data[1]:
            return "utf-16-le"
    return "utf-8"


def loads(text: Any) -> Any:
    """Exactly `json.loads(text)` for a str, bytes or bytearray: the same value, or the same
    error (raised by json.loads itself)."""
    kind = type(text)
    if kind is str:
        document = text
    elif kind is bytes or kind is bytearray:
        try:  # what json.loads does with bytes
            document = text.decode(detect_encoding(text), "surrogatepass")
        except Exception:
            return _json_loads(text)
    else:
        return _json_loads(text)
    start = 0
    if document[:1] in ("\t", "\n", "\r", " "):
        start = len(document) - len(document.lstrip(_WHITESPACE))
    try:
        value, end = scan_once(document, start)
    except Exception:  # json.loads raises its own error for it
        return _json_loads(text)
    if end == len(document) or not document[end:].strip(_WHITESPACE):
        return value
    return _json_loads(text)
