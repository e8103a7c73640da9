"""Writing a task's audit anchor (issue 14): a commit naming the chain's head, added to
`refs/taskgate/audit/<task>` (engine/anchor.py says why and reads it back for `audit`).

Its own module, beside the engine (issue 18): the prompt hook anchors every prompt of a
session holding a task, and importing the engine package and engine/anchor.py's reading side
cost that process more than this. The commit is written by taskgate.gitplumb when it can
vouch for writing exactly what git writes, else by git.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

REF_PREFIX = "refs/taskgate/audit/"
_MAGIC = "taskgate audit anchor"
# Anchor commits carry no files: the empty tree of each object format.
_EMPTY_TREE = {
    "sha1": "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
    "sha256": "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321",
}
_FORMAT_OF = {40: "sha1", 64: "sha256"}  # an object id's length names its format
_HEX = frozenset("0123456789abcdef")
_NAME, _EMAIL = "taskgate", "taskgate@localhost"
_IDENTITY = {
    "GIT_AUTHOR_NAME": _NAME,
    "GIT_AUTHOR_EMAIL": _EMAIL,
    "GIT_COMMITTER_NAME": _NAME,
    "GIT_COMMITTER_EMAIL": _EMAIL,
}
_PLUMB = True  # taskgate.gitplumb first (tests compare both paths by turning it off)


def ref(task: str) -> str:
    """The anchor's ref for `task`."""
    return REF_PREFIX + task


def write(repo: str | Path, common_dir: str | Path, task: str, seq: int, digest: str,
          at: str) -> bool:  # fmt: skip
    """Anchor event `seq` (its `digest`, recorded `at`) of `task`: a commit on the task's
    anchor ref, moved by compare-and-swap from the parent it names. False when git refused
    (the step is committed all the same; audit reports the stale or missing anchor).

    No git process in the usual case (issue 18, fourth pass): when the ref's loose file names
    a loose commit in a repository taskgate.gitplumb writes exactly as git does, the commit
    object, the ref and its reflog line are written in this process; the same bytes
    `commit-tree` and `update-ref` write, with the identity and the date both paths give git
    in its environment. Otherwise git: the ref's current value read from its loose file when
    it has one (what `git rev-parse` would print: a loose ref wins over packed-refs), and
    `rev-parse` only for the first anchor, a packed ref or a reftable repository.
    `commit-tree -p` refuses a parent that is no commit, `update-ref` one that moved since it
    was read: the same outcome as reading it with `rev-parse ...^{commit}`."""
    text = f"{_MAGIC}\n\ntask {task}\nseq {seq}\nhash {digest}\nat {at}\n"
    name = ref(task)
    repo = str(repo)
    message = f"taskgate: audit anchor #{seq}"
    when = _now()
    parent = _loose_ref(str(common_dir), name)
    if parent:
        tree = _EMPTY_TREE[_FORMAT_OF[len(parent)]]
        if _PLUMB:
            from taskgate import gitplumb

            ident = f"{_NAME} <{_EMAIL}>"
            made = gitplumb.commit(repo, str(common_dir), name, parent, tree, text, ident,
                                   when, message)  # fmt: skip
            if made is not None:
                return True
    else:
        code, out = _git(["rev-parse", "--show-object-format", "-q", "--verify",
                          f"{name}^{{commit}}"], repo)  # fmt: skip
        fields = out.split()
        parent = fields[1] if len(fields) > 1 else ""
        tree = _EMPTY_TREE.get(fields[0] if fields else "", "")
        if not parent or not tree:  # the first anchor writes the (empty) tree it uses
            code, out = _git(["mktree"], repo, stdin=b"")
            if code:
                return False
            tree = out.strip()
    # The identity and the date of the commit and of the reflog line (when git writes one),
    # given explicitly so that git and gitplumb write the same bytes.
    env = {**_IDENTITY, "GIT_AUTHOR_DATE": f"@{when}", "GIT_COMMITTER_DATE": f"@{when}"}
    cmd = ["commit-tree", tree, "-m", text, *(["-p", parent] if parent else [])]
    code, out = _git(cmd, repo, env)
    if code:
        return False
    # Compare-and-swap; --no-deref (last: the arguments keep their places for readers of
    # this command line, tests/test_views_deferred.py): an anchor ref made symbolic behind
    # taskgate's back (to main, say) is replaced, never followed to the branch it names.
    update = ["update-ref", "-m", message, name, out.strip(), parent, "--no-deref"]
    code, _ = _git(update, repo, env)
    return code == 0


def _now() -> str:
    """Now as git writes a date in a commit and a reflog: "<seconds> <+hhmm>", the offset of
    the local time zone (git's local_tzoffset)."""
    import time

    seconds = int(time.time())
    minutes = time.localtime(seconds).tm_gmtoff // 60
    sign = "-" if minutes < 0 else "+"
    minutes = abs(minutes)
    return f"{seconds} {sign}{minutes // 60:02d}{minutes % 60:02d}"


def _loose_ref(common_dir: str, name: str) -> str:
    """The object id a loose ref file holds ('' when there is none or it holds anything
    else: a symbolic ref, a reftable repository's placeholder)."""
    if os.path.isdir(os.path.join(common_dir, "reftable")):
        return ""  # refs/ there is a placeholder, never the refs (git's reftable backend)
    try:
        with open(os.path.join(common_dir, name), "rb") as handle:
            raw = handle.read(80)
    except OSError:
        return ""
    value = raw.decode("ascii", "replace").strip()
    return value if len(value) in _FORMAT_OF and _HEX.issuperset(value) else ""


def _git(args: list[str], repo: str, extra: dict[str, str] | None = None,
         stdin: bytes | None = None) -> tuple[int, str]:  # fmt: skip
    """(exit code, stdout) of `git args` in `repo`, in the environment taskgate.git.cmd.git
    gives every git command (no inherited GIT_*, LC_ALL=C, no prompts).

    Started by taskgate.spawn (`os.posix_spawnp`), like hooks/effects.run_git: the prompt
    hook anchors every prompt of a session holding a task, and importing subprocess (locale,
    threading, selectors, signal) costs that process more than the two git commands (issue
    18)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"}, **(extra or {}))
    from taskgate.spawn import git

    try:  # the git no agent can have planted on PATH (spawn.git_program), or none
        code, out = git(["-C", repo, *args], env, stdin)
    except OSError:
        return 127, ""
    return code, out.decode("utf-8", "replace")
