"""Build failure classification (RULES §11, D-VAL-1; C-29)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from taskgate.protocol.states import STYLE_MAIN_AGENT_MAX_VIOLATIONS


class FailureType(StrEnum):
    """D-VAL-1 failure types."""

    COMPILATION = "compilation"
    TEST = "test"
    STYLE = "style"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class BuildFailure:
    """The class of a failed build and who fixes it."""

    type: FailureType
    responsible: str  # "main" | agent name | "user"
    detail: str
    violations: int | None = None


_STYLE_COUNT = (
    re.compile(r"You have (\d+) Checkstyle violations?"),
    re.compile(r"\[(\d+)\] violations?"),
)


def classify_failure(output: str) -> BuildFailure:
    """R-VAL-04..08: case-sensitive markers in order compilation, test, style, unknown."""
    lines = output.splitlines()
    if "COMPILATION ERROR" in output:
        for index, line in enumerate(lines):
            if "COMPILATION ERROR" in line and any(
                "cannot find symbol" in later for later in lines[index : index + 6]
            ):  # R-VAL-05: within the 5 lines after the marker
                return BuildFailure(FailureType.COMPILATION, "main", "missing imports")
        return BuildFailure(FailureType.COMPILATION, "architect", "compilation error")
    if "There are test failures" in output:
        detail = "\n".join(line for line in lines if "Tests run:" in line or "Failures:" in line)
        return BuildFailure(FailureType.TEST, "test", detail or "test failures")  # R-VAL-06
    if "Checkstyle violations" in output or re.search(r"\[\d+\] violations?", output):
        count = None
        for pattern in _STYLE_COUNT:
            match = pattern.search(output)
            if match:
                count = int(match.group(1))
                break
        small = count is not None and count <= STYLE_MAIN_AGENT_MAX_VIOLATIONS  # R-VAL-07
        return BuildFailure(
            FailureType.STYLE, "main" if small else "style", f"{count} violations", count
        )
    return BuildFailure(FailureType.UNKNOWN, "user", "unknown failure: escalate (R-VAL-08)")
