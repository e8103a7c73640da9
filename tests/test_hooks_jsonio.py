"""hooks/jsonio.py: the hook path's JSON, checked against the json package, in a process that
has not loaded json (as the hook process has not)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from taskgate.hooks import jsonio

SRC = Path(__file__).resolve().parent.parent / "src"
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.text()
    | st.floats(allow_nan=False, allow_infinity=False)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(VALUES)
def test_round_trips_like_the_json_package(value: object) -> None:
    text = jsonio.dumps(value)
    assert text == json.dumps(value)
    assert jsonio.loads(text) == json.loads(text)
    assert jsonio.loads(f" \n{json.dumps(value, indent=2)}\t") == value


def test_errors_are_value_errors_even_before_json_is_loaded() -> None:
    """CPython 3.11's C scanner needs json.decoder loaded to raise; the hook never loads it."""
    probe = (
        "import sys\n"
        f"sys.path.insert(0, {str(SRC)!r})\n"
        "from taskgate.hooks.jsonio import loads\n"
        "assert 'json' not in sys.modules\n"
        "for bad in ('', '{not json', '[1] x', 'NaN', '{\"a\": 1,}', '\"\\x01\"', '[1, 2'):\n"
        "    try:\n"
        "        loads(bad)\n"
        "    except ValueError:\n"
        "        continue\n"
        "    raise SystemExit(f'accepted {bad!r}')\n"
        "print('ok')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-S", "-c", probe], capture_output=True, text=True, check=False
    )
    assert (proc.returncode, proc.stdout.strip()) == (0, "ok"), proc.stderr


def test_refuses_what_is_not_json() -> None:
    for value in (float("nan"), float("inf"), {1: "x"}, object()):
        try:
            jsonio.dumps(value)
        except (ValueError, TypeError):
            continue
        raise AssertionError(f"dumped {value!r}")
