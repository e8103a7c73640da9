"""Where answers and decisions come from when no terminal is asked: nobody (the CLI exits 4
with what is pending), the scenario's scripted person (`--demo`), or answers given on the
command line (`spec answer`). The terminal responder lives in the CLI, which owns the I/O."""

from __future__ import annotations

from taskgate.spec.agents import DEMO_SCENARIO, ScriptedSpecBackend
from taskgate.spec.loop import Responder
from taskgate.spec.state import Decision, SpecState


class Nobody:
    """No person at hand: the run stops and the CLI exits 4 with what is pending."""

    def answers(self, state: SpecState) -> dict[str, str] | None:
        """Nobody answers."""
        return None

    def decide(self, state: SpecState, decision: Decision) -> str | None:
        """Nobody decides."""
        return None


class Scripted:
    """`--demo`: the scenario's scripted person answers and decides."""

    def __init__(self, state: SpecState) -> None:
        self.backend = ScriptedSpecBackend(state.agents.get("scenario") or DEMO_SCENARIO)

    def answers(self, state: SpecState) -> dict[str, str] | None:
        """For each question, the next scripted answer of each gap it covers."""
        out = {}
        for q in state.pending_questions:
            parts = []
            for gap_id in q.gaps:
                gap = state.gap(gap_id)
                assert gap is not None
                asked = sum(gap_id in c.gaps for c in state.clarifications)
                parts.append(self.backend.answer(gap.key, asked))
            out[q.id] = "; ".join(parts)
        return out

    def decide(self, state: SpecState, decision: Decision) -> str | None:
        """The next scripted decision."""
        return self.backend.decide(len(state.decisions))


class Preset:
    """`spec answer`: the given answers/decision once, then `then` for later questions."""

    def __init__(self, answers: dict[str, str], decision: str | None, then: Responder) -> None:
        self._answers, self._decision, self.then = answers or None, decision, then

    def answers(self, state: SpecState) -> dict[str, str] | None:
        """The preset answers the first time."""
        given, self._answers = self._answers, None
        return given if given is not None else self.then.answers(state)

    def decide(self, state: SpecState, decision: Decision) -> str | None:
        """The preset decision the first time."""
        given, self._decision = self._decision, None
        return given if given is not None else self.then.decide(state, decision)
