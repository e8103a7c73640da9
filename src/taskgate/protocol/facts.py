"""Snapshots of facts that guards judge. Built by the engine; guards never do I/O."""

from __future__ import annotations

from collections.abc import Mapping

from taskgate.dataclass_lite import dataclass, field
from taskgate.protocol.states import AgentStatus, ChangeType, Decision, RiskLevel, State


@dataclass(frozen=True)
class LogEntry:
    """One transition_log entry (R-TRN-04, C-05)."""

    source: State
    target: State
    at: str
    reason: str = ""


@dataclass(frozen=True)
class AgentFacts:
    """What is known about one required agent, scoped to the current phase (R-AST-19, C-69)."""

    name: str
    worktree_exists: bool
    status: AgentStatus | None = None  # status for the current phase; None = not reported
    work_remaining: bool = False
    report_bytes: int | None = None  # None = T-A-requirements.md missing (R-DOC-03)
    decision: Decision | None = None  # review decision for the current round and HEAD
    added_at_state: State | None = None
    unmerged_commits: int = 0  # commits on T-A that T does not contain (IMPLEMENTATION)
    task_commits: int = 0  # commits tagged [agent:A] on T since the task began
    no_change: bool = False  # the agent recorded "no change needed" (R-TRN-14)


@dataclass(frozen=True)
class Approval:
    """A human approval bound to what was presented (R-CKP-03, R-CKP-13)."""

    bound_to: str  # plan hash or commit SHA
    presented_at: str
    approved_at: str


@dataclass(frozen=True)
class Validation:
    """The latest recorded build verification (R-VAL-01)."""

    head_sha: str
    success: bool
    at: str
    command: str = ""


@dataclass(frozen=True)
class TaskFacts:
    """Everything a transition guard may look at, gathered in one snapshot."""

    task: str
    session_id: str
    owner: str | None
    state: State
    path: tuple[State, ...]
    log: tuple[LogEntry, ...] = ()
    risk_level: RiskLevel | None = None
    change_type: ChangeType | None = None
    required_agents: tuple[str, ...] = ()
    agents: Mapping[str, AgentFacts] = field(default_factory=dict)
    in_todo: bool = True
    task_worktree_exists: bool = False
    task_worktree_branch: str | None = None
    # None: the caller does not enforce the working-directory checks (config check_cwd=false).
    cwd_in_task_worktree: bool | None = None
    task_md: str | None = None  # content of WS/tasks/T/task.md, None when missing
    plan_hash: str | None = None  # hash of the plan section of task.md, None when absent
    plan_presented_at: str | None = None
    plan_approval: Approval | None = None
    head_sha: str | None = None  # HEAD of the task branch
    validation: Validation | None = None
    entered_at: Mapping[State, str] = field(default_factory=dict)  # latest entry per state
    checkpoint_sha: str | None = None
    change_approval: Approval | None = None
    archival_committed: bool = False
    merged_to_main: bool = False
    audit_complete_problems: tuple[str, ...] = ()  # R-AUD-05 failures, empty when complete
    scope_deferral_recorded: bool = False
    scope_negotiation_permitted: bool = False
    # Files the task branch changes against its base (None: not gathered in this state).
    diff_files: tuple[str, ...] | None = None
    noop_approved: bool = False  # the person accepted a task that changes nothing
    validated_heads: frozenset[str] = frozenset()  # task-branch SHAs with a passing build
    change_requests_at: tuple[str, ...] = ()  # when the person asked for changes (R-INT-11)

    def agent(self, name: str) -> AgentFacts:
        """The facts for a required agent (an unknown agent has no worktree and no status)."""
        return self.agents.get(name) or AgentFacts(name=name, worktree_exists=False)
