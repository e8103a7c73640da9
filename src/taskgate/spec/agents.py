"""The spec workflow's agents: spec writer, validator, checklist writer, gap classifier.

A `SpecBackend` takes a role and a JSON request and returns a JSON reply; `SpecAgents` checks
every reply at this edge and turns it into typed values, so the loop trusts what it gets.
Backends:

- `scripted`: deterministic agents driven by a scenario (gaps, when they appear, how many
  answers resolve them, scripted answers and decisions). `--demo` and the tests use it.
- `command`, `claude`, `codex`: the task agents' backends (`taskgate.agents`), configured in
  taskgate.toml (`[spec] backend`, `[agents.<backend>]`) and run through the same door; see
  `taskgate.spec.backends`. `--agent-command EXE` is the command backend with `EXE` as its
  command: `EXE ROLE`, the request as JSON on stdin, the reply as a JSON object on stdout.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from taskgate.errors import TaskgateError, UsageError
from taskgate.spec.detect import words
from taskgate.spec.state import MAX_QUESTIONS, SEVERITIES, Clarification

if TYPE_CHECKING:
    from taskgate.spec.backends import SpecPlace

ROLES = ("spec-writer", "validator", "checklist", "gap-classifier")
NON_ANSWERS = frozenset({"", "?", "skip", "unknown", "don't know", "dont know", "n/a"})


class AgentFailed(TaskgateError):
    """A spec agent failed or replied outside the contract (exit 10; resume retries it)."""

    kind = "agent"


class SpecBackend(Protocol):
    """Runs one spec role: JSON request in, JSON reply out."""

    name: str

    def invoke(self, role: str, request: Mapping[str, Any]) -> Mapping[str, Any]:
        """The role's reply to `request`."""
        ...


@dataclass(frozen=True)
class Finding:
    """A gap as the validator reports it; `key` identifies it across iterations."""

    key: str
    severity: str
    summary: str
    section: str


@dataclass(frozen=True)
class QuestionDraft:
    """A clarification question from the gap classifier (the loop assigns its id)."""

    summary: str
    text: str
    gaps: tuple[str, ...]


# --- the scripted backend -------------------------------------------------------------------


@dataclass(frozen=True)
class ScriptedGap:
    """A gap the scripted validator reports until it has received `needs` real answers."""

    key: str
    severity: str
    summary: str
    section: str
    question: str
    needs: int | None = 1  # None: never resolved by answers (a stale gap)
    appears_at: int = 1  # first iteration the validator sees it


DEMO_SCENARIO: dict[str, Any] = {
    "gaps": [
        {
            "key": "actors",
            "severity": "critical",
            "summary": "Users and out-of-scope",
            "section": "User Scenarios",
            "question": "Who uses this feature, and what is explicitly out of scope?",
        },
        {
            "key": "data",
            "severity": "important",
            "summary": "Data kept and retention",
            "section": "Requirements",
            "question": "Which data must be stored, and for how long?",
        },
        {
            "key": "failure",
            "severity": "important",
            "summary": "Behaviour on failure",
            "section": "Edge Cases",
            "question": "What should the user see when the operation fails?",
        },
        {
            "key": "latency",
            "severity": "important",
            "summary": "Acceptable response time",
            "section": "Success Criteria",
            "appears_at": 2,
            "question": "What response time is acceptable for the main action?",
        },
        {
            "key": "glossary",
            "severity": "minor",
            "summary": "Terminology not defined",
            "section": "Key Entities",
            "question": "",
            "needs": None,
        },
    ],
    "answers": {
        "actors": ["Registered users; administration screens are out of scope"],
        "data": ["Only what the feature needs, kept for 90 days"],
        "failure": ["A clear error message and the option to retry"],
        "latency": ["Under 2 seconds for 95% of requests"],
    },
    "decisions": ["retry"],
}


def _gap_marker(key: str) -> str:
    return f"<!-- gap:{key} -->"


class ScriptedSpecBackend:
    """Deterministic spec agents: the same inputs always give the same documents."""

    name = "scripted"

    def __init__(self, scenario: Mapping[str, Any]) -> None:
        self.scenario = dict(scenario)
        try:
            self.gaps = [ScriptedGap(**g) for g in scenario.get("gaps", [])]
        except TypeError as exc:
            raise UsageError(f"spec scenario: bad gap entry ({exc})") from None
        for gap in self.gaps:
            if gap.severity not in SEVERITIES:
                raise UsageError(
                    f"spec scenario: gap {gap.key!r} has severity {gap.severity!r}",
                    hint=f"use one of {', '.join(SEVERITIES)}",
                )

    def invoke(self, role: str, request: Mapping[str, Any]) -> Mapping[str, Any]:
        """Dispatch to the role."""
        if role == "spec-writer":
            return {"spec": self._write(request)}
        if role == "validator":
            return {"gaps": self._validate(request)}
        if role == "checklist":
            return {"checklist": self._checklist(request)}
        if role == "gap-classifier":
            return {"questions": self._classify(request)}
        raise AgentFailed(f"unknown spec role {role!r}")

    def _write(self, request: Mapping[str, Any]) -> str:
        description = str(request["description"])
        title = description.strip().rstrip(".").split(".")[0][:80] or request["feature_id"]
        lines = [
            f"# Feature Specification: {title}",
            "",
            f"**Feature**: `{request['feature_id']}`  ",
            f'**Input**: "{description.strip()}"',
            "",
            "## User Scenarios",
            "",
            f"- As a user, I can use this feature: {description.strip()}",
            "",
            "## Requirements",
            "",
            f"- **FR-001**: The system MUST provide: {description.strip()}",
        ]
        clarifications = [
            c
            for c in request.get("clarifications", [])
            if str(c["answer"]).strip().lower() not in NON_ANSWERS
        ]
        for n, item in enumerate(clarifications, start=2):
            lines.append(f"- **FR-{n:03d}**: The system MUST honour: {item['answer']}")
        entities = list(dict.fromkeys(w.capitalize() for w in words(description)))[:3]
        lines += ["", "## Key Entities", "", *(f"- {e}" for e in entities or [title]), ""]
        if request.get("feedback"):
            lines += ["## Open Points", ""]
            lines += [f"- [NEEDS CLARIFICATION: {f}]" for f in request["feedback"]]
            lines.append("")
        if request.get("clarifications"):
            lines += ["## Clarifications", ""]
            for item in request["clarifications"]:
                markers = " ".join(_gap_marker(k) for k in item.get("keys", []))
                lines.append(f"- {item['question']}: {item['text']} → {item['answer']} {markers}")
            lines.append("")
        return "\n".join(lines)

    def _answered(self, spec: str, key: str) -> int:
        # A clarification line counts only when its answer is a real one (not "skip").
        count = 0
        for line in spec.splitlines():
            if _gap_marker(key) in line:
                answer = line.split(" → ", 1)[-1].split(" <!--", 1)[0].strip().lower()
                count += answer not in NON_ANSWERS
        return count

    def _validate(self, request: Mapping[str, Any]) -> list[dict[str, str]]:
        spec, iteration = str(request["spec"]), int(request["iteration"])
        found = []
        for gap in self.gaps:
            if iteration < gap.appears_at:
                continue
            if gap.needs is not None and self._answered(spec, gap.key) >= gap.needs:
                continue
            found.append(
                {
                    "key": gap.key,
                    "severity": gap.severity,
                    "summary": gap.summary,
                    "section": gap.section,
                }
            )
        return found

    def _checklist(self, request: Mapping[str, Any]) -> str:
        ids = re.findall(r"\*\*(FR-\d{3})\*\*", str(request["spec"]))
        lines = ["# Requirements Checklist", "", f"Feature: `{request['feature_id']}`", ""]
        lines += [
            f"- [ ] CHK-{n:03d} {fr} is testable and unambiguous ({fr})"
            for n, fr in enumerate(ids, start=1)
        ]
        lines += [f"- [ ] CHK-{len(ids) + 1:03d} No [NEEDS CLARIFICATION] markers remain", ""]
        return "\n".join(lines)

    def _classify(self, request: Mapping[str, Any]) -> list[dict[str, Any]]:
        questions = {g.key: g.question for g in self.gaps}
        groups: dict[str, list[Mapping[str, Any]]] = {}
        for gap in request["gaps"]:  # already in priority order
            groups.setdefault(str(gap["section"]), []).append(gap)
        drafts = []
        for members in list(groups.values())[: int(request["max_questions"])]:
            texts = [
                questions.get(str(g["key"])) or f"Please clarify: {g['summary']}" for g in members
            ]
            drafts.append(
                {
                    "summary": " / ".join(str(g["summary"]) for g in members),
                    "text": " ".join(texts),
                    "gaps": [g["id"] for g in members],
                }
            )
        return drafts

    def answer(self, key: str, round_: int) -> str:
        """The scripted answer for a gap the `round_`-th time it is asked (from 0)."""
        answers = self.scenario.get("answers", {}).get(key) or [f"Use the simplest option ({key})"]
        return str(answers[min(round_, len(answers) - 1)])

    def decide(self, index: int) -> str:
        """The scripted person's `index`-th decision (the last one repeats)."""
        decisions = self.scenario.get("decisions") or ["accept"]
        return str(decisions[min(index, len(decisions) - 1)])


def agents_config(
    script: str | None, command: str | None, *, demo: bool = False, configured: str = "scripted"
) -> dict[str, Any]:
    """The `agents` field of a new workflow: an --agent-command, a scripted scenario from a
    JSON file, the built-in demo scenario (`--demo`, or `configured` is scripted), or the
    `configured` backend ([spec] backend), whose options are read from taskgate.toml on every
    run."""
    if command:
        from taskgate.spec.backends import pin_command

        return {"backend": "command", "command": [pin_command(command)]}
    if script:
        try:
            scenario = json.loads(Path(script).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UsageError(f"--script {script}: {exc}", hint="pass a JSON scenario") from None
        if not isinstance(scenario, dict):
            raise UsageError(f"--script {script}: not a JSON object", hint="see docs/spec.md")
        ScriptedSpecBackend(scenario)  # validate once, at the edge
        return {"backend": "scripted", "scenario": scenario}
    if demo or configured == "scripted":
        return {"backend": "scripted", "scenario": DEMO_SCENARIO}
    return {"backend": configured}


def backend_from(config: Mapping[str, Any], place: SpecPlace | None = None) -> SpecBackend:
    """The backend a workflow's state names (`agents` field); `place` locates the workflow
    for the backends that run an executable (command, claude, codex)."""
    kind = config.get("backend", "scripted")
    if kind == "scripted":
        return ScriptedSpecBackend(config.get("scenario") or DEMO_SCENARIO)
    from taskgate.spec.backends import cli_backend

    if place is None:
        raise UsageError(
            f"spec agent backend {kind!r} needs the workflow's location",
            hint="run it through 'taskgate spec resume ID'",
        )
    return cli_backend(config, place)


# --- typed facade: validate every reply at the edge -----------------------------------------


def _expect(reply: Mapping[str, Any], key: str, kind: type, role: str) -> Any:
    value = reply.get(key)
    if not isinstance(value, kind):
        raise AgentFailed(
            f"spec agent {role} replied without a {kind.__name__} '{key}'",
            hint="the reply contract is in docs/spec.md",
        )
    return value


class SpecAgents:
    """The four roles with typed inputs and checked outputs."""

    def __init__(self, backend: SpecBackend) -> None:
        self.backend = backend

    def write_spec(
        self,
        feature_id: str,
        description: str,
        clarifications: Sequence[tuple[Clarification, Sequence[str]]],
        feedback: Sequence[str] = (),
    ) -> str:
        """spec.md from the description and every applied answer (idempotent)."""
        request = {
            "feature_id": feature_id,
            "description": description,
            "clarifications": [
                {
                    "question": c.question,
                    "text": c.text,
                    "answer": c.answer,
                    "gaps": c.gaps,
                    "keys": list(keys),
                    "iteration": c.iteration,
                }
                for c, keys in clarifications
            ],
            "feedback": list(feedback),
        }
        text: str = _expect(self.backend.invoke("spec-writer", request), "spec", str, "spec-writer")
        if not text.strip():
            raise AgentFailed("spec agent spec-writer returned an empty spec")
        return text if text.endswith("\n") else text + "\n"

    def validate(
        self, feature_id: str, description: str, spec: str, iteration: int
    ) -> list[Finding]:
        """The gaps the validator finds in `spec`."""
        request = {
            "feature_id": feature_id,
            "description": description,
            "spec": spec,
            "iteration": iteration,
        }
        raw = _expect(self.backend.invoke("validator", request), "gaps", list, "validator")
        findings: list[Finding] = []
        for item in raw:
            if not isinstance(item, dict) or item.get("severity") not in SEVERITIES:
                raise AgentFailed(f"validator gap {item!r} needs a severity in {SEVERITIES}")
            key = str(item.get("key") or item.get("summary") or "").strip()
            if not key or key in {f.key for f in findings}:
                raise AgentFailed(f"validator gap {item!r} needs a unique key")
            findings.append(
                Finding(
                    key,
                    str(item["severity"]),
                    str(item.get("summary", key)),
                    str(item.get("section", "")),
                )
            )
        return findings

    def checklist(self, feature_id: str, spec: str) -> str:
        """checklists/requirements.md for `spec`."""
        reply = self.backend.invoke("checklist", {"feature_id": feature_id, "spec": spec})
        text: str = _expect(reply, "checklist", str, "checklist")
        return text if text.endswith("\n") else text + "\n"

    def classify(self, gaps: Sequence[Mapping[str, Any]]) -> list[QuestionDraft]:
        """At most 3 questions; together they cover only the given gaps, each gap at most once."""
        request = {"gaps": list(gaps), "max_questions": MAX_QUESTIONS}
        raw = _expect(
            self.backend.invoke("gap-classifier", request), "questions", list, "gap-classifier"
        )
        known, seen = {str(g["id"]) for g in gaps}, set[str]()
        drafts: list[QuestionDraft] = []
        for item in raw[:MAX_QUESTIONS]:  # A5: never more than 3 questions
            ids = tuple(str(i) for i in item.get("gaps", [])) if isinstance(item, dict) else ()
            if not ids or not set(ids) <= known or seen & set(ids):
                raise AgentFailed(
                    f"gap-classifier question {item!r} must cover listed gaps, "
                    "each gap in one question only"
                )
            seen |= set(ids)
            text = str(item.get("text", "")).strip()
            drafts.append(
                QuestionDraft(
                    str(item.get("summary", "")).strip() or text[:60],
                    text or "Please clarify.",
                    ids,
                )
            )
        if gaps and not drafts:
            raise AgentFailed("gap-classifier asked no question for open gaps")
        return drafts
