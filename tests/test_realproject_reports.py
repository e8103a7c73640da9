"""Test runners' reports → failing tests, files and failure classes (protocol/testreports.py,
protocol/buildfail.py). pytest runs for real here; other runners' outputs are in
tests/fixtures/testreports (see its README for which were captured from real runs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from taskgate.protocol import testreports as tr
from taskgate.protocol.buildfail import FailureType, classify_failure

FIXTURES = Path(__file__).parent / "fixtures" / "testreports"

LIB = '''\
def split_words(text, sep=" "):
    """Split text on sep, dropping empty pieces."""
    return [w for w in text.split(sep) if w] + ["oops"]
'''
TESTS = """\
from textlib.words import split_words


def test_split_words():
    assert split_words("a b") == ["a", "b"]


def test_empty_separator():
    assert split_words("a", sep="") == ["a"]
"""


def _real_pytest(tmp_path: Path, *, broken_import: bool = False) -> tuple[str, str]:
    """Run the real pytest on a two-file project; (stdout, junit xml)."""
    (tmp_path / "textlib").mkdir()
    (tmp_path / "textlib" / "__init__.py").write_text("")
    (tmp_path / "textlib" / "words.py").write_text("def split_words(:\n" if broken_import else LIB)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "test_words.py").write_text(TESTS)
    xml = tmp_path / "junit.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode != 0
    return proc.stdout + proc.stderr, xml.read_text()


def test_pytest_junit_xml_names_the_test_and_the_source_file(tmp_path: Path) -> None:
    out, xml = _real_pytest(tmp_path)
    report = tr.parse_junit_xml(xml, root=str(tmp_path))
    assert (report.tests, report.failed, report.errors, report.passed) == (2, 2, 0, 0)
    assertion, raised = report.failures
    assert assertion.name == "tests.test_words.test_split_words"
    assert assertion.files == ("tests/test_words.py",) and "oops" in assertion.excerpt
    # An exception raised in the library names the library's file in the traceback.
    assert raised.files == ("tests/test_words.py", "textlib/words.py")
    assert "empty separator" in raised.message
    assert tr.resolve_modules(assertion.modules, ["tests/test_words.py", "textlib/words.py"]) == (
        "tests/test_words.py",
    )
    build = classify_failure(out, report)
    assert build.type is FailureType.TEST
    assert build.tests == (assertion.name, raised.name)


def test_pytest_text_fallback_reads_the_summary(tmp_path: Path) -> None:
    out, _ = _real_pytest(tmp_path)
    report = tr.parse_text(out, root=str(tmp_path))
    assert report is not None and report.runner == "pytest"
    assert report.failed == 2 and report.passed == 0
    first, second = report.failures
    assert first.name == "tests/test_words.py::test_split_words"
    assert first.files == ("tests/test_words.py",)
    assert second.files == ("tests/test_words.py", "textlib/words.py")
    assert classify_failure(out, report).type is FailureType.TEST


def test_pytest_collection_error_is_a_compilation_failure(tmp_path: Path) -> None:
    out, xml = _real_pytest(tmp_path, broken_import=True)
    report = tr.parse_junit_xml(xml, root=str(tmp_path))
    assert report.errors == 1
    build = classify_failure(out, report)
    assert build.type is FailureType.COMPILATION
    assert any("textlib/words.py" in f.files for f in build.failures)


def test_cargo_test_failure_captured() -> None:
    text = (FIXTURES / "cargo-test-failure.txt").read_text()
    report = tr.parse_cargo(text, root="/work/crt")
    assert report is not None
    assert (report.tests, report.failed, report.passed) == (2, 1, 1)
    (failure,) = report.failures
    assert failure.name == "tests::adds" and failure.files == ("src/lib.rs",)
    assert "left: 0" in failure.excerpt
    assert classify_failure(text, report).type is FailureType.TEST


def test_cargo_build_error_is_compilation() -> None:
    text = (FIXTURES / "cargo-build-error.txt").read_text()
    report = tr.parse_text(text, root="/work/crt")
    assert report is not None
    build = classify_failure(text, report)
    assert build.type is FailureType.COMPILATION
    assert build.failures[0].files == ("src/lib.rs",)
    assert "cannot find value `c`" in build.failures[0].message


# go-test.json and go-test.stderr.txt are a real capture (issue 17): go1.19.8 linux/amd64
# (Debian golang-go), `go test -json ./...` in /tmp/gocap/calc, a module `example.com/calc`
# with TestZero passing, TestAdd failing, and package broken/ that does not compile; stdout
# and stderr saved verbatim. Go before 1.24 writes no build events: the build failure is a
# plain `FAIL\t<pkg> [build failed]` line among the JSON and the compiler errors are on stderr.
def test_go_test_json() -> None:
    stdout = (FIXTURES / "go-test.json").read_text()
    stderr = (FIXTURES / "go-test.stderr.txt").read_text()
    report = tr.parse_go_json(stdout + stderr, root="/tmp/gocap/calc")
    assert (report.tests, report.failed) == (2, 1)
    names = [f.name for f in report.failures]
    assert names == ["example.com/calc.TestAdd", "example.com/calc/broken [build failed]"]
    assert report.failures[0].files == ("calc_test.go",)
    assert report.failures[0].message == "calc_test.go:13: Add(2, 2) = 0, want 4"
    assert "--- FAIL: TestAdd" in report.failures[0].excerpt
    assert report.failures[1].kind == "compile"
    assert report.failures[1].files == ("broken/broken.go",)
    assert report.failures[1].message == "broken/broken.go:4:9: undefined: missing"
    assert classify_failure("", report).type is FailureType.COMPILATION
    # stdout alone (no stderr): the build failure is still seen, just without its files
    alone = tr.parse_go_json(stdout, root="/tmp/gocap/calc")
    assert [f.name for f in alone.failures] == names
    assert alone.failures[1].kind == "compile" and alone.failures[1].files == ()


# go-test-1.24-handwritten.json is NOT a capture: go 1.24's build-output/build-fail events,
# written from cmd/test2json's documentation (only go 1.19 is installable offline here).
def test_go_test_json_build_events_of_go_1_24() -> None:
    report = tr.parse_go_json((FIXTURES / "go-test-1.24-handwritten.json").read_text())
    assert (report.tests, report.failed) == (2, 1)
    names = [f.name for f in report.failures]
    assert names == ["example.com/calc.TestAdd", "example.com/calc/broken [build failed]"]
    assert report.failures[1].kind == "compile"
    assert report.failures[1].files == ("broken/broken.go",)


# jest.json is a real capture (issue 17): jest 30.5.2 on node v20.20.2, `npx jest --json
# --outputFile=…` in /tmp/jestcap with src/sum.test.js (one passing, one failing test of a
# `sum` that subtracts) and src/broken.test.js (requires a missing module: the suite cannot
# run); saved verbatim.
def test_jest_json() -> None:
    report = tr.parse_jest_json((FIXTURES / "jest.json").read_text(), root="/tmp/jestcap")
    assert (report.tests, report.failed, report.errors) == (2, 1, 1)
    failing, suite = report.failures
    assert failing.name == "src/sum.test.js > sum adds 1 + 2"
    assert failing.files == ("src/sum.test.js",)  # node_modules frames dropped
    assert failing.message == "Error: expect(received).toBe(expected) // Object.is equality"
    # the excerpt keeps expected/received and the test's own frame, not jest-circus's dozen
    assert "Expected: 3\nReceived: -1" in failing.excerpt
    assert "(/tmp/jestcap/src/sum.test.js:9:23)" in failing.excerpt
    assert "node_modules" not in failing.excerpt and "<anonymous>" not in failing.excerpt
    assert suite.name == "src/broken.test.js" and suite.kind == "collection"
    assert suite.message == "Cannot find module './does-not-exist' from 'src/broken.test.js'"
    assert suite.files == ("src/broken.test.js",)
    assert classify_failure("", report).type is FailureType.TEST


def test_surefire_xml_resolves_the_java_files() -> None:
    report = tr.parse_junit_xml((FIXTURES / "TEST-demo.CalcTest.xml").read_text())
    (failure,) = report.failures
    assert failure.name == "demo.CalcTest.adds"
    assert failure.files == ("demo/CalcTest.java",)  # JUnit's own frames dropped
    tracked = ["pom.xml", "src/main/java/demo/Calc.java", "src/test/java/demo/CalcTest.java"]
    assert tr.resolve_modules(failure.modules, tracked) == ("src/test/java/demo/CalcTest.java",)


@pytest.mark.parametrize(
    ("output", "kind"),
    [
        ("[ERROR] COMPILATION ERROR\n[ERROR] x.java cannot find symbol\n", FailureType.COMPILATION),
        ("[ERROR] There are test failures.\nTests run: 3, Failures: 1\n", FailureType.TEST),
        ("You have 3 Checkstyle violations\n", FailureType.STYLE),
        ("src/a.py:3:1: F401 `os` imported but unused\nFound 1 error.\n", FailureType.STYLE),
        ("ERROR: No matching distribution found for nosuchpkg\n", FailureType.DEPENDENCY),
        ("ModuleNotFoundError: No module named 'yaml'\n", FailureType.DEPENDENCY),
        ('  File "src/x.py", line 1\nSyntaxError: invalid syntax\n', FailureType.COMPILATION),
        ("something odd happened\n", FailureType.UNKNOWN),
    ],
)
def test_text_classes(output: str, kind: FailureType) -> None:
    assert classify_failure(output, tr.parse_text(output)).type is kind


def test_timeout_and_crash() -> None:
    assert classify_failure("", timed_out=True).type is FailureType.TIMEOUT
    assert classify_failure("", signal=-11).type is FailureType.CRASH


def test_not_junit_is_an_error() -> None:
    with pytest.raises(ValueError):
        tr.parse_junit_xml("<html/>")
    with pytest.raises(ValueError):
        tr.parse_jest_json("[]")


def test_routing_follows_the_files_to_the_agents_that_changed_them(tmp_path: Path) -> None:
    """engine/failures.py: a failure naming a file goes to the agent whose commit changed it;
    one naming nothing of the task's goes to the task's committers; `unknown` stays rare."""
    from conftest import make_repo
    from flow import PASSING_BUILD, to_validation
    from taskgate.engine import failures
    from taskgate.engine.core import Engine
    from taskgate.engine.workspace import find_workspace
    from taskgate.protocol.buildfail import BuildFailure

    repo = make_repo(tmp_path / "r", config=PASSING_BUILD)
    to_validation(repo, "add-login")  # quality committed src/auth/login.py on the branch
    engine = Engine(find_workspace(repo.path), session_id="s1", cwd=repo.path)
    try:
        snap = engine.require_snapshot("add-login")
        named = tr.TestFailure("tests/test_login.py::test_ok", "boom",
                               files=("src/auth/login.py",))  # fmt: skip
        elsewhere = tr.TestFailure("tests/test_other.py::test_x", "boom", files=("README.md",))
        build = BuildFailure(FailureType.TEST, "test", "2 failing tests",
                             failures=(named, elsewhere))  # fmt: skip
        routing = failures.route(engine, snap, build)
        assert routing.agents == {"quality": [named, elsewhere]}
        assert routing.why["quality"] == {"src/auth/login.py"}
        assert routing.unrouted == []
        text = failures.feedback_text(build, routing.agents["quality"], routing.why["quality"])
        assert "test_ok: boom" in text and "src/auth/login.py" in text
    finally:
        engine.close()


def test_validation_asks_known_runners_for_their_reports(tmp_path: Path) -> None:
    from taskgate.engine.validate import instrument

    py = instrument(("python", "-m", "pytest", "-q"), tmp_path, 0)
    assert py.kind == "junit" and py.argv[-1] == f"--junitxml={tmp_path / 'junit-0.xml'}"
    own = ("pytest", "--junitxml=out.xml")
    mine = instrument(own, tmp_path, 1)  # the project's own report path is kept, and read
    assert mine.argv == own and mine.kind == "junit" and str(mine.report) == "out.xml"
    go = instrument(("go", "test", "./..."), tmp_path, 2)
    assert go.argv == ("go", "test", "-json", "./...") and go.kind == "go-json"
    jest = instrument(("npx", "jest"), tmp_path, 3)
    assert jest.argv[-2:] == ("--json", f"--outputFile={tmp_path / 'jest-3.json'}")
    make = ("make", "check")
    assert instrument(make, tmp_path, 4).argv == make and instrument(make, tmp_path, 4).kind == ""
