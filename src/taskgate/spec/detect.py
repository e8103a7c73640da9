"""The specs directory: feature numbering, and resume detection (R-SPC-01..03, C-58, C-59).

"Matches" (the seed leaves `matches_feature` undefined, C-58) is defined on normalised words:
lowercase, ASCII letters and digits only, common English filler words and generic verbs
("add", "implement", "support" …) dropped, a trailing plural "s" removed. A workflow matches a
description when
- its short name equals the short name derived from the description, or
- the Jaccard similarity of the two word sets is at least `MATCH_THRESHOLD` (0.6).
A directory without saved state (a crash in A1, C-58) has no description, so it matches on
its short name alone: equal, or all of its words among the description's words.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from taskgate import failpoints
from taskgate.engine.clock import iso
from taskgate.errors import Corrupted, UsageError
from taskgate.spec.index import render_index
from taskgate.spec.state import (
    FEATURE_ID_RE,
    FINAL_STATUSES,
    SpecPaths,
    SpecState,
    load_state,
    save_state,
)

SPECS_DIR = "specs"
MATCH_THRESHOLD = 0.6
SLUG_WORDS = 4
_STOP = frozenset(
    {
        "a",
        "an",
        "the",
        "and",
        "or",
        "of",
        "to",
        "for",
        "in",
        "on",
        "at",
        "by",
        "with",
        "from",
        "into",
        "as",
        "is",
        "are",
        "be",
        "it",
        "its",
        "this",
        "that",
        "we",
        "our",
        "us",
        "you",
        "your",
        "i",
        "me",
        "my",
        "should",
        "must",
        "can",
        "could",
        "would",
        "will",
        "shall",
        "please",
        "so",
        "via",
        "add",
        "adds",
        "adding",
        "implement",
        "implementing",
        "create",
        "creating",
        "build",
        "building",
        "make",
        "support",
        "new",
        "feature",
        "allow",
        "allows",
        "let",
        "lets",
        "enable",
    }
)


def words(text: str) -> list[str]:
    """The normalised significant words of `text`, in order."""
    out = []
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        if word in _STOP:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.append(word)
    return out


def slugify(text: str) -> str:
    """The short name derived from a description: its first significant words, hyphenated."""
    slug = ""
    for word in words(text)[:SLUG_WORDS]:
        candidate = f"{slug}-{word}" if slug else word
        if len(candidate) > 40:
            break
        slug = candidate
    return slug or "feature"


def similarity(a: str, b: str) -> float:
    """Jaccard similarity of the normalised word sets of two descriptions (0..1)."""
    left, right = set(words(a)), set(words(b))
    if not left or not right:
        return 0.0
    return len(left & right) / len(left | right)


@dataclass(frozen=True)
class Candidate:
    """A workflow in specs/: its state (None for a directory without state) and activity."""

    paths: SpecPaths
    state: SpecState | None
    last_activity: str
    problem: str = ""  # why the state could not be read, if it could not

    @property
    def feature_id(self) -> str:
        """NNN-name."""
        return self.paths.root.name

    @property
    def finished(self) -> bool:
        """Completed or terminated (never offered by detection, C-59)."""
        return self.state is not None and self.state.loop_status in FINAL_STATUSES

    def matches(self, description: str) -> bool:
        """Does this workflow match `description`? (module docstring)"""
        slug = self.feature_id[4:]
        if slug == slugify(description):
            return True
        if self.state is None:
            own = slug.split("-")
            return len(own) >= 2 and set(own) <= set(words(description))
        return similarity(self.state.description, description) >= MATCH_THRESHOLD


def specs_root(repo: Path) -> Path:
    """`specs/` in the main worktree."""
    return repo / SPECS_DIR


def scan(root: Path) -> list[Candidate]:
    """Every feature directory `NNN-name` under `root`, most recent activity first (R-SPC-03)."""
    found: list[Candidate] = []
    if not root.is_dir():
        return found
    for entry in root.iterdir():
        if not entry.is_dir() or not FEATURE_ID_RE.fullmatch(entry.name):
            continue
        paths = SpecPaths(entry)
        try:
            state = load_state(paths)
            problem = ""
        except Corrupted as exc:
            state, problem = None, exc.message
        if state is not None:
            activity = state.last_activity
        else:  # C-58: no saved state; the directory's own time stands in for activity
            activity = iso(datetime.fromtimestamp(entry.stat().st_mtime, UTC))
        found.append(Candidate(paths, state, activity, problem))
    found.sort(key=lambda c: (c.last_activity, c.feature_id), reverse=True)
    return found


def detect(root: Path, description: str) -> list[Candidate]:
    """Interrupted workflows matching `description`, most recent first (R-SPC-02, R-SPC-03).
    Completed and terminated ones are never offered (C-59); unreadable ones are, so that the
    person sees them (their integrity check then offers repair or fresh start)."""
    return [c for c in scan(root) if not c.finished and c.matches(description)]


def find(root: Path, feature: str) -> Candidate:
    """The workflow named `feature` (NNN-name, or NNN alone); UsageError when there is none."""
    for candidate in scan(root):
        if feature in (candidate.feature_id, candidate.feature_id[:3]):
            return candidate
    raise UsageError(
        f"no spec workflow {feature!r} in {root}", hint="'taskgate spec list' shows the workflows"
    )


def create(
    root: Path, description: str, slug: str, *, agents: dict[str, object], scripted: bool, now: str
) -> SpecPaths:
    """A1's first half: reserve the next number with a new directory and save the initial
    state (loop status scaffolding). The caller holds the numbering lock."""
    if not description.strip():
        raise UsageError("the feature description is empty", hint='taskgate spec new "what"')
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,59}", slug):
        raise UsageError(
            f"spec name {slug!r} must match [a-z0-9][a-z0-9-]{{0,59}}",
            hint="pass --name with lowercase letters, digits and '-'",
        )
    root.mkdir(parents=True, exist_ok=True)
    numbers = [int(p.name[:3]) for p in root.iterdir() if FEATURE_ID_RE.fullmatch(p.name)]
    number = max(numbers, default=0) + 1
    if number > 999:
        raise UsageError("specs/ already holds 999 features", hint="archive old specs")
    paths = SpecPaths(root / f"{number:03d}-{slug}")
    os.mkdir(paths.root)  # the reservation: a second process fails here, not later
    failpoints.hit("spec:A1:dir")  # crash here leaves an orphan directory (C-58)
    adopt_orphan(paths, description, agents=agents, scripted=scripted, now=now)
    return paths


def adopt_orphan(
    paths: SpecPaths, description: str, *, agents: dict[str, object], scripted: bool, now: str
) -> SpecState:
    """Give a directory without state (C-58) its initial state; it then resumes at A1."""
    state = SpecState(
        feature_id=paths.root.name,
        description=description.strip(),
        loop_status="scaffolding",
        phase="A1",
        created=now,
        agents=dict(agents),
        scripted_answers=scripted,
    )
    return save_state(paths, state, render=render_index)
