"""R-CMP-03 / C-32: the archival commit on T that `taskgate complete` makes first.

It removes the task's todo.md entry and adds its changelog entry, from the approved commit's
files (never the disk), so a resumed run after a kill writes the same bytes (R-CMP-09).
"""

from __future__ import annotations

from taskgate import failpoints
from taskgate.engine.core import Engine
from taskgate.errors import Refused
from taskgate.fsutil import atomic_write, remove_stale_temps
from taskgate.git import ops
from taskgate.git import repo as gitrepo
from taskgate.git.cmd import git
from taskgate.protocol.todo import TodoError, parse_todo, remove_task
from taskgate.protocol.violations import Violation
from taskgate.store.records import TaskSnapshot

ARCHIVE_SUBJECT = "[agent:main] archive"  # R-WTB-06: taskgate commits as the main agent


def changelog_entry(engine: Engine, task: str, snap: TaskSnapshot, title: str) -> str:
    t = snap.task
    # The time this complete began, not now: a resumed archival writes the same bytes, so
    # the blob a killed run had staged stays the one committed (issue 16: nothing lost).
    started = [e.at for e in snap.events if e.kind == "complete_started"]
    lines = [f"## {task}: {title}", f"- Completed: {started[-1] if started else engine.now()}"]
    if t.risk_level:
        lines.append(f"- Risk: {t.risk_level}")
    if t.required_agents:
        lines.append(f"- Agents: {', '.join(t.required_agents)}")
    return "\n".join(lines) + "\n"


def archival_edits(engine: Engine, snap: TaskSnapshot, approved: str) -> dict[str, str]:
    """The archival commit's files (path -> text): todo.md without the task's entry, the
    changelog with it; none that needs no edit. Contents come from the approved commit, never
    from the disk: a crash may have left the files half-edited, and redoing the edit from the
    commit is what makes this idempotent (and lets the effect check recognise a killed run's
    edit, engine/journal_work.py)."""
    task = snap.task.name
    wt = engine.ws.task_worktree(task)
    todo_name = engine.ws.config.workspace.todo
    log_name = engine.ws.config.workspace.changelog
    todo_text = git("show", f"{approved}:{todo_name}", cwd=wt, check=False)
    log_text = git("show", f"{approved}:{log_name}", cwd=wt, check=False)
    title = task
    edits: dict[str, str] = {}
    if todo_text.ok:
        try:
            entry = parse_todo(todo_text.stdout).get(task)
        except TodoError:
            entry = None  # a broken todo.md on T is kept as it is; the changelog still records
        if entry is not None:
            title = entry.title
            edits[todo_name] = remove_task(todo_text.stdout, entry)
    # `taskgate init` writes changelog.md untracked; its text is the base when T lacks one, and
    # the merge later replaces that untracked copy (its text is a prefix of the new one).
    changelog = log_text.stdout if log_text.ok else untracked_text(engine, log_name)
    if f"## {task}:" not in changelog:
        entry_text = changelog_entry(engine, task, snap, title)
        edits[log_name] = changelog.rstrip("\n") + "\n\n" + entry_text
    return edits


def archive(engine: Engine, snap: TaskSnapshot, approved: str) -> str:
    """R-CMP-03 / C-32: one commit on T removing the todo.md entry and adding a changelog entry."""
    task = snap.task.name
    wt = engine.ws.task_worktree(task)
    head = gitrepo.rev_parse(wt, "HEAD") or ""
    if head != approved:
        info = ops.commit(wt, head)
        if info.parents == (approved,) and info.subject.startswith(ARCHIVE_SUBJECT):
            return head  # committed before a crash; the journal did not record it yet
        raise Refused(
            f"the task branch moved during completion ({approved[:12]} -> {head[:12]})",
            [Violation("R-CKP-13", "only the approved commit is completed")],
            hint=f"present the change again ('taskgate present {task}')",
        )
    log_name = engine.ws.config.workspace.changelog
    for name in (engine.ws.config.workspace.todo, log_name):
        remove_stale_temps(wt / name)  # a kill inside atomic_write leaves its temp file
    edits = archival_edits(engine, snap, approved)
    for name, text in edits.items():
        atomic_write(wt / name, text)
    paths = list(edits)
    if not paths:
        return approved  # archived already (e.g. a squash rebased after R-CMP-06)
    git("add", "--", *paths, cwd=wt)
    failpoints.hit("complete:archival-staged")
    git(
        "commit", "--no-verify", "-q", "-m", f"{ARCHIVE_SUBJECT} {task}: todo.md -> "
        f"{log_name}", "--", *paths, cwd=wt,
    )  # fmt: skip
    return gitrepo.rev_parse(wt, "HEAD") or ""


def untracked_text(engine: Engine, name: str) -> str:
    path = engine.ws.repo / name
    if path.is_file() and not ops.is_tracked(engine.ws.repo, name):
        text = path.read_text(encoding="utf-8", errors="replace")
        if text.strip():
            return text
    return "# Changelog\n"
