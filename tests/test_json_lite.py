"""taskgate/json_lite.py (issue 18, fifth pass): `loads` is exactly `json.loads` -- the same value
or the same error -- on generated documents, damaged documents, bytes in every encoding json
detects and things that are not documents at all, both where `json` is loaded and in a process
that has not loaded it (as the command path has not: CPython 3.11's C scanner cannot raise its
error there)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from taskgate import json_lite

SRC = Path(__file__).resolve().parent.parent / "src"
SCALARS = (
    st.none() | st.booleans() | st.integers() | st.text() | st.floats()
    | st.integers(min_value=-(10**40), max_value=10**40)
)  # fmt: skip
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
NOISE = list(' \t\n\r{}[]":,-+.eE0123456789aflnrstuINy\\\ufeff\x00\x1f\u00e9\ud800')


def outcome(loads: object, document: object) -> tuple[str, str]:
    """What a call gives: the value's repr (types and NaN included), or the error's type and
    text."""
    try:
        value = loads(document)  # type: ignore[operator]
    except Exception as exc:  # the error is the outcome compared
        return type(exc).__name__, str(exc)
    return "value", repr(value)


def documents(value: object, rng: random.Random) -> list[object]:
    """`value` as json writes it in several layouts, damaged copies of those, and bytes."""
    texts = [
        json.dumps(value),
        json.dumps(value, indent=2, ensure_ascii=False),
        f" \n\t{json.dumps(value, separators=(',', ':'))}\r\n ",
    ]
    for text in list(texts):
        for _ in range(3):
            at = rng.randrange(len(text) + 1)
            cut = rng.randrange(3)
            texts.append(text[:at] + rng.choice(NOISE) * rng.randrange(2) + text[at + cut :])
    out: list[object] = list(texts)
    for text in texts[:2]:
        for encoding in ("utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32",
                         "utf-32-le", "utf-32-be"):  # fmt: skip
            try:
                out.append(text.encode(encoding))
            except UnicodeEncodeError:  # a lone surrogate
                out.append(text.encode(encoding, "surrogatepass"))
        out.append(bytearray(text.encode("utf-8", "surrogatepass")))
    return out


@given(VALUES, st.randoms(use_true_random=False))
@settings(max_examples=400, deadline=None)
def test_loads_is_json_loads_on_generated_and_damaged_documents(
    value: object, rng: random.Random
) -> None:
    for document in documents(value, rng):
        assert outcome(json_lite.loads, document) == outcome(json.loads, document), document


ODD = [
    "", " ", "\ufeff[1]", "\ufeff", "NaN", "-Infinity", "[Infinity, NaN]", "1 2", "[1]\x0c",
    "[1] \t\r\n", " \n[1] x", '"\x01"', '"\\ud800"', '"\ud800"', '{"a": 1,}', "[1, 2", "{\"a\"",
    "1" * 5000, "0" * 2, "-", "1e400", "[" * 100_000 + "]" * 100_000, "nul", "truex",
    b"", b"[1]", b"\xef\xbb\xbf[1]", b"\xef\xbb\xbf\xef\xbb\xbf[1]", b"\xff\xfe[\x001\x00]\x00",
    b"\x00[", b"[\x00", b"\x00\x00\x00[", b"\xff", b"\xed\xa0\x80", b'"\xed\xa0\x80"', b"1\x00",
    bytearray(b"[true]"), None, 1, [1], memoryview(b"[1]"),
]  # fmt: skip


def test_loads_is_json_loads_on_odd_inputs() -> None:
    for document in ODD:
        assert outcome(json_lite.loads, document) == outcome(json.loads, document), document


def test_loads_is_json_loads_where_json_is_not_loaded_yet() -> None:
    """Each document in a process where `json` is not loaded (unloaded again before each):
    the C scanner then fails without its error, and loads must still raise json's."""
    rng = random.Random(7)
    cases: list[object] = [d for d in ODD if isinstance(d, str | bytes)][:30]
    for value in ({"a": [1, 2.5, None, "\u00e9"]}, [True, {"b": "x\ny"}], "s", -3):
        cases += [d for d in documents(value, rng) if isinstance(d, str | bytes)]
    probe = (
        "import sys\n"
        "from taskgate.json_lite import loads\n"
        "assert 'json' not in sys.modules, 'json is loaded'\n"
        f"outcome = {_source_of_outcome()!r}\n"
        "exec(outcome)\n"
        "results = []\n"
        "for document in eval(sys.stdin.read()):\n"
        "    for name in [m for m in sys.modules if m == 'json' or m.startswith('json.')]:\n"
        "        del sys.modules[name]\n"
        "    results.append(outcome(loads, document))\n"
        "print(repr(results))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.run(
        [sys.executable, "-c", probe], input=repr(cases), env=env, capture_output=True,
        text=True, check=True,
    )  # fmt: skip
    assert eval(proc.stdout) == [outcome(json.loads, d) for d in cases]


def _source_of_outcome() -> str:
    import inspect

    return inspect.getsource(outcome).replace("# type: ignore[operator]", "")


BOMS = [b"\x00\x00\xfe\xff", b"\xff\xfe\x00\x00", b"\xfe\xff", b"\xff\xfe", b"\xef\xbb\xbf"]


@given(
    st.binary(max_size=6) | st.tuples(st.sampled_from(BOMS), st.binary(max_size=4)).map(b"".join)
)
def test_detect_encoding_is_jsons(data: bytes) -> None:
    assert json_lite.detect_encoding(data) == json.detect_encoding(data)


@given(st.text())
def test_escape_and_scan_once_are_jsons(text: str) -> None:
    from json.encoder import encode_basestring

    assert json_lite.escape(text) == encode_basestring(text)
    document = json.dumps([text, 1.5, {"k": None}])
    assert json_lite.scan_once(document, 0) == json.JSONDecoder().scan_once(document, 0)  # type: ignore[attr-defined]
