"""What the effect check's git ignores from configuration the agent can write (issue 15).

An unconfined agent can write the repository's configuration (`.git/config`, a worktree's
`config.worktree`, `.git/info/attributes`, `~/.gitconfig`, the files they include) at a time
it was allowed to, and git honours it inside taskgate's own comparison. Measured with git
2.39 (docs/security.md, "What the comparison ignores from git's configuration"), each of these
makes `git status` report an edited worktree as unchanged:

- a clean or process filter (`filter.<name>.clean = git show :README.md` with `README.md
  filter=<name>` in info/attributes): a same-size edit is filtered back to the index's blob;
- stat trust (`core.trustctime=false`, `core.checkStat=minimal`): an edit that keeps the size
  and restores the mtime (`touch -r`) is never re-read;
- `core.fileMode=false` (a chmod), `core.symlinks=false` (a link replaced by a file naming its
  target), `core.ignoreCase=true` (a new `readme.md` beside `README.md`);
- `core.worktree` in the worktree's `config.worktree` (git reads another directory).

So every comparison's git runs with the safe values on its command line (free: no process)
and with every filter driver the configuration defines switched off, git-lfs's standard one
excepted: it runs as the command `git lfs install` writes, from a `git-lfs` the agent cannot
have planted (taskgate.spawn's rule), or is switched off too. The driver names come from
reading the configuration files here (no git process): the repository's, the worktree's, the
global and system ones and every file they include, whatever the include's condition, so a
name is never missed, at worst switched off needlessly.

The worktree's index is the agent's too (assume-unchanged and skip-worktree bits, stat data
refreshed through a filter): the comparison reads its own copy of it (below). And a git that
cannot read the configuration at all fails the check closed (`unreadable`, R-REC-14) rather
than leaving the worktree uncompared.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Each forced to git's default where the agent's value could hide a change; none of them
# changes what an ordinary repository's status reports.
SAFE = (
    "core.fsmonitor=false",  # a program of the agent's, run by git status
    "core.hooksPath=/dev/null",
    "core.trustctime=true",
    "core.checkStat=default",
    "core.ignoreStat=false",
    "core.fileMode=true",
    "core.symlinks=true",
    "core.ignoreCase=false",
    "core.untrackedCache=false",  # an untracked cache in the index the agent can write
)
LFS = "lfs"
INCLUDE_DEPTH = 10  # git's own limit


def options(cwd: str, env: dict[str, str]) -> list[str]:
    """The command-line options of every git the comparison runs in `cwd` (a worktree's top
    directory): the safe values, the work tree named (`core.worktree` is the agent's), and
    the configuration's filter drivers switched off. A driver whose name `-c` cannot carry
    (an `=` in it) goes into `env` (GIT_CONFIG_COUNT, git 2.31 and later)."""
    found = ["--work-tree=" + os.path.abspath(cwd)]
    for item in SAFE:
        found += ["-c", item]
    for name in sorted(filter_names(cwd)):
        for key, value in _driver(name):
            if "=" not in name:
                found += ["-c", f"filter.{name}.{key}={value}"]
                continue
            given = env.get("GIT_CONFIG_COUNT", "")
            count = int(given) if given.isdigit() else 0
            env[f"GIT_CONFIG_KEY_{count}"] = f"filter.{name}.{key}"
            env[f"GIT_CONFIG_VALUE_{count}"] = value
            env["GIT_CONFIG_COUNT"] = str(count + 1)
    return found


def _driver(name: str) -> list[tuple[str, str]]:
    """What filter driver `name` becomes for the comparison."""
    if name == LFS:
        from taskgate.spawn import trusted_program

        program = trusted_program("git-lfs")
        if program:
            quoted = "'" + program.replace("'", "'\\''") + "'"
            return [("clean", f"{quoted} clean -- %f"), ("process", f"{quoted} filter-process")]
    # Empty clean and process: git applies no filter; not required, or git status would die.
    return [("clean", ""), ("process", ""), ("required", "false")]


def unreadable(worktree: str) -> OSError | None:
    """The error to fail closed with when git status failed in `worktree` although it is a
    worktree (its git dir is there): a configuration git cannot read (a syntax error in
    `.git/config` or `~/.gitconfig`) would otherwise leave it uncompared, and its baseline
    a marker. None when it is gone (removed, pruned)."""
    gitdir = git_dirs(worktree)[0]
    if not gitdir or not os.path.isdir(gitdir):
        return None
    from taskgate.spawn import UntrustedGit

    return UntrustedGit(
        f"git cannot read the task worktree {worktree} (git status fails there), so taskgate "
        "cannot check what the session changes",
        f"Run 'git -C {worktree} status' to see why, and repair the configuration it names "
        "(.git/config, the worktree's config.worktree, ~/.gitconfig)",
    )


# -- the comparison's own index ----------------------------------------------------------------
#
# The worktree's index is the agent's to write: `git update-index --assume-unchanged` or
# `--skip-worktree` makes git status skip a file, and an index refreshed by a git that ran the
# agent's filter (`git -c filter.x.clean=... status`, once) records an edited file's stat as
# clean, so a git that trusts the stat data never re-reads it. So the comparison reads its own
# copy of the index, made when the baseline is taken (right after taskgate's refresh, those
# bits cleared), in the store's directory beside the baseline; the worktree's own index is
# read only when it changed since (one stat), for what is staged.


def index_copy(baseline: str) -> str:
    """Where the comparison's copy of the index lives, beside the baseline file."""
    return (baseline[:-5] if baseline.endswith(".json") else baseline) + ".index"


def index_key(worktree: str) -> str:
    """The worktree's own index file's size, mtime and inode ("-": none)."""
    gitdir = git_dirs(worktree)[0]
    try:
        st = os.stat(os.path.join(gitdir, "index"))
    except OSError:
        return "-"
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"


def keep_index(worktree: str, copy: str, run_git: Any) -> str:
    """Copy the worktree's index to `copy`, assume-unchanged and skip-worktree bits cleared;
    the index's key (index_key) as copied, "" when no copy could be made."""
    gitdir = git_dirs(worktree)[0]
    key = index_key(worktree)
    tmp = f"{copy}.{os.getpid()}.tmp"
    try:
        with open(os.path.join(gitdir, "index"), "rb") as handle:
            data = handle.read()
        os.makedirs(os.path.dirname(copy), exist_ok=True)
        with open(tmp, "wb") as handle:
            handle.write(data)
    except OSError:
        return ""
    if not clear_bits(worktree, None, run_git, {"GIT_INDEX_FILE": tmp}):
        os.unlink(tmp)
        return ""
    os.replace(tmp, copy)
    return key


def clear_bits(worktree: str, paths: set[str] | None, run_git: Any,
               env: dict[str, str] | None = None) -> bool:  # fmt: skip
    """Clear the assume-unchanged and skip-worktree bits of the index's entries (of `paths`
    only, when given); False when git failed. One update-index per bit: git applies only the
    first of the two options."""
    code, out = run_git(["ls-files", "-v", "-z"], worktree, None, env)
    if code != 0:
        return False
    marked: dict[str, list[bytes]] = {"--no-assume-unchanged": [], "--no-skip-worktree": []}
    for record in out.split(b"\0"):
        tag, path = record[:1], record[2:]
        if paths is not None and path.decode("utf-8", "surrogateescape") not in paths:
            continue
        if tag.islower():
            marked["--no-assume-unchanged"].append(path)
        if tag in (b"S", b"s"):
            marked["--no-skip-worktree"].append(path)
    for option, listed in marked.items():
        if listed:
            args = ["update-index", option, "-z", "--stdin"]
            code, _ = run_git(args, worktree, b"\0".join(listed) + b"\0", env)
            if code != 0:
                return False
    return True


def index_side(entries: list[str]) -> dict[str, str]:
    """path -> what the index holds for it, for the status entries that differ from HEAD
    (staged, renamed, unmerged): the X column, the index's mode and blob id."""
    found: dict[str, str] = {}
    for entry in entries:
        kind = entry[0]
        if kind == "1":
            f = entry.split(" ", 8)
            if f[1][0] != ".":
                found[f[8]] = f"{f[1][0]} {f[4]} {f[7]}"
        elif kind == "2":
            f = entry.split(" ", 9)
            found[f[9].split("\0")[0]] = f"{f[1][0]} {f[4]} {f[7]} {f[8]} {f[9]}"
        elif kind == "u":
            f = entry.split(" ", 10)
            found[f[10]] = " ".join([f[1][0], *f[3:6], *f[7:10]])
    return found


def tree_now(layout: Any, base: dict[str, Any]) -> dict[str, Any] | None:
    """The task worktree's fingerprint now, as its guarded baseline was taken: through the
    comparison's copy of the index, and what the worktree's own index stages when that index
    changed since (above)."""
    from taskgate.hooks.effects import baseline_path, worktree_of, worktree_print

    old, worktree = base["tree"], worktree_of(layout, str(base["task"]))
    copy = index_copy(baseline_path(layout.state_dir, str(base.get("session") or "")))
    # the copy describes the baseline's HEAD: not one taskgate's journaled merge moved it to
    # (quarantine.own_work), whose index is taskgate's own
    private = old.get("index_head") == old["head"] and os.path.exists(copy)
    tree = worktree_print(worktree, old.get("ignore"), copy if private else None)
    if tree is None:
        error = unreadable(worktree)
        if error is not None:
            raise error  # reported (R-REC-14); the baseline stays for the next comparison
        return None
    if not private:
        return tree
    tree["staged"] = index_side(tree["entries"])
    if index_key(worktree) != old["index"]:
        real = worktree_print(worktree, untracked="no")
        tree["staged"] = index_side(real["entries"]) if real else {}
    return tree


def rewrite_found(wt: str, tree: dict[str, Any], head: str, run_git: Any) -> None:
    """Put back from `head` the tracked files the comparison found changed (`tree`, through
    its own copy of the index): read-tree leaves a file whose stat the agent's index claims
    clean, or that it marked to skip, and checkout-index -f too trusts the stat data; so their
    bits are cleared, the index reset to `head`, the files removed and written again."""
    from taskgate.hooks.effects import _path

    found = [_path(e) for e in tree["entries"] if e[0] in "12" and e[3] != "."]
    if found:
        clear_bits(wt, set(found), run_git)
    code, _ = run_git(["read-tree", "--reset", "-u", head], wt)
    if code != 0:
        raise OSError(f"git read-tree --reset -u {head} failed with exit code {code} in {wt}")
    for path in found:
        full = os.path.join(wt, path)
        if not os.path.isdir(full):
            try:  # noqa: SIM105
                os.unlink(full)
            except OSError:
                pass
    if found:
        listed = "\0".join(found).encode("utf-8", "surrogateescape") + b"\0"
        run_git(["checkout-index", "-f", "-q", "-z", "--stdin"], wt, listed)


# -- the filter drivers the configuration defines ---------------------------------------------


def filter_names(cwd: str) -> set[str]:
    """Every `filter.<name>.*` the configuration git reads in `cwd` may define."""
    names: set[str] = set()
    for path in config_files(cwd):
        _scan(path, names, 0)
    return names


def config_files(cwd: str) -> list[str]:
    """The system, global, repository and worktree configuration files of `cwd`."""
    env = os.environ
    home = env.get("HOME", "")
    files: list[str] = []
    if not env.get("GIT_CONFIG_NOSYSTEM"):
        files.append(env.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig")
        try:
            from taskgate.spawn import git_program

            prefix = os.path.dirname(os.path.dirname(git_program()))
            files.append(os.path.join(prefix, "etc", "gitconfig"))  # Homebrew's, a source build
        except OSError:
            pass
    if env.get("GIT_CONFIG_GLOBAL"):
        files.append(env["GIT_CONFIG_GLOBAL"])
    else:
        xdg = env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
        files += [os.path.join(xdg, "git", "config"), os.path.join(home, ".gitconfig")]
    gitdir, common = git_dirs(cwd)
    if common:
        files.append(os.path.join(common, "config"))
    if gitdir:
        files.append(os.path.join(gitdir, "config.worktree"))
    return files


def git_dirs(cwd: str) -> tuple[str, str]:
    """(git dir, common git dir) of the worktree `cwd`, read from its `.git` (no git)."""
    dot = os.path.join(cwd, ".git")
    if os.path.isdir(dot):
        return dot, dot
    try:
        with open(dot, encoding="utf-8", errors="surrogateescape") as handle:
            line = handle.readline().strip()
    except OSError:
        return "", ""
    if not line.startswith("gitdir:"):
        return "", ""
    gitdir = os.path.join(cwd, line[7:].strip())
    try:
        with open(os.path.join(gitdir, "commondir"), encoding="utf-8") as handle:
            common = os.path.join(gitdir, handle.read().strip())
    except OSError:
        common = gitdir
    return gitdir, common


def _scan(path: str, names: set[str], depth: int) -> None:
    """Add the filter drivers of one configuration file and of the files it includes."""
    try:
        with open(path, "rb") as handle:
            text = handle.read(1 << 22).decode("utf-8", "surrogateescape")
    except OSError:
        return
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("["):
            section, line = _header(line)
            if section.startswith("filter."):
                names.add(section[7:])
        if not line or line[0] in "#;" or depth >= INCLUDE_DEPTH:
            continue
        if section == "include" or section.startswith("includeif."):
            key, eq, value = line.partition("=")
            if eq and key.strip().lower() == "path":
                target = _include_path(_value(value.strip()), path)
                if target:
                    _scan(target, names, depth + 1)


def _header(line: str) -> tuple[str, str]:
    """(`filter.x` of `[filter "x"]` or of the old form `[filter.X]`, the rest of the line):
    section names lowered, a quoted subsection kept with its escapes resolved."""
    end = line.find("]")
    quote = line.find('"')
    if quote < 0 or 0 <= end < quote:
        if end < 0:
            return line[1:].strip().lower(), ""
        return line[1:end].strip().lower(), line[end + 1 :].strip()
    sub: list[str] = []
    i = quote + 1
    while i < len(line) and line[i] != '"':
        if line[i] == "\\" and i + 1 < len(line):
            i += 1
        sub.append(line[i])
        i += 1
    rest = line[i + 1 :].partition("]")[2]
    return f"{line[1:quote].strip().lower()}.{''.join(sub)}", rest.strip()


def _value(value: str) -> str:
    """A configuration value: quotes resolved, a comment after it cut."""
    out: list[str] = []
    quoted = False
    for ch in value:
        if ch == '"':
            quoted = not quoted
        elif ch in "#;" and not quoted:
            break
        else:
            out.append(ch)
    return "".join(out).strip()


def _include_path(value: str, including: str) -> str:
    """Where an include's `path` points: `~/` is $HOME, relative is the including file's."""
    if not value:
        return ""
    if value.startswith("~/"):
        value = os.path.join(os.environ.get("HOME", ""), value[2:])
    return os.path.join(os.path.dirname(including), value)
