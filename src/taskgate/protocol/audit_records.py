"""What the compliance checks read and return (RULES §15): the recorded task as plain records
(`AuditInput`, built by engine/audit.py from a store snapshot) and the results (`CheckResult`,
`Finding`). The checks themselves are in protocol/audit_checks.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

WRITE_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
MAIN_AGENT = "main"
# R-AGT-12 names Java sources; the same rule applies to the source files of any language.
SOURCE_SUFFIXES = frozenset(
    {
        ".java",
        ".py",
        ".pyi",
        ".js",
        ".jsx",
        ".mjs",
        ".ts",
        ".tsx",
        ".go",
        ".rs",
        ".c",
        ".h",
        ".cc",
        ".cpp",
        ".hpp",
        ".cs",
        ".kt",
        ".kts",
        ".scala",
        ".rb",
        ".php",
        ".swift",
        ".m",
        ".mm",
        ".sh",
    }
)
SOURCE_NAMES = frozenset({"pom.xml", "module-info.java", "build.gradle", "build.gradle.kts"})
SOURCE_DIRS = ("src/main/java/", "src/test/java/")
AGENT_TAG = re.compile(r"\[agent:([A-Za-z0-9_.-]+)\]")
CHECK_ALIASES = {"0.2": "1.2"}  # C-13: the seeds' code uses 0.2 for check 1.2


@dataclass(frozen=True)
class Event:
    """One audit event, in chain order (`seq` orders events within and across steps)."""

    seq: int
    kind: str
    at: str
    payload: Mapping[str, Any]


@dataclass(frozen=True)
class Logged:
    """One transition_log row."""

    index: int
    source: str
    target: str
    at: str
    reason: str = ""


@dataclass(frozen=True)
class ApprovalRecord:
    """An approval row with its provenance (the channel it came from)."""

    kind: str
    bound_to: str
    presented_at: str
    approved_at: str
    provenance: str
    revoked_at: str | None = None


@dataclass(frozen=True)
class PresentationRecord:
    """What was shown at a checkpoint."""

    kind: str
    bound_to: str
    at: str


@dataclass(frozen=True)
class AgentRecord:
    """An agent row: initial selection or a dynamic addition."""

    agent: str
    initial: bool
    added_at_state: str | None = None
    justification: str = ""


@dataclass(frozen=True)
class Commit:
    """A commit on the task branch (base..T)."""

    sha: str
    message: str
    files: tuple[str, ...] = ()
    merge: bool = False


@dataclass(frozen=True)
class AuditInput:
    """Everything the pure checks judge about one task."""

    task: str
    state: str
    risk_level: str | None = None
    change_type: str | None = None
    required_agents: tuple[str, ...] = ()
    initial_agents: tuple[str, ...] | None = None  # the classification's selection
    transitions: tuple[Logged, ...] = ()
    events: tuple[Event, ...] = ()
    approvals: tuple[ApprovalRecord, ...] = ()
    presentations: tuple[PresentationRecord, ...] = ()
    agents: tuple[AgentRecord, ...] = ()
    commits: tuple[Commit, ...] | None = None  # None: the branch is gone (merged, cleaned up)
    task_md: str | None = None
    report_sizes: Mapping[str, int | None] = field(default_factory=dict)
    archival_sha: str | None = None
    merged_sha: str | None = None
    auto_approve_allowed: bool = False


@dataclass(frozen=True)
class Finding:
    """One violation: what the record shows, how to fix it, and why it probably happened."""

    evidence: str
    fix: str
    root_cause: str

    def to_json(self) -> dict[str, str]:
        """Stable JSON shape."""
        return {"evidence": self.evidence, "fix": self.fix, "root_cause": self.root_cause}


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check; it passes when it has no findings (notes never fail it)."""

    id: str
    title: str
    rules: tuple[str, ...]
    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        """True when nothing was found."""
        return not self.findings

    def to_json(self) -> dict[str, Any]:
        """Stable JSON shape used by `audit --json`."""
        return {
            "id": self.id,
            "title": self.title,
            "rules": list(self.rules),
            "passed": self.passed,
            "findings": [f.to_json() for f in self.findings],
            "notes": list(self.notes),
        }


def canonical_check_id(check_id: str) -> str:
    """Accept the seeds' aliases (C-13: 0.2 is check 1.2)."""
    return CHECK_ALIASES.get(check_id, check_id)


def is_source_file(path: str) -> bool:
    """Source files the main agent must not write during IMPLEMENTATION (R-AGT-12, C-27)."""
    p = PurePosixPath(path.replace("\\", "/"))
    if ".taskgate" in p.parts:
        # Worktrees live under .taskgate/tasks/T/[agents/A/]code; everything else there
        # (task.md, reports, views) is the main agent's to write.
        parts = p.parts[p.parts.index(".taskgate") :]
        if "code" not in parts:
            return False
        p = PurePosixPath(*parts[parts.index("code") + 1 :])
    text = str(p)
    return (
        p.name in SOURCE_NAMES
        or p.suffix in SOURCE_SUFFIXES
        or any(d in f"/{text}" or text.startswith(d) for d in SOURCE_DIRS)
    )
