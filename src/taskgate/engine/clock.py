"""Time: UTC ISO-8601 with `Z` (R-TRN-04), injectable for tests."""

from __future__ import annotations

import os
from collections.abc import Callable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from datetime import UTC, datetime
else:
    try:  # the C classes datetime.py re-exports, without running datetime.py (1 ms, issue 18)
        from _datetime import datetime, timezone

        UTC = timezone.utc
    except ImportError:  # an interpreter without the C module
        from datetime import UTC, datetime

Clock = Callable[[], datetime]


def system_clock() -> datetime:
    """The current UTC time; TASKGATE_FAKE_NOW (ISO-8601) pins it for tests."""
    fake = os.environ.get("TASKGATE_FAKE_NOW")
    if fake:
        return parse_time(fake)
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    """`YYYY-MM-DDTHH:MM:SSZ`."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime:
    """Parse an ISO-8601 timestamp (with `Z` or an offset); ValueError when it does not parse."""
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise ValueError(f"timestamp without a time zone: {text!r}")
    return value.astimezone(UTC)
