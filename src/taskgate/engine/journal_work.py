"""The git work a journaled command did on its task branch, told from the journal (issue 15).

`taskgate merge` and `taskgate complete` record their intent in the task row (`pending`)
before their git work and close it after. A kill in between leaves taskgate's own work on T
(a merge of an agent branch; the archival edit or commit; T moved to the squash) that the
last baseline of a guarded session (hooks/effects.py) does not have. The effect check asks
here whether what it found is that work (hooks/quarantine.py `own_work`, before every
judgement), so it is taken into the baseline instead of being judged as the main agent's, by
the killed call's own PostToolUse and by the resumed command's first comparison
(`compare_first`) alike. Only what the command itself makes is explained:

- merge: every commit in `old..new` is on a journaled agent's branch, or a two-parent merge
  `taskgate: merge T-A into T` of such a branch whose tree is what `git merge-tree` makes of
  its parents (a hand-made commit under that subject with other content is not explained);
  `old` is an ancestor of `new`, and the journal's `before` of `old`. With the journal closed
  (a kill after the last step committed, before the new baseline), HEAD moved forward to
  exactly the head the last `agent_merge` event recorded.
- complete: `new` is the archival commit on the approved one (subject `[agent:main] archive`,
  touching only todo.md and changelog.md), or the squash (main's journaled commit as its only
  parent, the archival commit's tree), reached from `old` in that order; before the archival
  commit, todo.md and changelog.md holding exactly the text `complete` writes.

Everything else a comparison finds (other files, the index, untracked and ignored files, refs)
is judged as before.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from taskgate.engine.complete_archive import ARCHIVE_SUBJECT
from taskgate.errors import TaskgateError

Runner = Callable[[list[str], str], tuple[int, bytes]]
OPS = ("merge", "complete")
MAX_COMMITS = 500  # beyond, not explained (the comparison judges it)


def explains(
    run: Runner,
    worktree: str,
    task: str,
    pending: dict[str, Any],
    old: str,
    new: str,
    archive_paths: tuple[str, ...] = ("todo.md", "changelog.md"),
) -> bool:
    """Whether T's HEAD moving from `old` to `new` is the git work `pending` journals."""
    if old == new:
        return True
    if not (_sha(old) and _sha(new)):
        return False
    op = pending.get("op")
    if op == "merge":
        return _merge(run, worktree, task, pending, old, new)
    if op == "complete":
        return _complete(run, worktree, pending, old, new, archive_paths)
    return False


def own_baseline(
    engine: Any, worktree: str, base: dict[str, Any], pending: dict[str, Any], recorded: str
) -> dict[str, Any]:
    """`base` (a guarded baseline of `worktree`) with what `pending` explains taken in: HEAD
    moved by the command's own commits, or (complete) its archival edit written but not yet
    committed; with the journal closed, HEAD moved to the head the last `agent_merge`
    recorded. `base` itself when nothing is explained."""
    from taskgate.hooks.effects import run_git

    tree: dict[str, Any] = base["tree"]
    code, out = run_git(["rev-parse", "-q", "--verify", "HEAD"], worktree)
    head, old = (out.decode().strip() if code == 0 else ""), str(tree.get("head"))
    if not head:
        return base
    if head == old:
        found = _archival_in_flight(engine, worktree, base, pending) if pending else None
        return base if found is None else {**base, "tree": found}
    ws = engine.ws.config.workspace
    paths = (ws.todo, ws.changelog)
    if not (
        explains(run_git, worktree, str(base["task"]), pending, old, head, paths)
        if pending
        else _recorded(run_git, worktree, old, head, recorded)
    ):
        return base
    return {**base, "tree": {**tree, "head": head}}


def _archival_in_flight(
    engine: Any, worktree: str, base: dict[str, Any], pending: dict[str, Any]
) -> dict[str, Any] | None:
    """The baseline's tree with the archival edit a killed `complete` wrote (or staged) on the
    approved commit taken in, when the worktree differs from `base` in exactly that: todo.md
    and changelog.md holding, in the index and on disk, either the approved commit's text or
    the text `complete` writes (engine/complete_archive.archival_edits, from the approved
    commit and the journal's start time). None when anything else differs."""
    import hashlib

    from taskgate.engine.complete_archive import archival_edits
    from taskgate.hooks import effects

    tree: dict[str, Any] = base["tree"]
    approved = str(pending.get("approved_sha") or "")
    if pending.get("op") != "complete" or pending.get("archival_sha") or tree["head"] != approved:
        return None
    now = effects.worktree_print(worktree, tree.get("ignore"))
    if now is None or now["branch"] != tree["branch"]:
        return None
    changed = effects.differences({**base, "refs": {}}, now, {})
    if not changed:
        return None
    try:
        edits = archival_edits(engine, engine.require_snapshot(str(base["task"])), approved)
    except (TaskgateError, OSError):
        return None  # not told apart: judged as found
    if any(line.partition(": ")[0] not in edits for line in changed):
        return None
    entries = {effects._path(e): e for e in now["entries"]}

    def blob(text: str) -> str:
        data = text.encode("utf-8")
        return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()

    for path in {line.partition(": ")[0] for line in changed}:
        entry, want = entries.get(path), blob(edits[path])
        if entry is None:
            return None
        if entry[0] == "?":
            ok = now["hashes"].get(path) == want
        elif entry[0] == "1":
            fields = entry.split(" ", 8)
            xy, in_head, in_index = fields[1], fields[6], fields[7]
            on_disk = now["hashes"].get(path) if xy[1] != "." else in_index
            ok = in_index in (in_head, want) and on_disk == want
        else:
            ok = False
        if not ok:
            return None
    effects._store_blobs(worktree, [p for p, h in now["hashes"].items() if len(h) == 40])
    return {**tree, "entries": now["entries"], "hashes": now["hashes"]}


def _recorded(run: Runner, worktree: str, old: str, new: str, head: str) -> bool:
    """Whether HEAD moving forward from `old` to `new` ends at `head`, the commit the task's
    last `agent_merge` event recorded: a merge killed after its last step committed (journal
    closed), before it took the new baseline."""
    return (
        _sha(old)
        and new == head
        and _sha(new)
        and _ok(run, worktree, "merge-base", "--is-ancestor", old, new)
    )


def running_path(state_dir: object, task: str) -> str:
    """The file `taskgate merge`/`complete` hold a shared lock on while they run
    (`running`); the kernel releases it when the process dies."""
    return os.path.join(str(state_dir), "effects", f".running-{task}")


def command_running(state_dir: object, task: str) -> bool:
    """Whether a `taskgate merge`/`complete` on `task` holds its lock now."""
    import fcntl

    try:
        fd = os.open(running_path(state_dir, task), os.O_RDONLY)
    except OSError:
        return False  # never run since the effects directory exists
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


@contextmanager
def running(engine: Any, task: str) -> Iterator[None]:
    """Held for the whole of a `taskgate merge`/`complete`: a shared lock on
    hooks/quarantine.running_path that the kernel releases when the process ends or is
    killed, so a comparison that finds an open journal with the lock free judges at once
    instead of waiting for a dead command (hooks/quarantine._await_own_step). Nothing without
    an effects directory (no guarded session)."""
    fd = None
    if engine._effects_watched():
        import fcntl

        try:
            fd = os.open(running_path(engine.ws.state_dir, task), os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_SH)
        except OSError:
            pass  # the hooks then wait for the journal as before
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)


def compare_first(engine: Any, task: str) -> None:
    """A resumed journaled command compares before redoing its git work, as its un-crashed
    run does in its first step: the work its journal explains is taken into the baseline,
    anything else is moved aside and recorded (hooks/quarantine.py before_step)."""
    if engine._effects_watched():  # one stat: no baseline directory, nothing to compare
        from taskgate.hooks import quarantine

        quarantine.before_step(engine, task)


def _sha(value: object) -> bool:
    text = str(value or "")
    return len(text) == 40 and text.strip("0123456789abcdef") == ""


def _ok(run: Runner, wt: str, *args: str) -> bool:
    return run(list(args), wt)[0] == 0


def _out(run: Runner, wt: str, *args: str) -> str | None:
    code, out = run(list(args), wt)
    return out.decode("utf-8", "replace") if code == 0 else None


def _merge(run: Runner, wt: str, task: str, pending: dict[str, Any], old: str, new: str) -> bool:
    agents = [str(a) for a in pending.get("agents") or []]
    before = str(pending.get("before") or "")
    if not agents or not _sha(before):
        return False
    if not _ok(run, wt, "merge-base", "--is-ancestor", before, old):
        return False
    if not _ok(run, wt, "merge-base", "--is-ancestor", old, new):
        return False
    tips = {a: f"refs/heads/{task}-{a}" for a in agents}
    listed = _out(
        run, wt, "log", "-z", f"--max-count={MAX_COMMITS + 1}", "--format=%H %T %P%x01%s",
        new, f"^{old}", *(f"^{t}" for t in tips.values()), "--",
    )  # fmt: skip
    if listed is None:
        return False
    records = [r for r in listed.split("\0") if r]
    if len(records) > MAX_COMMITS:
        return False
    subjects = {f"taskgate: merge {task}-{a} into {task}": a for a in agents}
    for record in records:
        ids, _, subject = record.partition("\x01")
        fields = ids.split()
        agent = subjects.get(subject.strip())
        if agent is None or len(fields) != 4:
            return False  # not a merge taskgate made of a journaled agent's branch
        _, tree, first, second = fields
        if not _ok(run, wt, "merge-base", "--is-ancestor", second, tips[agent]):
            return False
        merged = _out(run, wt, "merge-tree", "--write-tree", first, second)
        if merged is None or merged.split("\n", 1)[0].strip() != tree:
            return False  # its content is not what merging its parents makes
    return True


def _complete(
    run: Runner, wt: str, pending: dict[str, Any], old: str, new: str, paths: tuple[str, ...]
) -> bool:
    approved, main = str(pending.get("approved_sha") or ""), str(pending.get("main_sha") or "")
    archival = str(pending.get("archival_sha") or "")
    if not _sha(approved):
        return False
    if not archival and old == approved and _is_archival(run, wt, new, approved, paths):
        return True  # the archival commit, made before a kill; the journal did not record it
    if not archival and _is_archival(run, wt, old, approved, paths):
        archival = old  # a baseline taken after the archival commit, before its journal step
    chain = [approved, archival] if archival else [approved]
    if archival and _sha(main) and _is_squash(run, wt, new, archival, main):
        chain.append(new)
    return old in chain and new in chain and chain.index(old) <= chain.index(new)


def _is_archival(run: Runner, wt: str, sha: str, approved: str, paths: tuple[str, ...]) -> bool:
    """R-CMP-03: one commit on the approved one, taskgate's subject, todo.md/changelog.md only."""
    shown = _out(run, wt, "log", "-1", "--format=%P%x01%s", sha, "--")
    if shown is None:
        return False
    parents, _, subject = shown.strip().partition("\x01")
    if parents.split() != [approved] or not subject.startswith(ARCHIVE_SUBJECT):
        return False
    changed = _out(run, wt, "diff-tree", "--no-commit-id", "--name-only", "-r", "-z", sha)
    return changed is not None and set(filter(None, changed.split("\0"))) <= set(paths)


def _is_squash(run: Runner, wt: str, sha: str, archival: str, main: str) -> bool:
    """R-CMP-04: one commit on main's journaled commit with the archival commit's tree."""
    shown = _out(run, wt, "log", "-1", "--format=%P %T", sha, "--")
    tree = _out(run, wt, "rev-parse", f"{archival}^{{tree}}")
    if shown is None or tree is None:
        return False
    fields = shown.split()
    return len(fields) == 2 and fields[0] == main and fields[1] == tree.strip()
