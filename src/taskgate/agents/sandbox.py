"""Confinement of the agent processes `taskgate run` starts: bubblewrap on Linux (DESIGN.md
Trust, layer 1).

Inside the sandbox everything is read-only except:

    the agent's worktree           read-write (its `.git` file read-only)
    its git namespace              agents/gitshadow.py: private refs and object store; its own
                                   branch and the objects it wrote are imported afterwards
    the files the protocol asks for   the requirement report (REQUIREMENTS), task.md
                                   (SYNTHESIS), the result file: written into a private copy of
                                   their directory and copied back after the agent exits
    /tmp and $HOME                 private and empty (HOME holds copies of the client's config
                                   and the user's git identity); discarded afterwards

The store, the views, the hook and client settings, the main worktree, other worktrees and
every other ref stay out of reach: a write fails (read-only file system) or lands in a private
copy that is discarded and reported. Namespaces: user, pid, ipc, uts, cgroup, mount are new
(no other process is visible, nothing can be ptraced or signalled); the network is kept,
because agents call their model's API. `[agents] sandbox` chooses: "auto" (bubblewrap when it
works here, otherwise unconfined and said so on every run), "bwrap" (required), "none".
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from taskgate import process
from taskgate.agents.gitshadow import GitShadow, Mount, ShadowError, mount_point, prepare

SETTINGS = ("auto", "bwrap", "none")
CONFINED = "confined"
UNCONFINED = "unconfined"
INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap)"

# Namespaces and hardening common to the probe and every run.
# No capabilities and no nested user namespaces: nothing inside can mount or unmount (a
# client's own bubblewrap cannot start in here either: codex runs with its sandbox off inside
# this one, CodexBackend.inner; claude -p runs without its Bash sandbox).
_FLAGS = (
    "--unshare-all", "--share-net", "--unshare-user", "--disable-userns",
    "--die-with-parent", "--new-session", "--cap-drop", "ALL",
)  # fmt: skip
# Client configuration copied into the private HOME (never the real files: an agent must not
# change the person's own settings, e.g. turn off the hooks of their interactive sessions).
CLAUDE_SETTINGS = ".claude/settings.json"
HOME_COPIES = (
    ".gitconfig",
    ".config/git",
    ".claude.json",
    CLAUDE_SETTINGS,
    ".claude/.credentials.json",
    ".codex/config.toml",
    ".codex/auth.json",
)
_SOCKETS = ("/run/docker.sock", "/var/run/docker.sock")
_PREFIX = "taskgate-sandbox-"
_OWNER = ".pid"  # in each scratch directory: the process that made it
_DROPPED_ENV = ("DBUS_SESSION_BUS_ADDRESS", "SSH_AUTH_SOCK")  # their sockets are hidden
_MAX_OUTPUT_BYTES = 16 * 1024 * 1024


class SandboxUnavailable(Exception):
    """`sandbox = "bwrap"` but bubblewrap cannot confine agents here."""


@dataclass(frozen=True)
class Choice:
    """How agents run here: confined by `bwrap`, or unconfined and why."""

    confined: bool
    reason: str = ""
    bwrap: str = ""


@functools.cache
def probe(executable: str = "bwrap") -> tuple[str, str]:
    """(path, "") when bubblewrap confines here, ("", why not) otherwise; run once per process."""
    if not sys.platform.startswith("linux"):
        return "", f"bubblewrap needs Linux ({sys.platform}): agents run unconfined"
    path = shutil.which(executable)
    if path is None:
        return "", f"{executable} is not installed; {INSTALL_HINT}"
    proc = process.run(
        [path, *_FLAGS, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
         "--tmpfs", "/tmp", "true"],
        timeout=30,
    )  # fmt: skip
    if not proc.ok:
        detail = proc.stderr.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        return "", f"{path} does not work here: {detail[0]}"
    return path, ""


def choose(setting: str) -> Choice:
    """The confinement `[agents] sandbox = setting` gives on this machine."""
    if setting == "none":
        return Choice(False, 'sandbox = "none" in taskgate.toml [agents]')
    path, why = probe()
    if path:
        return Choice(True, bwrap=path)
    if setting == "bwrap":
        raise SandboxUnavailable(
            f'[agents] sandbox = "bwrap" but {why}; {INSTALL_HINT}, or set sandbox = "auto"'
        )
    return Choice(False, why)


def warning(choice: Choice) -> str:
    """The line `run` prints when its agents are not confined (empty when they are)."""
    if choice.confined:
        return ""
    return (
        f"warning: agents run unconfined ({choice.reason}); what they run can write the store "
        "and move any branch, and approvals cannot be proven human. See docs/security.md."
    )


@dataclass(frozen=True)
class Outcome:
    """What one confined run did beyond its worktree: refused writes and violations."""

    mode: str
    reason: str = ""
    violations: tuple[str, ...] = ()
    discarded: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """Shape of `<stem>.sandbox.json` and of the `agent_sandbox` event."""
        return {
            "mode": self.mode,
            "reason": self.reason,
            "violations": list(self.violations),
            "discarded": list(self.discarded),
        }


@dataclass
class _Shadowed:
    """A directory replaced by a private copy: entries mounted read-only, `outputs` writable."""

    real: Path
    copy: Path
    outputs: tuple[str, ...]
    expected: set[str] = field(default_factory=set)  # every entry of `real`
    mounted: set[str] = field(default_factory=set)  # the entries mounted read-only


@dataclass
class Jail:
    """One confined invocation: the bwrap argument list, and the work to do after it."""

    argv: list[str]
    env: dict[str, str]
    git: GitShadow | None  # None: a read-only run (nothing of git is writable)
    shadowed: list[_Shadowed]

    def finish(self) -> Outcome:
        """Import the agent's commits, copy its outputs back, report what was refused."""
        violations = self.git.import_back() if self.git is not None else []
        discarded: list[str] = []
        for item in self.shadowed:
            for name in sorted(os.listdir(item.copy)):
                if name in item.outputs:
                    _copy_back(item.copy / name, item.real / name)
                elif name not in item.expected:
                    discarded.append(str(item.real / name))
        return Outcome(CONFINED, violations=tuple(violations), discarded=tuple(discarded))


@contextmanager
def confine(
    bwrap: str,
    cmd: Sequence[str],
    env: Mapping[str, str],
    *,
    worktree: Path,
    branch: str,
    outputs: Sequence[Path],
    readable: Sequence[Path] = (),
    writable_dirs: Sequence[Path] = (),
    keep_branch: bool = True,
    read_only: bool = False,
) -> Iterator[Jail]:
    """A Jail for `cmd` in `worktree` (on `branch`); `outputs` are the files it may write
    outside the worktree, `writable_dirs` directories it writes in place (a backend's own
    private directory). `keep_branch=False`: commits on `branch` are not imported (the
    project's own commands). `read_only=True`: `worktree` is only the directory it starts in
    (any directory), read-only like the rest, and git gets no private namespace (the spec
    roles: they only read). The private copies are removed when the block ends."""
    root = _scratch_root()
    _reap(Path(root or tempfile.gettempdir()))
    scratch = Path(tempfile.mkdtemp(prefix=_PREFIX, dir=root))
    (scratch / _OWNER).write_text(str(os.getpid()), encoding="utf-8")
    spec = _Spec(tuple(cmd), env, worktree.resolve(), branch, tuple(outputs), tuple(readable),
                 tuple(writable_dirs), read_only)  # fmt: skip
    try:
        jail = _build(bwrap, spec, scratch)
        if jail.git is not None:
            jail.git.keep_branch = keep_branch
        yield jail
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@dataclass(frozen=True)
class _Spec:
    """What `confine` was asked for."""

    cmd: tuple[str, ...]
    env: Mapping[str, str]
    worktree: Path
    branch: str
    outputs: tuple[Path, ...]
    readable: tuple[Path, ...]
    writable_dirs: tuple[Path, ...]
    read_only: bool = False


def _reap(root: Path) -> None:
    """Remove the private copies of runs whose process is gone (killed before its cleanup)."""
    for scratch in root.glob(f"{_PREFIX}*"):
        try:
            pid = int((scratch / _OWNER).read_text(encoding="utf-8"))
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(scratch, ignore_errors=True)
        except (OSError, ValueError):
            continue  # another user's, or being created right now


def _scratch_root() -> str | None:
    """Memory-backed when there is one: the private copies are many small directories, and
    creating and removing them on a disk costs more than the sandbox itself."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None


def _build(bwrap: str, spec: _Spec, scratch: Path) -> Jail:
    """The argument list, in mount order: read-only root, private places, what must stay
    readable under them, the private copies, the worktree, the git shadow."""
    worktree = spec.worktree
    args: list[str] = [bwrap, *_FLAGS, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    hidden, private = _private_places(spec.env, scratch)
    args += private
    shadow = None if spec.read_only else prepare(worktree, spec.branch, scratch)
    needed = [
        *([shadow.common.parent] if shadow is not None else []),
        worktree,
        *(o.parent for o in spec.outputs),
        *spec.readable,
        *_program_paths(spec.cmd, spec.env),
    ]
    for path in _reexpose(needed, hidden):
        args += ["--ro-bind", str(path), str(path)]
    shadowed = _shadow_dirs(spec.outputs, None if spec.read_only else worktree, scratch)
    for item in shadowed:
        args += ["--bind", str(item.copy), str(item.real)]
        for name in sorted(item.mounted):  # -try: an engine temp file may be gone by now
            args += ["--ro-bind-try", str(item.real / name), str(item.real / name)]
    if shadow is not None:
        args += ["--bind", str(worktree), str(worktree)]
        if (worktree / ".git").is_file():
            args += ["--ro-bind", str(worktree / ".git"), str(worktree / ".git")]
    for directory in spec.writable_dirs:
        if directory.is_dir():
            args += ["--bind", str(directory), str(directory)]
    if shadow is not None:
        args += _mount_args(shadow.mounts)
    args += ["--chdir", str(worktree), "--", *spec.cmd]
    inner = {k: v for k, v in spec.env.items() if k not in _DROPPED_ENV}
    inner.update({"TMPDIR": "/tmp", "TASKGATE_SANDBOX": "bwrap"})
    return Jail(args, inner, shadow, shadowed)


def _private_places(env: Mapping[str, str], scratch: Path) -> tuple[list[Path], list[str]]:
    """(the directories hidden behind private ones, their mounts): /tmp, the runtime dir with
    the user's sockets, the docker socket, $HOME (a private copy of the client config)."""
    hidden = [Path("/tmp")]
    args = ["--tmpfs", "/tmp"]
    runtime = env.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
    if os.path.isdir(runtime):
        hidden.append(Path(runtime))
        args += ["--tmpfs", runtime]
    for sock in _SOCKETS:
        if os.path.exists(sock):
            args += ["--ro-bind", "/dev/null", sock]
    home = env.get("HOME", "")
    if home and os.path.isabs(home) and os.path.isdir(home) and Path(home).resolve() != Path("/"):
        private_home = scratch / "home"
        _fill_home(Path(home), private_home)
        hidden.append(Path(home).resolve())
        args += ["--bind", str(private_home), str(Path(home).resolve())]
    return hidden, args


def _mount_args(mounts: Sequence[Mount]) -> list[str]:
    args: list[str] = []
    for mount in mounts:
        args += [f"--{mount.op}", str(mount.src), str(mount.dest)]
    return args


def _fill_home(real: Path, private: Path) -> None:
    """A private HOME with copies of the client configuration and the git identity."""
    private.mkdir()
    for rel in HOME_COPIES:
        src = real / rel
        dest = private / rel
        try:
            if src.is_dir() and not src.is_symlink():
                shutil.copytree(src, dest, symlinks=True)
            elif src.is_file():
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dest)
                if rel == CLAUDE_SETTINGS:
                    _without_client_sandbox(dest)
        except OSError:
            continue  # unreadable: the client will say what it misses


def _without_client_sandbox(settings: Path) -> None:
    """Claude Code's own sandbox switched off in the private copy of its user settings (which
    `hooks install` fills for interactive sessions): it is bubblewrap too and cannot start
    inside this one (no nested user namespaces), and this sandbox is the boundary here."""
    try:
        data = json.loads(settings.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(data, dict) and isinstance(data.get("sandbox"), dict):
        data["sandbox"] = {"enabled": False}
        settings.write_text(json.dumps(data, indent=2), encoding="utf-8")


def _program_paths(cmd: Sequence[str], env: Mapping[str, str]) -> list[Path]:
    """Directories the agent's program needs to start: its own (and its link target's), the
    PATH entries, and this interpreter (for `taskgate` inside the sandbox)."""
    paths: list[Path] = []
    exe = shutil.which(cmd[0], path=env.get("PATH")) if cmd else None
    if exe:
        paths += [Path(exe).parent, Path(os.path.realpath(exe)).parent]
    paths += [Path(p) for p in env.get("PATH", "").split(os.pathsep) if os.path.isabs(p)]
    paths += [Path(sys.prefix), Path(sys.base_prefix), Path(__file__).resolve().parents[2]]
    # A script named by absolute path (`python /x/agent.py`): under /tmp or HOME it would be
    # hidden behind the private ones (a checkout under /tmp ran no agent at all).
    paths += [Path(a).parent for a in cmd[1:] if os.path.isabs(a) and os.path.isfile(a)]
    return paths


def _reexpose(paths: Sequence[Path], hidden: Sequence[Path]) -> list[Path]:
    """The paths under a hidden directory (/tmp, HOME) to mount back read-only, outermost
    first, none inside another."""
    found: list[Path] = []
    for path in sorted({Path(os.path.abspath(p)) for p in paths}, key=lambda p: len(p.parts)):
        if not path.exists() or any(path.is_relative_to(f) for f in found):
            continue
        if any(path.is_relative_to(h) and path != h for h in hidden):
            found.append(path)
    return found


def _shadow_dirs(outputs: Sequence[Path], worktree: Path | None, scratch: Path) -> list[_Shadowed]:
    """Private copies of the directories holding `outputs`, parents first."""
    by_dir: dict[Path, list[str]] = {}
    for out in outputs:
        by_dir.setdefault(out.parent.resolve(), []).append(out.name)
    shadowed = []
    for index, real in enumerate(sorted(by_dir, key=lambda p: len(p.parts))):
        if not real.is_dir():
            continue
        copy = scratch / f"dir{index}"
        copy.mkdir()
        item = _Shadowed(real, copy, tuple(by_dir[real]))
        for entry in sorted(os.listdir(real)):
            src = real / entry
            if entry in item.outputs:
                if src.is_file() and not src.is_symlink():
                    shutil.copyfile(src, copy / entry)  # e.g. task.md: the agent edits it
                continue
            item.expected.add(entry)
            if worktree is not None and real == worktree.parent and entry == worktree.name:
                (copy / entry).mkdir()  # the worktree: mounted read-write afterwards
            elif mount_point(src, copy / entry):
                item.mounted.add(entry)
        shadowed.append(item)
    return shadowed


def _copy_back(src: Path, dest: Path) -> None:
    """An output the agent wrote in its private copy, into the real place (a regular file
    only: a symlink or a device is never followed)."""
    fd = -1
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_OUTPUT_BYTES:
            return
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(_MAX_OUTPUT_BYTES)
    except OSError:
        return
    finally:
        if fd >= 0:
            os.close(fd)
    try:
        if dest.read_bytes() == data:
            return
    except OSError:
        pass
    tmp = dest.parent / f".{dest.name}.{os.urandom(6).hex()}.tmp"
    tmp.write_bytes(data)
    os.replace(tmp, dest)


__all__ = [
    "CONFINED",
    "SETTINGS",
    "UNCONFINED",
    "Choice",
    "Jail",
    "Outcome",
    "SandboxUnavailable",
    "ShadowError",
    "choose",
    "confine",
    "probe",
    "warning",
]
