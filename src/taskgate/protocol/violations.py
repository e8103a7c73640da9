"""A violation: what a guard returns when a rule does not hold."""

from __future__ import annotations

from taskgate.dataclass_lite import dataclass


@dataclass(frozen=True)
class Violation:
    """One failed check: the rule it enforces, what is wrong, and how to fix it."""

    rule: str
    message: str
    hint: str = ""

    def render(self) -> str:
        """One human line: `[R-XXX-NN] message (hint: ...)`."""
        text = f"[{self.rule}] {self.message}"
        return f"{text}\n    hint: {self.hint}" if self.hint else text

    def to_json(self) -> dict[str, str]:
        """Stable JSON shape used by --json output."""
        return {"rule": self.rule, "message": self.message, "hint": self.hint}
