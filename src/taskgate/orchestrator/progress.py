"""Progress of `taskgate run`: plain lines, a JSON event stream, and the closing timeline."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from typing import Any, TextIO


@dataclass
class Timeline:
    """Time per state, agents invoked, retries and commits: the summary at the end of a run."""

    started: float = field(default_factory=time.monotonic)
    states: list[tuple[str, str, float]] = field(default_factory=list)  # (task, state, seconds)
    invocations: int = 0
    retries: int = 0
    rounds: int = 0
    commits: list[str] = field(default_factory=list)
    _current: tuple[str, str, float] | None = None

    def enter(self, task: str, state: str) -> None:
        """A task is now in `state`."""
        now = time.monotonic()
        if self._current is not None:
            prev_task, prev_state, since = self._current
            if (prev_task, prev_state) == (task, state):
                return
            self.states.append((prev_task, prev_state, now - since))
        self._current = (task, state, now)

    def close(self) -> None:
        """Account the state the run ended in."""
        if self._current is not None:
            task, state, since = self._current
            self.states.append((task, state, time.monotonic() - since))
            self._current = None

    def render(self) -> str:
        """The human summary."""
        self.close()
        lines = ["", "Timeline:"]
        for task, state, seconds in self.states:
            lines.append(f"  {task:<16} {state:<24} {seconds:6.2f} s")
        lines.append(
            f"  total {time.monotonic() - self.started:.2f} s; {self.invocations} agent "
            f"invocations, {self.retries} retries, {self.rounds} implementation rounds, "
            f"{len(self.commits)} commits on main"
        )
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """Machine summary."""
        self.close()
        return {
            "seconds": round(time.monotonic() - self.started, 3),
            "states": [{"task": t, "state": s, "seconds": round(d, 3)} for t, s, d in self.states],
            "invocations": self.invocations,
            "retries": self.retries,
            "rounds": self.rounds,
            "commits": self.commits,
        }


@dataclass
class Progress:
    """Reports what the run does: plain lines (default) or JSON lines (`--json`)."""

    out: TextIO = field(default_factory=lambda: sys.stdout)
    as_json: bool = False
    timeline: Timeline = field(default_factory=Timeline)

    def emit(self, event: str, task: str, text: str, **data: Any) -> None:
        """One progress event."""
        if event == "state":
            self.timeline.enter(task, str(data.get("state")))
        if self.as_json:
            record = {"event": event, "task": task, "message": text, **data}
            self.out.write(json.dumps(record, sort_keys=True, default=str) + "\n")
        else:
            self.out.write(f"[{task}] {text}\n")
        self.out.flush()
