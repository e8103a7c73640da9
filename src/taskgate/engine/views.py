"""Views: the seeds' files rendered atomically from the store, never read back as truth.

Every view carries `_seq`, the store sequence of the task it reflects; a missing, stale or
corrupt view is re-rendered by the next command that touches the task. task.json and
audit-trail.json are rewritten by every step; an agent's status.json and the flags only when
their content changes (issue 18: most steps changed nothing in them but `_seq`), so theirs is
the sequence they were last rendered at, never above the task's (`settled`). The task's
store record (store-record.jsonl, what `recover --rebuild` restores from) is appended to,
a line per rendering (engine/store_record.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from taskgate import failpoints
from taskgate.engine import store_record
from taskgate.engine.workspace import Workspace
from taskgate.fsutil import atomic_write, read_json
from taskgate.json_lite import escape as _escape
from taskgate.json_lite import loads as _loads
from taskgate.store.event_log import count_of, of_kinds, select
from taskgate.store.records import TaskSnapshot
from taskgate.store.snapshot import file_key as snapshot_file_key
from taskgate.store.snapshot_splice import ascii_text

TYPE_CHECKING = False  # typing stays unimported on the command path (issue 18)
if TYPE_CHECKING:
    from typing import Any

VIEW_NOTE = (
    "view rendered from the taskgate store; editing it changes nothing (run taskgate status)"
)


def _write_view(path: Path, data: Any) -> None:
    """Views are rebuilt from the store, so they skip the fsync (atomic, not durable)."""
    atomic_write(path, pretty_json(data) + "\n", durable=False)


_CONSTANTS = {None: "null", True: "true", False: "false"}
_STR_KEYS = {str}
_TEMPLATES: dict[tuple[tuple[str, ...], str], str] = {}


def pretty_json(value: Any, indent: str = "\n") -> str:
    """Exactly `json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)`, about four
    times faster (issue 18: with indent, json falls back to its pure-Python encoder, and the
    audit trail of a task with 2,000 events was most of a step). Strings go through the C
    escaper; anything but exact str-keyed dicts, lists, str, int, bool and None is handed to
    json itself, re-indented (a raw newline in its output is always indentation)."""
    kind = type(value)
    if kind is dict:
        if not value:
            return "{}"
        keys = tuple(sorted(value)) if set(map(type, value)) == _STR_KEYS else None
        if keys is not None:
            # The text around the values, per key set and depth: audit trails and store
            # records repeat a few shapes thousands of times.
            template = _TEMPLATES.get((keys, indent))
            inner = indent + "  "
            if template is None:
                if len(_TEMPLATES) > 1024:
                    _TEMPLATES.clear()
                template = (
                    "{"
                    + ",".join(f"{inner}{_escape(k)}: ".replace("%", "%%") + "%s" for k in keys)
                    + indent
                    + "}"
                )
                _TEMPLATES[(keys, indent)] = template
            return template % tuple(
                [  # a str value inline: most of an audit trail's values
                    _escape(item) if type(item) is str else pretty_json(item, inner)
                    for item in map(value.__getitem__, keys)
                ]
            )
    elif kind is str:
        return _escape(value)
    elif kind is list:
        if not value:
            return "[]"
        inner = indent + "  "
        return "[" + ",".join([inner + pretty_json(v, inner) for v in value]) + indent + "]"
    elif value is None or kind is bool:
        return _CONSTANTS[value]
    elif kind is int:
        return int.__repr__(value)
    import json

    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
    return text.replace("\n", indent)


def _write_changed(path: Path, data: dict[str, Any]) -> None:
    """Write a view unless the file holds exactly this content at an earlier `_seq`."""
    try:
        old = path.read_text(encoding="utf-8")
        seq = _loads(old).get("_seq")
    except (OSError, ValueError, AttributeError):
        seq = None
    if (
        type(seq) is int
        and seq <= data["_seq"]
        and old == pretty_json({**data, "_seq": seq}) + "\n"
    ):
        return
    _write_view(path, data)


def settled(view: Any, expected: dict[str, Any]) -> dict[str, Any]:
    """`expected` as a view written only when its content changes holds it: an earlier `_seq`
    is no fault of its own (its content is compared); one above the store's still is."""
    seq = view.get("_seq") if isinstance(view, dict) else None
    if type(seq) is int and seq <= expected["_seq"]:
        return {**expected, "_seq": seq}
    return expected


def task_json(snap: TaskSnapshot) -> dict[str, Any]:
    """task.json in the seeds' shape (R-TRN-28, D-CKP-3) plus the sequence it reflects."""
    t = snap.task
    additions = [
        {
            "agent": a.agent,
            "added_at_state": a.added_at_state,
            "timestamp": a.added_at,
            "justification": a.justification,
        }
        for a in snap.agents
        if not a.initial
    ]
    data: dict[str, Any] = {
        "_seq": t.seq,
        # Events appended without a seq bump (a hook's tool_usage, setup notes) still make
        # the views stale: the count is compared too.
        "_events": len(snap.events),
        "_note": VIEW_NOTE,
        "session_id": t.session_id,
        "task_name": t.name,
        "state": t.state,
        "created_at": t.created_at,
        "updated_at": t.updated_at,
        "risk_level": t.risk_level,
        "change_type": t.change_type,
        "required_agents": list(t.required_agents),
        "agent_additions": additions,
        "transition_log": [
            {"from": r.source, "to": r.target, "timestamp": r.at}
            | ({"reason": r.reason} if r.reason else {})
            for r in snap.transitions
        ],
        "checkpoint": t.checkpoint,
        "lock": {
            "session_id": t.session_id,
            "host": t.host,
            "fence": t.fence,
            "owner_pid": t.owner_pid,
            "released_at": t.lock_released_at,
        },
    }
    if t.cleanup_timestamp:
        data["cleanup_timestamp"] = t.cleanup_timestamp
    if t.lock_released_at:
        data["lock_released_at"] = t.lock_released_at
    if t.classification:
        data["classification"] = t.classification
    # R-INT-10: the interruption log; its length is the interruption count.
    data["interruptions"] = [
        {"type": e.payload.get("type"), "timestamp": e.at}
        for e in of_kinds(snap.events, ("interruption",))
    ]
    return data


def status_json(snap: TaskSnapshot, agent: str) -> dict[str, Any]:
    """agents/A/status.json (R-AST-01): status, updated_at, error_message, retry_count, phase."""
    row = snap.agent(agent)
    data: dict[str, Any] = {"_seq": snap.task.seq, "_note": VIEW_NOTE, "agent": agent}
    if row is not None:
        data |= {
            "status": row.status,
            "phase": row.phase,
            "updated_at": row.updated_at,
            "retry_count": row.retry_count,
            "work_remaining": row.work_remaining,
        }
        if row.status == "ERROR":
            data["error_message"] = row.message or "Unknown"
        elif row.message:
            data["message"] = row.message
    return data


# The kinds audit_trail_json renders from every event (tool_usage: from `since` on).
_TRAIL_KINDS = ("transition", "agent_invoked", "agent_completed", "commit", "validation",
                "approval")  # fmt: skip


def audit_trail_json(snap: TaskSnapshot, since: int = 0) -> dict[str, Any]:
    """audit-trail.json (R-AUD-01/02/03/04) derived from the hash-chained events (`since`:
    the tool_usage entries of the events before it left out, see _write_trail)."""
    t = snap.task
    trail: dict[str, Any] = {
        "_seq": t.seq,
        "_note": VIEW_NOTE,
        "task_name": t.name,
        "session_id": t.session_id,
        "started_at": t.created_at,
        "state_transitions": [],
        "agent_invocations": [],
        "tool_usage": [],
        "commits": [],
        "build_verifications": [],
        "approvals": [],
        "events": len(snap.events),
        "chain_head": snap.events[-1].hash if snap.events else None,
    }
    running: dict[str, dict[str, Any] | None] = {}
    # The events of the sections' kinds, and the tool_usage ones from `since` on: what the
    # trail holds (issue 18: the others are not read from the store).
    for later, e in select(snap.events, _TRAIL_KINDS, since):
        p = e.payload
        if e.kind == "transition":
            trail["state_transitions"].append(
                {
                    "from_state": p.get("from"),
                    "to_state": p.get("to"),
                    "timestamp": e.at,
                    "verification_passed": True,
                }
            )
        elif e.kind == "agent_invoked":
            entry: dict[str, Any] = {
                "agent_name": p.get("agent"),
                "agent_mode": p.get("mode"),
                "working_dir": p.get("working_dir"),
                "invocation_timestamp": e.at,
                "status": "running",
            }
            running[str(p.get("agent"))] = entry
            trail["agent_invocations"].append(entry)
        elif e.kind == "agent_completed":
            done = running.pop(str(p.get("agent")), None) or {
                "agent_name": p.get("agent"),
                "agent_mode": p.get("mode"),
            }
            if done not in trail["agent_invocations"]:
                trail["agent_invocations"].append(done)
            done |= {
                "status": "completed",
                "completion_timestamp": e.at,
                "report_location": p.get("report"),
            }
        elif e.kind == "tool_usage":
            if later:
                trail["tool_usage"].append({"timestamp": e.at, **p})
        elif e.kind == "commit":
            trail["commits"].append({"timestamp": e.at, **p})
        elif e.kind == "validation":
            trail["build_verifications"].append({"timestamp": e.at, **p})
        elif e.kind == "approval":
            trail["approvals"].append({"timestamp": e.at, **p})
    return trail


# audit-trail.json's tool_usage: the last key, and most of the file for a long task (one entry
# per recorded tool call). A rendering reuses the entries of the file it wrote before when
# that file is provably that rendering: `.audit-trail.key` names it (device, inode, size and
# times, written after it: a crash between, or any write to the file since, does not match),
# and its "events" count and "chain_head" are the store's at that position, so the events it
# was rendered from are the store's (the hash chain binds every earlier one). Anything else
# renders it whole. The text is the same either way (tests/test_views_json.py).
TRAIL_KEY = ".audit-trail.key"
_TOOL_USAGE = b'\n  "tool_usage": '
_ENTRY = b"\n    {"


def _write_trail(task_dir: Path, snap: TaskSnapshot) -> None:
    path = task_dir / "audit-trail.json"
    key_path = task_dir / TRAIL_KEY
    reused = _reusable(path, key_path, snap)
    since, old = reused if reused is not None else (0, b"")
    trail = audit_trail_json(snap, since)
    atomic_write(path, trail_pieces(trail, old), durable=False)
    try:
        atomic_write(key_path, snapshot_file_key(path.stat()), durable=False)
    except OSError:
        key_path.unlink(missing_ok=True)


def trail_text(trail: dict[str, Any], old: bytes | memoryview = b"") -> bytes:
    """(pretty_json(trail) + "\n") in UTF-8, `old` being the text of the tool_usage entries
    rendered before the ones `trail` holds (each "\n    {...}", joined by commas)."""
    return b"".join(trail_pieces(trail, old))


def trail_pieces(trail: dict[str, Any], old: bytes | memoryview = b"") -> list[bytes | memoryview]:
    """trail_text in pieces, `old` not copied (issue 18: at 2,000 events it is most of the
    file, and every copy of it cost more than writing it)."""
    entries = trail.pop("tool_usage")
    head = pretty_json({**trail, "tool_usage": []})
    trail["tool_usage"] = entries
    assert head.endswith('"tool_usage": []\n}')  # the last key: see _TOOL_USAGE
    new = ",".join(["\n    " + pretty_json(entry, "\n    ") for entry in entries]).encode()
    if not old and not new:
        return [head[:-4].encode() + b"[]\n}\n"]
    return [head[:-4].encode() + b"[", old, b"," if old and new else b"", new, b"\n  ]\n}\n"]


_EMPTY = b"[]\n}\n"
_FIRST, _LAST = b"[" + _ENTRY, b"\n  ]\n}\n"


def _reusable(
    path: Path, key_path: Path, snap: TaskSnapshot
) -> tuple[int, bytes | memoryview] | None:
    """(events it covers, its tool_usage entries' text) of the audit-trail.json written
    before, when it is provably the rendering of the store's first events; else None."""
    try:
        key = ascii_text(key_path.read_bytes())  # as read_text(encoding="ascii") reads it
        with open(path, "rb") as handle:  # the key of the file read, not of a path
            if key != snapshot_file_key(os.fstat(handle.fileno())):
                return None
            text = handle.read()
    except (OSError, UnicodeDecodeError):
        return None
    at = text.rfind(_TOOL_USAGE)
    count, head = _top_int(text, "events"), _top_str(text, "chain_head")
    if at < 0 or count is None or not 0 < count <= len(snap.events):
        return None
    if head != snap.events[count - 1].hash:
        return None
    start = at + len(_TOOL_USAGE)  # the section: text[start:], "[...]\n}\n"
    if len(text) - start == len(_EMPTY) and text.endswith(_EMPTY):
        low = high = start
    elif text.startswith(_FIRST, start) and text.endswith(_LAST):
        low, high = start + 1, len(text) - len(_LAST)
    else:
        return None
    used = count_of(snap.events, "tool_usage", count)
    if (text.count(_ENTRY, low, high) if high > low else 0) != used:
        return None
    return count, memoryview(text)[low:high]


def _top_int(text: bytes, key: str) -> int | None:
    at = text.find(f'\n  "{key}": '.encode())
    if at < 0:
        return None
    value = text[at + len(key) + 7 : text.find(b"\n", at + 1)].rstrip(b",")
    return int(value) if value.isdigit() else None


def _top_str(text: bytes, key: str) -> str | None:
    at = text.find(f'\n  "{key}": "'.encode())
    if at < 0:
        return None
    start = at + len(key) + 8
    end = text.find(b'"', start)
    return text[start:end].decode("ascii", "replace") if end > start else None


def _flag_states(snap: TaskSnapshot) -> dict[str, bool]:
    """Which flag views must exist: approvals that hold in the store (C-03, C-04)."""
    return {
        "plan": snap.active_approval("plan") is not None,
        "changes": snap.active_approval("changes") is not None
        and bool((snap.task.checkpoint or {}).get("approved")),
        "archival": bool(snap.task.extra.get("archival_sha")),
    }


def view_seq(ws: Workspace, task: str) -> int | None:
    """The store sequence task.json was rendered at, None when missing or unreadable."""
    data = read_json(ws.task_dir(task) / "task.json")
    seq = data.get("_seq") if isinstance(data, dict) else None
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else None


def view_is_current(ws: Workspace, snap: TaskSnapshot) -> bool:
    """True when task.json reflects the store's sequence and every flag matches the store."""
    data = read_json(ws.task_dir(snap.task.name) / "task.json")
    if not isinstance(data, dict) or data.get("_seq") != snap.task.seq:
        return False
    if data.get("_events") != len(snap.events):
        return False
    return all(
        ws.flag(snap.task.name, kind).exists() == wanted
        for kind, wanted in _flag_states(snap).items()
    )


def render(ws: Workspace, snap: TaskSnapshot) -> None:
    """Write every view of the task atomically (task.json last, so its _seq marks completion)."""
    name = snap.task.name
    rendered = view_seq(ws, name)
    if rendered is not None and rendered > snap.task.seq:
        return  # a newer step rendered them already: never render backwards
    task_dir = ws.task_dir(name)
    task_dir.mkdir(parents=True, exist_ok=True)
    for agent in snap.task.required_agents:
        _write_changed(ws.agent_dir(name, agent) / "status.json", status_json(snap, agent))
    # What `recover --rebuild` restores from: appended, not rewritten (engine/store_record.py).
    store_record.render(task_dir, snap)
    _write_trail(task_dir, snap)
    failpoints.hit("views:mid")
    wanted = _flag_states(snap)
    for kind in ("plan", "changes"):
        path = ws.flag(name, kind)
        approval = snap.active_approval(kind)
        if not wanted[kind] or approval is None:
            path.unlink(missing_ok=True)
        else:
            _write_changed(
                path,
                {
                    "_seq": snap.task.seq,
                    "_note": VIEW_NOTE,
                    "bound_to": approval.bound_to,
                    "approved_at": approval.approved_at,
                    "provenance": approval.provenance,
                },
            )
    archival = ws.flag(name, "archival")
    if snap.task.extra.get("archival_sha"):
        _write_changed(archival, {"_seq": snap.task.seq, "sha": snap.task.extra["archival_sha"]})
    else:
        archival.unlink(missing_ok=True)
    _write_view(task_dir / "task.json", task_json(snap))


def ensure_current(ws: Workspace, snap: TaskSnapshot) -> bool:
    """Re-render the views when stale or missing; True when it rendered."""
    if view_is_current(ws, snap):
        return False
    render(ws, snap)
    return True
