"""Effects over predictions: fingerprints of a task worktree and the refs (issue 15, the net).

While the main agent may not write its task's worktree (IMPLEMENTATION, a waiting checkpoint,
REVIEW, VALIDATION outside C-27), taskgate keeps a baseline of that worktree (HEAD, branch,
`git status --porcelain=v2 -z` with untracked files, the content hash of every dirty file) and
of the refs it watches (main, other tasks' branches, the task's agent branches), in
`.taskgate/effects/<session>.json`. PreToolUse writes it when missing; PostToolUse compares:
any difference is a change nobody was allowed to make, whatever the command looked like, and
goes to hooks/quarantine.py (moved aside into a ref, recorded, reported). Every taskgate step
does the same check first and re-baselines after its own work (engine/core.py calls
`before_step` / `after_step`), so a change made outside any hook is caught by the next command.

The hook side imports nothing heavy: git runs through `os.posix_spawn` with the environment
hygiene of taskgate.process (no inherited GIT_*, LC_ALL=C, no prompts), because loading
subprocess and the git layer would cost the hook more than the comparison itself; which git is
taskgate.spawn's choice, never a `git` the agent planted earlier on PATH.
"""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from taskgate.hooks.policy import Actor, Layout

FORMAT = 1
DIRTY_HASH_LIMIT = 2000  # dirty files hashed by content; beyond, size and mtime stand in
_KEEP_ENV = ("PATH", "HOME", "TMPDIR", "USER", "LOGNAME", "XDG_CONFIG_HOME")


# -- running git without subprocess ---------------------------------------------------------


def run_git(
    args: list[str], cwd: str, stdin: bytes | None = None, extra: dict[str, str] | None = None
) -> tuple[int, bytes]:
    """(exit code, stdout) of `git -C cwd args...`; stderr is discarded."""
    env = {k: v for k, v in os.environ.items() if k in _KEEP_ENV or k.startswith("GIT_CONFIG")}
    env.update(LC_ALL="C", GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", **(extra or {}))
    from taskgate.hooks.gitsafe import options
    from taskgate.spawn import git

    # No fsmonitor, no hooks, no filter of the agent's, none of the configuration that hides a
    # change from git status (hooks/gitsafe.py). The git itself is one the agent cannot have
    # planted on PATH (spawn.git_program).
    return git(["-C", cwd, *options(cwd, env), *args], env, stdin)


# -- fingerprints ----------------------------------------------------------------------------


def worktree_print(
    worktree: str, ignore: list[str] | None = None, index: str | None = None, untracked: str = "all"
) -> dict[str, Any] | None:
    """HEAD, branch, status entries and dirty-file hashes of one worktree, and with `ignore`
    (the patterns not watched) its ignored files' fingerprint (hooks/ignored.py), all from one
    `git status` (reading `index`, the comparison's copy, when given: hooks/gitsafe.py); None
    when it is not a git worktree (gone, or never created)."""
    args = ["status", "--porcelain=v2", "-z", "--branch", f"--untracked-files={untracked}"]
    args.append("--ignore-submodules=none")  # git's default, whatever the agent configured
    if ignore is not None:
        args.append("--ignored=matching")
    code, out = run_git(args, worktree, None, {"GIT_INDEX_FILE": index} if index else None)
    if code != 0:
        return None
    head, branch = "", ""
    entries: list[str] = []
    dirty: list[str] = []
    listed: list[str] = []
    records = out.decode("utf-8", "surrogateescape").split("\0")
    i = 0
    while i < len(records):
        rec = records[i]
        i += 1
        if not rec:
            continue
        if rec.startswith("# branch.oid "):
            head = rec[13:]
        elif rec.startswith("# branch.head "):
            branch = rec[14:]
        elif rec.startswith("#"):
            continue
        elif rec.startswith("! "):
            listed.append(rec[2:])
        else:
            if rec.startswith("2 "):
                rec += "\0" + records[i]  # the rename's original path
                i += 1
            entries.append(rec)
            if rec[0] in "u?" or rec.split(" ", 2)[1][1] != ".":
                dirty.append(_path(rec))
    found = {"head": head, "branch": branch, "entries": entries, "hashes": _hashes(worktree, dirty)}
    if ignore is not None:
        found["ignore"] = ignore
        found["ignored"] = {}
        if listed:
            from taskgate.hooks.ignored import fingerprint

            found["ignored"] = fingerprint(worktree, listed, ignore)
    return found


def _hashes(worktree: str, paths: list[str]) -> dict[str, str]:
    """git blob ids of dirty files (so a baseline can name their content), "-" if missing."""
    if not paths:
        return {}
    import hashlib

    found: dict[str, str] = {}
    for n, path in enumerate(paths):
        full = os.path.join(worktree, path)
        try:
            if os.path.islink(full):
                data = os.readlink(full).encode("utf-8", "surrogateescape")
            elif n >= DIRTY_HASH_LIMIT:
                st = os.stat(full)
                found[path] = f"stat:{st.st_size}:{st.st_mtime_ns}"
                continue
            else:
                with open(full, "rb") as handle:
                    data = handle.read()
        except OSError:
            found[path] = "-"
            continue
        found[path] = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    return found


def read_refs(common_dir: str) -> dict[str, str]:
    """Every local branch -> commit, read from the ref files (no git process)."""
    refs: dict[str, str] = {}
    try:
        with open(os.path.join(common_dir, "packed-refs"), encoding="utf-8") as handle:
            for line in handle:
                sha, _, name = line.strip().partition(" ")
                if name.startswith("refs/heads/") and len(sha) >= 40:
                    refs[name[11:]] = sha
    except OSError:
        pass
    heads = os.path.join(common_dir, "refs", "heads")
    for root, _, files in os.walk(heads):
        for name in files:
            path = os.path.join(root, name)
            try:
                with open(path, encoding="utf-8") as handle:
                    sha = handle.read().strip()
            except OSError:
                continue
            refs[os.path.relpath(path, heads)] = sha
    return refs


def main_branch(common_dir: str) -> str:
    """The branch the main worktree has checked out (main), from its HEAD file."""
    try:
        with open(os.path.join(common_dir, "HEAD"), encoding="utf-8") as handle:
            head = handle.read().strip()
    except OSError:
        return "main"
    return head[16:] if head.startswith("ref: refs/heads/") else "main"


def watched_refs(
    common_dir: str, task: str, tasks: dict[str, tuple[str, ...]]
) -> dict[str, str | None]:
    """The refs the net watches for one task: main, other tasks' branches, its agents'."""
    refs = read_refs(common_dir)
    names = [main_branch(common_dir)]
    for name, agents in tasks.items():
        names += (
            [name, *(f"{name}-{a}" for a in agents)]
            if name != task
            else [f"{name}-{a}" for a in agents]
        )
    return {n: refs.get(n) for n in names}


def checked_out(common_dir: str) -> dict[str, str]:
    """Branch -> the HEAD reflog of the worktree that has it checked out (main's included)."""
    places = [common_dir]
    try:
        names = sorted(os.listdir(os.path.join(common_dir, "worktrees")))
    except OSError:
        names = []
    places += [os.path.join(common_dir, "worktrees", n) for n in names]
    found: dict[str, str] = {}
    for place in places:
        try:
            with open(os.path.join(place, "HEAD"), encoding="utf-8") as handle:
                head = handle.read().strip()
        except OSError:
            continue
        if head.startswith("ref: refs/heads/"):
            found[head[16:]] = os.path.join(place, "logs", "HEAD")
    return found


def worktree_tip(log: str) -> tuple[str, int] | None:
    """(value, unix time) of the last entry of a worktree's HEAD reflog: where its own work
    (a commit, merge, reset or rebase there, or taskgate moving an agent's branch to the
    commits the agent made there) last left HEAD."""
    try:
        with open(log, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - 4096))
            tail = handle.read()
    except OSError:
        return None
    line = tail.rstrip(b"\n").rpartition(b"\n")[2]
    fields = line.partition(b"\t")[0].split(b" ")
    if len(fields) < 5 or not fields[-2].isdigit():
        return None
    return fields[1].decode("ascii", "replace"), int(fields[-2])


def made_in_worktree(common_dir: str, name: str, sha: str | None) -> bool:
    """Whether branch `name` now at `sha` was moved by work in its own worktree: it is checked
    out there and that worktree's HEAD last moved to `sha`. A move from outside (update-ref,
    `branch -f`, `fetch . x:b`, a push) leaves that worktree's HEAD reflog behind."""
    log = checked_out(common_dir).get(name)
    tip = worktree_tip(log) if log and sha else None
    return tip is not None and tip[0] == sha


# -- the baseline ----------------------------------------------------------------------------


def baseline_path(state_dir: str, session: str) -> str:
    """Where a session's baseline lives (inside the store's directory: writes are denied)."""
    from taskgate.hooks.context import safe_name

    return os.path.join(state_dir, "effects", safe_name(session) + ".json")


def load(path: str) -> dict[str, Any] | None:
    """A baseline, or None when absent or unreadable (then it is simply taken again)."""
    from taskgate.hooks.jsonio import loads

    try:
        with open(path, encoding="utf-8") as handle:
            data = loads(handle.read())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == FORMAT else None


def take(layout: Layout, actor: Actor, session: str) -> dict[str, Any]:
    """The session's baseline: a marker when its main agent may write, else a fingerprint of
    the task worktree and the watched refs (the worktree's path is derived, never stored, so
    a copied repository compares its own)."""
    from taskgate.hooks.policy import forbids_main_writes

    task = actor.task
    assert task is not None
    data: dict[str, Any] = {
        "format": FORMAT,
        "task": task.name,
        "state": task.state,
        "session": session,
        "guarded": False,
        "taken": int(time.time()),
    }
    if not forbids_main_writes(task):
        return data
    worktree = worktree_of(layout, task.name)
    from taskgate.hooks import ignored

    # Stat information only: in a worktree taskgate just checked out or merged into, git
    # cannot trust the index entries' stat ("racily clean") and the comparisons' status, which
    # never writes the index (GIT_OPTIONAL_LOCKS=0), would re-read each such file every time.
    # One refresh here keeps every later comparison a stat walk (3 x faster on 20,000 files).
    # It fails harmlessly while another git holds the index lock.
    run_git(["update-index", "-q", "--refresh"], worktree)
    from taskgate.hooks.gitsafe import index_copy, index_side, keep_index

    copy = index_copy(baseline_path(layout.state_dir, session))
    key = keep_index(worktree, copy, run_git)
    unwatched = ignored.unwatched(layout.repo, worktree, layout.state_dir)
    tree = worktree_print(worktree, unwatched, copy if key else None)
    if tree is None:
        from taskgate.hooks.gitsafe import unreadable

        error = unreadable(worktree)
        if error is not None:
            raise error  # fail closed (R-REC-14), never a marker baseline
        return data
    if key:
        tree.update(index=key, index_head=tree["head"], staged=index_side(tree["entries"]))
    if tree["hashes"]:
        _store_blobs(worktree, [p for p, h in tree["hashes"].items() if len(h) == 40])
    tree["kept"] = ignored.keep(worktree, tree["ignored"], run_git)
    data.update(
        guarded=True, tree=tree, refs=watched_refs(layout.common_dir, task.name, actor.tasks)
    )
    return data


def worktree_of(layout: Layout, task: str) -> str:
    """The task worktree (the tasks root's layout, hooks/policy.py place)."""
    return os.path.join(layout.tasks_root, task, "code")


def _store_blobs(worktree: str, paths: list[str]) -> None:
    """Keep the content of dirty files in git's object store, so a restore can bring back
    exactly the baseline (objects only: no ref, no index change)."""
    if paths:
        run_git(
            ["hash-object", "-w", "--no-filters", "--stdin-paths"],
            worktree,
            stdin="\n".join(paths).encode("utf-8", "surrogateescape") + b"\n",
        )


def save(path: str, data: dict[str, Any]) -> None:
    """Write a baseline atomically, and the session's guard marker with it (dispatch.py
    guard_marker: PostToolUse compares after plain reads too while it exists). The marker is
    made before a guarded baseline and removed after a marker baseline: a marker left behind
    costs a comparison that finds nothing, a missing one only defers detection."""
    from taskgate.hooks.jsonio import dumps

    session = str(data.get("session") or "")
    if data.get("guarded"):
        mark(session, path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(dumps(data))
    os.replace(tmp, path)
    if not data.get("guarded"):
        unmark(session)


def drop(path: str) -> None:
    """Forget a baseline (the session's main agent may write again), and its guard marker."""
    base = load(path)
    from taskgate.hooks.gitsafe import index_copy

    for name in (path, index_copy(path)):
        try:  # noqa: SIM105  (contextlib would cost the hook its collections/functools imports)
            os.unlink(name)
        except OSError:
            pass
    if base is not None:
        unmark(str(base.get("session") or ""))


def mark(session: str, path: str) -> None:
    """Make the guard marker of `session` (its content names the baseline, for a person)."""
    if not session:
        return
    from taskgate.hooks.dispatch import guard_marker

    marker = guard_marker(session)
    try:
        os.makedirs(os.path.dirname(marker), exist_ok=True)
        with open(marker, "w", encoding="utf-8") as handle:
            handle.write(path + "\n")
    except OSError:
        pass  # a read-only home: detection after plain reads waits for the next comparison


def unmark(session: str) -> None:
    """Remove the guard marker of `session` (absent already: nothing to do)."""
    if not session:
        return
    from taskgate.hooks.dispatch import guard_marker

    try:  # noqa: SIM105
        os.unlink(guard_marker(session))
    except OSError:
        pass


def differences(
    base: dict[str, Any], worktree: dict[str, Any] | None, refs: dict[str, str | None]
) -> list[str]:
    """What changed since the baseline, one line each (empty: nothing)."""
    found: list[str] = []
    old = base["tree"]
    if worktree is not None:
        if worktree["branch"] != old["branch"]:
            found.append(f"HEAD switched from {old['branch']} to {worktree['branch']}")
        elif worktree["head"] != old["head"]:
            found.append(
                f"{old['branch']} moved from {old['head'][:12]} to {worktree['head'][:12]}"
            )
        before = {_path(e): e for e in old["entries"]}
        after = {_path(e): e for e in worktree["entries"]}
        staged = worktree.get("staged")
        for path in sorted(set(before) | set(after)):
            was, now = before.get(path), after.get(path)
            if was == now and old["hashes"].get(path) == worktree["hashes"].get(path):
                continue
            if was is None:  # new to the comparison's index, staged in the worktree's: changed
                new = now and now[0] == "?" and path not in (staged or {})
                found.append(f"{path}: {'created' if new else 'changed'}")
            elif now is None:
                found.append(f"{path}: {'removed' if was[0] == '?' else 'restored to HEAD'}")
            else:
                found.append(f"{path}: changed")
        for path in sorted(set(old.get("staged", ())) | set(staged or ())):
            if staged is not None and old["staged"].get(path) != staged.get(path):
                found.append(f"{path}: changed in the index")
        if "ignored" in old:
            from taskgate.hooks.ignored import changed

            found += changed(old["ignored"], worktree.get("ignored", {}))
    for name, sha in sorted(base["refs"].items()):
        now_sha = refs.get(name)
        if now_sha != sha:
            if now_sha is None:
                found.append(f"branch {name} deleted (was {str(sha)[:12]})")
            elif sha is None:
                found.append(f"branch {name} created at {now_sha[:12]}")
            else:
                found.append(f"branch {name} moved from {sha[:12]} to {now_sha[:12]}")
    return found


def _path(entry: str) -> str:
    kind = entry[0]
    if kind == "?" or kind == "!":
        return entry[2:]
    if kind == "1":
        return entry.split(" ", 8)[-1]
    if kind == "2":
        return entry.split(" ", 9)[-1].split("\0")[0]
    return entry.split(" ", 10)[-1]


# -- the hook side ---------------------------------------------------------------------------


def before_tool(layout: Layout, actor: Actor, session: str) -> None:
    """PreToolUse of a session holding a task: make sure its baseline exists. From then on
    every taskgate step keeps it current (hooks/quarantine.py after_step)."""
    path = baseline_path(layout.state_dir, session)
    if actor.task is None or actor.agent or os.path.exists(path):
        return
    from taskgate.spawn import git_program

    git_program()  # fail closed (R-REC-14) without a git the agent cannot have planted, even
    # where the baseline would need none (a marker): the session's comparisons will
    save(path, take(layout, actor, session))
    from taskgate.hooks.context import remember_session

    remember_session(session, layout.repo)  # later calls from outside the repository


def compare(layout: Layout, base: dict[str, Any]) -> list[str]:
    """What changed since a guarded baseline (empty for a marker). A watched branch other
    than main that its own worktree moved (an agent's commit) is that worktree's work, not a
    difference; main and every other move or deletion are."""
    if not base.get("guarded"):
        return []
    from taskgate.hooks.gitsafe import tree_now

    tree = tree_now(layout, base)
    common = layout.common_dir
    refs = read_refs(common)
    now = {n: refs.get(n) for n in base["refs"]}
    main = main_branch(common)
    for name, old in base["refs"].items():
        new = now[name]
        moved = name != main and None not in (old, new) and new != old
        if moved and made_in_worktree(common, name, new):
            now[name] = old
    return differences(base, tree, now)


def after_tool(data: dict[str, Any]) -> str:
    """PostToolUse: compare the session's baseline with now; quarantine and report any
    difference (hooks/quarantine.py). Returns the text for the agent ("" when clean)."""
    from taskgate.hooks.context import load_layout, session_repo

    layout = load_layout(data["cwd"])
    if layout is None:
        repo = session_repo(data["session_id"])
        layout = load_layout(repo) if repo else None
    if layout is None:
        return ""
    path = baseline_path(layout.state_dir, data["session_id"])
    base = load(path)
    if base is None:
        return ""
    if base.get("guarded"):
        from taskgate.hooks.dispatch import guard_marker

        if not os.path.exists(guard_marker(data["session_id"])):
            mark(data["session_id"], path)  # a baseline from before the marker, or one removed
    changes = compare(layout, base)
    if not changes:
        return ""
    from taskgate.hooks.quarantine import handle

    return handle(layout, base, path, changes, data)
