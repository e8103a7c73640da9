"""`taskgate validate`: run the configured build on the task branch and record it (RULES §11)."""

from __future__ import annotations

from dataclasses import dataclass

from taskgate.engine.core import Engine, current_state
from taskgate.engine.worktree_setup import worktree_env
from taskgate.errors import Refused
from taskgate.git import repo as gitrepo
from taskgate.process import clean_env, run
from taskgate.protocol.buildfail import BuildFailure, classify_failure
from taskgate.protocol.states import State
from taskgate.protocol.violations import Violation
from taskgate.store.base import Tx
from taskgate.store.records import TaskSnapshot, ValidationRow

_TAIL = 4000


@dataclass(frozen=True)
class ValidationResult:
    """The recorded build verification and, on failure, its class (D-VAL-1)."""

    row: ValidationRow
    failure: BuildFailure | None
    output: str


def validate(engine: Engine, task: str) -> ValidationResult:
    """Run every configured command in the task worktree; record the result against HEAD."""
    snap = engine.require_snapshot(task)
    engine.require_owner(snap.task)
    if current_state(snap.task) is not State.VALIDATION:
        raise Refused(
            f"validation runs in VALIDATION, the task is in {snap.task.state}",
            [Violation("R-VAL-01", "the build is verified fresh in the VALIDATION state")],
            hint=f"taskgate transition {task} VALIDATION",
        )
    commands = engine.ws.config.validation.commands
    if not commands:
        raise Refused(
            "no validation commands configured",
            [Violation("C-80", "the build command is project-specific")],
            hint='set [validation] commands = ["..."] in taskgate.toml',
        )
    worktree = engine.ws.task_worktree(task)
    head = gitrepo.head_sha(worktree)
    if head is None:
        raise Refused("the task worktree is missing", [], hint=f"taskgate recover {task}")
    timeout = engine.ws.config.validation.timeout_minutes * 60
    ports = worktree_env(engine.ws, task, None)  # issue 21: the task worktree's port block
    outputs: list[str] = []
    code = 0
    ran: list[str] = []
    for cmd in commands:
        result = run(cmd, cwd=worktree, env=clean_env(ports), timeout=timeout)
        ran.append(" ".join(cmd))
        outputs.append(f"$ {' '.join(cmd)}\n{result.stdout}{result.stderr}")
        if not result.ok:
            code = result.returncode
            break  # R-VAL-02: a non-zero exit is a build failure
    output = "\n".join(outputs)
    failure = classify_failure(output) if code else None

    def body(tx: Tx, current: TaskSnapshot) -> ValidationRow:
        if current_state(current.task) is not State.VALIDATION:
            raise Refused("the task left VALIDATION while the build ran", [])
        row = ValidationRow(
            task=task,
            head_sha=head,
            command=" && ".join(ran),
            exit_code=code,
            success=code == 0,
            at=engine.now(),
            output_tail=output[-_TAIL:],
            failure_class=failure.type.value if failure else "",
        )
        tx.add_validation(row)
        engine.event(
            tx,
            task,
            "validation",
            {
                "command": row.command,
                "result": "SUCCESS" if row.success else "FAILURE",
                "exit_code": code,
                "head_sha": head,
                "failure_class": row.failure_class,
                "responsible": failure.responsible if failure else None,
            },
        )
        engine.touch(tx, current)
        return row

    return ValidationResult(engine.step(task, body), failure, output)
