"""Compliance checks over a recorded task (RULES §15): pure functions, record in, findings out.

The engine turns a store snapshot (plus task.md, the reports and the task-branch commits) into
an `AuditInput`; every check here returns a `CheckResult` whose findings carry the evidence,
the fix and a root-cause line (the seeds' documentation-auditor step, R-AUD-07, C-14).

Tool-usage events (written by the Claude Code hooks, kind `tool_usage`, RULES R-AUD-03) have
this payload shape, which check 1.2 reads:

    {"tool": "Write" | "Edit" | "MultiEdit" | "NotebookEdit" | "Bash" | ...,
     "file_path": "path written (absolute, or relative to the task worktree)",
     "agent": "main" | "<agent name>",      # who acted; missing or "" means the main agent
     "note": "optional free text"}

Commit events (kind `commit`, git lifecycle) carry {"sha", "agent", "branch", "files_created",
"files_modified", "message"}; a commit by agent "main" during IMPLEMENTATION is check 1.2.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from taskgate.protocol.audit_records import (
    AGENT_TAG,
    MAIN_AGENT,
    WRITE_TOOLS,
    AuditInput,
    CheckResult,
    Event,
    Finding,
    is_source_file,
)
from taskgate.protocol.confinement import check_confinement
from taskgate.protocol.effect_checks import check_effect_violations
from taskgate.protocol.states import MIN_REPORT_BYTES, ChangeType, RiskLevel, State
from taskgate.protocol.transitions import lookup, next_on_path
from taskgate.protocol.workflow import state_path


def _subject(message: str) -> str:
    return message.splitlines()[0] if message else ""


def _state(text: str) -> State | None:
    try:
        return State(text)
    except ValueError:
        return None


def _path(i: AuditInput) -> tuple[State, ...]:
    try:
        risk = RiskLevel(i.risk_level) if i.risk_level else None
        change = ChangeType(i.change_type) if i.change_type else None
    except ValueError:
        risk, change = None, None
    return state_path(risk, change)


# -- checks ------------------------------------------------------------------------------------


class _Found:
    """Collects the findings of one check; most share a fix and a root cause."""

    def __init__(self, fix: str, cause: str) -> None:
        self.items: list[Finding] = []
        self.fix, self.cause = fix, cause

    def add(self, evidence: str, fix: str = "", cause: str = "") -> None:
        self.items.append(Finding(evidence, fix or self.fix, cause or self.cause))


def check_transitions(i: AuditInput) -> CheckResult:
    """Every logged transition is a table row, on the task's path, with no state skipped."""
    found = _Found(
        f"run 'taskgate recover {i.task}' and restore the record from a backup",
        "the state or the transition_log was changed outside taskgate (a direct edit of the "
        "store); taskgate refuses every move that is not in the table",
    )
    path = _path(i)
    previous = State.INIT
    for n, row in enumerate(i.transitions):
        where = f"transition #{n} ({row.source} -> {row.target} at {row.at})"
        if row.index != n:
            found.add(f"{where} has index {row.index}: a transition_log row was deleted or "
                      "inserted (R-TRN-04)")  # fmt: skip
        source, target = _state(row.source), _state(row.target)
        if source is None or target is None:
            found.add(f"{where} names an unknown state (R-TRN-01)")
            continue
        if source is not previous:
            found.add(f"{where} starts at {source} but the previous transition ended at "
                      f"{previous} (R-TRN-05)")  # fmt: skip
        table = lookup(source, target)
        expected = next_on_path(path, source)
        if table is None:
            found.add(f"{where} is not in the transition table (R-TRN-03)",
                      f"return to the last valid state ({source}) and run the skipped states "
                      "(R-AUD-14)")  # fmt: skip
        elif table.forward and expected is not target:
            found.add(f"{where} skips {expected} on this task's path "
                      f"({' -> '.join(s.value for s in path)}) (R-WFV-06)",
                      f"return to {source} and run {expected} (R-AUD-14)")  # fmt: skip
        elif table.backward and not row.reason.strip():
            found.add(f"{where} is a backward transition without a reason (R-TRN-06)",
                      "record why the task went back (transition ... --reason)")  # fmt: skip
        previous = target
    if _state(i.state) is None:
        found.add(f"the task's state {i.state!r} is not a protocol state (R-TRN-01)")
    elif previous.value != i.state:
        found.add(f"the transition_log ends at {previous} but the task's state is {i.state} "
                  "(R-TRN-05): the state changed without a logged transition")  # fmt: skip
    logged = [(r.source, r.target) for r in i.transitions]
    chained = [
        (str(e.payload.get("from")), str(e.payload.get("to")))
        for e in i.events
        if e.kind == "transition"
    ]
    if logged != chained:
        first = next(
            (n for n, (a, b) in enumerate(zip(logged, chained, strict=False)) if a != b),
            min(len(logged), len(chained)),
        )
        found.add(f"transition_log has {len(logged)} rows but the audit trail records "
                  f"{len(chained)} transitions; they first differ at #{first} "
                  f"(log {logged[first] if first < len(logged) else 'none'}, trail "
                  f"{chained[first] if first < len(chained) else 'none'})")  # fmt: skip
    return CheckResult(
        "transitions",
        "every transition is in the table and follows the task's path",
        ("R-TRN-03", "R-TRN-05", "R-WFV-06", "R-TRN-06"),
        tuple(found.items),
    )


def _required_at(i: AuditInput, seq: int) -> list[str]:
    """The required agents at event `seq`: the classification's plus additions before it."""
    agents: list[str] = []
    for e in i.events:
        if e.seq >= seq:
            break
        if e.kind == "classification":
            agents = [str(a) for a in e.payload.get("agents", [])]
        elif e.kind == "agent_added" and str(e.payload.get("agent")) not in agents:
            agents.append(str(e.payload.get("agent")))
    return agents


def _gate_problems(i: AuditInput, e: Event, entered: int) -> list[str]:
    """D-AUD-1's critical checks for the transition event `e` (the source entered at `entered`)."""
    move = (str(e.payload.get("from")), str(e.payload.get("to")))
    since = [x for x in i.events if entered < x.seq < e.seq]
    problems: list[str] = []
    if move == ("INIT", "CLASSIFIED") and not any(
        x.kind == "classification" for x in i.events if x.seq <= e.seq
    ):
        problems.append("no risk classification recorded (R-RSK-13)")
    phase = {
        ("REQUIREMENTS", "SYNTHESIS"): "requirements",
        ("IMPLEMENTATION", "VALIDATION"): "implementation",
    }.get(move)
    if phase:
        done = {
            str(x.payload.get("agent"))
            for x in since
            if x.kind == "agent_completed"
            and x.payload.get("mode") == phase
            and x.payload.get("status") == "COMPLETE"
        }
        missing = [a for a in _required_at(i, e.seq) if a not in done]
        if missing:
            problems.append(f"no COMPLETE from {', '.join(missing)} in {phase} (R-AST-01)")
        for agent in _required_at(i, e.seq) if phase == "requirements" else ():
            size = i.report_sizes.get(agent)
            if size is None or size < MIN_REPORT_BYTES:
                problems.append(f"report of {agent} is missing or under {MIN_REPORT_BYTES} "
                                "bytes (R-DOC-04)")  # fmt: skip
    if move == ("VALIDATION", "REVIEW") and not any(
        x.kind == "validation" and x.payload.get("result") == "SUCCESS" for x in since
    ):
        problems.append("no passing build recorded in VALIDATION (R-VAL-01)")
    if move == ("REVIEW", "AWAITING_USER_APPROVAL"):
        latest = {str(x.payload.get("agent")): x.payload.get("decision")
                  for x in since if x.kind == "verdict"}  # fmt: skip
        missing = [a for a in _required_at(i, e.seq) if latest.get(a) != "APPROVED"]
        if missing:
            problems.append(f"no APPROVED verdict from {', '.join(missing)} (R-REV-01)")
    if move[1] == State.COMPLETE.value and not i.archival_sha:
        problems.append("no archival commit recorded (R-CMP-01)")
    if move[1] in (State.COMPLETE.value, State.CLEANUP.value) and not i.merged_sha:
        problems.append("no merge into the main branch recorded (R-CMP-06, C-36)")
    return problems


def check_artifacts(i: AuditInput) -> CheckResult:
    """Each gate's critical checks (D-AUD-1) held when the transition was made."""
    found = _Found(
        "return to the state that produces the artifact and redo it (R-AUD-14)",
        "the gate's evidence is missing from the record: it was deleted from the store or the "
        "transition was written without taskgate's guard",
    )
    entered = -1
    for e in i.events:
        if e.kind == "transition":
            for problem in _gate_problems(i, e, entered):
                found.add(f"{e.payload.get('from')} -> {e.payload.get('to')} at {e.at}: {problem}")
            entered = e.seq
    return CheckResult(
        "artifacts", "required artifacts existed at each gate", ("D-AUD-1", "R-AUD-16"),
        tuple(found.items),
    )  # fmt: skip


def check_approvals(i: AuditInput) -> CheckResult:
    """Approvals came from a human channel, before the transition, bound to what was shown."""
    found = _Found(
        "present it again and have the user approve it",
        "an approval was recorded by something other than the person at the checkpoint",
    )
    notes: list[str] = []
    for a in i.approvals:
        label = f"{a.kind} approval of {a.bound_to[:12]} at {a.approved_at}"
        if not a.provenance.strip():
            found.add(f"{label} has no provenance (R-CKP-02)")
        elif a.provenance.strip().lower().startswith("automated"):
            if i.auto_approve_allowed:
                notes.append(f"{label} was automated ({a.provenance}), allowed by "
                             "allow_auto_approve in taskgate.toml")  # fmt: skip
            else:
                found.add(f"{label} came from '{a.provenance}', not from a human "
                          "(R-CKP-02, R-CKP-05)")  # fmt: skip
        if not any(
            p.kind == a.kind and p.bound_to == a.bound_to and p.at == a.presented_at
            for p in i.presentations
        ):
            found.add(f"{label} is bound to {a.bound_to[:12]} presented at {a.presented_at}, "
                      "but no such presentation is recorded (R-CKP-03, R-CKP-13, "
                      "R-CKP-15)")  # fmt: skip
        if a.approved_at < a.presented_at:
            found.add(f"{label} precedes its presentation at {a.presented_at} (R-CKP-04)")
    for kind in ("plan", "changes"):
        recorded = sum(1 for a in i.approvals if a.kind == kind)
        trail = sum(1 for e in i.events if e.kind == "approval" and e.payload.get("kind") == kind)
        if recorded != trail:
            found.add(f"the approvals table holds {recorded} {kind} approval(s) but the audit "
                      f"trail records {trail}", f"run 'taskgate recover {i.task}'",
                      "approval rows were added or deleted directly in the store")  # fmt: skip
    _approval_order(i, found)
    return CheckResult(
        "approvals",
        "approvals came from a human, before the transition, bound to what was presented",
        ("R-CKP-02", "R-CKP-03", "R-CKP-04", "R-CKP-13", "R-CKP-15"),
        tuple(found.items),
        tuple(notes),
    )


def _approval_order(i: AuditInput, found: _Found) -> None:
    """Each checkpoint-gated transition has an approval event after the presentation."""
    entered = -1
    for e in i.events:
        if e.kind != "transition":
            continue
        source, target = str(e.payload.get("from")), str(e.payload.get("to"))
        kind = None
        if source == "SYNTHESIS" and target in ("IMPLEMENTATION", "AWAITING_USER_APPROVAL"):
            kind = "plan"
        elif source == "AWAITING_USER_APPROVAL" and target == "COMPLETE":
            kind = "changes"
        if kind is not None:
            since = [x for x in i.events if entered < x.seq < e.seq]
            since = [x for x in since if x.payload.get("kind") == kind]
            approvals = [x for x in since if x.kind == "approval"]
            shown = [x for x in since if x.kind == "presentation"]
            fix = f"return to {source}, present and ask the user"
            if not approvals:
                found.add(f"{source} -> {target} at {e.at} has no {kind} approval recorded "
                          "before it (R-CKP-01, R-TRN-15)", fix)  # fmt: skip
            elif not shown or approvals[-1].seq < shown[0].seq:
                found.add(f"the {kind} approval before {source} -> {target} at {e.at} was given "
                          "before anything was presented (R-CKP-04)", fix)  # fmt: skip
        entered = e.seq


def _stakeholders(task_md: str | None) -> str:
    if not task_md:
        return ""
    match = re.search(r"^## Stakeholder Agent Reports\s*$(.*?)(?=^## |\Z)", task_md, re.M | re.S)
    return match.group(1) if match else ""


def check_agent_additions(i: AuditInput) -> CheckResult:
    """R-AGT-22: every added agent is justified, timely and listed in task.md."""
    found = _Found(
        f"run 'taskgate recover {i.task}'",
        "an agent was added without 'taskgate agent add' or its record was edited",
    )
    added = {a.agent: a for a in i.agents if not a.initial}
    section = _stakeholders(i.task_md)
    for a in added.values():
        if not a.justification.strip():
            found.add(f"agent {a.agent} was added without a justification",
                      f"record why {a.agent} was needed")  # fmt: skip
        if a.added_at_state in (State.VALIDATION.value, State.REVIEW.value):
            found.add(f"agent {a.agent} was added in {a.added_at_state} without returning to "
                      "REQUIREMENTS first (C-47)",
                      f"taskgate transition {i.task} REQUIREMENTS --reason 'critical agent "
                      "addition'")  # fmt: skip
        if i.task_md is not None and not re.search(rf"\b{re.escape(a.agent)}\b", section):
            found.add(f"added agent {a.agent} is missing from the Stakeholder Agent Reports of "
                      "task.md", f"add '### {a.agent}' with its report to task.md",
                      "the main agent did not update task.md after the addition")  # fmt: skip
    initial = i.initial_agents
    for agent in i.required_agents if initial is not None else ():
        if agent not in (initial or ()) and agent not in added:
            found.add(f"agent {agent} is required but was neither selected at classification "
                      "nor added")  # fmt: skip
    return CheckResult(
        "agent-additions", "agent additions are justified and recorded", ("R-AGT-22", "R-AGT-17"),
        tuple(found.items),
    )  # fmt: skip


def check_agents_completed(i: AuditInput) -> CheckResult:
    """Every agent invocation completed before its phase ended (R-AUD-05)."""
    running: dict[str, Event] = {}
    for e in i.events:
        agent = str(e.payload.get("agent"))
        if e.kind == "agent_invoked":
            running[agent] = e
        elif e.kind == "agent_completed":
            running.pop(agent, None)
    found = _Found(
        f"re-run the agent or record its status (taskgate recover {i.task})",
        "the agent's session ended (crash, timeout) before it reported",
    )
    for agent, e in sorted(running.items()):
        if str(e.payload.get("mode", "")).upper() != i.state:
            found.add(f"{agent} was invoked for {e.payload.get('mode')} at {e.at} and never "
                      f"completed, but the task is now in {i.state}")  # fmt: skip
    return CheckResult(
        "agents-completed", "every agent invocation completed", ("R-AUD-05", "C-41"),
        tuple(found.items),
    )  # fmt: skip


def check_main_agent_did_not_implement(i: AuditInput) -> CheckResult:
    """Check 1.2 (alias 0.2, C-13): no source writes by the main agent in IMPLEMENTATION."""
    found = _Found(
        "git reset --hard to the SYNTHESIS state SHA in the task worktree, "
        f"'taskgate transition {i.task} SYNTHESIS --reason \"violation 1.2\"' and re-delegate "
        "to an agent (R-AUD-14)",
        "the main agent implemented instead of delegating to a stakeholder agent (R-AGT-13)",
    )
    state = State.INIT.value
    for e in i.events:
        if e.kind == "transition":
            state = str(e.payload.get("to"))  # events are in chain order: the state at e
        if e.kind not in ("tool_usage", "commit") or state != State.IMPLEMENTATION.value:
            continue
        if str(e.payload.get("agent") or MAIN_AGENT) != MAIN_AGENT:
            continue
        if e.kind == "tool_usage":
            tool, path = str(e.payload.get("tool", "")), str(e.payload.get("file_path", ""))
            if tool in WRITE_TOOLS and is_source_file(path):
                found.add(f"main agent used {tool} on {path} at {e.at} during IMPLEMENTATION")
            continue
        files = [*e.payload.get("files_created", []), *e.payload.get("files_modified", [])]
        sources = [str(f) for f in files if is_source_file(str(f))]
        if sources:
            found.add(f"main agent committed {str(e.payload.get('sha', ''))[:12]} touching "
                      f"{', '.join(sources)} during IMPLEMENTATION")  # fmt: skip
    # A person's fix on T in VALIDATION is a recorded intervention, not the main agent's work.
    human = {str(s) for e in i.events if e.kind == "intervention" for s in e.payload["shas"]}
    for c in i.commits or () if State.IMPLEMENTATION in _path(i) else ():
        if c.merge or c.sha == i.archival_sha or AGENT_TAG.search(c.message) or c.sha in human:
            continue
        sources = [f for f in c.files if is_source_file(f)]
        if sources:
            found.add(f"commit {c.sha[:12]} ({_subject(c.message)}) on the task branch is not "
                      f"tagged [agent:A] and changes {', '.join(sources)}")  # fmt: skip
    return CheckResult(
        "1.2",
        "the main agent did not write source files during IMPLEMENTATION",
        ("R-AGT-12", "R-AUD-15", "C-13"),
        tuple(found.items),
    )


PURE_CHECKS: tuple[Callable[[AuditInput], CheckResult], ...] = (
    check_transitions,
    check_artifacts,
    check_approvals,
    check_agent_additions,
    check_agents_completed,
    check_main_agent_did_not_implement,
    check_confinement,  # protocol/confinement.py (issue 14)
    check_effect_violations,  # protocol/effect_checks.py (issue 15)
)


def run_checks(i: AuditInput) -> list[CheckResult]:
    """Every pure check, in a stable order."""
    return [check(i) for check in PURE_CHECKS]
