"""`taskgate audit`: compliance checks that never change anything (R-AUD-12).

The store is opened read-only (SQLite refuses writes on the connection), views are read and
compared but never re-rendered, and git is only queried. Everything found is reported as a
discrepancy with its evidence and fix; repairs are `taskgate recover`'s job.

This module reads the snapshots, runs every check of a task and renders the report. The
checks beside the pure ones (protocol/audit_checks.py) are in engine/audit_chain.py (the
hash chain, what a rebuild restored), engine/audit_views.py (the views and store-record.jsonl
against the store), engine/audit_git.py (the task's commits; git against the record),
engine/anchor.py (the head anchored in git) and engine/guard_trail.py (the guards' records);
their public names are importable from here as well.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from taskgate.engine import guard_trail, views
from taskgate.engine.anchor import check_anchor
from taskgate.engine.audit_chain import (
    chain_findings,
    check_hash_chain,
    check_rebuild,
    rebuild_events,
)
from taskgate.engine.audit_git import check_git, git_problems, task_commits
from taskgate.engine.audit_views import check_views, record_problems, view_problems, views_elsewhere
from taskgate.engine.core import Engine, check_history
from taskgate.engine.workspace import Workspace, require_initialized
from taskgate.errors import Corrupted, UsageError
from taskgate.fsutil import file_size, read_text
from taskgate.git.cmd import git
from taskgate.protocol import audit_checks as ac
from taskgate.protocol import audit_records as ar
from taskgate.store.base import StoreCorrupt
from taskgate.store.records import EventRow, TaskSnapshot
from taskgate.store.select import open_store

__all__ = [
    "TaskAudit",
    "audit",
    "audit_input",
    "audit_repository",
    "audit_snapshot",
    "chain_findings",
    "check_git",
    "check_hash_chain",
    "check_rebuild",
    "check_views",
    "git_problems",
    "read_snapshots",
    "record_problems",
    "render_text",
    "task_commits",
    "view_problems",
]


@dataclass(frozen=True)
class TaskAudit:
    """The audit of one task."""

    task: str
    state: str
    checks: tuple[ar.CheckResult, ...]

    @property
    def passed(self) -> bool:
        """True when every check passed."""
        return all(c.passed for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        """Stable JSON shape."""
        return {
            "task": self.task,
            "state": self.state,
            "verdict": "PASSED" if self.passed else "FAILED",
            "checks": [c.to_json() for c in self.checks],
        }


def read_snapshots(ws: Workspace, task: str | None) -> list[TaskSnapshot]:
    """Snapshots from a read-only store connection (never migrates, never writes)."""
    require_initialized(ws)
    try:
        store = open_store(ws, timeout=60.0, read_only=True)  # SQLite or PostgreSQL (issue 20)
    except StoreCorrupt as exc:
        raise Corrupted(str(exc), hint="run 'taskgate recover'") from exc
    names = [task] if task else [p.parent.name for p in ws.tasks_root.glob("*/task.json")]
    rendered = {name: views.view_seq(ws, name) for name in names}  # before the store: see core
    try:
        with store.read() as tx:
            if task is None:
                snaps = [s for r in tx.tasks() if (s := tx.snapshot(r.name)) is not None]
                found = {s.task.name: s for s in snaps}
                for name, seq in rendered.items():
                    check_history(ws, name, seq, found.get(name))
                return snaps
            snap = tx.snapshot(task)
            check_history(ws, task, rendered[task], snap)
    except StoreCorrupt as exc:
        raise Corrupted(
            f"the store cannot be read: {exc}",
            hint=f"run 'taskgate recover {task}'" if task else "run 'taskgate recover'",
        ) from exc
    finally:
        store.close()
    if snap is None:
        raise UsageError(f"task '{task}' has not been started", hint="see 'taskgate status'")
    return [snap]


def audit(engine: Engine, task: str | None = None) -> list[TaskAudit]:
    """Audit one task or every task (and then the repository's own trail); reads only."""
    if task is not None:
        engine.check_task_name(task)
    snaps = read_snapshots(engine.ws, task)
    repository = guard_trail.read_repository_events(engine.ws)
    audits = [
        audit_snapshot(engine.ws, snap, repository, _documents_elsewhere(engine, snap))
        for snap in snaps
    ]
    if task is None:
        audits += audit_repository(repository)
    return audits


def _documents_elsewhere(engine: Engine, snap: TaskSnapshot) -> str | None:
    """Issue 20: a team's task that ran on another machine has no directory here; its
    documents (task.md, the reports) are read from their commit on the shared remote
    (engine/remote_sync.py), and its views, this machine never rendered, are not compared."""
    if engine.ws.task_dir(snap.task.name).exists() or not engine.ws.uses_database_server:
        return None
    from taskgate.engine import remote_sync

    return remote_sync.fetch_documents(engine, snap.task.name)


def audit_repository(events: Sequence[EventRow]) -> list[TaskAudit]:
    """The repository's trail, when it has events: its chain and the guard records on it."""
    if not events:
        return []
    chain = ar.CheckResult(
        "hash-chain",
        f"the repository trail's hash chain is intact ({len(events)} events)",
        ("R-AUD-01",),
        tuple(chain_findings(guard_trail.REPOSITORY, events)),
    )
    return [TaskAudit(guard_trail.REPOSITORY, "-", (chain, guard_trail.check_guards(events)))]


def audit_snapshot(
    ws: Workspace, snap: TaskSnapshot, repository: Sequence[EventRow] = (), docs: str | None = None
) -> TaskAudit:
    """Every check for one task: the pure protocol checks plus chain, views and git; with the
    repository's trail, its hook-settings records of the sessions that worked on the task;
    with `docs`, the task ran on another machine: its documents are read from that commit."""
    checks = [
        check_hash_chain(snap),
        *ac.run_checks(audit_input(ws, snap, docs)),
        check_views(ws, snap) if docs is None else views_elsewhere(snap),
        check_git(ws, snap),
        check_anchor(ws, snap),  # engine/anchor.py (issue 14)
        guard_trail.check_guards(snap.events, guard_trail.linked(snap, repository)),
    ]
    if any(rebuild_events(snap)):  # issue 16: the store was rebuilt from the views
        checks.append(check_rebuild(snap))
    return TaskAudit(snap.task.name, snap.task.state, tuple(checks))


def _document(ws: Workspace, docs: str | None, path: Path) -> str | None:
    """A task document's text: the file here, or with `docs` its copy in that commit."""
    if docs is None:
        return read_text(path)
    found = git("cat-file", "blob", f"{docs}:{path.name}", cwd=ws.repo, check=False)
    return found.stdout if found.ok else None


def audit_input(ws: Workspace, snap: TaskSnapshot, docs: str | None = None) -> ar.AuditInput:
    """The snapshot in the shape the pure checks judge (plus task.md, reports and commits)."""
    t = snap.task

    def size(path: Path) -> int | None:
        if docs is None:
            return file_size(path)
        text = _document(ws, docs, path)
        return None if text is None else len(text.encode("utf-8"))

    agents = t.classification.get("agents") if t.classification else None
    return ar.AuditInput(
        task=t.name,
        state=t.state,
        risk_level=t.risk_level,
        change_type=t.change_type,
        required_agents=t.required_agents,
        initial_agents=tuple(str(a) for a in agents) if isinstance(agents, list) else None,
        transitions=tuple(
            ar.Logged(r.index, r.source, r.target, r.at, r.reason) for r in snap.transitions
        ),
        events=tuple(ar.Event(e.seq, e.kind, e.at, e.payload) for e in snap.events),
        approvals=tuple(
            ar.ApprovalRecord(
                a.kind, a.bound_to, a.presented_at, a.approved_at, a.provenance, a.revoked_at
            )
            for a in snap.approvals
        ),
        presentations=tuple(
            ar.PresentationRecord(p.kind, p.bound_to, p.at) for p in snap.presentations
        ),
        agents=tuple(
            ar.AgentRecord(a.agent, a.initial, a.added_at_state, a.justification)
            for a in snap.agents
        ),
        commits=task_commits(ws, snap),
        task_md=_document(ws, docs, ws.task_md(t.name)),
        report_sizes={a: size(ws.report_path(t.name, a)) for a in t.required_agents},
        archival_sha=t.extra.get("archival_sha"),
        merged_sha=t.extra.get("merged_sha"),
        auto_approve_allowed=ws.config.protocol.allow_auto_approve,
    )


def render_text(audits: list[TaskAudit]) -> str:
    """Human output: one verdict per task, each failed check with evidence, fix and cause."""
    lines: list[str] = []
    for a in audits:
        failed = [c for c in a.checks if not c.passed]
        verdict = "PASSED" if a.passed else f"FAILED ({len(failed)} of {len(a.checks)} checks)"
        lines.append(f"audit {a.task} ({a.state}): {verdict}")
        for c in a.checks:
            lines.append(f"  {'PASS' if c.passed else 'FAIL'}  {c.id:<16} {c.title}")
            for f in c.findings:
                lines += [
                    f"        evidence:   {f.evidence}",
                    f"        fix:        {f.fix}",
                    f"        root cause: {f.root_cause}",
                ]
            lines += [f"        note: {n}" for n in c.notes]
    overall = all(a.passed for a in audits)
    if len(audits) != 1:
        lines.append(f"{len(audits)} task(s) audited: {'PASSED' if overall else 'FAILED'}")
    return "\n".join(lines) or "no tasks started yet"
