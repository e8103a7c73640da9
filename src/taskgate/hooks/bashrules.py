"""Judging a Bash command line from its analysis (hooks/shell.py, issues 7 and 15).

Each simple command meets the taskgate and git rules; each path it may write meets the write
rules (hooks/policy.py); a link into taskgate's files, code naming them, or a line that could
not be analysed is refused. Where the actor is the main agent and may not write its task's
worktree (`guarded`), a program that may write anything, a line not fully analysed or over the
analyser's budget is refused too, with what to do instead; elsewhere it is allowed (the effect
check, hooks/effects.py, stands behind every allowed call)."""

from __future__ import annotations

import os

from taskgate.hooks.policy import (
    ALLOW,
    PROTECTED_MARKERS,
    Actor,
    Layout,
    Verdict,
    _inside,
    _main_write,
    check_command,
    check_write,
    deny,
    forbids_main_writes,
    place,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from taskgate.hooks.shell import Analysis


def guarded(actor: Actor) -> bool:
    """True when the actor is the main agent in a state where it may not write its task's
    worktree: programs that may write anything are denied (issue 15)."""
    return not actor.agent and forbids_main_writes(actor.task)


def _guard_denial(actor: Actor, what: str, hint: str) -> Verdict:
    t = actor.task
    assert t is not None
    rule = _main_write("", "task-worktree", t).rule
    return deny(
        rule,
        f"{what}; in {t.state} the main agent may not change the task's files "
        f"(task '{t.name}'). {hint}",
    )


_READ_HINT = (
    "Use read-only commands (git status/log/diff, grep, cat, pytest, make -n: the read list is "
    "in docs/hooks.md) or delegate the change to a stakeholder agent"
)


def check_bash(analysis: Analysis, text: str, layout: Layout, actor: Actor) -> Verdict:
    """Judge a Bash command line from its analysis (shell.analyse)."""
    if analysis.budget:
        if _mentions_protected(text, layout) or guarded(actor):
            return deny(
                "R-REC-14",
                f"{analysis.budget}; split it into smaller commands (nothing was run)",
            )
        return ALLOW
    for command in analysis.commands:
        verdict = check_command(command, layout, actor)
        if not verdict.allow:
            return verdict
    for path in sorted(analysis.writes):
        verdict = check_write(path, layout, actor)
        if verdict.allow:
            verdict = _hard_link(path, layout, actor)
        if not verdict.allow:
            return verdict
    for directory in sorted(analysis.dir_writes):
        verdict = _check_dir_write(directory, layout, actor)
        if not verdict.allow:
            return verdict
    for tree in sorted(analysis.tree_writes):
        verdict = check_write(os.path.join(tree, "-"), layout, actor)  # git keeps to tracked files
        if not verdict.allow:
            return verdict
    for target in sorted(analysis.link_targets):
        if place(os.path.realpath(target), layout)[0] in ("store", "config", "git"):
            return deny(
                "R-LCK-09",
                f"a link to {target} would let later writes reach "
                "taskgate's files; read them directly or use the taskgate CLI",
            )
        if guarded(actor) and not check_write(target, layout, actor).allow:
            return _guard_denial(actor, f"a link to {target} would let writes reach it", _READ_HINT)
    for code in analysis.opaque:
        if _mentions_protected(code, layout):
            return deny(
                "R-LCK-09",
                "code that names taskgate's files counts as a write to the store; use the "
                "taskgate CLI (taskgate status / transition)",
            )
    for path, source in analysis.scripts:
        if _mentions_protected(source, layout):
            return deny(
                "R-LCK-09",
                f"the script {path} names taskgate's files, so running it counts as a write "
                "to the store; change task state only through the taskgate CLI",
            )
    if analysis.unbounded and guarded(actor):
        return _guard_denial(actor, f"{analysis.unbounded[0]}, so it may write files", _READ_HINT)
    if not analysis.complete:
        if _mentions_protected(text, layout):
            return deny(
                "R-LCK-09",
                "this command cannot be fully analysed ("
                f"{analysis.problems[0]}) and names taskgate's files; use the taskgate "
                "CLI to change task state",
            )
        if guarded(actor):
            return _guard_denial(
                actor,
                f"this command cannot be fully analysed ({analysis.problems[0]})",
                "Spell the paths out, or delegate to a stakeholder agent",
            )
    return ALLOW


def _hard_link(path: str, layout: Layout, actor: Actor) -> Verdict:
    """A file with several names may be a hard link to a protected file."""
    try:
        st = os.lstat(path)
    except OSError:
        return ALLOW
    if st.st_nlink < 2 or not os.path.isfile(path):
        return ALLOW
    try:
        db = os.stat(os.path.join(layout.state_dir, "state.db"))
        protected = (st.st_dev, st.st_ino) == (db.st_dev, db.st_ino)
    except OSError:
        protected = False
    if protected:
        return deny("R-LCK-09", f"{path} is a hard link to taskgate's store")
    if guarded(actor):
        return _guard_denial(
            actor, f"{path} has {st.st_nlink} names (a hard link may reach a protected file)",
            _READ_HINT,
        )  # fmt: skip
    return ALLOW


def _check_dir_write(directory: str, layout: Layout, actor: Actor) -> Verdict:
    real = os.path.realpath(directory)
    for protected in (layout.state_dir, layout.common_dir):
        if _inside(protected, real):
            return deny(
                "R-LCK-09",
                f"this command may delete or change files anywhere below "
                f"{real}, which holds taskgate's store or git's state; narrow it",
            )
    return check_write(os.path.join(real, "-"), layout, actor)


def _mentions_protected(text: str, layout: Layout) -> bool:
    return any(m in text for m in PROTECTED_MARKERS) or layout.state_dir in text
