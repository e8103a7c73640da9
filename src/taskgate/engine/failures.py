"""Which agents fix a failed build: failing tests → files → the agents that own them (C-49).

Evidence, strongest first: the files a failure names (its traceback or compiler message, the
test file, the modules a Python test imports), then who touched them in this task — the
agents whose tagged commits on the task branch changed them — and otherwise who the plan
makes their owner. A failure nobody in the task touched goes to every agent that committed
(their change broke an existing test); only a build without any of this evidence is unrouted,
and the orchestrator escalates it (R-VAL-08).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from taskgate.engine.core import Engine
from taskgate.fsutil import read_text
from taskgate.git.cmd import git
from taskgate.protocol import testreports as tr
from taskgate.protocol.buildfail import BuildFailure
from taskgate.protocol.filekinds import is_test_path
from taskgate.store.records import TaskSnapshot

_IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import|import\s+([\w.]+))", re.MULTILINE)
_MAX_FEEDBACK = 6000
_MAX_ROUTED = 50


@dataclass
class Routing:
    """Failures per agent, how each was decided, and what could not be routed."""

    agents: dict[str, list[tr.TestFailure]] = field(default_factory=dict)
    why: dict[str, set[str]] = field(default_factory=dict)  # agent -> files that decided it
    unrouted: list[tr.TestFailure] = field(default_factory=list)

    def add(self, agent: str, failure: tr.TestFailure, files: Sequence[str]) -> None:
        """Route `failure` to `agent` because of `files`."""
        bucket = self.agents.setdefault(agent, [])
        if failure not in bucket:
            bucket.append(failure)
        self.why.setdefault(agent, set()).update(files)


def _tracked(engine: Engine, task: str) -> list[str]:
    out = git("ls-files", "-z", cwd=engine.ws.task_worktree(task), check=False).stdout
    return [p for p in out.split("\0") if p]


def _authors(engine: Engine, snap: TaskSnapshot, path: str, team: Sequence[str]) -> list[str]:
    """Agents whose tagged commits on T (since the task began) changed `path`."""
    t = snap.task
    base = t.base_sha or f"refs/heads/{t.base_branch}"
    out = git("log", "--no-merges", "--format=%s", f"{base}..refs/heads/{t.name}", "--", path,
              cwd=engine.ws.repo, check=False).stdout  # fmt: skip
    found = []
    for line in out.splitlines():
        match = re.match(r"\[agent:([\w.-]+)\]", line)
        if match and match.group(1) in team and match.group(1) not in found:
            found.append(match.group(1))
    return found


def _plan_owners(engine: Engine, snap: TaskSnapshot) -> dict[str, str]:
    """path -> agent from the plan's file manifest and phases (R-DOC-12)."""
    from taskgate.protocol.presentation import parse_plan

    text = read_text(engine.ws.task_md(snap.task.name)) or ""
    view = parse_plan(text, snap.task.required_agents)
    owners = {f.path: f.owner for f in view.files if f.owner in snap.task.required_agents}
    for phase in view.phases:
        for path in re.findall(r"`([^`]+)`", phase.text):
            if len(phase.agents) == 1:
                owners.setdefault(path, phase.agents[0])
    return owners


def _imports(engine: Engine, task: str, test_file: str, tracked: Sequence[str]) -> tuple[str, ...]:
    """Project modules a Python test file imports (what an assertion in it exercises)."""
    if not test_file.endswith(".py"):
        return ()
    text = read_text(engine.ws.task_worktree(task) / test_file) or ""
    modules = [a or b for a, b in _IMPORT.findall(text)]
    return tuple(p for p in tr.resolve_modules(modules, tracked) if p != test_file)


def files_of(
    engine: Engine, task: str, failure: tr.TestFailure, tracked: Sequence[str]
) -> list[str]:
    """The tracked files a failure names, sources before tests."""
    known = set(tracked)
    named = [f for f in failure.files if f in known]
    named += [f for f in tr.resolve_modules(failure.modules, tracked) if f not in named]
    for unknown in (f for f in failure.files if f not in known):  # a/b.java → src/.../a/b.java
        named += [p for p in tracked if p.endswith("/" + unknown) and p not in named][:1]
    for test in [f for f in named if is_test_path(f)]:
        named += [p for p in _imports(engine, task, test, tracked) if p not in named]
    return sorted(dict.fromkeys(named), key=is_test_path)


def route(engine: Engine, snap: TaskSnapshot, failure: BuildFailure) -> Routing:
    """The agents that fix `failure`, each with its failing tests (see the module docstring)."""
    team = snap.task.required_agents
    tracked = _tracked(engine, snap.task.name)
    routing = Routing()
    plan: dict[str, str] | None = None
    for item in failure.failures[:_MAX_ROUTED]:  # a suite that fails wholesale: the first ones
        files = files_of(engine, snap.task.name, item, tracked)
        by_commit = {f: _authors(engine, snap, f, team) for f in files}
        sources = [f for f in files if not is_test_path(f) and by_commit[f]]
        chosen = sources or [f for f in files if by_commit[f]]
        if chosen:
            for f in chosen:
                for agent in by_commit[f]:
                    routing.add(agent, item, [f])
            continue
        if plan is None:
            plan = _plan_owners(engine, snap)
        owned = [f for f in files if f in plan]
        if owned:
            for f in owned:
                routing.add(plan[f], item, [f])
            continue
        routing.unrouted.append(item)
    if routing.unrouted:  # nobody's file: the task's change broke it, so its authors look
        committers = _committers(engine, snap)
        for item in routing.unrouted:
            for agent in committers:
                routing.add(agent, item, [])
        if committers:
            routing.unrouted = []
    return routing


def _committers(engine: Engine, snap: TaskSnapshot) -> list[str]:
    t = snap.task
    base = t.base_sha or f"refs/heads/{t.base_branch}"
    out = git("log", "--no-merges", "--format=%s", f"{base}..refs/heads/{t.name}",
              cwd=engine.ws.repo, check=False).stdout  # fmt: skip
    found = []
    for line in out.splitlines():
        match = re.match(r"\[agent:([\w.-]+)\]", line)
        if match and match.group(1) in t.required_agents and match.group(1) not in found:
            found.append(match.group(1))
    return found


def feedback_text(failure: BuildFailure, mine: Sequence[tr.TestFailure], why: set[str]) -> str:
    """What the agent reads: the class, its failing tests, why it is theirs, the excerpts."""
    lines = [f"The build failed ({failure.type}): {failure.detail}"]
    if why:
        lines.append(f"You are asked because your commits or plan cover: {', '.join(sorted(why))}")
    lines.append("Failing tests and errors for you to fix:")
    for item in mine:
        lines.append(f"- {item.name}" + (f": {item.message}" if item.message else ""))
        if item.excerpt:
            lines += ["  ```", *("  " + ln for ln in item.excerpt.splitlines()[-25:]), "  ```"]
    text = "\n".join(lines)
    return text if len(text) <= _MAX_FEEDBACK else text[:_MAX_FEEDBACK] + "\n…"
