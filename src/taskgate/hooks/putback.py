"""Moving a forbidden change aside and putting things back (hooks/quarantine.py, issue 15):
the worktree as found becomes a commit under the quarantine ref, moved branches keep their
found value beside it, then the worktree, its HEAD, its index and the branches are put back as
the baseline had them. Every git runs as the effect check runs it (hooks/effects.run_git)."""

from __future__ import annotations

import contextlib
import os

from taskgate.hooks import effects, ignored

TYPE_CHECKING = False  # typing stays unimported on the command path (issue 18)
if TYPE_CHECKING:
    from typing import Any

    from taskgate.hooks.policy import Layout


class QuarantineFailed(Exception):
    """A git step of the quarantine failed (the violation is still recorded)."""


def git(
    args: list[str], cwd: str, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> bytes:
    """stdout of the effect check's git; QuarantineFailed when it fails."""
    code, out = effects.run_git(args, cwd, stdin, env)
    if code != 0:
        raise QuarantineFailed(f"git {' '.join(args)} failed with exit code {code} in {cwd}")
    return out


def is_sha(value: str | None) -> bool:
    """`value` is an object id (hex)."""
    return value is not None and len(value) >= 40 and value.strip("0123456789abcdef") == ""


def move_aside(
    wt: str, base: dict[str, Any], tree: dict[str, Any], ref: str, task: str, changes: list[str]
) -> None:
    """A commit of the worktree as found (parent: its HEAD; second parent: the baseline's)."""
    gitdir = git(["rev-parse", "--absolute-git-dir"], wt).decode().strip()
    index = os.path.join(gitdir, "taskgate-quarantine-index")
    env = {"GIT_INDEX_FILE": index}
    try:
        if tree["head"] and tree["head"] != "(initial)":
            git(["read-tree", tree["head"]], wt, env=env)
        git(["add", "-A", "--", "."], wt, env=env)
        forced = ignored.quarantined(base["tree"].get("ignored", {}), tree.get("ignored", {}))
        if forced:  # the ignored files the change created or rewrote, as found
            listed = "\0".join(forced).encode("utf-8", "surrogateescape")
            add = ["add", "-f", "--pathspec-from-file=-", "--pathspec-file-nul"]
            git(add, wt, stdin=listed, env={**env, "GIT_LITERAL_PATHSPECS": "1"})
        tree_id = git(["write-tree"], wt, env=env).decode().strip()
    finally:
        with contextlib.suppress(OSError):
            os.unlink(index)
    parents: list[str] = []
    for head in (tree["head"], base["tree"]["head"]):
        if head and head != "(initial)" and head not in parents:
            parents += [head]
    message = (f"taskgate quarantine: task {task}\n\n" + "\n".join(changes[:200]) + "\n").encode()
    args = ["commit-tree", tree_id, *[a for p in parents for a in ("-p", p)], "-F", "-"]
    sha = git(args, wt, stdin=message).decode().strip()
    git(["update-ref", "-m", "taskgate quarantine", f"{ref}/worktree", sha, ""], wt)


def restore_worktree(wt: str, base: dict[str, Any], tree: dict[str, Any]) -> list[str]:
    """Put HEAD, the index and the files back as the baseline had them; what could not be
    put back is returned (large ignored files the baseline kept no copy of)."""
    old = base["tree"]
    head, branch = old["head"], old["branch"]
    if branch and branch != "(detached)":
        if tree["branch"] != branch:
            git(["symbolic-ref", "HEAD", f"refs/heads/{branch}"], wt)
        if tree["head"] != head or tree["branch"] != branch:
            git(["update-ref", "-m", "taskgate restore", f"refs/heads/{branch}", head], wt)
    elif head and head != "(initial)":
        git(["update-ref", "--no-deref", "HEAD", head], wt)
    if head and head != "(initial)":
        from taskgate.hooks.gitsafe import rewrite_found

        try:
            rewrite_found(wt, tree, head, effects.run_git)
        except OSError as exc:
            raise QuarantineFailed(str(exc)) from exc
    kept = {effects._path(e) for e in old["entries"] if e[0] == "?"}
    now = effects.worktree_print(wt) or {"entries": []}
    for entry in now["entries"]:
        path = effects._path(entry)
        if entry[0] == "?" and path not in kept:
            ignored.remove(wt, path)
    info: list[str] = []
    for entry in old["entries"]:
        if entry[0] not in "12":
            continue
        fields = entry.split(" ")
        xy, mode, sha = fields[1], fields[4], fields[7]
        path = effects._path(entry)
        if xy[0] == "D":
            info.append(f"0 {'0' * 40}\t{path}")
        elif xy[0] != ".":
            info.append(f"{mode} {sha}\t{path}")
    if info:
        git(["update-index", "--index-info"], wt, stdin=("\n".join(info) + "\n").encode())

    def blob(sha: str) -> bytes:
        return git(["cat-file", "blob", sha], wt)

    for path, sha in old["hashes"].items():
        if sha == "-":
            ignored.remove(wt, path)
        elif len(sha) == 40:
            ignored.put(wt, path, blob(sha))
    if "ignored" not in old:
        return []
    return ignored.restore(wt, old["ignored"], old.get("kept", {}), tree["ignored"], blob)


def restore_ref(layout: Layout, name: str, old: str | None, new: str | None, ref: str) -> None:
    """Keep the branch's found value beside the quarantine (`<ref>/refs/heads/<name>`), then
    put it back to `old` (None: the change created it, so it goes). Compare-and-swap on the
    found value; --no-deref: a branch made symbolic is replaced, its target left alone."""
    repo = layout.repo
    branch = f"refs/heads/{name}"
    if is_sha(new):
        git(["update-ref", "-m", "taskgate quarantine", f"{ref}/{branch}", str(new), ""], repo)
    if old is None:
        git(["update-ref", "--no-deref", "-d", branch, *([str(new)] if is_sha(new) else [])],
             repo)  # fmt: skip
        return
    cas = [str(new)] if is_sha(new) else [""] if new is None else []
    git(["update-ref", "--no-deref", "-m", "taskgate restore", branch, old, *cas], repo)
    if name == effects.main_branch(layout.common_dir) and is_sha(new) and new != old:
        # the main worktree has main checked out: bring its files back too (keeps local edits)
        effects.run_git(["read-tree", "-m", "-u", str(new), old], repo)
