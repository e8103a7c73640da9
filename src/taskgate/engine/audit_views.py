"""The audit's checks of the views against the store (DESIGN.md State, C-03, C-04).

task.json, each agent's status.json, audit-trail.json, the approval flags and the task's
store-record.jsonl (engine/store_record.py) are renderings of the store: each is compared
with what the store renders now, never read back as truth and never repaired here (that is
`taskgate recover --repair`). A view the hooks left behind on purpose (issue 18: events
appended without rendering) is told apart from an edited one. Part of `taskgate audit`
(engine/audit.py); `taskgate recover` (engine/recover_diagnosis.py) reads `view_problems`.
"""

from __future__ import annotations

import json
from typing import Any

from taskgate.engine import store_record, views
from taskgate.engine.workspace import Workspace
from taskgate.fsutil import read_json
from taskgate.protocol import audit_records as ar
from taskgate.protocol.states import State
from taskgate.store.records import TaskSnapshot

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


def views_elsewhere(snap: TaskSnapshot) -> ar.CheckResult:
    """The views check of a task that ran on another machine (issue 20): a note, no finding."""
    return ar.CheckResult(
        "views", "the views match the store", ("DESIGN-State", "C-03", "C-04"), (),
        (f"'{snap.task.name}' ran on another machine: its views were rendered there, "
         "not here (the store is the truth; documents read from the shared remote)",),
    )  # fmt: skip
