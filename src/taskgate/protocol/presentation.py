"""What the person sees at a checkpoint: the plan summary and the change review (pure).

The plan summary follows seed 002 "Plan Presentation Format for User Approval" in the
Purpose -> Approach -> Benefits order (R-DOC-12), built from the plan section of task.md;
the change review shows what the approval will be bound to (R-CKP-10, R-CKP-13).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from taskgate.protocol import taskmd
from taskgate.protocol.violations import Violation

# R-DOC-13: always among the success criteria. The seeds' second line names Java's linters
# ("Checkstyle and PMD pass with zero violations"); taskgate states the configured validation
# commands instead (required_criteria), so a plan reads right in any language.
REQUIRED_CRITERIA = ("Build passes with zero test failures",)


def required_criteria(commands: Sequence[Sequence[str]] = ()) -> tuple[str, ...]:
    """R-DOC-13 for this repository: zero test failures, and each validation command passes."""
    return (*REQUIRED_CRITERIA, *(f"`{' '.join(c)}` passes" for c in commands))


# Plan sub-headings -> the summary part they feed; the first matching spelling wins, so the
# specific spellings come before the general ones ("files to create/modify" before "files").
_PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("purpose", ("problem statement", "purpose", "problem", "motivation", "background")),
    ("approach", ("proposed solution", "approach", "solution", "overview")),
    ("benefits", ("benefit", "outcome")),
    ("scope", ("scope",)),
    ("decisions", ("decision",)),
    ("files_create", ("files to create",)),
    ("files_modify", ("files to modify",)),
    ("files", ("file manifest", "files")),
    ("api", ("api", "signature")),
    ("behavior", ("behavio",)),
    ("phases", ("implementation sequence", "implementation phase", "phase", "sequence")),
    ("tests", ("test case", "tests", "test plan", "testing")),
    ("criteria", ("success criteria", "acceptance")),
    ("risks", ("risk", "mitigation")),
)
_HEADING_RE = re.compile(r"^(#{3,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
_LEVEL2_RE = re.compile(r"^##[ \t]+(.+?)[ \t]*$", re.MULTILINE)
_ITEM_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?(.*\S)\s*$")
# "1. quality implements X; 2. test writes Y" on one line is two phases.
_INLINE_ITEM_RE = re.compile(r";\s*(?=\d+[.)]\s)")
_NUMBER_RE = re.compile(r"^\s*\d+[.)]\s+")
_BACKTICK_RE = re.compile(r"`([^`]+)`")
_PATHLIKE_RE = re.compile(r"[\w./-]*[/.][\w./-]*\w")
_TEST_NAME_RE = re.compile(r"\btest_\w+")
_AGENT_TAG_RE = re.compile(r"\(\s*agents?\s*:\s*([^)]+)\)", re.IGNORECASE)
# R-DOC-14: the main agent never implements; the plan must delegate every phase.
_MAIN_AGENT_IMPLEMENTS_RE = re.compile(
    r"\bmain\s+agent\s+(?:will\s+|shall\s+)?(?:implement|write|code)s?\b"
    r"|\bi(?:\s+will|'ll|\s+shall)\s+(?:now\s+|first\s+)?implement\b"
    r"|\bimplemented\s+by\s+the\s+main\s+agent\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class FileEntry:
    """One row of the file manifest."""

    path: str
    purpose: str
    change: str  # "Create", "Modify" or what the plan's table says
    owner: str = ""  # the agent the plan names for this file, if any

    def to_json(self) -> dict[str, str]:
        """JSON shape for `present --json`."""
        return {"path": self.path, "purpose": self.purpose, "change": self.change,
                "owner": self.owner}  # fmt: skip


@dataclass(frozen=True)
class Phase:
    """One implementation phase and the agents it names."""

    number: int
    text: str
    agents: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        """JSON shape for `present --json`."""
        return {"number": self.number, "text": self.text, "agents": list(self.agents)}


@dataclass(frozen=True)
class PlanView:
    """The plan section of task.md, sorted into the parts the summary shows."""

    parts: Mapping[str, str]
    files: tuple[FileEntry, ...]
    phases: tuple[Phase, ...]
    test_count: int
    criteria: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    problems: tuple[Violation, ...] = ()

    def to_json(self) -> dict[str, object]:
        """JSON shape for `present --json`."""
        return {
            "files": [f.to_json() for f in self.files],
            "phases": [p.to_json() for p in self.phases],
            "test_count": self.test_count,
            "success_criteria": list(self.criteria),
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True)
class ChangeView:
    """What the change review shows; the approval is bound to `commit_sha` (R-CKP-13)."""

    task: str
    commit_sha: str
    branch: str
    base: str
    diff_stat: str
    commits: tuple[str, ...] = ()
    validation: Mapping[str, object] | None = None  # success, command, head_sha, at
    verdicts: Mapping[str, str] = field(default_factory=dict)
    feedback: tuple[str, ...] = ()  # earlier change requests this round answers
    pushed_to: str = ""  # "origin/T" when the branch was pushed (R-CKP-10 step 5)


def _level2_sections(text: str) -> dict[str, str]:
    found = list(_LEVEL2_RE.finditer(text))
    sections: dict[str, str] = {}
    for i, match in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(text)
        sections[match.group(1).strip().lower()] = text[match.end() : end].strip()
    return sections


def _part_of(heading: str) -> str | None:
    lowered = heading.lower()
    for part, spellings in _PARTS:
        if any(s in lowered for s in spellings):
            return part
    return None


def split_plan(plan: str) -> dict[str, str]:
    """The plan's level-3+ subsections keyed by summary part (text under each, stripped)."""
    found = list(_HEADING_RE.finditer(plan))
    parts: dict[str, str] = {}
    for i, match in enumerate(found):
        part = _part_of(match.group(2))
        if part is None:
            continue
        end = found[i + 1].start() if i + 1 < len(found) else len(plan)
        body = plan[match.end() : end].strip()
        parts[part] = f"{parts[part]}\n{body}".strip() if part in parts else body
    return parts


def _items(text: str) -> list[str]:
    items: list[str] = []
    for line in text.splitlines():
        match = _ITEM_RE.match(line)
        if match:
            parts = _INLINE_ITEM_RE.split(match.group(1))
            items += [_NUMBER_RE.sub("", p).strip() for p in parts if p.strip()]
    return items


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


_EMPTY_CELLS = {"", "-", "—", "(none)", "none", "n/a", "_(none)_"}


def _columns(header: list[str]) -> dict[str, int]:
    """Which column holds the path, the purpose, the change kind and the owner."""
    roles: dict[str, int] = {}
    for index, cell in enumerate(c.lower() for c in header):
        role = next(
            (r for r, words in (("path", ("file", "path")), ("owner", ("owner", "agent")),
                                ("change", ("action", "kind", "type", "create")),
                                ("purpose", ("purpose", "change", "description", "what")))
             if any(w in cell for w in words)),
            None,
        )  # fmt: skip
        if role == "purpose" and "purpose" in roles and "change" in cell:
            role = "change"  # "| File | Purpose | Changes |": the third column says how
        if role and role not in roles:
            roles[role] = index
    roles.setdefault("path", 0)
    roles.setdefault("purpose", 1)
    return roles


def _cell(cells: list[str], roles: dict[str, int], role: str) -> str:
    index = roles.get(role)
    return cells[index].strip() if index is not None and index < len(cells) else ""


def _files(text: str, change: str) -> list[FileEntry]:
    entries: list[FileEntry] = []
    roles: dict[str, int] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("|"):
            cells = _cells(stripped)
            if not cells or set("".join(cells)) <= set("-: "):
                continue  # the separator row
            if roles is None:
                roles = _columns(cells)
                if any(w in cells[roles["path"]].lower() for w in ("file", "path")):
                    continue  # the header row
            path = _cell(cells, roles, "path").strip("`")
            if path.lower() in _EMPTY_CELLS:
                continue  # a placeholder row such as "| (none) | | |"
            kind = _cell(cells, roles, "change")
            entries.append(
                FileEntry(
                    path,
                    _cell(cells, roles, "purpose"),
                    kind if kind.lower().startswith(("create", "modify", "delete")) else change,
                    _cell(cells, roles, "owner").strip("`"),
                )
            )
            continue
        roles = None
        match = _ITEM_RE.match(line)
        if not match:
            continue
        item = match.group(1)
        ticked = _BACKTICK_RE.search(item)
        pathlike = ticked or _PATHLIKE_RE.search(item)
        if pathlike is None:
            continue
        path = pathlike.group(1) if ticked else pathlike.group(0)
        rest = item[pathlike.end() :].strip(" \t:-—–()`")
        tag = _AGENT_TAG_RE.search(rest)
        owner = tag.group(1).strip() if tag else ""
        rest = _AGENT_TAG_RE.sub("", rest).strip(" \t:-—–()`")
        entries.append(FileEntry(path, rest, change, owner))
    return entries


def _phases(text: str, agents: Sequence[str]) -> list[Phase]:
    phases: list[Phase] = []
    for number, item in enumerate(_items(text), start=1):
        named: list[str] = []
        tag = _AGENT_TAG_RE.search(item)
        if tag:
            named += [a.strip() for a in re.split(r"[,/&]|\band\b", tag.group(1)) if a.strip()]
        named += [
            a for a in agents if a not in named and re.search(rf"\b{re.escape(a)}\b", item, re.I)
        ]
        phases.append(Phase(number, item, tuple(named)))
    return phases


def _test_count(text: str) -> int:
    names = set(_TEST_NAME_RE.findall(text))
    return len(names) if names else len(_items(text))


def parse_plan(
    task_md: str, agents: Sequence[str] = (), required: Sequence[str] = REQUIRED_CRITERIA
) -> PlanView:
    """Sort task.md's plan into the summary's parts; note gaps (R-DOC-12) and R-DOC-14.

    `required` are the success criteria every plan gets (R-DOC-13; see required_criteria)."""
    plan = taskmd.plan_section(task_md) or ""
    parts = split_plan(plan)
    top = _level2_sections(task_md)
    if "purpose" not in parts and top.get("task objective"):
        parts["purpose"] = top["task objective"]  # the todo.md Purpose, written at CLASSIFIED
    if "scope" not in parts and top.get("scope definition"):
        parts["scope"] = top["scope definition"]
    files = [
        *_files(parts.get("files_create", ""), "Create"),
        *_files(parts.get("files_modify", ""), "Modify"),
        *_files(parts.get("files", ""), "Create/Modify"),
    ]
    phases = _phases(parts.get("phases", ""), agents)
    criteria = _items(parts.get("criteria", ""))
    lowered = [c.lower() for c in criteria]
    criteria += [c for c in required if not any(c.lower().strip("`") in x for x in lowered)]
    warnings = [
        f"the plan has no {label} (R-DOC-12)"
        for part, label in (
            ("purpose", "problem statement"),
            ("approach", "proposed solution"),
            ("benefits", "benefits"),
            ("risks", "risks and mitigations"),
        )
        if not parts.get(part)
    ]
    if not files:
        warnings.append("the file manifest lists no files (R-DOC-11)")
    warnings += [
        f"phase {p.number} names no agent (R-DOC-12): {p.text}" for p in phases if not p.agents
    ]
    problems = tuple(
        Violation(
            "R-DOC-14",
            f"the plan assigns implementation to the main agent: '{m.group(0)}'",
            "delegate every implementation phase to a stakeholder agent, then present again",
        )
        for m in _MAIN_AGENT_IMPLEMENTS_RE.finditer(plan)
    )
    return PlanView(
        parts=parts,
        files=tuple(files),
        phases=tuple(phases),
        test_count=_test_count(parts.get("tests", "")),
        criteria=tuple(criteria),
        warnings=tuple(warnings),
        problems=problems,
    )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _or_missing(text: str | None) -> str:
    return text.strip() if text and text.strip() else "_(not stated in the plan)_"


def render_plan(
    view: PlanView,
    *,
    task: str,
    title: str,
    risk_level: str,
    agents: Sequence[str],
    task_md_path: str,
) -> str:
    """The seed 002 plan summary, Purpose -> Approach -> Benefits first (R-DOC-12, D-CKP-1)."""
    p = view.parts
    creates = sum(1 for f in view.files if f.change.lower().startswith("create"))
    modifies = len(view.files) - creates
    lines = [
        "## Implementation Plan Summary",
        "",
        f"**Task**: {task}" + (f" - {title}" if title and title != task else ""),
        f"**Risk Level**: {risk_level or 'unclassified'}",
        f"**Stakeholder Agents**: {', '.join(agents) or 'none'}",
        "",
        "### Problem Statement",
        _or_missing(p.get("purpose")),
        "",
        "### Proposed Solution",
        _or_missing(p.get("approach")),
        "",
        "### Benefits",
        _or_missing(p.get("benefits")),
        "",
        "### Scope Summary",
        f"**Files to create**: {_plural(creates, 'file')}",
        f"**Files to modify**: {_plural(modifies, 'file')}",
        f"**Test coverage**: {_plural(view.test_count, 'planned test')}",
    ]
    if p.get("scope"):
        lines += ["", p["scope"]]
    lines += ["", "### Key Design Decisions", _or_missing(p.get("decisions")), ""]
    owners = any(f.owner for f in view.files)
    lines += [
        "### Files to Create/Modify",
        "| File Path | Purpose | Changes |" + (" Owner |" if owners else ""),
        "|---|---|---|" + ("---|" if owners else ""),
    ]
    lines += [
        f"| `{f.path}` | {f.purpose or '-'} | {f.change} |"
        + (f" {f.owner or '-'} |" if owners else "")
        for f in view.files
    ]
    if not view.files:
        lines.append("_(the plan lists no files)_")
    lines += ["", "### Key API Signatures", _or_missing(p.get("api")), ""]
    lines += ["### Behavioral Summary", _or_missing(p.get("behavior")), ""]
    lines.append("### Implementation Phases")
    lines += [
        f"{ph.number}. {_AGENT_TAG_RE.sub('', ph.text).strip()} "
        f"(Agent: {', '.join(ph.agents) or 'UNASSIGNED'})"
        for ph in view.phases
    ] or ["_(no phases in the plan)_"]
    lines += ["", "### Success Criteria", *(f"- [ ] {c}" for c in view.criteria), ""]
    lines += ["### Risks and Mitigations", _or_missing(p.get("risks")), ""]
    if view.warnings:
        lines += ["### Gaps in the plan", *(f"- {w}" for w in view.warnings), ""]
    lines += [
        "---",
        "",
        f"**Full implementation details**: See `{task_md_path}`",
        "",
        "**Please review and respond with:**",
        '- "approved" / "proceed" to begin implementation',
        "- Or provide feedback for plan revisions",
    ]
    return "\n".join(lines)


def render_changes(view: ChangeView) -> str:
    """The change review: the SHA the approval binds to, branch, diff, build and reviews."""
    v = view.validation
    if v is None:
        build = "not run"
    elif v.get("head_sha") != view.commit_sha:
        build = f"not run for this commit (last run was for {str(v.get('head_sha'))[:12]})"
    else:
        build = f"{'PASSED' if v.get('success') else 'FAILED'} ({v.get('command')})"
    reviews = ", ".join(f"{a}: {d}" for a, d in sorted(view.verdicts.items())) or "none"
    lines = [
        "## Change Review",
        "",
        f"**Task**: {view.task}",
        f"**Commit**: {view.commit_sha}",
        f"**Branch**: {view.branch} (merges into {view.base})"
        + (f", pushed to {view.pushed_to}" if view.pushed_to else ""),
        f"**Validation**: {build}",
        f"**Reviews**: {reviews}",
    ]
    if view.feedback:
        lines += ["", "### Change requests addressed", *(f"- {f}" for f in view.feedback)]
    if view.commits:
        lines += ["", "### Commits", *(f"- {c}" for c in view.commits)]
    lines += ["", "### Diff stat", "```", view.diff_stat or "(no changes)", "```", ""]
    lines += [
        "---",
        "",
        f"Approving binds to commit {view.commit_sha[:12]}; a new commit needs a new review.",
        "",
        "**Please review and respond with:**",
        '- "approved" / "merge it" to merge into ' + view.base,
        "- Or say what to change (the task goes back to work at once)",
    ]
    return "\n".join(lines)
