"""The audit's checks of the hash chain: the trail is intact, and what a rebuild restored.

Each event's hash covers its content and the previous hash (DESIGN.md State, R-AUD-01);
after `taskgate recover --rebuild` (engine/rebuild.py) the recorded `recovery` events say
which events git's anchor proves, and what it does not prove stays a finding. The anchor
itself is checked by engine/anchor.py `check_anchor`. Part of `taskgate audit`
(engine/audit.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from taskgate.protocol import audit_records as ar
from taskgate.store.records import GENESIS_HASH, EventRow, TaskSnapshot, event_hash


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


def rebuild_events(snap: TaskSnapshot) -> list[Any]:
    """The task's `recovery` events of `recover --rebuild` (issue 16)."""
    return [
        e for e in snap.events if e.kind == "recovery" and e.payload.get("procedure") == "rebuild"
    ]


def check_rebuild(snap: TaskSnapshot) -> ar.CheckResult:
    """After `recover --rebuild` (engine/rebuild.py): what git could not prove stays a finding."""
    findings: list[ar.Finding] = []
    notes: list[str] = []
    name = snap.task.name
    for e in rebuild_events(snap):
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
