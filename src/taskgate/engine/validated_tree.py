"""Issue 17 (Measure): cleanup does not run the whole suite again when main is exactly what
`taskgate validate` passed.

`complete` squashes the validated task commit plus the archival edit (todo.md, changelog.md)
onto main. When main's tip differs from the last passing validation's commit only in those two
files, and the same commands would run, the build on main would repeat a run whose result is
already known. `[validation] rebuild_on_main = "always"` keeps the build for projects whose
suite reads the archival files; any other difference (another task merged meanwhile, a
person's commit on main, changed commands) builds main as before (R-CMP-08).
"""

from __future__ import annotations

from typing import Any

from taskgate.engine.core import Engine
from taskgate.git.cmd import git
from taskgate.store.records import TaskSnapshot


def _last_passing_validation(snap: TaskSnapshot) -> dict[str, Any] | None:
    """The payload of the task's last validation before the merge, if it passed."""
    for event in reversed(snap.events):
        p = event.payload
        if event.kind == "validation" and not p.get("on_main"):
            return dict(p) if p.get("result") == "SUCCESS" else None
    return None


def reuse(engine: Engine, snap: TaskSnapshot, built: str) -> dict[str, Any] | None:
    """The main-build report that stands for a build of `built`, or None to build it."""
    validation = engine.ws.config.validation
    if validation.rebuild_on_main != "changed":
        return None
    passed = _last_passing_validation(snap)
    validated = str(passed.get("head_sha") or "") if passed else ""
    commands = " && ".join(" ".join(cmd) for cmd in validation.commands)
    if not passed or not validated or passed.get("command") != commands:
        return None
    diff = git("diff", "--name-only", "-z", "--no-renames", validated, built, "--",
               cwd=engine.ws.repo, check=False)  # fmt: skip
    if diff.returncode != 0:  # the validated commit is gone (gc'd): build main instead
        return None
    changed = sorted(p for p in diff.stdout.split("\0") if p)
    repo = engine.ws.repo.resolve()
    archival = {
        str(engine.ws.todo_path.resolve().relative_to(repo)),
        str(engine.ws.changelog_path.resolve().relative_to(repo)),
    }
    if not set(changed) <= archival:
        return None
    return {
        "result": "UNCHANGED",
        "validated_sha": validated,
        "differs_only_in": changed,
        "reason": "main is the validated tree apart from the archival files: the validation "
        f'of {validated[:12]} stands ([validation] rebuild_on_main = "changed")',
    }
