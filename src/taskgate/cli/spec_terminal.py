"""Where the spec workflow's answers and decisions come from at the command line: a person at
the terminal, the scripted demo answers, or nobody (`taskgate spec`, cli/spec_cmds.py)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from taskgate.spec.state import Decision, SpecState


def interactive() -> bool:
    """True when a person can type answers (stdin is a terminal)."""
    return sys.stdin.isatty()


def ask(prompt: str) -> str | None:
    """One line typed at the terminal; None when input ends (Ctrl-D): nobody answered."""
    try:
        return input(prompt).strip()
    except EOFError:
        print()
        return None


class Terminal:
    """A person at the terminal answers the questions and makes the decisions."""

    def __init__(self, read: Callable[[str], str | None] = ask) -> None:
        self.read = read

    def answers(self, state: SpecState) -> dict[str, str] | None:
        """Ask each pending question in turn; all or nothing is recorded."""
        print(f"\nClarification questions (iteration {state.current_iteration}):")
        out = {}
        for q in state.pending_questions:
            print(f"\n{q.id} [{', '.join(q.gaps)}] {q.summary}\n  {q.text}")
            answer = self.read(f"{q.id}> ")
            if answer is None:
                return None
            out[q.id] = answer
        return out

    def decide(self, state: SpecState, decision: Decision) -> str | None:
        """Ask until one of the options is typed."""
        print(f"\n{decision.message}")
        while True:
            choice = self.read(f"[{'/'.join(decision.options)}]> ")
            if choice is None or choice.lower() in decision.options:
                return choice.lower() if choice else None
            print(f"please type one of: {', '.join(decision.options)}")


def responder(state: SpecState, demo: bool) -> Any:
    from taskgate.spec.responders import Nobody, Scripted

    if demo or state.scripted_answers:
        return Scripted(state)
    return Terminal() if interactive() else Nobody()
