"""Built-in deterministic agents (the demo and the tests), with faults for every recovery path.

They do real work: a report at the report path, the plan section in task.md, code and tests
committed with the `[agent:A]` tag in their worktree, a review verdict. Their answer goes through
the same result parser as any executable's JSON, so a fault exercises the real checks.

Faults (`[[agents.scripted.faults]]` or `ScriptedBackend(faults=…)`), matched on agent, mode,
round and attempt (absent = any); the first match wins:

    fail          status ERROR                       hang      no answer until the timeout
    crash         exits 1 without a result, partial work left behind
    nothing       claims COMPLETE, writes nothing     short-report  a 20-byte report
    reject        review: REJECTED                    scope     REJECTED + scope concern (3×)
    conflict      implementation: also rewrites the first lines of `conflict_file`
    garbage       output that is not JSON            blocked   status BLOCKED (needs a human)
    escape        claims COMPLETE after writing a file into the task worktree (not its own)
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from taskgate import failpoints
from taskgate.agents import artifacts
from taskgate.agents.base import (
    AgentRequest,
    AgentResult,
    Mode,
    ResultStatus,
    error_result,
    parse_result_text,
)
from taskgate.fsutil import atomic_write, read_text
from taskgate.git.cmd import git
from taskgate.protocol import taskmd

if TYPE_CHECKING:
    from taskgate.agents.config import AgentSettings

FAULT_KINDS = (
    "fail",
    "hang",
    "crash",
    "nothing",
    "short-report",
    "reject",
    "scope",
    "conflict",
    "garbage",
    "blocked",
    "escape",
)
SHORT_REPORT = "# short\nnot enough.\n"  # 20 bytes: under MIN_REPORT_BYTES (R-DOC-04)
GARBAGE = '{"status": COMPLETE, verdict: <<garbage>>'


@dataclass(frozen=True)
class Fault:
    """A fault injected when agent, mode, round and attempt match (None / "*" = any)."""

    fault: str
    agent: str = "*"
    mode: Mode | None = None
    round: int | None = None
    attempt: int | None = None

    def matches(self, request: AgentRequest) -> bool:
        """True when this fault applies to `request`."""
        return (
            self.agent in ("*", request.agent)
            and self.mode in (None, request.mode)
            and self.round in (None, request.round)
            and self.attempt in (None, request.attempt)
        )

    @classmethod
    def from_table(cls, table: dict[str, Any]) -> Fault:
        """From a (validated) `[[agents.scripted.faults]]` entry."""
        mode = table.get("mode")
        return cls(
            str(table["fault"]),
            str(table.get("agent", "*")),
            Mode.parse(mode) if mode else None,
            table.get("round"),
            table.get("attempt"),
        )


def _answer(**fields: Any) -> str:
    """The JSON line a scripted agent prints (the command backend's contract)."""
    return json.dumps({"status": "COMPLETE", "work_remaining": False, **fields})


@dataclass(frozen=True)
class ScriptedBackend:
    """Deterministic agents; `rounds` spreads each agent's files over that many rounds."""

    rounds: int = 1
    hang_seconds: float = 0.0
    faults: tuple[Fault, ...] = ()
    conflict_file: str = ""
    name: str = field(default="scripted", init=False)

    @classmethod
    def from_settings(cls, settings: AgentSettings) -> ScriptedBackend:
        """From the `[agents.scripted]` / per-agent options."""
        options = settings.options
        faults = tuple(Fault.from_table(t) for t in options.get("faults", ()))
        return cls(
            max(1, int(options.get("rounds", 1))),
            float(options.get("hang_seconds", 0)),
            faults,
            str(options.get("conflict_file", "")),
        )

    def fault_for(self, request: AgentRequest) -> str | None:
        """The fault that applies to `request`, if any."""
        return next((f.fault for f in self.faults if f.matches(request)), None)

    def run(self, request: AgentRequest) -> AgentResult:
        """Do the mode's work (or the configured fault) and answer like an executable would."""
        fault = self.fault_for(request)
        if fault == "hang":
            # Like an agent that never answers: the caller's timeout is what ends it.
            time.sleep(min(self.hang_seconds, request.timeout_s))
            return AgentResult(
                ResultStatus.TIMEOUT,
                backend=self.name,
                message=f"no result within {request.timeout_s:g} s",
                reason="timeout (C-02)",
            )
        if fault == "crash":
            self._partial_work(request)
            return error_result(
                "agent exited with code 1 without a result",
                backend=self.name,
                code=1,
                raw="Traceback (most recent call last):\n  scripted crash\n",
            )
        if fault == "garbage":
            return parse_result_text(GARBAGE, request.mode, backend=self.name)
        if fault == "fail":
            text = _answer(status="ERROR", message=f"{request.agent} failed (scripted fault)")
        elif fault == "blocked":
            text = _answer(status="BLOCKED", message="needs a human decision (scripted fault)")
        elif fault == "nothing":
            text = _answer(message="done (scripted: wrote nothing)")
        elif fault == "escape":
            outside = request.task_worktree or request.worktree.parent
            (outside / f"ESCAPED-{request.agent}.txt").write_text("written outside\n")
            text = _answer(verdict="APPROVED", message="done (scripted: wrote outside)")
        else:
            text = self._work(request, fault)
        return replace(parse_result_text(text, request.mode, backend=self.name), exit_code=0)

    # --- the modes -----------------------------------------------------------------------------

    def _work(self, request: AgentRequest, fault: str | None) -> str:
        if request.mode is Mode.REQUIREMENTS:
            text = SHORT_REPORT if fault == "short-report" else None
            atomic_write(
                request.report_path,
                text or artifacts.requirements_report(request.brief, request.agent),
            )
            return _answer(message=f"wrote {request.report_path.name}")
        if request.mode is Mode.SYNTHESIS:
            self._write_plan(request)
            return _answer(message=f"wrote the implementation plan into {request.task_md.name}")
        if request.mode is Mode.IMPLEMENTATION:
            return self._implement(request, conflict=fault == "conflict")
        return self._review(request, fault)

    def _write_plan(self, request: AgentRequest) -> None:
        files = artifacts.planned_files(request.brief)
        exists = {f for f in files if (request.worktree / f).exists()}
        reports = sorted(request.task_dir.glob(f"{request.task}-*-requirements.md"))
        section = artifacts.plan_section(
            request.brief, request.team, request.agent, exists, reports
        )
        text = read_text(request.task_md) or f"# {request.task}\n"
        current = taskmd.plan_section(text)
        if current is not None:  # replace the old plan, keep the rest (idempotent)
            text = text.replace(current, section.rstrip("\n") + "\n\n", 1)
        else:
            text = text.rstrip("\n") + "\n\n" + section
        for report in reports:  # point the R-DOC-02 placeholders at the reports
            text = text.replace(f"_pending: {report.name}_", f"See `{report.name}`.")
        atomic_write(request.task_md, text.rstrip("\n") + "\n")

    def _my_files(self, request: AgentRequest) -> list[str]:
        team = request.team or (request.agent,)
        return [
            f
            for f in artifacts.planned_files(request.brief)
            if artifacts.owner(f, team, request.agent) == request.agent
        ]

    def _pending(self, request: AgentRequest) -> list[tuple[str, str]]:
        """(path, content) of my files that do not carry the task marker yet."""
        pending = []
        for path in self._my_files(request):
            # The committed version decides create vs modify: a crash's leftovers do not count.
            committed = git("show", f"HEAD:{path}", cwd=request.worktree, check=False)
            base = committed.stdout if committed.ok else None
            content = artifacts.file_content(path, request.brief, base)
            if content is not None and content != read_text(request.worktree / path):
                pending.append((path, content))
        return pending

    def _implement(self, request: AgentRequest, *, conflict: bool) -> str:
        pending = self._pending(request)
        rounds_left = max(1, self.rounds - request.round + 1)
        batch = pending[: math.ceil(len(pending) / rounds_left)] if pending else []
        for path, content in batch:
            target = request.worktree / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
        done = [path for path, _ in batch]
        if batch:
            _commit(request, done, f"implement {', '.join(done)} (round {request.round})")
        elif request.feedback and self._address_feedback(request):
            done.append("feedback")
        if conflict:
            self._conflict(request)
        remaining = len(pending) > len(batch) or request.round < self.rounds
        message = f"wrote {', '.join(done)}" if done else "nothing left to do"
        if not self._my_files(request) and not conflict:  # R-TRN-14: say so explicitly
            return _answer(
                work_remaining=remaining,
                message=message,
                no_change=f"no planned file is in the {request.agent} domain",
            )
        return _answer(work_remaining=remaining, message=message)

    def _address_feedback(self, request: AgentRequest) -> bool:
        """Append a note about the latest feedback to my first file that takes comments."""
        note = request.feedback[-1].strip().splitlines()[0][:120] if request.feedback else ""
        for path in self._my_files(request):
            target = request.worktree / path
            existing = read_text(target)
            prefix = artifacts.comment_prefix(path)
            if existing is None or prefix is None:
                continue
            line = f"{prefix or '<!--'} feedback (round {request.round}): {note}"
            line += " */" if prefix == "/*" else " -->" if not prefix else ""
            if line in existing:
                return False
            target.write_text(existing.rstrip("\n") + "\n" + line + "\n", encoding="utf-8")
            _commit(request, [path], f"address review feedback (round {request.round})")
            return True
        return False

    def _conflict(self, request: AgentRequest) -> None:
        """Rewrite the first lines of a file another agent owns: the merge must conflict."""
        path = self.conflict_file or artifacts.planned_files(request.brief)[0]
        target = request.worktree / path
        target.parent.mkdir(parents=True, exist_ok=True)
        body = read_text(target) or ""
        lines = [f"conflicting edit by {request.agent} (round {request.round})"] * 3
        target.write_text("\n".join(lines + body.splitlines()[3:]) + "\n", encoding="utf-8")
        _commit(request, [path], f"edit {path} (scripted conflict)")

    def _review(self, request: AgentRequest, fault: str | None) -> str:
        files = artifacts.planned_files(request.brief)
        if fault == "reject":
            return _answer(
                verdict="REJECTED",
                reason=f"{request.agent}: the change needs "
                f"another pass on {files[0]} (scripted rejection)",
            )
        if fault == "scope":
            size = float(len(files))
            concern = {
                "effort_estimate": 3 * size,
                "task_scope": size,
                "reason": "the remaining work is three times the task's scope",
                "deferred": [
                    f"{request.task}-{request.agent}-followup: extended "
                    f"{request.agent} work for {request.task}"
                ],
            }
            return _answer(
                verdict="REJECTED",
                scope=concern,
                reason=f"{request.agent}: beyond the scope of {request.task}",
            )
        where = request.task_worktree or request.worktree
        missing = [f for f in files if not (where / f).exists()]
        if missing:  # R-DOC-15: a planned file that is not there is a deviation
            return _answer(
                verdict="REJECTED",
                reason=f"planned files missing from the task branch: {', '.join(missing)}",
            )
        return _answer(
            verdict="APPROVED",
            reason=f"{len(files)} planned file(s) present",
            message=f"{request.agent} approves",
        )

    def _partial_work(self, request: AgentRequest) -> None:
        """What a crash leaves behind: half a report, or an uncommitted half-written file."""
        if request.mode is Mode.REQUIREMENTS:
            full = artifacts.requirements_report(request.brief, request.agent)
            atomic_write(request.report_path, full[: len(full) // 2])
        elif request.mode is Mode.IMPLEMENTATION:
            pending = self._pending(request)
            if pending:
                path, content = pending[0]
                target = request.worktree / path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(content[: len(content) // 2], encoding="utf-8")


def _commit(request: AgentRequest, paths: Sequence[str], subject: str) -> None:
    """Commit `paths` in the agent's worktree with the R-WTB-06 tag, as the scripted agent."""
    worktree: Path = request.worktree
    git("add", "--", *paths, cwd=worktree)
    failpoints.hit("scripted:staged")  # a kill inside the commit step leaves it staged
    git(
        "-c",
        f"user.name=taskgate scripted {request.agent}",
        "-c",
        f"user.email={request.agent}@scripted.taskgate.invalid",
        "-c",
        "commit.gpgsign=false",
        "commit",
        "-q",
        "--no-verify",
        "-m",
        f"{request.commit_tag} {subject}",
        cwd=worktree,
    )
