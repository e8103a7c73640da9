"""A commit and a ref update written without starting git, for the audit anchor (issue 18).

engine/anchor.write adds a commit (no files) to a task's anchor ref at every checkpoint; the
prompt hook does it for every prompt of a session holding a task, and the two git processes
it took (`commit-tree`, `update-ref --no-deref`) were a third of that hook's time. Git's
formats are public and stable (Documentation/gitformat-*, object-file.c, refs/files-backend.c):
a loose object is `zlib(b"<type> <size>\\0" + body)` at `objects/ab/cdef…`, named by the
SHA-1 of the uncompressed bytes, written to a temporary file beside it and linked into place,
read-only (taskgate.looseobject writes them in zlib's stored form: no zlib module to load);
a loose ref is updated by creating `<ref>.lock` exclusively, writing the new id, appending the
reflog line when git would (`logs/<ref>` exists, or `core.logAllRefUpdates=always`) and
renaming the lock over the ref.

`commit` writes what those two commands write (the same objects, ref file and reflog line;
an object's bytes are git's own at `core.looseCompression=0`, and at any level the same
object under the same name; tests/test_gitplumb.py compares both ways on many repository
shapes with the installed git) or writes nothing and returns None, and the caller runs git.
None whenever this module cannot vouch for the outcome:

- a repository it does not read the way git does: `-C repo` not finding `.git` there, a
  common directory other than the caller's, another owner (git's safe.directory check), a
  format version above 0 or any `extensions.*` (sha256 objects, reftable refs, worktree
  config), alternates, replace refs, a `reference-transaction` hook, a HEAD naming the
  anchor ref (git logs that update in HEAD's reflog too);
- configuration it does not parse: a git that is not /usr/bin/git (its system config may be
  elsewhere), `include`/`includeIf`, continuation lines, quoted or escaped values of the
  keys that matter, and keys that change the write (`core.sharedRepository`,
  `core.hooksPath`, `commit.gpgSign`, a non-UTF-8 `i18n.commitEncoding`,
  `core.createObject`, `core.worktree`);
- anything unusual at the ref or the objects: the ref not a regular file holding the parent,
  a lock already held (git waits `core.filesRefLockTimeout` for it; the git path does), a
  parent that is not a loose commit whose bytes hash to its name (commit-tree checks it), a
  reflog path that is a directory, a tree other than the empty one, a message or identity
  that is not plain ASCII;
- any error while writing: the temporary object file, the lock and the reflog's new line are
  removed (the reflog cut back to its length) before None is returned, so git finds nothing
  half-written (a `tmp_obj_*` file is never an object to git).

Durability: git 2.39 fsyncs neither loose objects nor refs by default (`core.fsync` leaves
them out; strace shows no fsync for either command); with any of `core.fsync`,
`core.fsyncObjectFiles` or `core.fsyncMethod` set, every file written here is fsynced before
it is linked or renamed into place, at least what git would do.
"""

from __future__ import annotations

import os

from taskgate import looseobject

_EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
_HEX = frozenset("0123456789abcdef")
_REF_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._/-")
_SYSTEM_GIT = "/usr/bin/git"  # its system configuration: /etc/gitconfig
_SYSTEM_CONFIG = "/etc/gitconfig"
_REFUSED_SECTIONS = frozenset({"include", "includeif", "extensions"})
# Keys whose presence changes what git writes here and that this module does not follow.
_REFUSED_KEYS = frozenset({
    "core.sharedrepository", "core.hookspath", "core.createobject", "core.worktree",
    "core.usereplacerefs",
})  # fmt: skip
_FSYNC_KEYS = frozenset({"core.fsync", "core.fsyncobjectfiles", "core.fsyncmethod"})
_UNPARSED = "\0unparsed"  # a value this module does not unquote
_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0", ""})


def commit(repo: str, common_dir: str, ref: str, parent: str, tree: str, message: str,
           ident: str, when: str, reflog_message: str) -> str | None:  # fmt: skip
    """The id of a new commit of `tree` with `parent` and `message`, authored and committed by
    `ident` ("Name <email>") at `when` ("<seconds> <+hhmm>"), to which `ref` was moved from
    `parent`: what `git -C repo commit-tree tree -p parent -m message` then `git update-ref
    --no-deref -m reflog_message ref <new> parent` write with that identity and date in the
    environment. None when nothing was written and git must do it (see the module's text)."""
    try:
        setup = _setup(repo, common_dir, ref, parent, tree)
    except (OSError, ValueError):
        return None
    if setup is None or not _plain(message, ident, reflog_message, when):
        return None
    objects, fsync, reflog_create = setup
    if not _parent_is_commit(objects, parent):
        return None
    body = (f"tree {tree}\nparent {parent}\nauthor {ident} {when}\ncommitter {ident} {when}\n"
            f"\n{message}" + ("" if message.endswith("\n") else "\n")).encode()  # fmt: skip
    oid = looseobject.write(objects, "commit", body, fsync)
    if oid is None:
        return None
    note = " ".join(reflog_message.split())  # git's copy_reflog_msg for ASCII
    line = f"{parent} {oid} {ident} {when}" + (f"\t{note}" if note else "") + "\n"
    if not _update_ref(common_dir, ref, parent, oid, line, reflog_create, fsync):
        return None
    return oid


def _setup(repo: str, common_dir: str, ref: str, parent: str,
           tree: str) -> tuple[str, bool, bool] | None:  # fmt: skip
    """(objects directory, fsync every file, create the reflog) when this
    repository and its configuration are ones this module writes exactly as git; else None."""
    if tree != _EMPTY_TREE or len(parent) != 40 or not _HEX.issuperset(parent):
        return None
    if not _safe_ref(ref):
        return None
    found = _gitdir(repo)
    if found is None:
        return None
    gitdir, common = found
    if not _same(common, common_dir):
        return None
    common = common_dir
    uid = os.geteuid()
    for path in (repo, os.path.join(repo, ".git"), gitdir):
        if os.stat(path).st_uid != uid:
            return None  # git's safe.directory check decides: the git path
    config = _config(common)
    if config is None:
        return None
    if config.get("core.repositoryformatversion", "0") != "0":
        return None
    if any(key in config for key in _REFUSED_KEYS):
        return None
    if _bool(config.get("commit.gpgsign", "false")) is not False:
        return None
    encoding = config.get("i18n.commitencoding")
    if encoding is not None and encoding.lower() not in ("utf-8", "utf8"):
        return None
    logs = _log_mode(config)
    if _level(config) is None or logs is None:  # values git would refuse, or not read here
        return None
    objects = os.path.join(common, "objects")
    for path in (os.path.join(objects, "info", "alternates"), os.path.join(common, "reftable"),
                 os.path.join(common, "hooks", "reference-transaction")):  # fmt: skip
        if os.path.lexists(path):
            return None
    if _has_replace_refs(common):
        return None
    try:
        with open(os.path.join(gitdir, "HEAD"), "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return None
    if head.startswith(b"ref:") and head[4:].strip() == ref.encode():
        return None
    fsync = any(key in config for key in _FSYNC_KEYS)
    return objects, fsync, logs == "always"


def _gitdir(repo: str) -> tuple[str, str] | None:
    """(git dir, common dir) that `git -C repo` uses; None when `repo` has no `.git` of its
    own (a bare repository, a subdirectory: git would search, the git path)."""
    dot_git = os.path.join(repo, ".git")
    if os.path.isdir(dot_git):
        gitdir = dot_git
    elif os.path.isfile(dot_git):
        with open(dot_git, encoding="utf-8") as handle:
            text = handle.read()
        if not text.startswith("gitdir:") or text.count("\n") > 1:
            return None
        gitdir = os.path.join(repo, text[7:].strip())
    else:
        return None
    try:
        with open(os.path.join(gitdir, "commondir"), encoding="utf-8") as handle:
            named = handle.read()
    except FileNotFoundError:
        return gitdir, gitdir
    if named.count("\n") > 1 or not named.strip():
        return None
    return gitdir, os.path.join(gitdir, named.strip())


def _same(one: str, other: str) -> bool:
    """The two paths name the same file (no realpath: its lstat of every component costs the
    prompt hook more than the rest of this module's checks)."""
    a, b = os.stat(one), os.stat(other)
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _safe_ref(ref: str) -> bool:
    """A ref name git's check_refname_format accepts, in the conservative subset used here."""
    parts = ref.split("/")
    return (
        ref.startswith("refs/")
        and _REF_CHARS.issuperset(ref)
        and ".." not in ref
        and all(p and not p.startswith(".") and not p.endswith(".lock") for p in parts)
        and not ref.endswith(".")
    )


def _plain(*texts: str) -> bool:
    """Printable ASCII and newlines only: git writes them as given (no re-encoding, no
    identity clean-up)."""
    return all(t.isascii() and all(c == "\n" or " " <= c < "\x7f" for c in t) for t in texts)


def _config(common: str) -> dict[str, str] | None:
    """The configuration git reads for this repository (system, global, repository; the last
    value of each key), None when some of it is not read here as git reads it."""
    found = _first_git()
    if found is None or not _same(found, _SYSTEM_GIT):
        return None
    home = os.environ.get("HOME")
    xdg = os.environ.get("XDG_CONFIG_HOME") or (os.path.join(home, ".config") if home else "")
    paths = [_SYSTEM_CONFIG]
    if xdg:
        paths.append(os.path.join(xdg, "git", "config"))
    if home:
        paths.append(os.path.join(home, ".gitconfig"))
    paths.append(os.path.join(common, "config"))
    values: dict[str, str] = {}
    for path in paths:
        if not _read_config(path, values):
            return None
    return values


def _first_git() -> str | None:
    """The `git` that `posix_spawnp` finds on PATH."""
    for entry in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(entry or ".", "git")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def _read_config(path: str, into: dict[str, str]) -> bool:
    """Add `path`'s keys to `into` ("section.key" lowercased, or "section.sub.key"); False
    when the file cannot be read or holds anything this reader does not follow."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except (FileNotFoundError, NotADirectoryError):
        return True
    except OSError:
        return False
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        return False
    section = ""
    for line in text.split("\n"):
        line = line.strip()
        if line.endswith("\\"):
            return False  # a continued value
        if line.startswith("["):
            end = line.find("]")
            name = _section(line[1:end]) if end > 0 else None
            if name is None or name.split(".", 1)[0] in _REFUSED_SECTIONS:
                return False
            section, line = name, line[end + 1 :].strip()
        if not line or line[0] in "#;":
            continue
        key, eq, value = line.partition("=")
        key = key.strip().lower()
        if not section or not key or not key[0].isalpha() or not key.isascii():
            return False
        if not key.replace("-", "").isalnum():
            return False
        into[f"{section}.{key}"] = _value(value) if eq else "\0true"
    return True


def _section(header: str) -> str | None:
    """`core` -> "core", `remote "origin"` -> "remote.origin"; None for what git refuses or
    this reader does not follow."""
    name, space, sub = header.partition(" ")
    if not name or not name.isascii() or not name.replace("-", "").replace(".", "").isalnum():
        return None
    if not space:
        return name.lower()
    sub = sub.strip()
    if len(sub) < 2 or sub[0] != '"' or sub[-1] != '"' or "\\" in sub or '"' in sub[1:-1]:
        return None
    return f"{name.lower()}.{sub[1:-1]}"


def _value(text: str) -> str:
    """A value without its comment; _UNPARSED when it is quoted or escaped."""
    if '"' in text or "\\" in text:
        return _UNPARSED
    for mark in "#;":
        text = text.split(mark, 1)[0]
    return text.strip()


def _bool(value: str) -> bool | None:
    """git_config_bool's reading (None: not a boolean git accepts, or not parsed here)."""
    if value == "\0true":
        return True
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    try:
        return int(lowered, 0) != 0
    except ValueError:
        return None


def _level(config: dict[str, str]) -> int | None:
    """The zlib level git would write loose objects at: core.looseCompression, else
    core.compression, else Z_BEST_SPEED (git's environment.c); None for a value not read
    here. taskgate.looseobject writes at level 0 whatever it is (the same objects)."""
    value = config.get("core.loosecompression", config.get("core.compression", "1"))
    try:
        level = int(value)
    except ValueError:
        return None
    return level if -1 <= level <= 9 else None


def _log_mode(config: dict[str, str]) -> str | None:
    """ "always" (the reflog is created) or "existing" (appended only when it exists: every
    other setting, for a ref outside refs/heads, refs/remotes and refs/notes); None when
    core.logAllRefUpdates or core.bare is not read here."""
    value = config.get("core.logallrefupdates")
    if value is not None and value.lower() == "always":
        return "always"
    if value is not None and _bool(value) is None:
        return None
    if _bool(config.get("core.bare", "false")) is None:
        return None
    return "existing"


def _has_replace_refs(common: str) -> bool:
    """Replace refs (loose or packed): commit-tree checks the parent through them."""
    try:
        if os.listdir(os.path.join(common, "refs", "replace")):
            return True
    except FileNotFoundError:
        pass
    try:
        with open(os.path.join(common, "packed-refs"), "rb") as handle:
            return b" refs/replace/" in handle.read()
    except FileNotFoundError:
        return False


def _parent_is_commit(objects: str, parent: str) -> bool:
    """The parent is a loose commit whose bytes hash to its name and start with its tree (what
    commit-tree -p reads before it writes; a packed parent: the git path)."""
    body = looseobject.read_commit(objects, parent)
    if body is None:
        return False
    return body[:5] == b"tree " and _HEX.issuperset(body[5:45].decode("ascii", "replace")) \
        and body[45:46] == b"\n"  # fmt: skip


def _update_ref(common: str, ref: str, old: str, new: str, line: str, create_log: bool,
                fsync: bool) -> bool:  # fmt: skip
    """Move the loose ref `ref` from `old` to `new` by git's lock-file protocol, appending
    `line` to its reflog when git would; False (lock, reflog and ref as they were) when the
    ref is not exactly `old` in a regular file, the lock is held, or a write fails."""
    path = os.path.join(common, ref)
    lock = path + ".lock"
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError:
        return False  # held (git waits for it: the git path), or unwritable
    log_fd = -1
    log_size = -1
    try:
        try:
            if not _regular(os.lstat(path).st_mode):
                return _unlock(lock)
            with open(path, "rb") as handle:
                if handle.read(256).rstrip() != old.encode():
                    return _unlock(lock)
            looseobject.write_all(fd, f"{new}\n".encode())
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        log_fd, log_size = _open_reflog(common, ref, create_log)
        if log_fd == -2:
            return _unlock(lock)
        if log_fd >= 0:
            try:
                looseobject.write_all(log_fd, line.encode())
                if fsync:
                    os.fsync(log_fd)
            except OSError:
                os.ftruncate(log_fd, log_size)
                raise
        os.rename(lock, path)
    except OSError:
        if log_fd >= 0 and log_size >= 0:
            try:  # noqa: SIM105  (as above)
                os.ftruncate(log_fd, log_size)
            except OSError:
                pass
        return _unlock(lock)
    finally:
        if log_fd >= 0:
            os.close(log_fd)
    return True


def _open_reflog(common: str, ref: str, create: bool) -> tuple[int, int]:
    """(descriptor open for appending, its size) of the ref's reflog; (-1, -1) when git
    writes none (it does not exist and is not to be created); (-2, -1) when its path is not
    a regular file (the git path decides)."""
    path = os.path.join(common, "logs", ref)
    flags = os.O_WRONLY | os.O_APPEND
    if create:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        flags |= os.O_CREAT
    try:
        fd = os.open(path, flags, 0o666)
    except FileNotFoundError:
        if create or os.path.lexists(path):  # a dangling symlink
            return -2, -1
        return -1, -1
    except (IsADirectoryError, NotADirectoryError):  # git: no reflog, or refuses the update
        return -2, -1
    info = os.fstat(fd)
    if not _regular(info.st_mode):
        os.close(fd)
        return -2, -1
    return fd, info.st_size


def _regular(mode: int) -> bool:
    """stat.S_ISREG without importing stat."""
    return mode & 0o170000 == 0o100000


def _unlock(lock: str) -> bool:
    """Remove our lock file; False (for the caller to return)."""
    looseobject.remove(lock)
    return False
