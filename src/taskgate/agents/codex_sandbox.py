"""What a `codex exec` agent may write, and the work taskgate does around the run (issue 13).

Codex 0.169 runs every model-generated command under its own Linux sandbox (bubblewrap: the
whole file system read-only, the writable roots bound read-write, `.git`, `.codex` and
`.agents` inside a writable root kept read-only, no network). Writable roots are directories:
the working directory (`--cd`), each `--add-dir`, and, unless excluded, `/tmp` and `$TMPDIR`.
A file cannot be a writable root (bubblewrap refuses to start).

So an agent gets exactly this, per mode:

- always: its worktree, and a private directory `<agent_dir>/codex/` (its `$TMPDIR`, and the
  files it must write elsewhere). `/tmp` and `$TMPDIR` are excluded, so a repository under the
  system temp directory is confined like any other.
- implementation: the worktree's own git dir (`.git/worktrees/<name>`: index, HEAD, logs) and
  the object store (`.git/objects`), so that `git add` / `git commit` work. No ref is
  writable: the worktree's HEAD is detached at `T-A` for the run, the agent's commits move
  only that private HEAD, and afterwards taskgate moves `refs/heads/T-A` to them and attaches
  HEAD again. `main`, other branches, `.git/config` and hooks stay read-only.
- requirements: the report `T-A-requirements.md` is written to `<agent_dir>/codex/` (the prompt
  names that path) and taskgate copies it to the task directory afterwards (R-DOC-04).
- synthesis: likewise for `task.md`: the agent edits a copy; taskgate puts it back.

Nothing else: not the main worktree, not the task worktree, not `.taskgate/state.db`, not
other agents' worktrees or reports.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path

from taskgate.agents.base import AgentRequest, Mode
from taskgate.fsutil import atomic_write
from taskgate.git import repo as gitrepo
from taskgate.git.cmd import git

SANDBOX_DIR = "codex"
DETACHED = "detached.json"  # in the private dir while the worktree's HEAD is detached
# Files of a worktree's git dir that say where the repository is: an agent that rewrote them
# would make taskgate's own git commands in that worktree read a config it wrote.
GUARDED = ("commondir", "gitdir")
MAX_STAGED_BYTES = 8 * 1024 * 1024  # a report or task.md; anything bigger is not taken over


@dataclass
class Confinement:
    """The writable roots of one run and what to do before and after it."""

    private: Path  # <agent_dir>/codex: $TMPDIR and the staged files
    roots: tuple[Path, ...] = ()  # --add-dir, besides the worktree and `private`
    staged: dict[Path, Path] = field(default_factory=dict)  # real path -> the agent's copy
    branch: str = ""  # set when the run commits on a detached HEAD (implementation)
    head: str = ""  # the branch tip before the run
    guarded: dict[Path, bytes | None] = field(default_factory=dict)

    @property
    def tmpdir(self) -> Path:
        """The agent's $TMPDIR."""
        return self.private / "tmp"


def plan(request: AgentRequest, *, commit: bool) -> Confinement:
    """The writable roots for `request`; `commit` gives implementation runs the git dir."""
    private = request.agent_dir / SANDBOX_DIR
    conf = Confinement(private)
    if request.mode is Mode.REQUIREMENTS:
        conf.staged[request.report_path] = private / "out" / request.report_path.name
    elif request.mode is Mode.SYNTHESIS:
        conf.staged[request.task_md] = private / "out" / request.task_md.name
    gitdir = gitrepo.git_dir(request.worktree)
    if commit and request.mode is Mode.IMPLEMENTATION and gitdir is not None:
        common = gitrepo.discover(request.worktree).common_dir
        if gitdir.resolve() != common.resolve():  # a linked worktree, as agents always are
            conf.roots = (gitdir, common / "objects")
            conf.branch = request.branch
    if gitdir is not None:
        conf.guarded = {gitdir / name: _read(gitdir / name) for name in GUARDED}
    return conf


def prepare(conf: Confinement, request: AgentRequest) -> AgentRequest:
    """Set the run up; returns the request as the agent sees it (staged paths, $TMPDIR)."""
    shutil.rmtree(conf.private, ignore_errors=True)  # nothing from an earlier run carries over
    conf.tmpdir.mkdir(parents=True)
    (conf.private / "out").mkdir()
    for real, copy in conf.staged.items():
        if real.is_file():
            shutil.copyfile(real, copy)
    if conf.branch:
        conf.head = git("rev-parse", "--verify", "HEAD^{commit}", cwd=request.worktree).stdout
        conf.head = conf.head.strip()
        # Written first: a taskgate killed during the run leaves this for heal() to find.
        atomic_write(conf.private / DETACHED, json.dumps({"branch": conf.branch,
                                                          "head": conf.head}))  # fmt: skip
        git("update-ref", "--no-deref", "HEAD", conf.head, cwd=request.worktree)
    prompt = request.prompt
    for real, copy in conf.staged.items():
        prompt = prompt.replace(str(real), str(copy))
    notes = _notes(conf, request)
    env = {**request.env, "TMPDIR": str(conf.tmpdir)}
    changed = replace(request, prompt=f"{prompt.rstrip()}\n\n{notes}\n" if notes else prompt)
    changed = replace(changed, env=env)
    if request.mode is Mode.REQUIREMENTS:
        changed = replace(changed, report_path=conf.staged[request.report_path])
    if request.mode is Mode.SYNTHESIS:
        changed = replace(changed, task_md=conf.staged[request.task_md])
    return changed


def _notes(conf: Confinement, request: AgentRequest) -> str:
    lines: list[str] = []
    for real, copy in conf.staged.items():
        lines.append(f"Write {real.name} at {copy}: taskgate copies it to {real} when you finish.")
    if conf.branch:
        lines.append(
            f"Your worktree's HEAD is detached at {conf.branch} for this run: commit as usual "
            f"(do not check out a branch); taskgate moves {conf.branch} to your commits."
        )
    return "\n".join(f"Sandbox: {line}" for line in lines)


def finish(conf: Confinement, request: AgentRequest) -> list[str]:
    """Undo the set-up and take over what the agent wrote; returns problems (empty: fine)."""
    problems = _restore_guarded(conf)
    if conf.branch:
        problems += _attach(conf, request.worktree)
        (conf.private / DETACHED).unlink(missing_ok=True)
    for real, copy in conf.staged.items():
        if copy.is_symlink() or (copy.exists() and not copy.is_file()):
            problems.append(f"{copy} is not a regular file; it was not copied to {real}")
            continue
        if not copy.is_file():
            continue
        if copy.stat().st_size > MAX_STAGED_BYTES:
            problems.append(f"{copy} is larger than {MAX_STAGED_BYTES} bytes; not copied")
            continue
        try:
            text = copy.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"cannot read {copy}: {exc}")
            continue
        if not real.is_file() or real.read_text(encoding="utf-8", errors="replace") != text:
            atomic_write(real, text)
    return problems


def _restore_guarded(conf: Confinement) -> list[str]:
    problems: list[str] = []
    for path, before in conf.guarded.items():
        if _read(path) == before:
            continue
        problems.append(f"the agent changed {path}; taskgate restored it")
        if before is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(before)
    return problems


def heal(agent_dir: Path, worktree: Path) -> list[str]:
    """After a taskgate killed during a Codex implementation run (SIGKILL, SIGTERM): take the
    agent's commits onto its branch and attach HEAD again, as the run would have. A no-op
    unless that run left its marker; returns what was done or found wrong."""
    marker = agent_dir / SANDBOX_DIR / DETACHED
    try:
        state = json.loads(marker.read_text(encoding="utf-8"))
        conf = Confinement(marker.parent, branch=str(state["branch"]), head=str(state["head"]))
    except (OSError, ValueError, KeyError, TypeError):
        return []
    problems = _attach(conf, worktree)
    marker.unlink(missing_ok=True)
    return [f"re-attached {worktree} to {conf.branch} after an interrupted codex run",
            *problems]  # fmt: skip


def _attach(conf: Confinement, wt: Path) -> list[str]:
    """Move refs/heads/T-A to the agent's commits and check the branch out again."""
    ref = f"refs/heads/{conf.branch}"
    attached = git("symbolic-ref", "-q", "HEAD", cwd=wt, check=False).stdout.strip()
    problems: list[str] = []
    if not attached:
        found = git("rev-parse", "--verify", "-q", "HEAD^{commit}", cwd=wt, check=False)
        new = found.stdout.strip()
        if found.ok and new and new != conf.head:
            moved = git("update-ref", "-m", "taskgate: codex agent commits", ref, new, conf.head,
                        cwd=wt, check=False)  # fmt: skip
            if not moved.ok:
                problems.append(f"cannot move {conf.branch} to {new[:10]}: {moved.stderr.strip()}")
        elif not found.ok:
            problems.append("the agent left its worktree without a valid HEAD")
    elif attached != ref:
        problems.append(f"the agent checked out {attached} instead of committing on {ref}")
    git("symbolic-ref", "HEAD", ref, cwd=wt)
    return problems


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def codex_args(conf: Confinement, *, shared_tmp: bool) -> list[str]:
    """The `codex exec` options that set the writable roots."""
    args: list[str] = []
    for root in (conf.private, *conf.roots):
        args += ["--add-dir", str(root)]
    if not shared_tmp:
        args += ["-c", "sandbox_workspace_write.exclude_slash_tmp=true"]
        args += ["-c", "sandbox_workspace_write.exclude_tmpdir_env_var=true"]
    return args
