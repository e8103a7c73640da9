"""MessageKind: what a message asks for (protocol/messages.py re-exports it).

Its own module so that the prompt hook, which judges with plain str values
(messages.judge_plain), creates no enum class (issue 18, fifth pass).
"""

from __future__ import annotations

from taskgate.enum_lite import StrEnum  # enum.StrEnum without importing enum (issue 18)


class MessageKind(StrEnum):
    """What a message asks for: R-INT-03 classes plus APPROVAL, AMBIGUOUS (R-CKP-08) and C-68."""

    APPROVAL = "APPROVAL"
    CHANGE_REQUEST = "CHANGE_REQUEST"
    RESUMPTION = "RESUMPTION"
    QUESTION = "QUESTION"
    AUDIT = "AUDIT"
    STATUS_REQUEST = "STATUS_REQUEST"
    UNRELATED_WORK = "UNRELATED_WORK"
    OTHER = "OTHER"
    AMBIGUOUS = "AMBIGUOUS"
