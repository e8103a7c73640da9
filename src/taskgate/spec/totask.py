"""The bridge into the task protocol: a completed spec seeds a todo.md task entry."""

from __future__ import annotations

import re
from pathlib import Path

from taskgate.errors import Refused, UsageError
from taskgate.fsutil import atomic_write
from taskgate.protocol.names import task_name_problem
from taskgate.protocol.todo import TodoError, parse_todo
from taskgate.protocol.violations import Violation
from taskgate.spec.detect import Candidate
from taskgate.spec.report import requirement_ids


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _section_bullets(spec: str, heading: str) -> list[str]:
    lines = spec.splitlines()
    try:
        start = lines.index(f"## {heading}")
    except ValueError:
        return []
    out = []
    for line in lines[start + 1 :]:
        if line.startswith("#"):
            break
        if line.startswith(("- ", "* ")):
            out.append(_one_line(line[2:]))
    return out


def task_entry(candidate: Candidate, name: str, repo: Path) -> str:
    """The todo.md entry (docs/todo-format.md) for a completed spec."""
    state = candidate.state
    assert state is not None
    spec = candidate.paths.spec.read_text(encoding="utf-8")
    rel = candidate.paths.spec.relative_to(repo)
    reqs = requirement_ids(spec)
    title = _one_line(re.split(r"(?<=[.!?])\s", state.description.strip())[0]).rstrip(".")
    components = _section_bullets(spec, "Key Entities") or reqs or ["see the spec"]
    scope = f"the behaviour specified in {rel}"
    if reqs:
        scope += f" ({reqs[0]}..{reqs[-1]})" if len(reqs) > 1 else f" ({reqs[0]})"
    lines = [
        f"## {name}: {title[:100]}",
        f"- Purpose: {_one_line(state.description)}",
        f"- Scope: {scope}",
        f"- Components: {', '.join(components)}",
        f"Spec {state.feature_id}: {rel} (termination: {state.termination_reason})",
    ]
    known = [g for g in state.gaps if g.status == "accepted"]
    if known:
        lines.append("Known gaps: " + "; ".join(f"{g.id} {g.summary}" for g in known))
    return "\n".join(lines) + "\n"


def append_task(repo: Path, candidate: Candidate, name: str | None) -> tuple[str, Path]:
    """Append the entry to todo.md (atomically; the result must parse); returns name, path."""
    from taskgate.engine.workspace import find_workspace

    state = candidate.state
    if state is None or state.loop_status != "completed":
        status = state.loop_status if state else "no saved state"
        raise Refused(
            f"spec {candidate.feature_id} is not completed ({status})",
            [
                Violation(
                    "R-SPC-09",
                    "only a completed spec (phase C done) seeds a task",
                    f"taskgate spec resume {candidate.feature_id}",
                )
            ],
            hint=f"finish it first: taskgate spec resume {candidate.feature_id}",
        )
    name = name or state.slug
    problem = task_name_problem(name)
    if problem:
        raise UsageError(problem, hint="pass --name with a valid task name")
    todo_path = find_workspace(repo).todo_path
    text = todo_path.read_text(encoding="utf-8") if todo_path.exists() else "# Tasks\n"
    try:
        existing = parse_todo(text)
    except TodoError as exc:
        raise UsageError(str(exc), hint=f"fix {todo_path.name} first") from None
    if existing.get(name):
        raise UsageError(
            f"todo.md already has a task '{name}'", hint="pass --name with another task name"
        )
    new_text = (
        text + ("" if text.endswith("\n") else "\n") + "\n" + task_entry(candidate, name, repo)
    )
    try:
        parse_todo(new_text)
    except TodoError as exc:  # never leave a todo.md that does not parse
        raise UsageError(f"the generated entry does not parse: {exc}") from None
    atomic_write(todo_path, new_text)
    return name, todo_path


# --- committing the new task with its spec (issue 17) ----------------------------------------


def commit_blocker(repo: Path, todo_path: Path) -> str:
    """Why to-task must leave its files for the person to commit ('' when it may commit):
    a detached HEAD, an operation in progress, or edits of the person's own in todo.md."""
    from taskgate.git.cmd import git

    branch = git("symbolic-ref", "-q", "--short", "HEAD", cwd=repo, check=False).stdout.strip()
    if not branch:
        return "the main worktree is not on a branch (detached HEAD)"
    git_dir = Path(git("rev-parse", "--absolute-git-dir", cwd=repo).stdout.strip())
    busy = {"MERGE_HEAD": "a merge", "rebase-merge": "a rebase", "rebase-apply": "a rebase",
            "CHERRY_PICK_HEAD": "a cherry-pick"}  # fmt: skip
    for marker, what in busy.items():
        if (git_dir / marker).exists():
            return f"{what} is in progress in the main worktree"
    rel = str(todo_path.relative_to(repo))
    if git("rev-parse", "-q", "--verify", "HEAD", cwd=repo, check=False).returncode != 0:
        return "the repository has no commit yet"
    dirty = git("status", "--porcelain", "-z", "--", rel, cwd=repo).stdout
    if dirty.strip("\0"):
        return f"{rel} has changes of yours that are not committed"
    return ""


def spec_files(candidate: Candidate) -> list[Path]:
    """What the task's record needs of the spec: spec.md, checklists, state and index (not
    the agents' transcripts or the workflow lock)."""
    paths = candidate.paths
    wanted = [paths.spec, paths.root / "checklists", paths.state, paths.workflow / "index.md",
              paths.report]  # fmt: skip
    return [p for p in wanted if p.exists()]


def commit_task(repo: Path, todo_path: Path, candidate: Candidate, name: str) -> str:
    """One commit on the current branch with the todo.md entry and the spec; its sha."""
    from taskgate.git.cmd import git

    rels = [str(p.relative_to(repo)) for p in (todo_path, *spec_files(candidate))]
    git("add", "--", *rels, cwd=repo)
    message = (
        f"todo: add task {name} from spec {candidate.feature_id}\n\n"
        f"taskgate spec to-task {candidate.feature_id}: the todo.md entry and "
        f"{candidate.paths.root.relative_to(repo)} (spec, checklists, workflow state) together."
    )
    git("commit", "-q", "-m", message, "--", *rels, cwd=repo)
    return git("rev-parse", "HEAD", cwd=repo).stdout.strip()
