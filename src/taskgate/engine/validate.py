"""`taskgate validate`: run the configured build on the task branch and record it (RULES §11).

The commands run without a shell in the task worktree. Where taskgate knows the runner it asks
for a machine-readable report as well (pytest `--junitxml`, `go test -json`, jest `--json`)
and reads the JUnit XML that Maven surefire and Gradle write; the reports decide which tests
failed and which files they name (protocol/testreports.py), the exit code whether it failed
(R-VAL-02). The record carries the test counts (R-VAL-01, R-AUD-04) and the failures.

The build runs code the agents wrote, so it runs in the agents' sandbox (issue 14,
agents/build_sandbox.py): the task worktree and the report directory writable, the store,
the views, the main worktree, other worktrees and every ref read-only. `[agents] sandbox`
decides; an unconfined build says so (`ValidationResult.notice`) and the record says which.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from taskgate.engine.core import Engine, current_state
from taskgate.engine.worktree_setup import worktree_env
from taskgate.errors import Refused
from taskgate.git import repo as gitrepo
from taskgate.process import clean_env
from taskgate.protocol import testreports as tr
from taskgate.protocol.buildfail import BuildFailure, classify_failure
from taskgate.protocol.states import State
from taskgate.protocol.violations import Violation
from taskgate.store.base import Tx
from taskgate.store.records import TaskSnapshot, ValidationRow

_TAIL = 4000
# JUnit XML that build tools write on their own (Maven surefire/failsafe, Gradle).
_XML_GLOBS = (
    "target/surefire-reports/*.xml",
    "*/target/surefire-reports/*.xml",
    "target/failsafe-reports/*.xml",
    "build/test-results/*/*.xml",
    "*/build/test-results/*/*.xml",
)


@dataclass(frozen=True)
class ValidationResult:
    """The recorded build verification and, on failure, its class (D-VAL-1)."""

    row: ValidationRow
    failure: BuildFailure | None
    output: str
    report: tr.TestReport | None = None
    notice: str = ""  # set when the build ran unconfined: the caller prints it
    sandbox: dict[str, Any] | None = None  # how it ran (mode, reason, refused writes)


@dataclass(frozen=True)
class _Instrumented:
    argv: tuple[str, ...]
    kind: str  # "junit" | "go-json" | "jest-json" | ""
    report: Path | None


def _is_pytest(cmd: Sequence[str]) -> bool:
    names = [Path(c).name for c in cmd[:4]]
    return any(n in ("pytest", "py.test") for n in names) or (
        "-m" in cmd[:3] and "pytest" in cmd[:4]
    )


def _own_junit(argv: tuple[str, ...]) -> str | None:
    for index, arg in enumerate(argv):
        for flag in ("--junitxml", "--junit-xml"):
            if arg.startswith(flag + "="):
                return arg.split("=", 1)[1]
            if arg == flag and index + 1 < len(argv):
                return argv[index + 1]
    return None


def instrument(cmd: Sequence[str], report_dir: Path, index: int) -> _Instrumented:
    """`cmd` with the flag that makes its runner write a report taskgate reads, if known."""
    argv = tuple(cmd)
    own = _own_junit(argv)
    if _is_pytest(argv) and own is not None:  # the project names its report: read that one
        return _Instrumented(argv, "junit", Path(own))
    if _is_pytest(argv) and not any(a.startswith(("--junitxml", "--junit-xml")) for a in argv):
        path = report_dir / f"junit-{index}.xml"
        return _Instrumented((*argv, f"--junitxml={path}"), "junit", path)
    if len(argv) >= 2 and Path(argv[0]).name == "go" and argv[1] == "test":
        return _Instrumented(argv if "-json" in argv else (*argv[:2], "-json", *argv[2:]),
                             "go-json", None)  # fmt: skip
    if any(Path(a).name == "jest" for a in argv[:3]) and "--json" not in argv:
        path = report_dir / f"jest-{index}.json"
        return _Instrumented((*argv, "--json", f"--outputFile={path}"), "jest-json", path)
    return _Instrumented(argv, "", None)


def _go_text(stdout: str) -> str:
    """What `go test` would have printed: the Output fields of its -json events."""
    parts = []
    for line in stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            parts.append(line + "\n")
            continue
        if isinstance(event, dict) and event.get("Action") in ("output", "build-output"):
            parts.append(str(event.get("Output", "")))
    return "".join(parts)


def _read_reports(
    how: _Instrumented, stdout: str, text: str, root: Path, since: float
) -> list[tr.TestReport]:
    reports: list[tr.TestReport] = []
    try:
        if how.kind == "go-json":
            reports.append(tr.parse_go_json(stdout, root=str(root)))
        elif how.report is not None and (root / how.report).is_file():  # absolute stays
            body = (root / how.report).read_text(encoding="utf-8", errors="replace")
            parse = tr.parse_jest_json if how.kind == "jest-json" else tr.parse_junit_xml
            reports.append(parse(body, root=str(root)))
    except ValueError:
        pass  # a report that does not parse: the text below still counts
    for pattern in _XML_GLOBS if not reports else ():
        for path in sorted(root.glob(pattern))[:200]:
            try:
                if path.stat().st_mtime >= since:
                    reports.append(
                        tr.parse_junit_xml(
                            path.read_text(errors="replace"), root=str(root), runner="surefire"
                        )
                    )
            except (OSError, ValueError):
                continue
    if not reports:
        parsed = tr.parse_text(text, root=str(root))
        if parsed is not None:
            reports.append(parsed)
    return reports


def _interventions(engine: Engine, snap: TaskSnapshot, head: str) -> list[str]:
    """Untagged commits made on T since it entered VALIDATION: a person's fix (R-VAL-10)."""
    from taskgate.git import ops

    entry = next((r for r in reversed(snap.transitions) if r.target == State.VALIDATION.value),
                 None)  # fmt: skip
    base = str((entry.evidence or {}).get("head") or "") if entry else ""
    if not base:
        return []  # no recorded entry head: nothing can be proven to be from VALIDATION
    seen = {str(e.payload.get("sha")) for e in snap.events if e.kind == "commit"}
    return [
        sha
        for sha, subject in ops.subjects(engine.ws.repo, "--no-merges", f"{base}..{head}")
        if sha not in seen and ops.agent_of(subject) is None
    ]


def validate(engine: Engine, task: str) -> ValidationResult:
    """Run every configured command in the task worktree; record the result against HEAD."""
    snap = engine.require_snapshot(task)
    engine.require_owner(snap.task)
    if current_state(snap.task) is not State.VALIDATION:
        raise Refused(
            f"validation runs in VALIDATION, the task is in {snap.task.state}",
            [Violation("R-VAL-01", "the build is verified fresh in the VALIDATION state")],
            hint=f"taskgate transition {task} VALIDATION",
        )
    commands = engine.ws.config.validation.commands
    if not commands:
        raise Refused(
            "no validation commands configured",
            [Violation("C-80", "the build command is project-specific")],
            hint='set [validation] commands = ["..."] in taskgate.toml',
        )
    worktree = engine.ws.task_worktree(task)
    head = gitrepo.head_sha(worktree)
    if head is None:
        raise Refused("the task worktree is missing", [], hint=f"taskgate recover {task}")
    human = _interventions(engine, snap, head)
    from taskgate.agents import build_sandbox  # issue 14: the build runs agent-written code

    confinement = build_sandbox.of(engine.ws)
    notice = confinement.notice("the build")
    if notice and engine.progress is not None:
        engine.progress(notice)  # said before it runs, on every unconfined build
    refused: list[str] = []
    timeout = engine.ws.config.validation.timeout_minutes * 60
    ports = worktree_env(engine.ws, task, None)  # issue 21: the task worktree's port block
    outputs: list[str] = []
    code = 0
    timed_out = False
    ran: list[str] = []
    reports: list[tr.TestReport] = []
    with tempfile.TemporaryDirectory(prefix="taskgate-reports-") as tmp:
        for index, cmd in enumerate(commands):
            how = instrument(cmd, Path(tmp), index)
            started = time.time() - 1  # file times have a coarse resolution on some systems
            result, how_ran = confinement.run(how.argv, cwd=worktree, env=clean_env(ports),
                                              timeout=timeout, writable=(Path(tmp),))  # fmt: skip
            refused += [*how_ran.violations, *(f"discarded {p}" for p in how_ran.discarded)]
            ran.append(" ".join(cmd))
            stdout = _go_text(result.stdout) if how.kind == "go-json" else result.stdout
            text = f"{stdout}{result.stderr}"
            outputs.append(f"$ {' '.join(cmd)}\n{text}")
            # go < 1.24 prints a package's compiler errors on stderr, outside the JSON
            reports += _read_reports(how, result.stdout + result.stderr, text, worktree, started)
            if not result.ok:
                code = result.returncode
                timed_out = result.timed_out
                break  # R-VAL-02: a non-zero exit is a build failure
    output = "\n".join(outputs)
    report = tr.merge(reports)
    ran_as = {"mode": confinement.mode, "reason": confinement.choice.reason, "refused": refused}
    failure = (
        classify_failure(output, report, timed_out=timed_out, signal=code, root=str(worktree))
        if code
        else None
    )

    def body(tx: Tx, current: TaskSnapshot) -> ValidationRow:
        if current_state(current.task) is not State.VALIDATION:
            raise Refused("the task left VALIDATION while the build ran", [])
        row = ValidationRow(
            task=task,
            head_sha=head,
            command=" && ".join(ran),
            exit_code=code,
            success=code == 0,
            at=engine.now(),
            output_tail=output[-_TAIL:],
            failure_class=failure.type.value if failure else "",
        )
        tx.add_validation(row)
        if human:  # a person fixed the build on T (the escalation's option 1): recorded, allowed
            from taskgate.engine.merge import record_commits

            record_commits(engine, tx, current, human, branch=task, provenance="human")
            engine.event(tx, task, "intervention", {"shas": human, "state": "VALIDATION",
                                                     "provenance": "human"})  # fmt: skip
        payload: dict[str, Any] = {
            "command": row.command,
            "result": "SUCCESS" if row.success else "FAILURE",
            "exit_code": code,
            "head_sha": head,
            "failure_class": row.failure_class,
            "responsible": failure.responsible if failure else None,
            "timed_out": timed_out,
            "sandbox": ran_as,
        }
        if report is not None:  # R-VAL-01 / R-AUD-04: test counts with every build
            payload["tests"] = report.to_json()
        if failure is not None and failure.failures and report is None:
            payload["tests"] = {"failures": [f.to_json() for f in failure.failures[:50]]}
        engine.event(tx, task, "validation", payload)
        engine.touch(tx, current)
        return row

    return ValidationResult(engine.step(task, body), failure, output, report, notice, ran_as)
