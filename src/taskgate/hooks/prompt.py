"""UserPromptSubmit for a session holding a task, answered without the engine (issue 18).

Every prompt of such a session is the person's word on the task: judged in context by the
message classifier, recorded in one step and anchored in git (engine/conversation.py's
`record_human_message`, issue 14). Through the engine that costs about 50 ms of imports
(dataclasses, the views, the checkpoint and transition modules, subprocess) before the first
query. Here the usual case, a message that is an interruption (R-INT-03..10: a question, a
status or audit request, anything else that does no task work), is recorded with the C
modules alone (store/hook_tx.py's write transaction), and everything else goes to the engine:
`record` returns None whenever the engine's path must answer.

Taken only where the engine's step would do exactly this and nothing more:

- the store is this machine's SQLite with the current schema (hook_tx refuses anything else),
  the hook snapshot not ahead of it and the views not ahead of it (StoreLost is the engine's);
- the session holds exactly one task, in a known state; in SYNTHESIS and
  AWAITING_USER_APPROVAL the message is judged against the presentation in force, read as
  engine/checkpoints.current_presentation reads it (the last presentation no later event
  voided);
- the verdict, from protocol/messages.judge (the function the engine's path calls), is an
  interruption: not an approval, a change request or a resumption (those move the state,
  reset the checkpoint or re-read the task: the engine's path); an approval of a checkpoint
  not presented since it changed stays an interruption with the engine's R-CKP-04 note;
- no agent invocation is open (the engine's step closes the dead ones first) and the
  effect check of a watched session finds nothing (the step's `before_step` would quarantine);
- no crash point is armed (tests) and this is no command the agent door forwarded.

Then, in one `BEGIN IMMEDIATE` transaction committed with `synchronous=FULL`: the
`interruption` event with the payload the engine writes (its hash chained like every event)
and the task row's compare-and-swap touch, which marks the views stale (they are rendered by
the next reader, as after a PostToolUse: engine/views.py `_seq`). Then the anchor, with the
engine's own function (anchor_write.write, which engine/anchor.py exports), naming the
task's last event; the effect-check baseline is taken again like the step's `after_step`; and
the text is the one hooks/record.handle_prompt returns. tests/test_hooks_prompt.py runs both
paths on the same prompts in every state and compares the events, the task row, the anchor
and the text.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from taskgate.hooks.policy import Layout

HUMAN_PROMPT = "human-prompt"  # engine/checkpoints.HUMAN_PROMPT (a test checks they agree)
MAX_MESSAGE_CHARS = 100_000  # engine/conversation.MAX_MESSAGE_CHARS (likewise)
# The checkpoint each state waits at (engine/checkpoints.CHECKPOINT_STATE, reversed).
_CHECKPOINT_KIND = {"SYNTHESIS": "plan", "AWAITING_USER_APPROVAL": "changes"}
_DOOR_RECORD_VAR = "TASKGATE_DOOR_RECORD"  # engine/core.DOOR_RECORD_VAR
# protocol/states.State's values (tests/test_hooks_prompt.py checks they agree): the prompt is
# judged with plain str values, so the hook creates no enum class (issue 18, fifth pass).
STATE_NAMES = frozenset({
    "INIT", "CLASSIFIED", "REQUIREMENTS", "SYNTHESIS", "IMPLEMENTATION", "VALIDATION", "REVIEW",
    "AWAITING_USER_APPROVAL", "SCOPE_NEGOTIATION", "COMPLETE", "CLEANUP",
})  # fmt: skip


def record(
    data: dict[str, Any], prompt: str, found: list[Layout | None] | None = None
) -> str | None:
    """The additional context for the person's `prompt` ("" for nothing to say), or None when
    the engine's path must answer it (nothing was written then). `found`: the workspace
    hooks/quick.holds_no_task found for the same `data` (else it is discovered here)."""
    from taskgate.hooks.quick import _engine_path, workspace

    if not prompt.strip():
        return None  # the engine's path says nothing either; kept there, one place
    if len(prompt) > MAX_MESSAGE_CHARS or os.environ.get("TASKGATE_FAILPOINT"):
        return None
    if os.environ.get(_DOOR_RECORD_VAR):
        return None
    try:
        layout = found[0] if found else workspace(data["cwd"])
    except LookupError:
        return None
    if layout is None:
        _engine_path("PostgreSQL")
        return None
    from taskgate.hooks.preload import PROMPT_STEP, load

    load(PROMPT_STEP)
    session = str(data["session_id"])
    if not _effects_clean(layout, session):
        return None
    return _record(layout, session, prompt)


def _effects_clean(layout: Layout, session: str) -> bool:
    """False when the session's effect-check baseline finds a change (or cannot be compared):
    the engine's step quarantines it first (hooks/quarantine.before_step)."""
    from taskgate.hooks import effects
    from taskgate.hooks.quick import _engine_path

    base = effects.load(effects.baseline_path(layout.state_dir, session))
    if base is None or not base.get("guarded"):
        return True  # nothing to compare: effects.compare finds nothing for a marker
    try:
        changes = effects.compare(layout, base)
    except (OSError, KeyError, TypeError, ValueError, AttributeError):
        changes = ["the baseline cannot be compared"]
    if changes:
        _engine_path("the effect check found changes: the engine's step quarantines them")
        return False
    return True


def _record(layout: Layout, session: str, prompt: str) -> str | None:
    from taskgate.hooks.quick import _engine_path, _errors, _rebaseline
    from taskgate.protocol.messages import judge_plain, unpresented_note
    from taskgate.protocol.names import task_name_problem
    from taskgate.store import canon, hook_tx, snapshot

    errors = _errors()
    try:
        with hook_tx.HookTx(layout.state_dir) as tx:
            conn = tx._c  # the reads this step needs beside hook_tx's own
            kept = snapshot.seen(layout.state_dir)  # Engine.open_store's check (issue 16)
            if kept and snapshot.ahead(kept, snapshot.last_seq(conn)):
                raise hook_tx.Unusable("the hook snapshot is ahead of the store")
            owned = tx.held_by(session)
            if len(owned) != 1:
                # None: no answer either way (the engine's path finds no task or reports
                # several: engine_path.on_owned_task); the engine decides.
                raise hook_tx.Unusable(f"the session holds {len(owned)} tasks")
            name, state_name, seq = owned[0]
            if task_name_problem(name):  # Engine.step's check: the name makes paths and refs
                raise hook_tx.Unusable(f"task name {name!r}: the engine's path refuses it")
            if state_name not in STATE_NAMES:  # State(state_name) raises ValueError
                raise hook_tx.Unusable(f"unknown state {state_name!r}")
            kind = _CHECKPOINT_KIND.get(state_name)
            pending = "NONE"  # Checkpoint's values (judge_plain: no enum class is created)
            if kind is not None and _presented(conn, name, kind, tx.loads):
                pending = "PLAN" if kind == "plan" else "CHANGES"
            rendered = hook_tx.view_seq(os.path.join(layout.tasks_root, name))
            if rendered is not None and rendered > seq:
                raise hook_tx.Unusable(f"task.json rendered at seq {rendered}, store at {seq}")
            if _open_invocations(conn, name, tx.loads):
                raise hook_tx.Unusable("an agent invocation is open: the step may close it")
            said, reason, response, checkpoint, unpresented = judge_plain(
                prompt, state=state_name, checkpoint=pending
            )
            if said in ("APPROVAL", "CHANGE_REQUEST"):  # MessageClass.keeps_state is False
                raise hook_tx.Unusable(f"{said}: the engine's path moves the task")
            if said == "RESUMPTION":
                raise hook_tx.Unusable("a resumption: the engine's path writes it")
            at = hook_tx.now()
            payload = {
                "session": session,
                "type": said,
                "checkpoint": checkpoint,
                "reason": reason,
                "provenance": HUMAN_PROMPT,
                "message_hash": canon.sha256_hex(prompt.encode("utf-8")),  # = message_hash
            }
            digest = tx.append_event(name, "interruption", payload, at)
            tx.touch(name, seq, at)
            last = conn.execute(
                "SELECT seq, hash, at FROM events WHERE task = ? ORDER BY seq DESC LIMIT 1",
                (name,),
            ).fetchone()
            tx.commit()
    except errors as exc:
        _engine_path(exc)
        return None
    from taskgate.anchor_write import write

    anchored = (int(last[0]), str(last[1]), str(last[2])) if last else (0, digest, at)
    write(layout.repo, layout.common_dir, name, *anchored)  # a person's message: a checkpoint
    _rebaseline(layout, session, name)
    # hooks/record.handle_prompt's text for an interruption (the state stays where it was).
    if unpresented and kind is not None:
        response += f"\nNote: {unpresented_note(kind, name)}"
    text = f"taskgate: task '{name}' [{said}] State: {state_name}. {response}"
    return text.rstrip()


def _presented(conn: Any, task: str, kind: str, loads: Any) -> bool:
    """engine/checkpoints.current_presentation(snap, kind) is not None: a presentation of
    `kind` that no later event voided (protocol/recovery.shown, the engine's own reading),
    and its row in the presentations table (snap.latest_presentation(kind))."""
    from taskgate.protocol.recovery import shown

    rows = conn.execute(
        "SELECT kind, payload FROM events WHERE task = ? AND kind IN "
        "('presentation', 'transition', 'agent_added', 'change_request') ORDER BY seq DESC",
        (task,),
    )

    def newest_first() -> Iterator[tuple[str, dict[str, Any]]]:
        for event, payload in rows:
            data = loads(payload)
            yield event, data if isinstance(data, dict) else {}

    if not shown(kind, newest_first()):
        return False
    row = conn.execute(
        "SELECT 1 FROM presentations WHERE task = ? AND kind = ? LIMIT 1", (task, kind)
    ).fetchone()
    return row is not None


def _open_invocations(conn: Any, task: str, loads: Any) -> bool:
    """engine/invocations.open_invocations is not empty: an `agent_invoked` event of an
    agent with no `agent_completed` after it."""
    running: set[str] = set()
    rows = conn.execute(
        "SELECT kind, payload FROM events WHERE task = ? "
        "AND kind IN ('agent_invoked', 'agent_completed') ORDER BY seq",
        (task,),
    )
    for kind, payload in rows:
        data = loads(payload)
        agent = str(data.get("agent")) if isinstance(data, dict) else "None"
        if kind == "agent_invoked":
            running.add(agent)
        else:
            running.discard(agent)
    return bool(running)
