"""The PreToolUse deny rules as pure functions: facts in, a Verdict with a rule id out (issue 7).

Paths are judged by where they are, after resolving symlinks and relative paths against the
hook's cwd: taskgate's store, views, flags and configuration; git internals; a task worktree;
an agent worktree (`T/agents/A/code`); the agent-written artifacts (task.md, reports); the main
worktree; or outside the repository (not governed). No I/O beyond `os.path.realpath`.
"""

from __future__ import annotations

import os

from taskgate.hooks.context import Layout as Layout  # there: the prompt hook needs no rules

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from taskgate.hooks.shell import Analysis, Command

# The 11 states of protocol/states.py (RULES §0 STATES), without importing enum on the hook
# path; tests/test_hooks_dispatch.py checks the two agree. Any other state fails closed.
STATES = frozenset({
    "INIT", "CLASSIFIED", "REQUIREMENTS", "SYNTHESIS", "IMPLEMENTATION", "VALIDATION",
    "REVIEW", "AWAITING_USER_APPROVAL", "SCOPE_NEGOTIATION", "COMPLETE", "CLEANUP",
})  # fmt: skip
# States whose transitions are protocol business: merges to main and branch deletion are part
# of the completion sequence only (R-CMP-01, R-CLN-03).
FINISHING = frozenset({"COMPLETE", "CLEANUP"})
# Words that show interpreter code or an unparsable command reaches for taskgate's own files.
PROTECTED_MARKERS = (
    ".taskgate",
    "state.db",
    "task.json",
    ".flag",
    "audit-trail",
    "store-record",
    "status.json",
    "taskgate.toml",
    ".claude",
)
SETTINGS_NAMES = ("settings.json", "settings.local.json")
_GIT_GLOBAL_WITH_VALUE = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace"})
# The git subcommands the rules judge (hooks/gitrules.py); others need no store read.
GIT_JUDGED = frozenset({
    "merge", "push", "branch", "reset", "reflog", "worktree", "clean", "checkout", "switch",
    "restore", "stash", "update-ref", "symbolic-ref", "fetch", "tag", "replace",
})  # fmt: skip


class Verdict:
    """Allow, or deny naming the rule and what to do instead."""

    __slots__ = ("allow", "reason", "rule")

    def __init__(self, allow: bool, rule: str = "", reason: str = "") -> None:
        self.allow = allow
        self.rule = rule
        self.reason = reason

    def message(self) -> str:
        """The text Claude sees: `[RULE] reason`."""
        return f"[{self.rule}] {self.reason}" if self.rule else self.reason

    def __repr__(self) -> str:
        return f"Verdict({self.allow}, {self.rule!r}, {self.reason!r})"


ALLOW = Verdict(True)


def deny(rule: str, reason: str) -> Verdict:
    """A refusal naming the rule; `reason` says what to do instead."""
    return Verdict(False, rule, reason)


class TaskView:
    """What the rules need to know about the session's task (read from the store)."""

    __slots__ = ("agents", "main_may_fix", "name", "plan_approved", "state")

    def __init__(
        self,
        name: str,
        state: str,
        agents: Iterable[str] = (),
        *,
        plan_approved: bool = False,
        main_may_fix: bool = False,
    ) -> None:
        self.name = name
        self.state = state
        self.agents = tuple(agents)
        self.plan_approved = plan_approved
        self.main_may_fix = main_may_fix  # C-27: the last build failure is the main agent's


class Actor:
    """Who acts: the session, its task (None when it holds none), the sub-agent type if any."""

    __slots__ = ("agent", "task", "tasks")

    def __init__(
        self,
        task: TaskView | None,
        agent: str = "",
        tasks: dict[str, tuple[str, ...]] | None = None,
    ) -> None:
        self.task = task
        self.agent = agent  # Claude Code agent_type; "" is the main agent
        self.tasks = tasks or {}  # every task in the store -> its agents (branch names)


# -- where a path is -------------------------------------------------------------------------


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def place(path: str, layout: Layout) -> tuple[str, str, str]:
    """(kind, task, agent) for an absolute path; kind is store, git, config, task-worktree,
    agent-worktree, artifact, main or outside."""
    in_claude = os.path.basename(os.path.dirname(path)) == ".claude"
    if in_claude and os.path.basename(path) in SETTINGS_NAMES:
        return "config", "", ""  # project or user settings: the hooks themselves
    if _inside(path, layout.common_dir):
        return "git", "", ""
    if _inside(path, layout.tasks_root) and path != layout.tasks_root:
        parts = path[len(layout.tasks_root) + 1 :].split(os.sep)
        task = parts[0]
        rest = parts[1:]
        if rest[:1] == ["code"]:
            return ("git" if rest[1:2] == [".git"] else "task-worktree"), task, ""
        if len(rest) >= 3 and rest[0] == "agents" and rest[2] == "code":
            return ("git" if rest[3:4] == [".git"] else "agent-worktree"), task, rest[1]
        if len(rest) == 1 and (
            rest[0] == "task.md"
            or (rest[0].startswith(f"{task}-") and rest[0].endswith("-requirements.md"))
        ):
            return "artifact", task, ""
        return "store", task, ""
    if _inside(path, layout.state_dir):
        return "store", "", ""
    if path == os.path.join(layout.repo, "taskgate.toml"):
        return "config", "", ""
    if _inside(path, layout.repo):
        return "main", "", ""
    return "outside", "", ""


def _store_rule(path: str) -> str:
    name = os.path.basename(path)
    if name.endswith(".flag"):
        return "R-CKP-03"  # flags are views of approvals recorded from the person
    if name in ("audit-trail.json", "store-record.jsonl"):
        return "R-AUD-01"
    if name == "status.json":
        return "R-AST-01"
    return "R-LCK-09"  # task.json, state.db: the lock and state only change through taskgate


# -- writes ----------------------------------------------------------------------------------


def process_relative(path: str) -> bool:
    """A path the kernel resolves for the process that opens it: /proc/self/cwd/f, /proc/<pid>/,
    /dev/fd/3/f (a directory descriptor), /dev/stdin/..: this process would resolve another
    place than the command's (bash writes /dev/fd/3/f into the directory fd 3 holds)."""
    parts = os.path.normpath(path).split(os.sep)
    if len(parts) > 2 and parts[1] == "proc":
        return True
    return len(parts) > 3 and parts[1] == "dev" and (parts[2] in ("fd", "stdin", "stdout",
                                                                 "stderr"))  # fmt: skip


def check_write(path: str, layout: Layout, actor: Actor) -> Verdict:
    """May the actor write `path` (absolute)? Symlinks are followed before judging."""
    if process_relative(path):
        return deny(
            "R-REC-14",
            f"{path} is resolved by the process that opens it (/proc, /dev/fd): taskgate "
            "cannot tell which file it names; write the file by its own path",
        )
    real = os.path.realpath(path)
    for candidate in dict.fromkeys((path, real)):
        verdict = _check_place(candidate, layout, actor)
        if not verdict.allow:
            return verdict
    return ALLOW


_TASK_PLACES = frozenset({"task-worktree", "agent-worktree", "artifact"})


def _check_place(path: str, layout: Layout, actor: Actor) -> Verdict:
    kind, task, agent = place(path, layout)
    if kind == "store":
        return deny(
            _store_rule(path),
            f"{path} is taskgate's store or a view rendered from it; "
            "change task state only through the taskgate CLI (taskgate status shows it)",
        )
    if kind == "config":
        return deny(
            "R-CKP-02",
            f"{path} configures taskgate or its hooks; only the person edits it (ask the user)",
        )
    if kind == "git":
        return deny(
            "R-WTB-09",
            f"{path} is git's internal state; use git commands in your "
            "worktree instead of editing it",
        )
    t = actor.task
    if t is None and task in actor.tasks and kind in _TASK_PLACES:
        return deny(
            "R-LCK-04",
            f"{path} belongs to task '{task}', which this session does not own; every task "
            "worktree and agent worktree belongs to the session that started the task and "
            f"its sub-agents (claim a task from this session with 'taskgate start TASK')",
        )
    if t is None or kind == "outside":
        return ALLOW
    if task and task != t.name:
        return deny(
            "R-LCK-04",
            f"{path} belongs to task '{task}', which this session does not "
            f"own; work only in task '{t.name}'",
        )
    if kind == "main":
        return deny(
            "R-LCK-15",
            f"{path} is in the main worktree; work in the task worktree "
            f"{layout.tasks_root}/{t.name}/code (changes reach main via taskgate complete)",
        )
    if kind == "artifact":
        return ALLOW
    if actor.agent:
        return _agent_write(path, kind, agent, t, actor.agent, layout)
    return _main_write(path, kind, t)


def _agent_write(
    path: str, kind: str, owner: str, t: TaskView, agent: str, layout: Layout
) -> Verdict:
    own = f"{layout.tasks_root}/{t.name}/agents/{agent}/code"
    if kind != "agent-worktree" or owner != agent:
        return deny(
            "R-AGT-13", f"sub-agent '{agent}' may write only in its own worktree {own}, not {path}"
        )
    waiting = _checkpoint_wait(t)
    if waiting:
        return deny("R-CKP-14", f"{waiting}: no implementation work until the person answers")
    return ALLOW


def _main_write(path: str, kind: str, t: TaskView) -> Verdict:
    if kind == "agent-worktree":
        return deny(
            "R-AGT-13",
            f"{path} is a stakeholder agent's worktree; invoke that agent "
            "instead of editing its files",
        )
    state = t.state
    if state == "IMPLEMENTATION":
        return deny(
            "R-AGT-12",
            f"Guard 7: the main agent coordinates and does not implement in "
            f"IMPLEMENTATION ({path}); delegate the change to a stakeholder agent (C-27)",
        )
    if state == "VALIDATION" and not t.main_may_fix:
        return deny(
            "R-VAL-10",
            "in VALIDATION the main agent may fix only missing imports or "
            "<=5 style violations (C-27); run 'taskgate validate' and go back to "
            "IMPLEMENTATION for anything else",
        )
    waiting = _checkpoint_wait(t)
    if waiting:
        return deny("R-CKP-14", f"{waiting}: only task.md may change until the person answers")
    if state == "REVIEW":
        return deny(
            "R-TRN-26",
            "code changes after review must go back through IMPLEMENTATION, "
            "VALIDATION and REVIEW (taskgate transition ... IMPLEMENTATION --reason ...)",
        )
    return ALLOW


def _checkpoint_wait(t: TaskView) -> str:
    if t.state == "SYNTHESIS" and not t.plan_approved:
        return "the task waits for PLAN APPROVAL"
    if t.state == "AWAITING_USER_APPROVAL":
        return "the task waits for CHANGE REVIEW"
    return ""


def forbids_main_writes(t: TaskView | None) -> bool:
    """True when the main agent may not change the task worktree now."""
    if t is None:
        return False
    return _main_write("", "task-worktree", t).allow is False


# -- Bash ------------------------------------------------------------------------------------


def check_command(command: Command, layout: Layout, actor: Actor) -> Verdict:
    """The taskgate and git rules for one simple command."""
    argv = command.argv
    if not argv:
        return ALLOW
    program = os.path.basename(argv[0])
    if program == "taskgate":
        return check_taskgate(argv[1:])
    if program.startswith("python") and argv[1:3] == ["-m", "taskgate"]:
        return check_taskgate(argv[3:])
    if program == "git":
        from taskgate.hooks.gitrules import check_git

        return check_git(command, layout, actor)
    return ALLOW


def split_git(argv: list[str], cwds: tuple[str, ...]) -> tuple[str, list[str], tuple[str, ...]]:
    """(subcommand, its arguments, the directories git runs in) after git's global options."""
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] == "-C" and i + 1 < len(argv):
            cwds = tuple(os.path.normpath(os.path.join(c, argv[i + 1])) for c in cwds)
        i += 2 if argv[i] in _GIT_GLOBAL_WITH_VALUE else 1
    return (argv[i] if i < len(argv) else ""), argv[i + 1 :], cwds


def needs_task(analysis: Analysis) -> bool:
    """Whether judging this command line needs the session's task from the store."""
    if not analysis.reads_only:
        return True
    return any(
        os.path.basename(c.argv[0]) == "git" and split_git(c.argv, c.cwds)[0] in GIT_JUDGED
        for c in analysis.commands
        if c.argv
    )


def check_taskgate(args: list[str]) -> Verdict:
    """Approvals, `say` of an approval and forced releases come only from the person."""
    rest = list(args)
    while rest and rest[0].startswith("--"):
        rest = rest[2:] if rest[0] in ("--repo", "--session") else rest[1:]
    sub = rest[0] if rest else ""
    if sub == "approve":
        return deny(
            "R-CKP-03",
            "approvals come only from the person: present the plan or the "
            "change (taskgate present) and wait for the user's reply in the chat",
        )
    if sub == "release" and ("--force" in rest or "-f" in rest):
        return deny(
            "R-LCK-21",
            "only the person may force-release a lock; report the stuck "
            "lock to the user and select another task (taskgate next)",
        )
    if sub == "violations" and "--resolve" in rest:
        return deny(
            "R-CKP-03",
            "only the person resolves a change the effect check moved aside; tell the user "
            "what happened and let them run 'taskgate violations' themselves",
        )
    if sub == "hooks" and rest[1:2] and rest[1] != "status":
        return deny("R-CKP-02", "the hooks are the person's settings; ask the user to change them")
    if sub == "say" and len(rest) >= 3 and _is_approval(" ".join(rest[2:])):
        return deny(
            "R-CKP-03",
            "an approval typed by the agent is not the person's; present "
            "the plan or change and wait for the user's own reply",
        )
    return ALLOW


def _is_approval(text: str) -> bool:
    from taskgate.protocol.messages import Checkpoint, is_approval

    return is_approval(text, Checkpoint.PLAN) or is_approval(text, Checkpoint.CHANGES)


# -- sub-agents ------------------------------------------------------------------------------


def check_task_tool(tool_input: dict[str, object], actor: Actor) -> Verdict:
    """R-CKP-14: no implementation-mode agent invocation while a checkpoint waits."""
    t = actor.task
    if t is None:
        return ALLOW
    text = " ".join(str(tool_input.get(k, "")) for k in ("description", "prompt", "subagent_type"))
    if "implement" not in text.lower():
        return ALLOW
    waiting = _checkpoint_wait(t)
    if waiting:
        return deny(
            "R-CKP-14",
            f"{waiting}: implementation-mode agents start only after the "
            "person approves (present it again with taskgate present)",
        )
    if t.state in ("INIT", "CLASSIFIED", "REQUIREMENTS"):
        return deny(
            "R-TRN-12",
            f"task '{t.name}' is in {t.state}; implementation agents run "
            "only in IMPLEMENTATION, after the plan is approved",
        )
    return ALLOW
