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

from taskgate.engine.core import Engine
from taskgate.engine.workspace import Workspace
from taskgate.errors import GitError
from taskgate.git.cmd import git
from taskgate.protocol import audit_records as ar
from taskgate.store.records import TaskSnapshot

REF_PREFIX = "refs/taskgate/audit/"
_MAGIC = "taskgate audit anchor"
# Anchor commits carry no files: the empty tree of each object format.
_EMPTY_TREE = {
    "sha1": "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
    "sha256": "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321",
}
_IDENTITY = {
    "GIT_AUTHOR_NAME": "taskgate",
    "GIT_AUTHOR_EMAIL": "taskgate@localhost",
    "GIT_COMMITTER_NAME": "taskgate",
    "GIT_COMMITTER_EMAIL": "taskgate@localhost",
}


def ref(task: str) -> str:
    """The anchor's ref for `task`."""
    return REF_PREFIX + task


def anchor(engine: Engine, task: str) -> None:
    """Add a commit naming the task's audit chain head to its anchor history."""
    snap = engine.snapshot(task)
    if snap is None or not snap.events:
        return
    last = snap.events[-1]
    text = f"{_MAGIC}\n\ntask {task}\nseq {last.seq}\nhash {last.hash}\nat {last.at}\n"
    repo = engine.ws.repo
    name = ref(task)
    try:
        out = git("rev-parse", "--show-object-format", "-q", "--verify", f"{name}^{{commit}}",
                  cwd=repo, check=False).stdout.split()  # fmt: skip
        parent = out[1] if len(out) > 1 else ""
        tree = _EMPTY_TREE.get(out[0] if out else "", "")
        if not parent or not tree:  # the first anchor writes the (empty) tree it uses
            tree = git("mktree", stdin="", cwd=repo).stdout.strip()
        cmd = ["commit-tree", tree, "-m", text, *(["-p", parent] if parent else [])]
        commit = git(*cmd, cwd=repo, env=_IDENTITY).stdout.strip()
        message = f"taskgate: audit anchor #{last.seq}"
        git("update-ref", "-m", message, name, commit, parent, cwd=repo)  # compare-and-swap
    except GitError:
        pass  # the step is committed; audit reports the stale or missing anchor


def read_anchor(ws: Workspace, task: str) -> tuple[int, str] | None:
    """(seq, hash) the task's anchor names, None when there is none or it does not parse."""
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
