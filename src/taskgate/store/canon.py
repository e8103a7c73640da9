"""Canonical JSON and the audit trail's event hash: one definition for every writer (issue 18).

The store (store/sqlite.py, store/pg_tx.py), the audit's verification (engine/audit_chain.py) and
the hook process that appends events without the engine (hooks/quick.py) all encode and
hash through this module, so the chain a hook appends is the chain `taskgate audit` checks.

It imports only C modules at their first use: the hook process must not pay for the `json`
package (it imports `re`) or for `hashlib` (OpenSSL), so the encoder is `_json`'s C encoder
configured exactly as `json.dumps(..., sort_keys=True)` configures it, and the hash is the
builtin SHA-256. Where a C module is missing (other interpreters) the pure-Python `json` and
`hashlib` give the same bytes (tests/test_canon.py compares them).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

GENESIS_HASH = "0" * 64


def _not_json(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _encoder(key_separator: str, item_separator: str) -> Callable[[Any], str]:
    """json.dumps(value, sort_keys=True, separators=(item_separator, key_separator))."""
    try:
        from _json import encode_basestring_ascii, make_encoder
    except ImportError:  # pragma: no cover - other interpreters
        import json

        def slow(value: Any) -> str:
            return json.dumps(value, sort_keys=True, separators=(item_separator, key_separator))

        return slow

    # As JSONEncoder.iterencode builds it for a one-shot encode without indent: circular
    # check on, NaN allowed (payloads never hold one), keys sorted, none skipped. Built once;
    # an encode that fails may leave its containers in the circular-check markers, so the
    # encoder is built again after a failure.
    def build() -> Any:
        return make_encoder(
            {}, _not_json, encode_basestring_ascii, None, key_separator, item_separator,
            True, False, True,
        )  # fmt: skip

    scan = [build()]

    def encode(value: Any) -> str:
        if isinstance(value, str):
            return str(encode_basestring_ascii(value))
        try:
            return "".join(scan[0](value, 0))
        except BaseException:
            scan[0] = build()
            raise

    return encode


_COMPACT: list[Callable[[Any], str]] = []
_SPACED: list[Callable[[Any], str]] = []


def compact(value: Any) -> str:
    """`json.dumps(value, sort_keys=True, separators=(",", ":"))`: stored payloads, hashes."""
    if not _COMPACT:
        _COMPACT.append(_encoder(":", ","))
    return _COMPACT[0](value)


def spaced(value: Any) -> str:
    """`json.dumps(value, sort_keys=True)`: the hook snapshot's header (store/snapshot.py)."""
    if not _SPACED:
        _SPACED.append(_encoder(": ", ", "))
    return _SPACED[0](value)


def _sha256(data: bytes) -> str:
    import sys

    # CPython's builtin SHA-256: `_sha256` up to 3.11, `_sha2` since 3.12; hashlib (OpenSSL)
    # only where neither exists.
    name = "_sha256" if sys.version_info < (3, 12) else "_sha2"
    try:
        module = __import__(name)
    except ImportError:  # pragma: no cover - other interpreters
        import hashlib as module
    return str(module.sha256(data).hexdigest())


def sha256_hex(data: bytes) -> str:
    """SHA-256 of `data`, hex, through the builtin module (the hook's snapshot check too)."""
    return _sha256(data)


def event_hash(prev_hash: str, task: str, at: str, kind: str, payload: dict[str, Any]) -> str:
    """SHA-256 over the previous hash and this event's canonical JSON (the hash chain)."""
    return _sha256(compact([prev_hash, task, at, kind, payload]).encode("utf-8"))
