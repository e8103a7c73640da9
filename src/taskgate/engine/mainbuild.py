"""The build on main after the merge (R-CMP-08), as issue 17 needs it: re-checked against
the current main, or accepted by a person.

engine/cleanup_build.py (issue 16) calls these from `verify_main_build`:

- `target`: the commit to build is main's current tip (it contains the task commit), so a
  person who fixed main after a failure gets the fix checked, not the old merge again;
- `accepted`: `taskgate cleanup T --accept-main --reason …` records that a person takes main
  as it is; cleanup then goes on without the build, and the record says so.
"""

from __future__ import annotations

from typing import Any

from taskgate.engine.checkpoints import _check_provenance, check_speaker
from taskgate.engine.core import Engine, current_state
from taskgate.errors import Refused, UsageError
from taskgate.git.cmd import git
from taskgate.protocol.states import State
from taskgate.protocol.violations import Violation
from taskgate.store.base import Tx
from taskgate.store.records import TaskSnapshot


def target(engine: Engine, snap: TaskSnapshot, merged: str) -> str:
    """The commit the main build checks: main's tip (which contains `merged`)."""
    tip = git("rev-parse", "--verify", "-q", f"refs/heads/{snap.task.base_branch}^{{commit}}",
              cwd=engine.ws.repo, check=False).stdout.strip()  # fmt: skip
    return tip or merged


def accepted(snap: TaskSnapshot) -> dict[str, Any] | None:
    """The person's record that main is accepted without a passing build, if any."""
    record = snap.task.extra.get("main_accepted")
    return record if isinstance(record, dict) else None


def accept_main(engine: Engine, task: str, *, reason: str, provenance: str) -> dict[str, Any]:
    """`taskgate cleanup T --accept-main --reason …`: a person takes main as it is (audited)."""
    if not reason.strip():
        raise UsageError("--accept-main needs --reason", hint="say why main is acceptable")

    def body(tx: Tx, snap: TaskSnapshot) -> dict[str, Any]:
        check_speaker(engine, snap.task)
        _check_provenance(engine, provenance)  # R-CKP-02: the person decides, not an agent
        if current_state(snap.task) is not State.COMPLETE:
            raise Refused(
                f"'{task}' is {snap.task.state}; main is accepted only in COMPLETE",
                [Violation("R-CMP-08", "the build on main is checked before CLEANUP")],
            )
        record = {
            "reason": reason.strip(),
            "provenance": provenance,
            "at": engine.now(),
            "main": target(engine, snap, str(snap.task.extra.get("merged_sha", ""))),
        }
        engine.event(tx, task, "main_accepted", record)
        engine.touch(tx, snap, extra={**snap.task.extra, "main_accepted": record})
        return record

    return engine.step(task, body, owner=False)
