"""Why blocked tasks wait (todo.blocked_reasons): unknown dependencies and cycles, in time
linear in the tasks (issue 18: a search per task was quadratic on a chain, cubic on a cycle).
No dataclass or enum is imported: the quick `todo` listing (engine/todo_fast.py) uses it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def blocked_reasons_of(
    names: Sequence[str], depends: Mapping[str, tuple[str, ...]], done: set[str]
) -> dict[str, str]:
    """blocked_reasons from the tasks' names in file order and their Depends (a task missing
    from `depends` has none): what the quick `todo` listing has without a TodoList."""
    known = set(names)
    deps = {n: [d for d in depends.get(n, ()) if d not in done] for n in names}
    reasons: dict[str, str] = {}
    cyclic: set[str] | None = None
    for name in names:
        unmet = deps[name]
        if not unmet:
            continue
        unknown = [d for d in unmet if d not in known]
        if cyclic is None:  # issue 18: a search per task was quadratic on a chain of tasks
            cyclic = _in_cycles(deps)
        cycle = _cycle_from(name, deps) if name in cyclic else None
        parts = []
        if unknown:
            parts.append(
                f"depends on {', '.join(unknown)}, which no task in todo.md or changelog.md "
                "is called (a typo, or a task that was renamed)"
            )
        if cycle:
            parts.append(f"is in a dependency cycle: {' -> '.join(cycle)}")
        waiting = [d for d in unmet if d in known and d not in (cycle or [])]
        if waiting:
            parts.append(f"waits for {', '.join(waiting)} to be completed")
        reasons[name] = f"'{name}' " + "; ".join(parts)
    return reasons


def _in_cycles(deps: dict[str, list[str]]) -> set[str]:
    """The tasks on some dependency cycle (those _cycle_from finds a path for): members of a
    strongly connected component of more than one task, or depending on themselves. Tarjan's
    algorithm without recursion, over the edges _cycle_from follows (to tasks in `deps`)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[str] = set()
    edges_of = {node: [d for d in ds if d in deps] for node, ds in deps.items()}
    for root in deps:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            edges = edges_of[node]
            if i < len(edges):
                work.append((node, i + 1))
                nxt = edges[i]
                if nxt == node:
                    found.add(node)
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if work:  # back in the caller: pass the low link up
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.update(component)
    return found


def _cycle_from(start: str, deps: dict[str, list[str]]) -> list[str] | None:
    """A dependency path from `start` back to itself, or None. Each task's path is the one it
    was first reached by, kept as a link to the task before it (not a copy per task)."""
    stack = [start]
    before: dict[str, str] = {}
    while stack:
        node = stack.pop()
        for nxt in deps.get(node, []):
            if nxt == start:
                path = [start, node]
                while node != start:
                    node = before[node]
                    path.append(node)
                return path[::-1]
            if nxt not in before and nxt != start and nxt in deps:
                before[nxt] = node
                stack.append(nxt)
    return None
