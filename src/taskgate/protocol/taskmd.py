"""task.md and requirement reports (RULES §7): the document rules guards and checkpoints share."""

from __future__ import annotations

from taskgate.protocol.states import MIN_REPORT_BYTES, TASK_MD_SECTIONS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

# What plan_section finds, as the regexes it used (issue 18, fifth pass: it now reads the text
# with str methods, without importing `re`; tests/test_taskmd.py compares both):
PLAN_HEADING = r"^##[ \t]+.*implementation plan.*$"  # re.IGNORECASE | re.MULTILINE
LEVEL2 = r"^##[ \t]"  # re.MULTILINE

# R-DOC-11: the six plan components, each matched by any of its spellings.
PLAN_COMPONENTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("File manifest (Files to Create / Files to Modify)", ("files to create", "files to modify")),
    ("API Design", ("api design",)),
    ("Behavior Specifications", ("behavior specification", "behaviour specification")),
    ("Test Cases", ("test cases",)),
    ("Implementation Sequence", ("implementation sequence",)),
    ("Decision log", ("decision log", "key design decisions")),
)


def plan_section(task_md: str) -> str | None:
    """The `## ... Implementation Plan ...` section up to the next level-2 heading, or None:
    from the first line matching PLAN_HEADING to the next line matching LEVEL2."""
    for start, end in _level2_lines(task_md, 0):
        if _names_the_plan(task_md[start + 3 : end]):
            following = next(_level2_lines(task_md, end + 1), None) if end < len(task_md) else None
            return task_md[start : len(task_md) if following is None else following[0]]
    return None


def _level2_lines(text: str, start: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each line from the line starting at `start` on that starts with "##"
    and a space or a tab (LEVEL2): lines as re.MULTILINE sees them, each beginning at the
    text's start or just after a "\n" and ending before its "\n"."""
    while True:
        end = text.find("\n", start)
        if text.startswith("##", start) and text[start + 2 : start + 3] in (" ", "\t"):
            yield start, len(text) if end < 0 else end
        if end < 0:
            return
        start = end + 1


def _names_the_plan(rest: str) -> bool:
    """`.*implementation plan.*` under re.IGNORECASE matches `rest` (a line after its "## ")."""
    if rest.isascii():  # re.IGNORECASE on ASCII text: the letters' ASCII cases, as lower()
        return "implementation plan" in rest.lower()
    import re  # non-ASCII letters that re takes for i (U+0130, U+0131): re decides

    return re.search("implementation plan", rest, re.IGNORECASE) is not None


def plan_hash(task_md: str | None) -> str | None:
    """SHA-256 of the plan section; plan approval is bound to it (R-CKP-15, C-46)."""
    if task_md is None:
        return None
    section = plan_section(task_md)
    if section is None:
        return None
    normalised = "\n".join(line.rstrip() for line in section.strip().splitlines())
    return _sha256(normalised.encode("utf-8"))


def _sha256(data: bytes) -> str:
    """hashlib.sha256(data).hexdigest() through the builtin module when there is one: hashlib
    loads OpenSSL, a few milliseconds of every guarded command (issue 18)."""
    try:
        from _sha256 import sha256  # type: ignore[import-not-found]  # Python 3.11
    except ImportError:  # pragma: no cover - 3.12+ names it _sha2; other interpreters
        try:
            from _sha2 import sha256  # type: ignore[import-not-found]
        except ImportError:
            from hashlib import sha256
    return str(sha256(data).hexdigest())


def missing_plan_components(task_md: str) -> list[str]:
    """The R-DOC-11 plan components that task.md lacks (case-insensitive)."""
    lowered = task_md.lower()
    return [name for name, spellings in PLAN_COMPONENTS if not any(s in lowered for s in spellings)]


def missing_sections(task_md: str) -> list[str]:
    """The D-DOC-1 mandatory headings missing from task.md (literal `## ` lines, R-DOC-02)."""
    present = {line[3:].strip() for line in task_md.splitlines() if line.startswith("## ")}
    return [s for s in TASK_MD_SECTIONS if s not in present]


def report_problem(size: int | None) -> str | None:
    """Why a requirements report is invalid (R-DOC-04), or None when it is valid."""
    if size is None:
        return "report missing"
    if size == 0:
        return "report is empty"
    if size < MIN_REPORT_BYTES:
        return f"too small ({size} bytes)"
    return None


def add_stakeholder(task_md: str, task: str, agent: str) -> str:
    """task.md with a placeholder for `agent` at the end of `## Stakeholder Agent Reports`
    (R-AGT-22: an added agent belongs on the stakeholder list). Other sections, the plan
    among them, stay byte-identical, so the plan hash does not move."""
    import re

    if re.search(rf"^###[ \t]+{re.escape(agent)}[ \t]*$", task_md, re.MULTILINE):
        return task_md
    heading = re.search(r"^## Stakeholder Agent Reports[ \t]*$", task_md, re.MULTILINE)
    entry = f"### {agent}\n\n_pending: {task}-{agent}-requirements.md_\n\n"
    if heading is None:
        return task_md.rstrip("\n") + f"\n\n## Stakeholder Agent Reports\n\n{entry}"
    following = re.compile(LEVEL2, re.MULTILINE).search(task_md, heading.end())
    at = following.start() if following else len(task_md)
    before = task_md[:at].rstrip("\n") + "\n\n"
    return before + entry + task_md[at:]
