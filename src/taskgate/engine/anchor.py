"""The head of a task's audit chain, anchored in git at every checkpoint (issue 14, DESIGN.md
Trust: tamper evidence beyond the store).

The events are hash-chained, so an edit in the middle of the trail is found; but a program
that can write the store can also recompute every hash after its edit. So at each checkpoint
(a presentation, an approval, a person's message) taskgate adds a commit (no files; its
message names the last event's seq and hash) to `refs/taskgate/audit/<task>`: `git log` on
that ref lists every anchored head. A confined agent cannot move that ref (its refs are a
private copy, agents/gitshadow.py); `audit` requires the store's trail to contain the
anchored event, exactly. An anchor that cannot be written never
fails the checkpoint (the step is already committed); `audit` says the anchor is missing.
"""

from __future__ import annotations

# The writing side (issue 18: the prompt hook imports it without the engine package).
from taskgate.anchor_write import _EMPTY_TREE as _EMPTY_TREE
from taskgate.anchor_write import _MAGIC as _MAGIC
from taskgate.anchor_write import REF_PREFIX as REF_PREFIX
from taskgate.anchor_write import ref as ref
from taskgate.anchor_write import write as write

TYPE_CHECKING = False
if TYPE_CHECKING:
    from taskgate.engine.core import Engine
    from taskgate.engine.workspace import Workspace
    from taskgate.protocol import audit_records as ar
    from taskgate.store.records import TaskSnapshot


def anchor(engine: Engine, task: str) -> None:
    """Add a commit naming the task's audit chain head to its anchor history."""
    engine.flush_views()  # the views' store record holds the anchored head (engine/rebuild.py)
    snap = engine.snapshot(task)
    if snap is None or not snap.events:
        return
    last = snap.events[-1]
    write(engine.ws.repo, engine.ws.common_dir, task, last.seq, last.hash, last.at)


def read_anchor(ws: Workspace, task: str) -> tuple[int, str] | None:
    """(seq, hash) the task's anchor names, None when there is none or it does not parse."""
    from taskgate.git.cmd import git

    out = git("log", "-1", "--format=%B", ref(task), "--", cwd=ws.repo, check=False)
    if not out.ok or not out.stdout.startswith(_MAGIC):
        return None
    fields = dict(line.split(" ", 1) for line in out.stdout.splitlines()[1:] if " " in line)
    try:
        return int(fields["seq"]), fields["hash"]
    except (KeyError, ValueError):
        return None


def check_anchor(ws: Workspace, snap: TaskSnapshot) -> ar.CheckResult:
    """The store's trail contains the event anchored in git at the last checkpoint."""
    from taskgate.protocol import audit_records as ar

    task = snap.task.name
    found: list[ar.Finding] = []
    notes: list[str] = []
    anchored = read_anchor(ws, task)
    if anchored is None:
        notes.append(f"no anchor in git ({ref(task)}): none is written before a checkpoint")
    else:
        seq, digest = anchored
        match = [e for e in snap.events if e.seq == seq]
        if not match or match[0].hash != digest:
            what = "holds another event there" if match else "has no such event"
            found.append(
                ar.Finding(
                    f"git anchors event #{seq} ({digest[:12]}) in {ref(task)}, but the store "
                    f"{what}: the audit trail was rewritten after that checkpoint",
                    f"restore .taskgate/state.db from a backup; run 'taskgate recover {task}'",
                    "the store was written behind taskgate's back (hashes recomputed)",
                )
            )
    return ar.CheckResult(
        "anchor",
        "the audit trail contains the head anchored in git at the last checkpoint",
        ("R-AUD-01", "R-CKP-02"),
        tuple(found),
        tuple(notes),
    )
