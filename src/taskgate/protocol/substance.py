"""Gates that check substance, not claims: committed and merged work, a non-empty change,
documentation-only skip paths, and a passing build for any code that reaches main.

Pure functions over TaskFacts (issue 17); the transition guards in guards.py call them.
"""

from __future__ import annotations

from taskgate.protocol.facts import TaskFacts
from taskgate.protocol.filekinds import file_kind
from taskgate.protocol.violations import Violation


def committed_work(f: TaskFacts) -> list[Violation]:
    """R-TRN-14 / R-WTB-06: each agent's commits are merged into T, or it said "no change"."""
    problems: list[Violation] = []
    for name in f.required_agents:
        agent = f.agent(name)
        if agent.unmerged_commits:
            problems.append(
                Violation(
                    "R-WTB-06",
                    f"{agent.unmerged_commits} commit(s) of agent {name} on {f.task}-{name} "
                    f"are not merged into {f.task}",
                    f"taskgate merge {f.task} {name}",
                )
            )
        elif not agent.task_commits and not agent.no_change:
            problems.append(
                Violation(
                    "R-TRN-14",
                    f"agent {name} has no commit on {f.task} and recorded no 'no change needed'",
                    f"commit {name}'s work on {f.task}-{name} and merge it, or record "
                    f"'taskgate agent set {f.task} {name} COMPLETE --done --no-change \"why\"'",
                )
            )
    return problems


def substantive_change(f: TaskFacts) -> list[Violation]:
    """The change review needs a change: an empty diff only as a person's recorded no-op."""
    if f.diff_files is None or f.diff_files or f.noop_approved:
        return []
    return [
        Violation(
            "R-CKP-10",
            f"the task branch {f.task} changes nothing against its base: there is no change "
            "to review",
            f"merge the agents' work (taskgate merge {f.task}), or, if nothing needs to "
            f"change, the person records it: taskgate approve {f.task} noop --message 'why'",
        )
    ]


def doc_only_change(f: TaskFacts) -> list[Violation]:
    """R-WFV-08 / R-WFV-09: a skip-path change may touch documentation only."""
    if f.diff_files is None:
        return []
    code = [p for p in f.diff_files if file_kind(p) != "doc"]
    if not code:
        return []
    shown = ", ".join(code[:5]) + (" …" if len(code) > 5 else "")
    return [
        Violation(
            "R-WFV-08",
            f"this {f.risk_level or ''} task skips validation, but its change touches "
            f"{shown}, which is not documentation",
            f"raise the risk so the change is implemented, validated and reviewed: "
            f"taskgate classify {f.task} --raise",
        )
    ]


def validated_change(f: TaskFacts) -> list[Violation]:
    """No code reaches main without a passing build of exactly that commit (R-TRN-15)."""
    if f.diff_files is None or not f.head_sha:
        return []
    code = [p for p in f.diff_files if file_kind(p) != "doc"]
    if not code or f.head_sha in f.validated_heads:
        return []
    return [
        Violation(
            "R-TRN-15",
            f"{len(code)} non-documentation file(s) change ({', '.join(code[:3])}) and no "
            f"passing build was recorded for {f.head_sha[:12]}",
            f"raise the risk (taskgate classify {f.task} --raise) so VALIDATION runs",
        )
    ]


# Caches that running a project's tests leaves in a worktree; never an agent's work.
_CACHE_PARTS = frozenset(
    {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis", ".tox"}
)


def is_cache_path(path: str) -> bool:
    """True for tool caches (``__pycache__/``, ``.pytest_cache/``, ``*.pyc``) in a worktree."""
    parts = path.rstrip("/").split("/")
    return bool(_CACHE_PARTS.intersection(parts)) or path.endswith((".pyc", ".pyo"))
