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
    builds: int = 0  # full validation runs (each costs the person the suite's run time)
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
            f"{self.builds} validation runs, {len(self.commits)} commits on main"
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
            "builds": self.builds,
            "commits": self.commits,
        }


@dataclass
class Progress:
    """Reports what the run does: a live view on a terminal, plain lines otherwise, or JSON
    lines (`--json`)."""

    out: TextIO = field(default_factory=lambda: sys.stdout)
    as_json: bool = False
    timeline: Timeline = field(default_factory=Timeline)
    live: bool | None = None  # None: a live status line when `out` is a terminal
    _running: dict[str, str] = field(default_factory=dict)
    _state: dict[str, str] = field(default_factory=dict)
    _round: dict[str, int] = field(default_factory=dict)
    _shown: bool = False

    def __post_init__(self) -> None:
        if self.live is None:
            self.live = not self.as_json and self.out.isatty()

    def emit(self, event: str, task: str, text: str, **data: Any) -> None:
        """One progress event."""
        if event == "state":
            self.timeline.enter(task, str(data.get("state")))
            self._state[task] = str(data.get("state"))
        elif event == "agent":
            self._running[str(data.get("agent"))] = str(data.get("mode", ""))
        elif event == "agent-result":
            self._running.pop(str(data.get("agent")), None)
        elif event == "round":
            self._round[task] = int(data.get("round", 0))
        if self.as_json:
            record = {"event": event, "task": task, "message": text, **data}
            self.out.write(json.dumps(record, sort_keys=True, default=str) + "\n")
        elif self.live:
            elapsed = time.monotonic() - self.timeline.started
            self.out.write(f"\r\033[K{elapsed:7.2f}s [{task}] {text}\n")
            self._status_line(task)
        else:
            self.out.write(f"[{task}] {text}\n")
        self.out.flush()

    def _status_line(self, task: str) -> None:
        """The live view's last line: state, round and the agents at work, redrawn in place."""
        parts = [f"\033[1m{task}\033[0m {self._state.get(task, '')}"]
        if self._round.get(task):
            parts.append(f"round {self._round[task]}")
        if self._running:
            parts.append("running: " + ", ".join(f"{a} ({m})" for a, m in self._running.items()))
        self.out.write("  " + " | ".join(parts))
        self._shown = True

    def finish(self) -> None:
        """Clear the live status line before the summary is printed."""
        if self.live and self._shown:
            self.out.write("\r\033[K")
            self.out.flush()
            self._shown = False
