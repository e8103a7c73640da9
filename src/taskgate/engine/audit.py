"""`taskgate audit`: compliance checks that never change anything (R-AUD-12).

The store is opened read-only (SQLite refuses writes on the connection), views are read and
compared but never re-rendered, and git is only queried. Everything found is reported as a
discrepancy with its evidence and fix; repairs are `taskgate recover`'s job.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from taskgate.engine import guard_trail, store_record, views
from taskgate.engine.anchor import check_anchor
from taskgate.engine.core import Engine, check_history
from taskgate.engine.workspace import Workspace, require_initialized
from taskgate.errors import Corrupted, UsageError
from taskgate.fsutil import file_size, read_json, read_text
from taskgate.git import repo as gitrepo
from taskgate.git.cmd import git, ok
from taskgate.protocol import audit_checks as ac
from taskgate.protocol import audit_records as ar
from taskgate.protocol.states import State
from taskgate.store.base import StoreCorrupt
from taskgate.store.records import GENESIS_HASH, EventRow, TaskSnapshot, event_hash
from taskgate.store.select import open_store

_DONE = (State.COMPLETE.value, State.CLEANUP.value)


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
        check_views(ws, snap) if docs is None else _views_elsewhere(snap),
        check_git(ws, snap),
        check_anchor(ws, snap),  # engine/anchor.py (issue 14)
        guard_trail.check_guards(snap.events, guard_trail.linked(snap, repository)),
    ]
    if any(_rebuilds(snap)):  # issue 16: the store was rebuilt from the views
        checks.append(check_rebuild(snap))
    return TaskAudit(snap.task.name, snap.task.state, tuple(checks))


def _views_elsewhere(snap: TaskSnapshot) -> ar.CheckResult:
    return ar.CheckResult(
        "views", "the views match the store", ("DESIGN-State", "C-03", "C-04"), (),
        (f"'{snap.task.name}' ran on another machine: its views were rendered there, "
         "not here (the store is the truth; documents read from the shared remote)",),
    )  # fmt: skip


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


def task_commits(ws: Workspace, snap: TaskSnapshot) -> tuple[ar.Commit, ...] | None:
    """Commits on branch T since the base (None when the branch or base is gone)."""
    t = snap.task
    if t.extra.get("squash_sha") or t.state in _DONE or not t.base_sha:
        return None  # completion squashed T into one commit: agent tags are gone by design
    if not gitrepo.branch_exists(ws.repo, t.name):
        return None
    result = git(
        "log",
        "--format=%x1e%H%x1f%P%x1f%B%x1f",
        "--name-only",
        f"{t.base_sha}..refs/heads/{t.name}",
        cwd=ws.repo,
        check=False,
    )
    if not result.ok:
        return None
    commits = []
    for record in result.stdout.split("\x1e")[1:]:
        sha, parents, message, files = [*record.split("\x1f"), "", "", ""][:4]
        commits.append(
            ar.Commit(
                sha.strip(),
                message.strip(),
                tuple(line for line in files.splitlines() if line.strip()),
                merge=len(parents.split()) > 1,
            )
        )
    return tuple(commits)


# -- engine-level checks -----------------------------------------------------------------------


def check_hash_chain(snap: TaskSnapshot) -> ar.CheckResult:
    """Each event's hash covers its content and the previous hash (DESIGN.md State)."""
    return ar.CheckResult(
        "hash-chain",
        f"the audit trail's hash chain is intact ({len(snap.events)} events)",
        ("R-AUD-01", "R-AUD-12"),
        tuple(chain_findings(snap.task.name, snap.events)),
    )


def chain_findings(name: str, events: Sequence[EventRow]) -> list[ar.Finding]:
    """Events that do not follow their predecessor or whose hash does not match."""
    findings: list[ar.Finding] = []
    fix = f"restore the store from a backup; run 'taskgate recover {name}'"
    cause = "audit events were edited or deleted directly in the store (they are append-only)"
    previous = GENESIS_HASH
    previous_seq: int | None = None
    for e in events:
        label = f"event #{e.seq} ({e.kind} at {e.at})"
        if e.prev_hash != previous:
            after = f"event #{previous_seq}" if previous_seq is not None else "the chain's start"
            findings.append(
                ar.Finding(
                    f"{label} does not follow {after}: its prev_hash {e.prev_hash[:12]} != "
                    f"{previous[:12]} (an event was deleted or reordered)",
                    fix,
                    cause,
                )
            )
        if event_hash(e.prev_hash, e.task, e.at, e.kind, e.payload) != e.hash:
            findings.append(
                ar.Finding(
                    f"{label}: the stored hash does not match its content (the event was edited)",
                    fix,
                    cause,
                )
            )
        previous, previous_seq = e.hash, e.seq
    return findings


# What appending events without rendering (the hooks, issue 18: hooks/quick.py) changes in
# each view: a view behind the store (an older sequence, or the same one with fewer events)
# that differs only there (tool_usage: the view's entries are the first of the store's) is
# rendered lazily, by the next command that reads the task, not edited. Any other difference
# is still reported.
_LAZY = {
    # interruptions: the prompt hook's (hooks/prompt.py) appends, a prefix like tool_usage.
    "task.json": frozenset({"_events", "updated_at", "interruptions"}),
    "audit-trail.json": frozenset({"events", "chain_head", "tool_usage", "store_record"}),
}


def _lazily_stale(name: str, view: dict[str, Any], expected: dict[str, Any]) -> bool:
    seq, now = view.get("_seq"), expected.get("_seq")
    if not (isinstance(seq, int) and isinstance(now, int) and seq <= now):
        return False
    if seq == now:  # events appended without a sequence bump (SubagentStop, SessionEnd)
        key = "_events" if "_events" in expected else "events"
        count, wanted = view.get(key), expected.get(key)
        if not (isinstance(count, int) and isinstance(wanted, int) and count < wanted):
            return False
    lazy = _LAZY.get(name.rsplit("/", 1)[-1], frozenset())
    for key in (set(view) | set(expected)) - {"_note", "_seq"}:
        was, wanted = view.get(key), expected.get(key)
        if was == wanted:
            continue
        if key not in lazy:
            return False
        if key in ("tool_usage", "interruptions") and not (
            isinstance(was, list) and isinstance(wanted, list) and wanted[: len(was)] == was
        ):
            return False
        if key == "store_record" and not _record_grew(was, wanted):
            return False
    return True


def _record_grew(was: Any, wanted: Any) -> bool:
    """The view's store record (engine/views.py) is the store's but for appended events and
    the task row's seq and updated_at: what the PostToolUse hook's appends change."""
    if not (isinstance(was, dict) and isinstance(wanted, dict) and set(was) == set(wanted)):
        return False
    for key in wanted:
        old, new = was[key], wanted[key]
        if key == "events":
            if not (isinstance(old, list) and isinstance(new, list) and new[: len(old)] == old):
                return False
        elif key == "task":
            if not (isinstance(old, dict) and isinstance(new, dict)):
                return False
            moved = {k for k in set(old) | set(new) if old.get(k) != new.get(k)}
            if not moved <= {"seq", "updated_at"}:
                return False
        elif old != new:
            return False
    return True


def _rebuilds(snap: TaskSnapshot) -> list[Any]:
    return [
        e for e in snap.events if e.kind == "recovery" and e.payload.get("procedure") == "rebuild"
    ]


def check_rebuild(snap: TaskSnapshot) -> ar.CheckResult:
    """After `recover --rebuild` (engine/rebuild.py): what git could not prove stays a finding."""
    findings: list[ar.Finding] = []
    notes: list[str] = []
    name = snap.task.name
    for e in _rebuilds(snap):
        p = e.payload
        unproven = [s for s in p.get("unproven_events") or [] if isinstance(s, int)]
        problems = [str(x) for x in p.get("problems") or []]
        when = f"the store was rebuilt from the views at {e.at} (event #{e.seq})"
        if unproven:
            anchored = p.get("anchored_event")
            after = f"after the last git anchor (#{anchored})" if anchored else "with no git anchor"
            findings.append(
                ar.Finding(
                    f"{when}: events #{unproven[0]}..#{unproven[-1]} ({len(unproven)}) came "
                    f"only from the views, {after}; nothing outside the store proves them",
                    f"check them against the task's commits and what you approved ('taskgate "
                    f"status {name}'); a backup of state.db is the only proof. The damaged "
                    f"store is kept in {p.get('store_kept')}",
                    "the store lost committed steps (a lost WAL, a deleted or emptied state.db)",
                )
            )
        findings += [
            ar.Finding(
                f"{when}: {problem}",
                "see 'taskgate recover --rebuild --json' output recorded in this event",
                "the store lost committed steps",
            )
            for problem in problems
            if not unproven or "anchor" not in problem
        ]
        if not unproven and not problems:
            notes.append(f"{when}; every event is proven against the git anchor "
                         f"#{p.get('anchored_event')}")  # fmt: skip
    return ar.CheckResult(
        "rebuild",
        "a store rebuilt from the views holds only what git proves",
        ("R-AUD-01", "R-REC-12"),
        tuple(findings),
        tuple(notes),
    )


def _differences(name: str, view: Any, expected: dict[str, Any]) -> list[str]:
    if view is None:
        return [f"{name} is missing or does not parse"]
    if not isinstance(view, dict):
        return [f"{name} is not a JSON object"]
    if _lazily_stale(name, view, expected):
        return []
    if view.get("_seq") != expected.get("_seq"):
        stale = [
            f"{name} is stale: it reflects _seq {view.get('_seq')}, the store is at "
            f"{expected.get('_seq')}"
        ]
    else:
        stale = []
    keys = sorted((set(view) | set(expected)) - {"_note", "_seq"})
    diffs = [
        f"{name}: {key!r} is {_short(view.get(key))} in the view but {_short(expected.get(key))} "
        "in the store"
        for key in keys
        if view.get(key) != expected.get(key)
    ]
    return stale + diffs


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def view_problems(ws: Workspace, snap: TaskSnapshot) -> list[str]:
    """Every way the views disagree with the store (task.json, status.json, trail, flags)."""
    name = snap.task.name
    task_dir = ws.task_dir(name)
    if snap.task.state == State.CLEANUP.value and not task_dir.exists():
        return []  # the task directory may go with the worktrees at cleanup
    problems = _differences("task.json", read_json(task_dir / "task.json"), views.task_json(snap))
    for agent in snap.task.required_agents:
        view = read_json(ws.agent_dir(name, agent) / "status.json")
        # Rewritten only when its content changes (issue 18): an earlier _seq is current.
        expected = views.settled(view, views.status_json(snap, agent))
        problems += _differences(f"agents/{agent}/status.json", view, expected)
    trail = read_json(task_dir / "audit-trail.json")
    expected_trail = views.audit_trail_json(snap)
    record = store_record.whole(snap)
    old_record = trail.pop("store_record", None) if isinstance(trail, dict) else None
    if old_record is not None and old_record != record and not _record_grew(old_record, record):
        trail["store_record"] = old_record  # a taskgate before store-record.jsonl: compared
        expected_trail["store_record"] = record
    problems += _differences("audit-trail.json", trail, expected_trail)
    problems += record_problems(ws, snap, old_record is not None)
    # Flags are views of active approvals (C-03, C-04): one that exists without an approval
    # in the store approves nothing, and is exactly what an agent touching a flag leaves.
    for kind, wanted in views._flag_states(snap).items():
        path = ws.flag(name, kind)
        if path.exists() and not wanted:
            problems.append(
                f"{path.name} exists but the store holds no active {kind} record "
                "(touching a flag approves nothing)"
            )
        elif wanted and not path.exists():
            problems.append(
                f"{path.name} is missing although the store holds an active {kind} record"
            )
    return problems


def record_problems(ws: Workspace, snap: TaskSnapshot, in_trail: bool = False) -> list[str]:
    """How the task's store-record.jsonl (engine/store_record.py) disagrees with the store:
    lines that do not verify, or rows that differ beyond what the hooks' appends explain
    (`in_trail`: an older taskgate kept the record in audit-trail.json instead)."""
    path = ws.task_dir(snap.task.name) / store_record.FILE_NAME
    got = store_record.replay(path)
    if got is None:
        return [] if in_trail else [f"{store_record.FILE_NAME} is missing"]
    found = list(got.damage)
    if got.record is None:
        return found
    wanted = json.loads(json.dumps(store_record.whole(snap)))  # tuples as the file has them
    if got.record == wanted or _record_grew(got.record, wanted):
        return found
    return found + [
        f"{store_record.FILE_NAME}: {key!r} is {_short(got.record.get(key))} in the view but "
        f"{_short(wanted.get(key))} in the store"
        for key in sorted(set(wanted) | set(got.record))
        if got.record.get(key) != wanted.get(key)
    ]


def check_views(ws: Workspace, snap: TaskSnapshot) -> ar.CheckResult:
    """The views agree with the store; disagreements are reported, never repaired here."""
    findings = [
        ar.Finding(
            problem,
            f"run 'taskgate recover {snap.task.name} --repair' (re-renders the views)",
            "a view was edited, touched or deleted outside taskgate, or a process died between "
            "committing and rendering; views are never read back as truth",
        )
        for problem in view_problems(ws, snap)
    ]
    return ar.CheckResult(
        "views", "the views match the store", ("DESIGN-State", "C-03", "C-04"), tuple(findings)
    )


def _is_ancestor(ws: Workspace, sha: str, ref: str) -> bool:
    return ok("merge-base", "--is-ancestor", sha, ref, cwd=ws.repo)


def git_problems(ws: Workspace, snap: TaskSnapshot) -> list[tuple[str, str]]:
    """(evidence, fix) for each way git disagrees with the record."""
    t = snap.task
    name = t.name
    problems: list[tuple[str, str]] = []
    recover = f"run 'taskgate recover {name} --repair'"
    if t.pending:
        problems.append(
            (
                f"the journaled step {t.pending.get('op')!r} was interrupted "
                "(pending in the task row)",
                recover,
            )
        )
    if t.state in _DONE:
        merged = t.extra.get("merged_sha")
        if not merged:
            problems.append(
                (
                    f"the task is {t.state} but no merged commit is recorded (R-CMP-06)",
                    "complete the task with 'taskgate complete'",
                )
            )
        elif not _is_ancestor(ws, str(merged), f"refs/heads/{t.base_branch}"):
            problems.append(
                (
                    f"the merged commit {str(merged)[:12]} is not on "
                    f"{t.base_branch}: the main branch was rewritten",
                    "restore the main branch from its reflog",
                )
            )
        return problems
    branches = [name] + [f"{name}-{a}" for a in t.required_agents]
    agents_ready = t.state != State.INIT.value and (t.pending or {}).get("op") != (
        "create_agent_worktrees"
    )
    if (t.pending or {}).get("op") == "create_task_worktree":
        return problems
    if not agents_ready:
        branches = branches[:1]
    missing = [b for b in branches if not gitrepo.branch_exists(ws.repo, b)]
    for b in missing:
        problems.append(
            (
                f"branch {b} is missing (R-WTB-01, R-WTB-02)",
                "restore it from the reflog (git branch <name> <sha>); taskgate never "
                "fabricates a branch (R-REC-11)",
            )
        )
    if not t.released:
        worktrees = {p.resolve(): b for p, b in gitrepo.worktree_paths(ws.repo).items()}
        expected = [(ws.task_worktree(name), name)]
        if agents_ready:
            expected += [(ws.agent_worktree(name, a), f"{name}-{a}") for a in t.required_agents]
        for path, branch in expected:
            actual = worktrees.get(path.resolve(), "<none>") if path.exists() else "<none>"
            if actual == "<none>":
                problems.append((f"worktree {path} is missing (R-WTB-01)", recover))
            elif actual != branch:
                problems.append(
                    (
                        f"worktree {path} is on {actual or 'a detached HEAD'}, not {branch}",
                        f"git -C {path} checkout {branch}",
                    )
                )
    if name in missing or t.extra.get("squash_sha"):
        return problems  # after the squash (R-CMP-01) the recorded commits are replaced
    recorded: dict[str, str] = {}
    if t.base_sha:
        recorded.setdefault(t.base_sha, "the base commit")
    for v in snap.validations:
        recorded.setdefault(v.head_sha, f"the commit validated at {v.at}")
    for d in snap.verdicts:
        recorded.setdefault(d.head_sha, f"the commit {d.agent} reviewed at {d.at}")
    for a in snap.approvals:
        if a.kind == "changes" and a.revoked_at is None:
            recorded.setdefault(a.bound_to, f"the commit approved at {a.approved_at}")
    sha = (t.checkpoint or {}).get("commit_sha")
    if sha:
        recorded.setdefault(str(sha), "the checkpoint commit")
    for sha, what in recorded.items():
        if sha and not _is_ancestor(ws, sha, f"refs/heads/{name}"):
            problems.append(
                (
                    f"{what} ({sha[:12]}) is no longer on branch {name}: the branch "
                    "was rewritten behind taskgate's back",
                    f"restore branch {name} from its reflog (git -C "
                    f"{ws.task_worktree(name)} reset --hard {sha[:12]}) or validate, "
                    "review and present the new history again",
                )
            )
    return problems


def check_git(ws: Workspace, snap: TaskSnapshot) -> ar.CheckResult:
    """Branches, worktrees and recorded commits agree with the repository."""
    findings = [
        ar.Finding(
            evidence,
            fix,
            "git was changed outside taskgate (reset, rebase, branch or worktree removal) or a "
            "journaled step was interrupted",
        )
        for evidence, fix in git_problems(ws, snap)
    ]
    return ar.CheckResult(
        "git",
        "git matches the record (branches, worktrees, recorded and merged commits)",
        ("R-WTB-01", "R-WTB-02", "R-CMP-06", "R-REC-11"),
        tuple(findings),
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
