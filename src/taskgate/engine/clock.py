"""Time: UTC ISO-8601 with `Z` (R-TRN-04), injectable for tests."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from datetime import UTC, datetime

Clock = Callable[[], "datetime"]
_ISO = "%Y-%m-%dT%H:%M:%SZ"


def _load() -> None:
    """`datetime` and `UTC` in this module's namespace: the C classes datetime.py re-exports,
    without running datetime.py (1 ms, issue 18), imported on first use (fifth pass: a step
    that only stamps the time never needs them, see now_iso)."""
    if "datetime" in globals():
        return
    try:
        from _datetime import datetime, timezone  # type: ignore[import-not-found]

        utc = timezone.utc
    except ImportError:  # an interpreter without the C module
        from datetime import UTC as utc
        from datetime import datetime
    globals().update(datetime=datetime, UTC=utc)


def __getattr__(name: str) -> object:
    """`clock.datetime` and `clock.UTC` as before, loaded on first use (PEP 562)."""
    if name in ("datetime", "UTC"):
        _load()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def system_clock() -> datetime:
    """The current UTC time; TASKGATE_FAKE_NOW (ISO-8601) pins it for tests."""
    fake = os.environ.get("TASKGATE_FAKE_NOW")
    if fake:
        return parse_time(fake)
    _load()
    return datetime.now(UTC)


def now_iso() -> str:
    """`iso(system_clock())` without importing datetime (issue 18, fifth pass): both read the
    system clock, cut it to the second and format the UTC fields with time.strftime (which
    datetime.strftime calls); TASKGATE_FAKE_NOW goes through system_clock as before."""
    if os.environ.get("TASKGATE_FAKE_NOW"):
        return iso(system_clock())
    return time.strftime(_ISO, time.gmtime())


def iso(moment: datetime) -> str:
    """`YYYY-MM-DDTHH:MM:SSZ`."""
    _load()
    return moment.astimezone(UTC).strftime(_ISO)


def parse_time(text: str) -> datetime:
    """Parse an ISO-8601 timestamp (with `Z` or an offset); ValueError when it does not parse."""
    _load()
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise ValueError(f"timestamp without a time zone: {text!r}")
    return value.astimezone(UTC)
