"""Build failure classification (RULES §11, D-VAL-1; C-29), for any toolchain.

The seeds' Maven markers keep their order and owners (R-VAL-04..08). Other toolchains are read
from the runner's own report (protocol/testreports.py: JUnit XML, go -json, jest, cargo,
pytest) and from well-known text: compiler errors, lint output, missing dependencies. A
timeout or a crash of the build is its own class. `unknown` is left for what nothing explains.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from taskgate.protocol.states import STYLE_MAIN_AGENT_MAX_VIOLATIONS
from taskgate.protocol.testreports import TestFailure, TestReport, excerpt, paths_in


class FailureType(StrEnum):
    """D-VAL-1 failure types, plus the classes other toolchains need."""

    COMPILATION = "compilation"
    TEST = "test"
    STYLE = "style"
    DEPENDENCY = "dependency"
    TIMEOUT = "timeout"
    CRASH = "crash"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class BuildFailure:
    """The class of a failed build, who fixes it by default, and the evidence."""

    type: FailureType
    responsible: str  # "main" | agent name | "user"
    detail: str
    violations: int | None = None
    failures: tuple[TestFailure, ...] = ()  # failing tests / errors, with the files they name

    @property
    def tests(self) -> tuple[str, ...]:
        """The names of the failing tests and errors."""
        return tuple(f.name for f in self.failures)


_STYLE_COUNT = (
    re.compile(r"You have (\d+) Checkstyle violations?"),
    re.compile(r"\[(\d+)\] violations?"),
)
_LINT_LINE = re.compile(r"^[\w./-]+\.\w+:\d+:\d+: [A-Z]+\d+ ", re.MULTILINE)  # ruff/flake8
_LINT_SUMMARY = re.compile(r"Found (\d+) errors?\.|(\d+) problems? \(\d+ errors?")
_COMPILE_MARKERS = (
    re.compile(r"^SyntaxError: ", re.M),
    re.compile(r"^error(\[E\d+\])?: ", re.M),  # rustc
    re.compile(r"^\S+\.go:\d+:\d+: ", re.M),  # go build
    re.compile(r"error TS\d+: "),  # tsc
    re.compile(r"^\S+\.(c|cc|cpp|h):\d+:\d+: error: ", re.M),  # gcc / clang
)
_DEPENDENCY_MARKERS = (
    "No matching distribution found",
    "Could not resolve dependencies",
    "could not resolve dependencies",
    "failed to select a version",
    "npm ERR! 404",
    "Cannot find module '",
    "cannot find package",
    "no required module provides package",
)
_MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")


def classify_failure(
    output: str,
    report: TestReport | None = None,
    *,
    timed_out: bool = False,
    signal: int | None = None,
    root: str = "",
) -> BuildFailure:
    """R-VAL-04..08 first (Maven text, case-sensitive), then the runners' reports and text."""
    maven = _maven(output)
    if maven is not None:
        return maven
    if timed_out:
        return BuildFailure(FailureType.TIMEOUT, "user", "the build did not finish in time")
    failures = report.failures if report else ()
    compiled = [f for f in failures if f.kind == "compile"]
    if compiled:
        return BuildFailure(
            FailureType.COMPILATION, "architect", _summary(compiled, "compile error"),
            failures=tuple(compiled),
        )  # fmt: skip
    missing = _MISSING_MODULE.search(output)
    if any(m in output for m in _DEPENDENCY_MARKERS) or (missing and not _local(missing, output)):
        return BuildFailure(FailureType.DEPENDENCY, "user", _dependency_detail(output),
                            failures=tuple(failures))  # fmt: skip
    if failures:
        collection = [f for f in failures if f.kind == "collection"]
        if collection and all(_looks_like_compile(f.excerpt + f.message) for f in collection):
            return BuildFailure(FailureType.COMPILATION, "architect",
                                _summary(collection, "import/syntax error"),
                                failures=tuple(failures))  # fmt: skip
        return BuildFailure(FailureType.TEST, "test", _summary(failures, "failing test"),
                            failures=tuple(failures))  # fmt: skip
    if any(p.search(output) for p in _COMPILE_MARKERS):
        return BuildFailure(
            FailureType.COMPILATION,
            "architect",
            "compile error",
            failures=(_text_failure("compile error", output, root, "compile"),),
        )
    lint = _LINT_LINE.findall(output)
    if lint:
        summary = _LINT_SUMMARY.search(output)
        count = int(next(g for g in summary.groups() if g)) if summary else len(lint)
        return BuildFailure(
            FailureType.STYLE, "style", f"{count} lint violations", count,
            failures=(_text_failure("lint", output, root, "style"),),
        )  # fmt: skip
    if signal is not None and signal < 0:
        return BuildFailure(FailureType.CRASH, "user", f"the build was killed by signal {-signal}")
    return BuildFailure(FailureType.UNKNOWN, "user", "unknown failure: escalate (R-VAL-08)")


def _maven(output: str) -> BuildFailure | None:
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
    return None


def _summary(failures: tuple[TestFailure, ...] | list[TestFailure], what: str) -> str:
    names = ", ".join(f.name for f in failures[:5]) + (" …" if len(failures) > 5 else "")
    return f"{len(failures)} {what}{'s' if len(failures) != 1 else ''}: {names}"


def _looks_like_compile(text: str) -> bool:
    return any(m in text for m in ("SyntaxError", "IndentationError", "ImportError",
                                   "ModuleNotFoundError", "NameError"))  # fmt: skip


def _local(missing: re.Match[str], output: str) -> bool:
    """A missing module that is the project's own (named in a project path) is no dependency."""
    top = missing.group(1).split(".")[0]
    return bool(re.search(rf"(^|[\s/\"']){re.escape(top)}/", output, re.M))


def _dependency_detail(output: str) -> str:
    for line in output.splitlines():
        if any(m in line for m in _DEPENDENCY_MARKERS) or "ModuleNotFoundError" in line:
            return f"missing dependency: {line.strip()[:200]}"
    return "missing dependency"


def _text_failure(name: str, output: str, root: str, kind: str) -> TestFailure:
    return TestFailure(name, excerpt(output, 300).splitlines()[-1] if output.strip() else "",
                       excerpt(output), paths_in(output, root), kind=kind)  # fmt: skip
