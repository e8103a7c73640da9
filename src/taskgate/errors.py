"""Typed errors; the CLI turns each into its exit code at one boundary (DESIGN.md CLI contract)."""

from __future__ import annotations

from collections.abc import Sequence

from taskgate.protocol.violations import Violation

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_FOREIGN = 3
EXIT_HUMAN = 4
EXIT_CORRUPT = 5
EXIT_INTERNAL = 10


class TaskgateError(Exception):
    """Base error: a message for the user, a hint saying what to do next, and an exit code."""

    exit_code = EXIT_INTERNAL
    kind = "internal"

    def __init__(self, message: str, *, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def to_json(self) -> dict[str, object]:
        """Stable JSON shape of an error for --json output."""
        return {"error": self.kind, "message": self.message, "hint": self.hint}


class Refused(TaskgateError):
    """A protocol rule refused the operation (exit 1); carries the violations."""

    exit_code = EXIT_REFUSED
    kind = "refused"

    def __init__(self, message: str, violations: Sequence[Violation] = (), *, hint: str = ""):
        super().__init__(message, hint=hint)
        self.violations = tuple(violations)

    def to_json(self) -> dict[str, object]:
        data = super().to_json()
        data["violations"] = [v.to_json() for v in self.violations]
        return data


class UsageError(TaskgateError):
    """Invalid input or usage (exit 2); nothing was changed."""

    exit_code = EXIT_USAGE
    kind = "usage"


class ForeignTask(TaskgateError):
    """The task is owned by another session (exit 3): select another task."""

    exit_code = EXIT_FOREIGN
    kind = "foreign"


class NeedsHuman(TaskgateError):
    """A human has to decide (exit 4): ask the user, escalation, ambiguous message."""

    exit_code = EXIT_HUMAN
    kind = "needs-human"


class Corrupted(TaskgateError):
    """Inconsistent or corrupted state (exit 5): run `taskgate recover`."""

    exit_code = EXIT_CORRUPT
    kind = "corrupted"


class GitError(TaskgateError):
    """A git command failed; carries the command, return code, stdout and stderr."""

    exit_code = EXIT_INTERNAL
    kind = "git"

    def __init__(
        self, cmd: Sequence[str], returncode: int, stdout: str, stderr: str, *, hint: str = ""
    ) -> None:
        self.cmd = tuple(cmd)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        detail = stderr.strip() or stdout.strip() or "(no output)"
        super().__init__(
            f"command failed (exit {returncode}): {' '.join(self.cmd)}\n{detail}", hint=hint
        )
