"""Test runners' own reports, parsed into failing tests with the files they name (pure).

VALIDATION runs the project's commands (RULES §11). What failed, and where, is read from the
runner's machine-readable output where there is one: JUnit XML (pytest `--junitxml`, Maven
surefire, Gradle, jest-junit), `go test -json`, jest `--json`; cargo and pytest are read from
their text. Each failure keeps its test name, a short message, an output excerpt for the agent
that fixes it, and the paths its traceback names; the engine maps those paths to agents.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

EXCERPT_CHARS = 1200
_MAX_FAILURES = 50


@dataclass(frozen=True)
class TestFailure:
    """One failing test, or one error that stopped tests or the build from running."""

    __test__ = False  # not a pytest test class

    name: str
    message: str = ""
    excerpt: str = ""
    files: tuple[str, ...] = ()  # paths the failure names, test file first (repo-relative)
    modules: tuple[str, ...] = ()  # dotted names (Java/Python classes) to resolve to files
    kind: str = "test"  # "test" | "compile" | "collection"

    def to_json(self) -> dict[str, object]:
        """JSON shape for the validation event and `validate --json`."""
        return {"name": self.name, "message": self.message, "files": list(self.files),
                "kind": self.kind}  # fmt: skip


@dataclass(frozen=True)
class TestReport:
    """What a runner reported: counts where known, and the failures."""

    __test__ = False

    runner: str
    tests: int | None = None
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    failures: tuple[TestFailure, ...] = field(default_factory=tuple)

    @property
    def passed(self) -> int | None:
        """Tests that passed, when the runner said how many ran."""
        if self.tests is None:
            return None
        return max(0, self.tests - self.failed - self.errors - self.skipped)

    def to_json(self) -> dict[str, object]:
        """R-AUD-04 / R-VAL-01: counts and failures for the build record."""
        return {
            "runner": self.runner,
            "tests_run": self.tests,
            "tests_passed": self.passed,
            "tests_failed": self.failed + self.errors,
            "failures": [f.to_json() for f in self.failures[:_MAX_FAILURES]],
        }


def merge(reports: Iterable[TestReport]) -> TestReport | None:
    """Several reports (one per command or XML file) as one; None when there are none."""
    items = list(reports)
    if not items:
        return None
    counted = [r.tests for r in items if r.tests is not None]
    return TestReport(
        runner="+".join(dict.fromkeys(r.runner for r in items)),
        tests=sum(counted) if counted else None,
        failed=sum(r.failed for r in items),
        errors=sum(r.errors for r in items),
        skipped=sum(r.skipped for r in items),
        failures=tuple(f for r in items for f in r.failures),
    )


# --- paths named in tracebacks ------------------------------------------------------------------

_PATH_PATTERNS = (
    re.compile(r'File "([^"]+)", line \d+'),  # Python traceback
    re.compile(r"^([\w./-]+\.\w+):\d+(?::\d+)?:", re.MULTILINE),  # pytest short, go, ruff
    re.compile(r"-->\s+([\w./-]+\.\w+):\d+"),  # rustc
    re.compile(r"panicked at ([\w./-]+\.\w+):\d+"),  # rust test panic
    re.compile(r"\(([\w./-]+\.[cm]?[jt]sx?):\d+:\d+\)"),  # node stack
    re.compile(r"^\s+([\w./-]+_test\.go):\d+:", re.MULTILINE),  # go test output
)
_JAVA_FRAME = re.compile(r"at ([\w$.]+)\.[\w$<>]+\((\w+\.(?:java|kt|scala)):\d+\)")
_NOISE = ("site-packages/", "dist-packages/", "/lib/python", "<frozen", "/rustc/", "node_modules/")


def paths_in(text: str, root: str = "") -> tuple[str, ...]:
    """Repo-relative paths named by a traceback or compiler output, in order, no duplicates.

    Absolute paths under `root` are made relative; other absolute paths and library frames
    (site-packages, the Rust standard library, node_modules) are dropped.
    """
    found: dict[str, None] = {}
    prefix = root.rstrip("/") + "/" if root else ""
    for pattern in _PATH_PATTERNS:
        for match in pattern.finditer(text):
            path = match.group(1)
            if any(n in path for n in _NOISE):
                continue
            if path.startswith("/"):
                if not prefix or not path.startswith(prefix):
                    continue
                path = path[len(prefix) :]
            found.setdefault(path.removeprefix("./"), None)
    for match in _JAVA_FRAME.finditer(text):
        qualified, filename = match.group(1), match.group(2)
        if qualified.startswith(("java.", "javax.", "jdk.", "sun.", "org.junit.")):
            continue
        package = qualified.rsplit(".", 1)[0].replace(".", "/") if "." in qualified else ""
        found.setdefault(f"{package}/{filename}" if package else filename, None)
    return tuple(found)


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The end of `text` (where the assertion is), at most `limit` characters."""
    text = text.strip()
    return text if len(text) <= limit else "…" + text[-limit:]


# --- JUnit XML (pytest --junitxml, Maven surefire, Gradle, jest-junit) ----------------------


def parse_junit_xml(text: str, *, root: str = "", runner: str = "junit-xml") -> TestReport:
    """A JUnit XML document (`<testsuites>` or one `<testsuite>`); ValueError if it is not one."""
    try:
        doc = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ValueError(f"not JUnit XML: {exc}") from None
    suites = [doc] if doc.tag == "testsuite" else list(doc.iter("testsuite"))
    if doc.tag not in ("testsuite", "testsuites"):
        raise ValueError(f"not JUnit XML: root element <{doc.tag}>")
    tests = failed = errors = skipped = 0
    failures: list[TestFailure] = []
    for suite in suites:
        for case in suite.iter("testcase"):
            tests += 1
            classname = case.get("classname", "")
            name = case.get("name", "")
            problem = case.find("failure")
            if problem is None:
                problem = case.find("error")
            if case.find("skipped") is not None and problem is None:
                skipped += 1
                continue
            if problem is None:
                continue
            if problem.tag == "failure":
                failed += 1
            else:
                errors += 1
            body = "\n".join(
                t for t in (problem.text or "", _child_text(case, "system-out"),
                            _child_text(case, "system-err")) if t.strip()
            )  # fmt: skip
            files = list(paths_in(body, root))
            declared = case.get("file")
            if declared:
                files.insert(0, declared)
            failures.append(
                TestFailure(
                    name=_junit_name(classname, name, declared),
                    message=(problem.get("message") or "").strip()[:300],
                    excerpt=excerpt(body),
                    files=tuple(dict.fromkeys(files)),
                    modules=(classname,) if classname else (),
                    kind="collection" if problem.tag == "error" and not classname else "test",
                )
            )
    return TestReport(runner, tests, failed, errors, skipped, tuple(failures))


def _child_text(case: ET.Element, tag: str) -> str:
    child = case.find(tag)
    return child.text or "" if child is not None else ""


def _junit_name(classname: str, name: str, declared: str | None) -> str:
    if declared and declared.endswith(".py"):
        inner = classname.split(".")[-1] if classname.count(".") else ""
        return f"{declared}::{inner + '::' if inner[:1].isupper() else ''}{name}"
    return f"{classname}.{name}" if classname else name


# --- go test -json ------------------------------------------------------------------------------


def parse_go_json(text: str, *, root: str = "") -> TestReport:
    """`go test -json` events (test2json): failed tests, and build failures of packages."""
    outputs: dict[tuple[str, str], list[str]] = {}
    failed_tests: list[tuple[str, str]] = []
    build_failed: list[str] = []
    tests = skipped = 0
    compiling = ""  # the package of the compiler output being read (go < 1.24, stderr)
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):  # go < 1.24 reports build failures as text (see below)
            compiling = _go_text_line(line, compiling, outputs, build_failed)
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        package = event.get("Package") or event.get("ImportPath") or ""
        key = (str(package), str(event.get("Test", "")))
        action = event.get("Action")
        if action in ("output", "build-output"):
            outputs.setdefault(key if action == "output" else (key[0], ""), []).append(
                str(event.get("Output", ""))
            )
        elif action == "build-fail":
            build_failed.append(key[0])
        elif key[1] and action in ("pass", "fail", "skip"):
            tests += 1
            skipped += action == "skip"
            if action == "fail":
                failed_tests.append(key)
        elif action == "fail" and not key[1]:
            said = "".join(outputs.get(key, []))
            if "[build failed]" in said or "[setup failed]" in said:
                build_failed.append(key[0])
    failures = [
        _go_failure(pkg, test, "".join(outputs.get((pkg, test), [])), root)
        for pkg, test in failed_tests
        if not any(other[1].startswith(test + "/") for other in failed_tests)  # leaf subtests
    ]
    for pkg in dict.fromkeys(build_failed):
        body = "".join(outputs.get((pkg, ""), []))
        failures.append(
            TestFailure(
                name=f"{pkg} [build failed]",
                message=_first_line(body),
                excerpt=excerpt(body),
                files=paths_in(body, root),
                kind="compile",
            )
        )
    return TestReport("go-json", tests, len(failed_tests), 0, skipped, tuple(failures))


_GO_BUILD_FAILED = re.compile(r"^FAIL\s+(\S+) \[(?:build|setup) failed\]$")
_GO_COMPILING = re.compile(r"^# (\S+)(?: \[\S+\])?$")


def _go_text_line(
    line: str, compiling: str, outputs: dict[tuple[str, str], list[str]], build_failed: list[str]
) -> str:
    """Go before 1.24 has no build events: `FAIL\t<pkg> [build failed]` is a text line on
    stdout and the compiler's `# <pkg> [<pkg>.test]` block is on stderr. Returns the package
    whose compiler output continues on the next line."""
    if failed := _GO_BUILD_FAILED.match(line):
        build_failed.append(failed.group(1))
        return ""
    if started := _GO_COMPILING.match(line):
        return started.group(1)
    if compiling and line:
        outputs.setdefault((compiling, ""), []).append(line + "\n")
    return compiling


def _go_failure(pkg: str, test: str, body: str, root: str) -> TestFailure:
    lines = [ln for ln in body.splitlines() if not ln.startswith(("=== RUN", "--- FAIL"))]
    return TestFailure(
        name=f"{pkg}.{test}",
        message=_first_line("\n".join(lines)),
        excerpt=excerpt(body),
        files=paths_in(body, root),
    )


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")[:300]


# --- jest --json ----------------------------------------------------------------------------


def parse_jest_json(text: str, *, root: str = "") -> TestReport:
    """jest's `--json` result object; ValueError when the text is not one."""
    try:
        data = json.loads(text)
    except ValueError:
        raise ValueError("not jest --json output") from None
    if not isinstance(data, dict) or "testResults" not in data:
        raise ValueError("not jest --json output")
    failures: list[TestFailure] = []
    for suite in data.get("testResults") or []:
        path = _relative(str(suite.get("name", "")), root)
        cases = suite.get("assertionResults") or []
        for case in cases:
            if case.get("status") != "failed":
                continue
            body = _jest_frames("\n".join(str(m) for m in case.get("failureMessages") or []))
            failures.append(
                TestFailure(
                    name=f"{path} > {case.get('fullName') or case.get('title')}",
                    message=_first_line(body),
                    excerpt=excerpt(body),
                    files=tuple(dict.fromkeys([path, *paths_in(body, root)])),
                )
            )
        if suite.get("status") == "failed" and not cases:  # the suite did not even load
            body = _jest_frames(str(suite.get("message", "")))
            said = "\n".join(ln for ln in body.splitlines() if not ln.strip().startswith("●"))
            failures.append(
                TestFailure(path, _first_line(said), excerpt(body),
                            tuple(dict.fromkeys([path, *paths_in(body, root)])), kind="collection")
            )  # fmt: skip
    return TestReport(
        "jest-json",
        int(data.get("numTotalTests", 0)),
        int(data.get("numFailedTests", 0)),
        int(data.get("numRuntimeErrorTestSuites", 0)),
        int(data.get("numPendingTests", 0)),
        tuple(failures),
    )


_JEST_NOISE_FRAME = re.compile(r"^\s+at .*(node_modules/|\(<anonymous>\)|node:internal)")


def _jest_frames(text: str) -> str:
    """jest's message without the stack frames of jest itself and node (a real failure has a
    dozen jest-circus frames after the one line of the test that matters)."""
    return "\n".join(ln for ln in text.splitlines() if not _JEST_NOISE_FRAME.match(ln))


def _relative(path: str, root: str) -> str:
    prefix = root.rstrip("/") + "/" if root else ""
    return path[len(prefix) :] if prefix and path.startswith(prefix) else path


# --- text: cargo test / rustc, pytest -----------------------------------------------------------

_CARGO_BLOCK = re.compile(r"^---- (\S+) stdout ----$(.*?)(?=^---- |^failures:$|\Z)", re.M | re.S)
_CARGO_RESULT = re.compile(r"test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored")
_RUSTC_ERROR = re.compile(
    r"^error(\[E\d+\])?: (.+?)$(.*?)(?=^error|^warning|^For more|\Z)", re.M | re.S
)


def parse_cargo(text: str, *, root: str = "") -> TestReport | None:
    """`cargo test` / `cargo build` text; None when it is not cargo's."""
    compile_errors = [
        TestFailure(
            name=f"rustc {m.group(1) or 'error'}".replace("[", "").replace("]", ""),
            message=m.group(2).strip(),
            excerpt=excerpt(m.group(0)),
            files=paths_in(m.group(3), root),
            kind="compile",
        )
        for m in _RUSTC_ERROR.finditer(text)
        if "-->" in m.group(3) and not m.group(2).startswith(("could not compile", "test failed"))
    ]
    results = _CARGO_RESULT.findall(text)
    if not results and not compile_errors:
        return None
    failures = [
        TestFailure(
            name=m.group(1),
            message=_first_line(re.sub(r"^thread .*?panicked at \S+\n?", "", m.group(2).strip())),
            excerpt=excerpt(m.group(2)),
            files=paths_in(m.group(2), root),
        )
        for m in _CARGO_BLOCK.finditer(text)
    ]
    passed = sum(int(r[0]) for r in results)
    failed = sum(int(r[1]) for r in results)
    ignored = sum(int(r[2]) for r in results)
    tests = passed + failed + ignored if results else None
    return TestReport("cargo", tests, failed, 0, ignored, tuple(compile_errors + failures))


_PYTEST_SUMMARY = re.compile(r"^(FAILED|ERROR) (\S+?)(?: - (.*))?$", re.MULTILINE)
_PYTEST_COUNTS = re.compile(
    r"^(?:=+ )?(\d+ (?:passed|failed|errors?|skipped)[\w ,]*?) in [\d.]+s", re.M
)


def parse_pytest_text(text: str, *, root: str = "") -> TestReport | None:
    """pytest's short test summary (`-ra` or the default FAILED lines); None if absent."""
    summary = _PYTEST_SUMMARY.findall(text)
    counts = _PYTEST_COUNTS.search(text)
    if not summary and not counts:
        return None
    numbers = dict.fromkeys(("passed", "failed", "error", "skipped"), 0)
    if counts:
        for number, word in re.findall(r"(\d+) (passed|failed|errors?|skipped)", counts.group(1)):
            numbers[word.rstrip("s") if word.startswith("error") else word] = int(number)
    failures = []
    for kind, nodeid, message in summary:
        test_file = nodeid.split("::", 1)[0]
        section = _pytest_section(text, nodeid)
        failures.append(
            TestFailure(
                name=nodeid,
                message=(message or "").strip()[:300],
                excerpt=excerpt(section or message or ""),
                files=tuple(dict.fromkeys([test_file, *paths_in(section, root)])),
                kind="test" if kind == "FAILED" else "collection",
            )
        )
    total = sum(numbers.values()) if counts else None
    return TestReport("pytest", total, numbers["failed"], numbers["error"], numbers["skipped"],
                      tuple(failures))  # fmt: skip


def _pytest_section(text: str, nodeid: str) -> str:
    """The `____ test_name ____` block of the failure report for `nodeid`, if printed."""
    short = nodeid.split("::")[-1]
    match = re.search(rf"^_+ (?:\S+::)?{re.escape(short)}(?:\[.*?\])? _+$(.*?)(?=^_{{3,}} |^=+ )",
                      text, re.M | re.S)  # fmt: skip
    return match.group(1) if match else ""


def parse_text(text: str, *, root: str = "") -> TestReport | None:
    """The text fallbacks in order: cargo, then pytest."""
    return parse_cargo(text, root=root) or parse_pytest_text(text, root=root)


def resolve_modules(modules: Sequence[str], tracked: Sequence[str]) -> tuple[str, ...]:
    """Tracked files for dotted names: `tests.test_x` → tests/test_x.py, `demo.CalcTest` →
    src/test/java/demo/CalcTest.java (the longest dotted prefix that names a file)."""
    stems: dict[str, str] = {}
    for path in tracked:
        stem = path.rsplit(".", 1)[0] if "." in path.rsplit("/", 1)[-1] else path
        stems.setdefault(stem, path)
    found: dict[str, None] = {}
    for module in modules:
        parts = module.split(".")
        for end in range(len(parts), 0, -1):
            tail = "/".join(parts[:end])
            hit = stems.get(tail) or next(
                (p for s, p in stems.items() if s.endswith("/" + tail)), None
            )
            if hit:
                found.setdefault(hit, None)
                break
    return tuple(found)
