"""Typed errors; the CLI turns each into its exit code at one boundary (DESIGN.md CLI contract)."""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence

TYPE_CHECKING = False
if TYPE_CHECKING:  # only a type here: importing errors loads no dataclasses (issue 18)
    from taskgate.protocol.violations import Violation

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_FOREIGN = 3
EXIT_HUMAN = 4
EXIT_CORRUPT = 5
EXIT_ENVIRONMENT = 6  # disk full, read-only, permissions, locks: fix the machine, rerun
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


class StoreLost(Corrupted):
    """The store lost history (exit 5): missing, empty, or behind its views. Restore it."""

    kind = "store-lost"


class SchemaDamaged(Corrupted):
    """The store's schema does not match taskgate's (exit 5): a renamed column, bad names."""

    kind = "schema-damaged"


class EnvironmentFault(TaskgateError):
    """The machine refused an operation (exit 6): nothing is corrupt; fix it and run again."""

    exit_code = EXIT_ENVIRONMENT
    kind = "environment"


class DiskFull(EnvironmentFault):
    """No space left on the device (or a file size / quota limit)."""

    kind = "disk-full"


class ReadOnly(EnvironmentFault):
    """A file system or file taskgate must write is read-only."""

    kind = "read-only"


class PermissionDenied(EnvironmentFault):
    """This user may not read or write a file taskgate needs."""

    kind = "permission"


class Locked(EnvironmentFault):
    """Another process holds a lock for longer than taskgate waits (the store, a file)."""

    kind = "locked"


_DISK_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_READ_ONLY = {errno.EROFS}
_PERMISSION = {errno.EACCES, errno.EPERM}
_CLASSIFIED = _DISK_FULL | _READ_ONLY | _PERMISSION | {errno.EIO}


def from_os_error(exc: OSError) -> TaskgateError:
    """The taxonomy entry for an OSError (ENOSPC, EROFS, EACCES ...); others stay internal."""
    where = f" ({exc.filename})" if exc.filename else ""
    if exc.errno in _DISK_FULL:
        return DiskFull(
            f"no space left on the device{where}: {exc.strerror}",
            hint="free disk space (or raise the quota / file size limit), then run the same "
            "command again; the store holds the last committed step",
        )
    if exc.errno in _READ_ONLY:
        return ReadOnly(
            f"read-only file system{where}",
            hint="remount it read-write (or move the repository), then run the command again",
        )
    if exc.errno in _PERMISSION:
        return PermissionDenied(
            f"permission denied{where}",
            hint="give this user write access (check chmod/chown of .taskgate and the "
            "repository), then run the command again",
        )
    return EnvironmentFault(
        f"input/output error{where}: {exc.strerror or exc}",
        hint="check the disk (dmesg); then run the same command again; do not delete anything",
    )


def _space_problem(path: object) -> str | None:
    """Why a write may have failed for lack of room: a file size limit or a nearly full disk."""
    import resource
    import shutil

    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft != resource.RLIM_INFINITY:
        return f"the file size limit is {soft} bytes (ulimit -f)"
    try:
        free = shutil.disk_usage(os.path.dirname(str(path)) or ".").free
    except OSError:
        return None
    return f"only {free} bytes free on its file system" if free < 1 << 20 else None


def from_sqlite_error(exc: Exception, path: object = "") -> TaskgateError | None:
    """The taxonomy entry for an sqlite3 error, None when it is not one of ours to name."""
    text = str(exc)
    low = text.lower()
    store = f" ({path})" if path else ""
    if "disk is full" in low or "database or disk is full" in low:
        return DiskFull(
            f"no space left for the store{store}: {text}",
            hint="free disk space, then run the same command again; the last committed step "
            "is intact (a failed write rolls back)",
        )
    if os.environ.get("TASKGATE_SANDBOX") and (
        "readonly" in low or "read-only" in low or "unable to open" in low
    ):  # an agent inside taskgate's sandbox (agents/sandbox.py): by design, not a fault
        return PermissionDenied(
            f"the store is read-only inside taskgate's agent sandbox{store}",
            hint="ask the person to start `taskgate serve`: its agent door then takes your "
            "taskgate commands (docs/security.md); under `taskgate run`, end your reply with "
            "the result object your prompt describes; approvals are the person's",
        )
    if "readonly database" in low or "read-only" in low:
        return ReadOnly(
            f"the store is read-only{store}: {text}",
            hint="make .taskgate/state.db, state.db-wal, state.db-shm and the .taskgate "
            "directory writable (chmod u+w), then run the command again",
        )
    if "unable to open database file" in low:
        return PermissionDenied(
            f"the store cannot be opened{store}: {text}",
            hint="check that .taskgate exists and is readable and writable by this user",
        )
    if "locked" in low or "busy" in low:
        return Locked(
            f"the store is locked by another process{store}: {text}",
            hint="another taskgate command holds the store; wait for it (or stop it) and "
            "run the command again",
        )
    if "disk i/o error" in low:
        limit = _space_problem(path)
        if limit:
            return DiskFull(
                f"the store cannot grow{store}: {limit} (sqlite: {text})",
                hint="free disk space or raise the limit (ulimit -f), then run the same command "
                "again; the last committed step is intact",
            )
        return EnvironmentFault(
            f"the disk reported an I/O error on the store{store}: {text}",
            hint="check the disk (dmesg) and free space, then run the command again; do not "
            "delete anything",
        )
    if "no such column" in low or "no such table" in low or "decode to utf-8" in low:
        return SchemaDamaged(
            f"the store's schema is damaged{store}: {text}",
            hint="restore .taskgate/state.db from a backup; 'taskgate audit' and 'taskgate "
            "recover' name what is wrong but do not rewrite the schema",
        )
    return None


def classify(exc: BaseException) -> TaskgateError | None:
    """One boundary for faults from below: OSError and sqlite3 errors become their class."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, TaskgateError):
            return current
        if isinstance(current, OSError) and hasattr(current, "hint"):  # spawn.UntrustedGit
            return EnvironmentFault(getattr(current, "message", str(current)), hint=current.hint)
        if isinstance(current, OSError) and current.errno in _CLASSIFIED:
            return from_os_error(current)
        if type(current).__module__ == "sqlite3":
            found = from_sqlite_error(current)  # type: ignore[arg-type]
            if found is not None:
                return found
        current = current.__cause__
    return None


class GitBusy(GitError):
    """Git's own lock file or an unfinished operation (rebase, merge) blocks the step (exit 6);
    still a GitError, so code that handles git failures handles it too."""

    exit_code = EXIT_ENVIRONMENT
    kind = "git-busy"

    def __init__(
        self, cmd: Sequence[str], returncode: int, stdout: str, stderr: str, *, what: str,
        hint: str,
    ) -> None:  # fmt: skip
        super().__init__(cmd, returncode, stdout, stderr, hint=hint)
        self.message = f"{what} ({' '.join(self.cmd)})"
        self.args = (self.message,)
