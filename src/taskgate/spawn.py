"""A short program run without `subprocess`, for the hook processes (issue 18), and the one
`git` they run.

Importing `subprocess` (with locale, threading, selectors and signal) costs a hook process more
than the one or two git commands it runs, so the hook side starts git with `os.posix_spawn`
here: stdout captured, stderr discarded, stdin from a small byte string or /dev/null. The
callers give the environment (taskgate.process's hygiene: no inherited GIT_*, LC_ALL=C, no
prompts); everything else goes through taskgate.process, the one door for subprocesses.

Which git (docs/security.md, "The git the hooks run"): the hooks run with the session's
environment, and an unconfined agent can write a `git` into a PATH directory that comes before
the real one (`~/.local/bin`), which would then answer the effect check and write the anchors.
So `git_program` takes the first `git` on PATH whose real path the agent cannot have written:
every directory from `/` down to it, and the file, neither owned by this user nor writable
through its groups or by everyone (as root, whom no permission stops: owned by root, nothing
world-writable on the way, not under $HOME); symlinks resolved, and the real path is what
runs, so a link the agent may repoint changes nothing. A few stats, once per process.
"""

from __future__ import annotations

import os


class UntrustedGit(FileNotFoundError):
    """No `git` on PATH is out of the agent's reach: the hooks run none (R-REC-14: PreToolUse
    denies guarded calls, the other events report)."""

    rule = "R-REC-14"

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(f"{message}. {hint}")
        self.message, self.hint = message, hint


def output(argv: list[str], env: dict[str, str], stdin: bytes | None = None) -> tuple[int, bytes]:
    """(exit code, stdout) of `argv` (its program found on PATH) run with `env`; raises
    OSError, with every descriptor closed, when it cannot be started."""
    return _run(argv[0], argv, env, stdin, search=True)


def git(args: list[str], env: dict[str, str], stdin: bytes | None = None) -> tuple[int, bytes]:
    """(exit code, stdout) of `git args...` with `env`, the git being `git_program()`'s (never
    one found on PATH at the moment it starts); raises UntrustedGit when there is none."""
    program = git_program()
    try:
        return _run(program, [program, *args], env, stdin, search=False)
    except FileNotFoundError:  # upgraded away since this process resolved it (a server)
        _FOUND.clear()
        program = git_program()
        return _run(program, [program, *args], env, stdin, search=False)


# -- which git -------------------------------------------------------------------------------

_FOUND: dict[tuple[str, str], str] = {}  # (PATH, HOME) -> the git they give
_LINK = "a symbolic link"


def git_program() -> str:
    """The real path of the first `git` on PATH that the agent cannot have planted or
    changed; raises UntrustedGit, naming each one refused and why, when there is none."""
    path = os.environ.get("PATH", os.defpath)
    home = os.environ.get("HOME", "")
    found = _FOUND.get((path, home))
    if found is not None:
        return found
    real, refused = _first_trusted("git", path, home)
    if real:
        _FOUND[(path, home)] = real
        return real
    listed = "; ".join(refused) if refused else "there is none"
    raise UntrustedGit(
        f"no git on PATH is out of the agent's reach ({listed}), so taskgate cannot check "
        "what the session changes",
        "Install git where your user cannot write (apt-get install git, dnf install git, "
        "xcode-select --install) and start the session with it on PATH (docs/security.md, "
        "'The git the hooks run')",
    )


def trusted_program(name: str) -> str:
    """The real path of the first `name` on PATH the agent cannot have written ("" if none):
    git_program's rule for another program (hooks/gitsafe.py: git-lfs)."""
    real, _ = _first_trusted(name, os.environ.get("PATH", os.defpath), os.environ.get("HOME", ""))
    return real


def _first_trusted(name: str, path: str, home: str) -> tuple[str, list[str]]:
    """(the real path of the first `name` on `path` the agent cannot have written, or "";
    each one passed over, with why)."""
    refused: list[str] = []
    for entry in path.split(os.pathsep):
        candidate = os.path.join(entry, name)
        try:
            st = os.stat(candidate)
        except OSError:
            continue
        if st.st_mode & 0o170000 != 0o100000 or not st.st_mode & 0o111:
            continue  # not what execvp would run either
        if not entry.startswith("/"):
            refused.append(f"{candidate}: a relative PATH entry")
            continue
        real, why = _judged(candidate, home)
        if not why:
            return real, refused
        refused.append(f"{candidate}: {why}")
    return "", refused


def _judged(candidate: str, home: str) -> tuple[str, str]:
    """(the real path of `candidate`, why the agent could have written it or "" when it
    could not). Without symlinks or dot components on the way, one lstat per component."""
    if "/." not in candidate and "//" not in candidate:
        why = agent_writable(candidate, home)
        if why != _LINK:
            return candidate, why
    real = os.path.realpath(candidate)
    why = agent_writable(real, home)
    return real, ("it changed while it was read" if why == _LINK else why)


def agent_writable(real: str, home: str) -> str:
    """Why this user (the agent) could have written or replaced the file at `real`, an
    absolute path: a component owned by the user, writable through one of its groups or by
    everyone; as root, whom no permission stops, a component not owned by root, writable by
    everyone, or `real` under $HOME. "" when it could not; _LINK when a component is a
    symbolic link (judge its real path instead)."""
    uid = os.geteuid()
    if uid == 0 and home.strip("/") and real.startswith(home.rstrip("/") + "/"):
        return f"under $HOME ({home})"
    groups: list[int] | None = None
    at = real
    while True:
        try:
            st = os.lstat(at)
        except OSError as exc:
            return f"{at}: {exc.strerror}"
        mode = st.st_mode
        if mode & 0o170000 == 0o120000:
            return _LINK
        if uid == 0 and st.st_uid != 0:
            return f"{at} is not owned by root"
        if uid != 0 and st.st_uid == uid:
            return f"{at} is yours"
        if mode & 0o002:
            return f"{at} is writable by everyone"
        if uid != 0 and mode & 0o020:
            if groups is None:
                groups = [os.getegid(), *os.getgroups()]
            if st.st_gid in groups:
                return f"{at} is writable by your group"
        if at == "/":
            return ""
        at = os.path.dirname(at)


def _run(program: str, argv: list[str], env: dict[str, str], stdin: bytes | None,
         search: bool) -> tuple[int, bytes]:  # fmt: skip
    out_r, out_w = os.pipe()
    in_r, in_w = os.pipe() if stdin is not None else (-1, -1)
    actions: list[tuple[object, ...]] = [
        (os.POSIX_SPAWN_DUP2, out_w, 1),
        (os.POSIX_SPAWN_CLOSE, out_r),
        (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
    ]
    if stdin is not None:
        actions += [(os.POSIX_SPAWN_DUP2, in_r, 0), (os.POSIX_SPAWN_CLOSE, in_w)]
    else:
        actions.append((os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0))
    start = os.posix_spawnp if search else os.posix_spawn
    try:
        pid = start(program, argv, env, file_actions=actions)
    except OSError:
        for fd in (out_r, out_w, in_r, in_w):
            if fd >= 0:
                os.close(fd)
        raise
    os.close(out_w)
    if stdin is not None:
        os.close(in_r)
        try:
            os.write(in_w, stdin)  # small: a list of paths, a commit message
        finally:
            os.close(in_w)
    chunks = []
    while chunk := os.read(out_r, 1 << 16):
        chunks.append(chunk)
    os.close(out_r)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), b"".join(chunks)
