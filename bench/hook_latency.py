"""Median wall time of the PreToolUse hook command that `taskgate hooks install` writes, with
50 tasks in the store (issue 7), as a ratio to `python3 -c pass` and to a seed-style bash + jq
hook (bench/seed_style_hook.sh), all measured interleaved in the same run.

Also (issue 15): PreToolUse and PostToolUse with the effect check on a 1,000-file and a
20,000-file task worktree in IMPLEMENTATION (the main agent may not write: PostToolUse compares
the worktree and refs with the baseline PreToolUse left), as ratios to `python3 -c pass`.

Also (issue 18): PreToolUse answered over HTTP by a warm `taskgate serve` (the entries
`taskgate hooks install --http` writes), p50 client-side, against the installed command hook,
interleaved in the same run.

Also (issue 18): the engine-path command hooks (PostToolUse after an Edit, UserPromptSubmit,
SessionStart) in their usual and their engine cases (--engine-only), then the floor of a
prompt that is recorded and anchored, and the command hooks with N more tasks in the store
(--scale N).

With `--against DIR` (a checkout of another version, e.g. `git worktree add /tmp/before main`),
the --engine-only and --scale tables add that tree's PostToolUse after an Edit, SessionStart
and UserPromptSubmit (holding a task) rows ("before: ..."), interleaved in the same rounds on
the same store.

Run: python bench/hook_latency.py [rounds] [--pre-only] [--effects-only] [--http-only]
     [--engine-only] [--scale N] [--against DIR]
"""

from __future__ import annotations

import atexit
import json
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import ROOT, env, tg
from common import scratch_repo as _scratch_repo


def scratch_repo(todo: str) -> Path:
    """common.scratch_repo, removed when the script ends: a `taskgate serve` that a
    SessionStart row started there then ends by itself (server/tether.py)."""
    repo = _scratch_repo(todo)
    atexit.register(shutil.rmtree, repo.parent, True)
    return repo


TASKS = 50
TODO = "".join(
    f"## task-{i}: Task {i}\n- Purpose: p\n- Scope: s\n- Components: c\n- Files: src/m{i}.py\n\n"
    for i in range(TASKS)
)


def timed(cmd: list[str], cwd: Path, stdin: str) -> float:
    """Wall time of one command fed `stdin` (it must succeed)."""
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env(), input=stdin.encode(), check=True, capture_output=True)
    return time.perf_counter() - start


CPU: dict[str, list[float]] = {}  # row -> user+sys CPU seconds of each run (the child's)


def timed_cpu(row: str, cmd: list[str], cwd: Path, stdin: str) -> float:
    """timed(), also keeping the child's CPU time (getrusage deltas) under `row`."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = timed(cmd, cwd, stdin)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    spent = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    CPU.setdefault(row, []).append(spent)
    return wall


def _print_rows(rows: dict[str, list[float]], width: int) -> None:
    """Median wall ms and its ratio to `python3 -c pass`, then the same for CPU time."""
    floor = statistics.median(rows["python3 -c pass"])
    cpu_floor = statistics.median(CPU["python3 -c pass"])
    print(f"{'case':{width}} {'median ms':>10} {'/ python':>9} {'cpu ms':>8} {'/ python':>9}")
    for name, values in rows.items():
        median = statistics.median(values)
        cpu = statistics.median(CPU[name])
        print(f"{name:{width}} {median * 1000:10.1f} {median / floor:9.2f} "
              f"{cpu * 1000:8.1f} {cpu / cpu_floor:9.2f}")  # fmt: skip


def installed_command(event: str) -> list[str]:
    """The argv of the hook command `taskgate hooks install` writes (what Claude Code runs)."""
    from taskgate.hooks.install import default_program

    return [*shlex.split(default_program()), event]


def console_script() -> list[str]:
    """The installed console script next to this interpreter, else `python -m taskgate`."""
    script = Path(sys.executable).parent / "taskgate"
    return [str(script)] if script.exists() else [sys.executable, "-m", "taskgate"]


def inputs(repo: Path) -> dict[str, str]:
    """Typical PreToolUse inputs of the session that owns task-0."""
    base = {
        "session_id": "bench",
        "transcript_path": "",
        "cwd": str(repo),
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
    }
    worktree = repo / ".taskgate" / "tasks" / "task-0" / "code"
    return {
        "Edit in the task worktree (snapshot read)": json.dumps(
            {
                **base,
                "tool_name": "Edit",
                "tool_input": {
                    "file_path": str(worktree / "src" / "m0.py"),
                    "old_string": "a",
                    "new_string": "b",
                },
            }
        ),
        "Bash `git status && pytest -q` (no task lookup)": json.dumps(
            {**base, "tool_name": "Bash", "tool_input": {"command": "git status && pytest -q"}}
        ),
        "Write to .taskgate/state.db (denied)": json.dumps(
            {
                **base,
                "tool_name": "Write",
                "tool_input": {"file_path": str(repo / ".taskgate" / "state.db"), "content": ""},
            }
        ),
    }


# Rows a --against tree also runs (issue 18, third pass: the hooks without the engine).
COMPARED = ("PostToolUse after an Edit (recorded, no engine)",
            "PostToolUse after that Edit (recorded, no engine)",
            "SessionStart (startup, new session)",
            "UserPromptSubmit, holding a task (engine: recorded)",
            "SessionStart (resume, holding a task: engine)")  # fmt: skip


def _against_arg() -> str | None:
    """The DIR of `--against DIR` or `--against=DIR`, None without."""
    for at, arg in enumerate(sys.argv):
        if arg.startswith("--against="):
            return arg.split("=", 1)[1]
        if arg == "--against" and at + 1 < len(sys.argv):
            return sys.argv[at + 1]
    return None


def against() -> Path | None:
    """The --against tree's root (its src/taskgate/hooks/launch.py is run), None without."""
    arg = _against_arg()
    if arg is None:
        return None
    tree = Path(arg).resolve()
    launcher = tree / "src" / "taskgate" / "hooks" / "launch.py"
    if not launcher.is_file():
        raise SystemExit(f"--against {tree}: no src/taskgate/hooks/launch.py there")
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "src")],
                   check=True, capture_output=True)  # fmt: skip
    return tree


def _before(tree: Path | None, event: str) -> list[str]:
    assert tree is not None
    return [sys.executable, "-S", str(tree / "src" / "taskgate" / "hooks" / "launch.py"), event]


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if "--against" in sys.argv and _against_arg() in args:
        args.remove(str(_against_arg()))
    rounds = int(args[0]) if args else 30
    if "--effects-only" in sys.argv:  # just the issue 15 rows
        effect_check(rounds)
        return 0
    if "--http-only" in sys.argv:  # just the issue 18 rows (--tasks N: N more tasks stored)
        more = sys.argv[sys.argv.index("--tasks") + 1] if "--tasks" in sys.argv else "0"
        http_rows(rounds, int(more))
        return 0
    if "--engine-only" in sys.argv:  # just the issue 18 engine-path rows
        engine_hooks(rounds)
        return 0
    if "--scale" in sys.argv:  # the command hooks with N more tasks stored (issue 18)
        scale_rows(rounds, int(sys.argv[sys.argv.index("--scale") + 1]))
        return 0
    repo = scratch_repo(TODO)
    tg(repo, "start", "task-0", check=True)
    for i in range(1, TASKS):  # one lock per session (R-LCK-19): 49 other sessions
        subprocess.run(
            [sys.executable, "-m", "taskgate", "--session", f"other-{i}", "start", f"task-{i}"],
            cwd=repo,
            env=env(),
            check=True,
            capture_output=True,
        )
    command = installed_command("PreToolUse")
    seed = ROOT / "bench" / "seed_style_hook.sh"
    has_jq = shutil.which("jq") is not None
    floor = "python3 -S -c 'import os, _json, _sqlite3'"
    script = "console script `taskgate hook` (Edit case)"
    # What the hook avoids: the json package (it imports re) and SQLite itself.
    imports = {
        "python3 -S -c pass": "pass",
        "python3 -S -c 'import json'": "import json",
        "python3 -S -c 'import _sqlite3'": "import _sqlite3",
    }
    samples: dict[str, list[float]] = {"python3 -c pass": [], floor: []}
    samples.update({name: [] for name in imports})
    cases = inputs(repo)
    for name in cases:
        samples[name] = []
    fallback = "Edit, no snapshot: read from the store (fallback)"
    samples[fallback] = []
    samples[script] = []
    snapshot = repo / ".taskgate" / "hook-snapshot.json"
    # Not on the decision path: PostToolUse records the tool usage in the audit trail and
    # checks the snapshot against the store (hooks/quick.py, no engine since issue 18).
    after = "PostToolUse after that Edit (recorded, no engine)"
    samples[after] = []
    quiet = "PostToolUse after `git status` (writes nothing)"
    samples[quiet] = []
    samples["seed-style bash + jq"] = []
    edit = cases["Edit in the task worktree (snapshot read)"]
    after_edit = json.dumps(
        {**json.loads(edit), "hook_event_name": "PostToolUse", "tool_response": {}}
    )
    status_call = json.loads(cases["Bash `git status && pytest -q` (no task lookup)"])
    after_status = json.dumps(
        {**status_call, "hook_event_name": "PostToolUse", "tool_response": {}}
    )
    for _ in range(rounds):  # interleaved, so machine noise hits every side alike
        samples["python3 -c pass"].append(timed([sys.executable, "-c", "pass"], repo, ""))
        # what any Python hook that parses JSON and reads the store must load
        samples[floor].append(
            timed([sys.executable, "-S", "-c", "import os, _json, _sqlite3"], repo, "")
        )
        for name, code in imports.items():
            samples[name].append(timed([sys.executable, "-S", "-c", code], repo, ""))
        for name, data in cases.items():
            samples[name].append(timed(command, repo, data))
        # The fallback when the snapshot is missing (after a crash, until the next write):
        # the same Edit decided from the store through SQLite.
        saved = snapshot.read_text()
        snapshot.unlink()
        samples[fallback].append(timed(command, repo, edit))
        snapshot.write_text(saved)
        samples[script].append(timed([*console_script(), "hook", "PreToolUse"], repo, edit))
        samples[after].append(timed(installed_command("PostToolUse"), repo, after_edit))
        samples[quiet].append(timed(installed_command("PostToolUse"), repo, after_status))
        if has_jq:
            samples["seed-style bash + jq"].append(timed(["bash", str(seed)], repo, edit))
    base = statistics.median(samples["python3 -c pass"])
    print(f"taskgate hook PreToolUse, {TASKS} tasks in the store, {rounds} rounds")
    print(f"installed hook command: {shlex.join(command)}")
    print(f"{'case':52} {'median ms':>10} {'/ python':>9} {'/ seed':>8}")
    seed_ms = statistics.median(samples["seed-style bash + jq"]) if has_jq else None
    for name, values in samples.items():
        if not values:
            print(f"{name:52} {'skipped (jq not installed)':>29}")
            continue
        median = statistics.median(values)
        vs_seed = f"{median / seed_ms:8.2f}" if seed_ms else f"{'-':>8}"
        print(f"{name:52} {median * 1000:10.1f} {median / base:9.2f} {vs_seed}")
    snapshot_scaling()
    if "--pre-only" in sys.argv:  # just the PreToolUse table (issue 7) and the snapshot's size
        return 0
    effect_check(rounds)
    http_rows(max(rounds, 50))
    engine_hooks(rounds)
    scale_rows(rounds, 10000)
    return 0


def engine_hooks(rounds: int) -> None:
    """The command hooks that open the engine (issue 18): PostToolUse after an Edit,
    UserPromptSubmit, SessionStart, as ratios to `python3 -c pass`; the hook program is this
    checkout's launch.py (ROOT), so a copy of bench/ beside an older src/ measures that one."""
    repo = scratch_repo(TODO)
    tg(repo, "start", "task-0", check=True)
    launcher = str(ROOT / "src" / "taskgate" / "hooks" / "launch.py")
    base = {"session_id": "bench", "transcript_path": "", "cwd": str(repo),
            "permission_mode": "default"}  # fmt: skip
    worktree = repo / ".taskgate" / "tasks" / "task-0" / "code"
    edit = {"tool_name": "Edit", "tool_use_id": "t1", "tool_response": {},
            "tool_input": {"file_path": str(worktree / "src" / "m0.py"),
                           "old_string": "a", "new_string": "b"}}  # fmt: skip
    fresh = {**base, "session_id": "fresh"}
    cases = {
        "PostToolUse after an Edit (recorded, no engine)": ("PostToolUse", {**base, **edit}),
        "UserPromptSubmit, session holding no task": (
            "UserPromptSubmit",
            {**fresh, "prompt": "what is the status?"},
        ),
        # Recorded as an interruption and anchored in git, since issue 18's third pass
        # without the engine (hooks/prompt.py); the row kept its name.
        "UserPromptSubmit, holding a task (engine: recorded)": (
            "UserPromptSubmit",
            {**base, "prompt": "what is the status?"},
        ),
        "SessionStart (startup, new session)": ("SessionStart", {**fresh, "source": "startup"}),
        "SessionStart (resume, holding a task: engine)": (
            "SessionStart",
            {**base, "source": "resume"},
        ),
    }
    rows: dict[str, list[float]] = {"python3 -c pass": []}
    rows.update({name: [] for name in cases})
    tree = against()
    if tree is not None:
        rows.update({f"before: {name}": [] for name in cases if name in COMPARED})
    CPU.clear()
    for _ in range(rounds):
        floor_cmd = [sys.executable, "-c", "pass"]
        rows["python3 -c pass"].append(timed_cpu("python3 -c pass", floor_cmd, repo, ""))
        for name, (event, data) in cases.items():
            body = json.dumps({**data, "hook_event_name": event})
            command = [sys.executable, "-S", launcher, event]
            rows[name].append(timed_cpu(name, command, repo, body))
            if f"before: {name}" in rows:
                before = f"before: {name}"
                rows[before].append(timed_cpu(before, _before(tree, event), repo, body))
    selfs = []
    for _ in range(5):  # protocol/messages.py's own import time (its regexes: issue 18)
        out = (
            subprocess.run(
                [sys.executable, "-X", "importtime", "-c", "import taskgate.protocol.messages"],
                env=env(),
                capture_output=True,
                text=True,
                check=True,
            )
            .stderr.strip()
            .splitlines()[-1]
        )
        selfs.append(int(out.split(":", 1)[1].split("|")[0]))
    own = statistics.median(selfs) / 1000
    print(f"import of taskgate.protocol.messages, self time: {own:.1f} ms")
    print(f"engine-path command hooks (issue 18), {rounds} rounds, {_load()}")
    print(f"hook program: {launcher}")
    if tree is not None:
        print(f"before: {tree / 'src' / 'taskgate' / 'hooks' / 'launch.py'}")
    _print_rows(rows, 60 if tree is not None else 52)
    held = cases["UserPromptSubmit, holding a task (engine: recorded)"][1]
    body = json.dumps({**held, "hook_event_name": "UserPromptSubmit"})
    prompt_floor(rounds, repo, launcher, body)


# What a prompt that is recorded and anchored cannot do without (issue 18, docs/benchmarks.md):
# a bare `python3 -S`, the classifier's regex engine (`re`), `_sqlite3`, one durable commit
# (synchronous=FULL, one event) and the anchor: as git processes, or (fourth pass) written in
# the process as taskgate.gitplumb writes it (zlib, the builtin SHA-1, a loose object linked
# into place, a ref moved by lock file and rename); run by path and ended with os._exit like
# the hook. DB, REPO, GIT_CMDS and ANCHOR are set per row.
# Fifth pass: the classifier outside a checkpoint needs no `re` (protocol/messages._Words), so the
# rows without it load `enum` (protocol/states' StrEnums, with functools and collections) or
# nothing beyond `_sqlite3`, loaded as store/hook_tx.sqlite_module loads it when nothing has
# imported functools (a stand-in for its lru_cache): IMPORTS is set per row.
_FLOOR = """
import os, sys
text = sys.stdin.read()
if IMPORTS == "re":
    import re, _sqlite3
    re.compile(r"\\b(?:what|how|why|explain|clarify)\\b").search(text.casefold())
else:
    if IMPORTS == "enum":
        import enum
    if "functools" not in sys.modules:
        from _functools import _lru_cache_wrapper
        stand_in = type(sys)("functools")
        stand_in.lru_cache = lambda size, typed=False: (
            lambda f: _lru_cache_wrapper(f, max(size, 0), typed, tuple))
        sys.modules["functools"] = stand_in
        import _sqlite3
        del sys.modules["functools"]
    import _sqlite3
    " what " in " " + text.casefold() + " "
c = _sqlite3.connect(DB, isolation_level=None)
c.execute("PRAGMA synchronous=FULL")
c.execute("BEGIN IMMEDIATE")
c.execute("INSERT INTO events (payload) VALUES (?)", (text,))
c.execute("COMMIT")
for args in GIT_CMDS:
    pid = os.posix_spawnp("git", ["git", "-C", REPO, *args], dict(os.environ))
    os.waitpid(pid, 0)
if ANCHOR:
    import zlib, _sha1, time
    git_dir = os.path.join(REPO, ".git")
    ref = os.path.join(git_dir, "refs", "taskgate", "floor")
    parent = open(ref).read().strip()
    body = ("tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\\nparent %s\\n"
            "author f <f> %d +0000\\ncommitter f <f> %d +0000\\n\\nfloor %s\\n"
            % (parent, time.time(), time.time(), time.perf_counter())).encode()
    raw = b"commit %d\\0" % len(body) + body
    oid = _sha1.sha1(raw).hexdigest()
    folder = os.path.join(git_dir, "objects", oid[:2])
    os.makedirs(folder, exist_ok=True)
    temp = os.path.join(folder, "tmp_obj_floor")
    fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o444)
    os.write(fd, zlib.compress(raw, 1))
    os.close(fd)
    os.link(temp, os.path.join(folder, oid[2:]))
    os.unlink(temp)
    fd = os.open(ref + ".lock", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
    os.write(fd, (oid + "\\n").encode())
    os.close(fd)
    os.rename(ref + ".lock", ref)
sys.stdout.flush()
os._exit(0)
"""


def _hook_modules(launcher: str, repo: Path, body: str) -> list[str]:
    """The modules the prompt hook imports beyond `python3 -S` itself, in import order (from
    `-X importtime` of one run of it): taskgate's and the C modules."""
    bare = subprocess.run([sys.executable, "-S", "-X", "importtime", "-c", "pass"], env=env(),
                          capture_output=True, text=True, check=True).stderr  # fmt: skip
    out = subprocess.run([sys.executable, "-S", "-X", "importtime", launcher, "UserPromptSubmit"],
                         cwd=repo, env=env(), input=body, capture_output=True, text=True,
                         check=True).stderr  # fmt: skip

    def names(text: str) -> list[str]:
        rows = [line.rsplit("|", 1)[-1] for line in text.splitlines() if "import time:" in line]
        return [r.strip() for r in rows if r.strip() and r.strip() != "imported package"]

    started = set(names(bare))
    # taskgate's own modules pull in the standard library modules they import; the C modules
    # imported inside functions (_sqlite3, zlib, _sha1...) are listed by name.
    return [name for name in names(out) if name not in started and (
        name.startswith("taskgate") or name == "zlib" or (name[0] == "_" and "." not in name)
    )]  # fmt: skip


def prompt_floor(rounds: int, repo: Path, launcher: str = "", body: str = "") -> None:
    """The floor of a prompt recorded and anchored, as ratios to `python3 -c pass`; with the
    hook's `launcher` and a prompt `body`, also the hook's own modules imported and nothing
    run (what its imports cost beside its work)."""
    import sqlite3
    import tempfile

    scratch = Path(tempfile.mkdtemp(prefix="taskgate-floor-"))
    db = scratch / "floor.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE events (seq INTEGER PRIMARY KEY, payload TEXT)")
    conn.commit()
    conn.close()
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()  # fmt: skip
    update = ["update-ref", "refs/taskgate/floor", head]
    subprocess.run(["git", "-C", str(repo), *update], check=True)
    commit = ["commit-tree", "4b825dc642cb6eb9a060e54bf8d69288fbee4904", "-m", "floor"]
    cases = {
        "python3 -c pass": [sys.executable, "-c", "pass"],
        "python3 -S -c pass": [sys.executable, "-S", "-c", "pass"],
        "python3 -S -c 'import re, _sqlite3'": [sys.executable, "-S", "-c", "import re, _sqlite3"],
        "python3 -S -c 'import enum, _sqlite3'": [
            sys.executable, "-S", "-c", "import enum, _sqlite3",
        ],
        "python3 -S -c 'import re'": [sys.executable, "-S", "-c", "import re"],
        "python3 -S -c 'import enum'": [sys.executable, "-S", "-c", "import enum"],
    }  # fmt: skip
    rows_of = (("re", "no git", [], False), ("re", "the anchor in-process", [], True),
               ("re", "1 git process", [update], False),
               ("re", "2 git processes", [commit, update], False),
               ("enum", "the anchor in-process", [], True),
               ("", "the anchor in-process", [], True))  # fmt: skip
    for imports, label, cmds, in_process in rows_of:
        path = scratch / f"floor-{imports}-{len(cmds)}-{in_process}.py"
        path.write_text(f"DB = {str(db)!r}\nREPO = {str(repo)!r}\nGIT_CMDS = {cmds!r}\n"
                        f"ANCHOR = {in_process!r}\nIMPORTS = {imports!r}\n"
                        + _FLOOR)  # fmt: skip
        loads = f"{imports}, _sqlite3" if imports else "_sqlite3"
        cases[f"floor: python3 -S, {loads}, a commit, {label}"] = [
            sys.executable, "-S", str(path),
        ]  # fmt: skip
    if launcher:
        modules = _hook_modules(launcher, repo, body)
        src = str(Path(launcher).parents[2])
        # _sqlite3 as the hook loads it (store/hook_tx.sqlite_module: without functools).
        code = f"import sys; sys.path[0] = {src!r}\n" + "".join(
            "from taskgate.store.hook_tx import sqlite_module; sqlite_module()\n"
            if name == "_sqlite3"
            else f"import {name}\n"
            for name in modules
        )
        label = f"the prompt hook's {len(modules)} modules, imported only"
        cases[label] = [sys.executable, "-S", "-c", code]
    rows: dict[str, list[float]] = {name: [] for name in cases}
    CPU.clear()
    for _ in range(rounds):
        for name, cmd in cases.items():
            rows[name].append(timed_cpu(name, cmd, repo, "what is the status?"))
    print(f"the floor of a prompt recorded and anchored, {rounds} rounds, {_load()}")
    _print_rows(rows, 68)


def _post(port: int, event: str, body: str, secret: str, conn: object = None) -> float:
    """Client-side wall time of one hook POST (a new connection unless `conn` is given)."""
    import http.client

    start = time.perf_counter()
    own = conn is None
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10) if own else conn
    assert isinstance(c, http.client.HTTPConnection)
    c.request(
        "POST",
        f"/hooks/{event}",
        body=body.encode(),
        headers={"Content-Type": "application/json", "X-Taskgate-Hook-Secret": secret},
    )
    response = c.getresponse()
    data = response.read()
    if own:
        c.close()
    elapsed = time.perf_counter() - start
    assert response.status == 200, (response.status, data)
    return elapsed


def _snapshot_kib(repo: Path) -> int:
    path = repo / ".taskgate" / "hook-snapshot.json"
    return path.stat().st_size // 1024 if path.exists() else -1


def _store_tasks(repo: Path, count: int) -> None:
    """`count` more tasks in the store, in one write (the hook snapshot grows with them)."""
    from taskgate.store.records import TaskRow
    from taskgate.store.sqlite import SqliteStore

    store = SqliteStore(repo / ".taskgate" / "state.db")
    with store.write() as tx:
        for i in range(count):
            tx.insert_task(
                TaskRow(name=f"stored-{i:05d}", state="CLEANUP", session_id=f"gone-{i}",
                        host="bench", fence=1, created_at="2026-01-01T00:00:00Z",
                        updated_at="2026-01-01T00:00:00Z", lock_released_at="2026-01-01",
                        required_agents=("architect", "quality", "security"))
            )  # fmt: skip
    store.close()


def _serve(repo: Path, src: Path) -> tuple[subprocess.Popen[bytes], int, str, Path]:
    """`taskgate serve` of the tree `src` for `repo` on a free port: (process, port, hook
    secret, state dir); the caller stops it with `_stop`."""
    import socket
    import tempfile

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    state = Path(tempfile.mkdtemp(prefix="taskgate-bench-state-"))
    server = subprocess.Popen(
        [sys.executable, "-m", "taskgate", "serve", "--port", str(port), "--state-dir", str(state)],
        cwd=repo,
        env={**env(), "PYTHONPATH": str(src)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    secret_file = None
    for _ in range(400):
        secret_file = next(state.glob("serve/*/hook-secret"), None)
        if secret_file and next(state.glob("serve/*/server.json"), None):
            break
        time.sleep(0.025)
    if secret_file is None:
        _stop(server, state)
        raise SystemExit(f"taskgate serve ({src}) did not start")
    return server, port, secret_file.read_text().strip(), state


def _stop(server: subprocess.Popen[bytes], state: Path) -> None:
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:  # a SIGTERM during start-up can go unanswered
        server.kill()
        server.wait(timeout=10)
    shutil.rmtree(state, ignore_errors=True)


def http_rows(rounds: int, more_tasks: int = 0) -> None:
    """PreToolUse over HTTP from a warm `taskgate serve` vs the installed command hook; with
    --against DIR, that tree's server too ("before: HTTP: ..."), on a repository of its own
    set up the same way, its calls interleaved with this tree's in every round."""
    import http.client
    import os

    tree = against()
    repos = {"": scratch_repo(TODO)}
    if tree is not None:
        repos["before: "] = scratch_repo(TODO)
    for repo in repos.values():
        tg(repo, "start", "task-0", check=True)
        if more_tasks:
            _store_tasks(repo, more_tasks)
            tg(repo, "status", check=True)  # a read: the snapshot is there before the first call
    servers: dict[str, tuple[subprocess.Popen[bytes], int, str, Path]] = {}
    load_before = os.getloadavg()
    try:
        for side, repo in repos.items():
            servers[side] = _serve(repo, (tree if side and tree else ROOT) / "src")
        repo = repos[""]
        cases = inputs(repo)
        command = installed_command("PreToolUse")
        rows: dict[str, list[float]] = {"python3 -c pass": []}
        for name in cases:
            rows[f"command: {name}"] = []
            for side in servers:
                rows[f"{side}HTTP: {name}"] = []
        keep = "HTTP, kept-alive connection (Edit case)"
        for side in servers:
            rows[side + keep] = []
        edit = cases["Edit in the task worktree (snapshot read)"]
        # The engine path: PostToolUse after that Edit records it (an engine step) warm.
        after = json.dumps({**json.loads(edit), "hook_event_name": "PostToolUse",
                            "tool_response": {}})  # fmt: skip
        post = "PostToolUse after that Edit (engine step)"
        rows[f"command: {post}"] = []
        rows[f"HTTP: {post}"] = []
        bodies = {side: inputs(repos[side]) for side in servers}
        conns = {side: http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                 for side, (_, port, _, _) in servers.items()}  # fmt: skip
        for side, (_, port, secret, _) in servers.items():
            for body in bodies[side].values():  # warm: first requests import the hook modules
                for _ in range(5):
                    _post(port, "PreToolUse", body, secret)
        for turn in range(rounds):
            # which tree's call comes first (right after a process start) alternates
            order = list(servers.items())[:: -1 if turn % 2 else 1]
            rows["python3 -c pass"].append(timed([sys.executable, "-c", "pass"], repo, ""))
            for name, body in cases.items():
                rows[f"command: {name}"].append(timed(command, repo, body))
                for side, (_, port, secret, _) in order:
                    rows[f"{side}HTTP: {name}"].append(
                        _post(port, "PreToolUse", bodies[side][name], secret)
                    )
            for side, (_, port, secret, _) in order:
                the_edit = bodies[side]["Edit in the task worktree (snapshot read)"]
                rows[side + keep].append(_post(port, "PreToolUse", the_edit, secret, conns[side]))
            _, port, secret, _ = servers[""]
            rows[f"command: {post}"].append(timed(installed_command("PostToolUse"), repo, after))
            rows[f"HTTP: {post}"].append(_post(port, "PostToolUse", after, secret))
        for conn in conns.values():
            conn.close()
        # Back to back, no process started in between (a tool-call burst of an agent).
        burst = "HTTP, 200 calls back to back (Edit case)"
        for side in servers:
            rows[side + burst] = []
        cpu = {side: -_cpu_s(server.pid) for side, (server, _, _, _) in servers.items()}
        for turn in range(200):
            for side, (_, port, secret, _) in list(servers.items())[:: -1 if turn % 2 else 1]:
                the_edit = bodies[side]["Edit in the task worktree (snapshot read)"]
                rows[side + burst].append(_post(port, "PreToolUse", the_edit, secret))
        for side, (server, _, _, _) in servers.items():
            cpu[side] = (cpu[side] + _cpu_s(server.pid)) / 200
    finally:
        for server, _, _, state in servers.values():
            _stop(server, state)
    base = statistics.median(rows["python3 -c pass"])
    tasks = TASKS + more_tasks
    print(f"HTTP hooks (issue 18): PreToolUse from a warm taskgate serve, {rounds} rounds,")
    print(f"{tasks} tasks in the store, hook snapshot {_snapshot_kib(repo)} KiB")
    if tree is not None:
        print(f"before: the server of {tree}, on a repository set up the same way")
    load_after = os.getloadavg()
    print("p50 client-side (a new TCP connection per call unless noted), interleaved; load "
          f"average {load_before[0]:.2f} before, {load_after[0]:.2f} after")  # fmt: skip
    print(f"{'case':60} {'p50 ms':>8} {'/ python':>9} {'cmd / http':>11}")
    for name, values in rows.items():
        median = statistics.median(values)
        ratio = ""
        if "HTTP: " in name:
            command_row = "command: " + name.split("HTTP: ", 1)[1]
            ratio = f"{statistics.median(rows[command_row]) / median:11.1f}"
        print(f"{name:60} {median * 1000:8.2f} {median / base:9.2f} {ratio}")
    print("server CPU (user+sys) per call of the 200-call burst: "
          + ", ".join(f"{side or 'this tree: '}{cpu[side] * 1000:.2f} ms" for side in servers)
          + " (its store watcher's polling included, the same code on both sides)")  # fmt: skip


def _cpu_s(pid: int) -> float:
    """user+sys seconds of process `pid` so far (all its threads)."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def effect_check(rounds: int) -> None:
    """PreToolUse / PostToolUse of `git status` with the effect check, by worktree size."""
    import os
    import tempfile

    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import Repo, make_repo  # the tests' repository builders, real CLI underneath
    from flow import to_implementation

    home = Path(tempfile.mkdtemp(prefix="taskgate-bench-home-"))
    (home / ".gitconfig").write_text("[user]\n\tname = B\n\temail = b@example.com\n")
    os.environ.update(HOME=str(home), GIT_CONFIG_NOSYSTEM="1")  # never the real home
    print(f"effect check (issue 15): the main agent in IMPLEMENTATION, {rounds} rounds; in this")
    print("guarded session every Bash call is compared (git status + refs), plain reads too")
    print(f"{'case':52} {'median ms':>10} {'/ python':>9}")
    print("load average (1, 5, 15 min) at the start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    for files in (1000, 20000):
        base = Path(tempfile.mkdtemp(prefix="taskgate-bench-fx-")) / "repo"
        repo: Repo = make_repo(base)
        src = base / "src"
        for i in range(files):
            sub = src / f"d{i // 500}"
            sub.mkdir(parents=True, exist_ok=True)
            (sub / f"m{i}.py").write_text(f"x = {i}\n")
        subprocess.run(["git", "add", "src"], cwd=base, check=True, capture_output=True)
        subprocess.run(["git", "commit", "-qm", "files"], cwd=base, check=True, capture_output=True)
        to_implementation(repo, "add-login")
        tree = repo.worktree("add-login")
        rows: dict[str, list[float]] = {"python3 -c pass": []}
        inputs: dict[str, tuple[str, str]] = {}
        for command in ("git status", "pytest -q"):
            call = {"session_id": "s1", "transcript_path": "", "cwd": str(tree),
                    "permission_mode": "default", "tool_name": "Bash",
                    "tool_input": {"command": command}}  # fmt: skip
            pre = json.dumps({**call, "hook_event_name": "PreToolUse"})
            post = json.dumps({**call, "hook_event_name": "PostToolUse", "tool_response": {}})
            inputs[command] = (pre, post)
            for part in ("PreToolUse", "PostToolUse", "pair"):
                rows[f"`{command}` {part}"] = []
        timed(installed_command("PreToolUse"), tree, inputs["git status"][0])  # the baseline
        for _ in range(rounds):
            rows["python3 -c pass"].append(timed([sys.executable, "-c", "pass"], tree, ""))
            for command, (pre, post) in inputs.items():
                a = timed(installed_command("PreToolUse"), tree, pre)
                b = timed(installed_command("PostToolUse"), tree, post)
                rows[f"`{command}` PreToolUse"].append(a)
                rows[f"`{command}` PostToolUse"].append(b)
                rows[f"`{command}` pair"].append(a + b)
        floor = statistics.median(rows["python3 -c pass"])
        for name, values in rows.items():
            median = statistics.median(values)
            label = f"{files:>6} files: {name}"
            print(f"{label:52} {median * 1000:10.1f} {median / floor:9.2f}")
        print("load average after these rows: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
        shutil.rmtree(base.parent, ignore_errors=True)


def snapshot_scaling() -> None:
    """What the snapshot costs the hook as tasks accumulate: size, and the in-process time
    of what a decision reads (the file's first line, and one lookup of another task)."""
    import tempfile

    from taskgate.hooks.jsonio import loads
    from taskgate.store import snapshot

    print("snapshot size and read time by task count (in-process, median of 20)")
    for count in (50, 1000, 10000):
        tasks = [
            {"name": f"task-{i}", "state": "CLEANUP", "session": None,
             "agents": ["architect", "quality", "security"]}
            for i in range(count)
        ]  # fmt: skip
        tasks[0].update(session="bench", plan_approved=True, main_may_fix=False)
        text = snapshot.render({"format": snapshot.FORMAT, "tasks": tasks})
        state = tempfile.mkdtemp(prefix="taskgate-bench-snap-")
        Path(state, snapshot.FILE_NAME).write_text(text)
        times = []
        for _ in range(20):
            snapshot._PARSED.clear()  # a hook process parses it afresh
            start = time.perf_counter()
            index = snapshot.read(state, loads)
            assert index is not None and index.task(f"task-{count - 1}") is not None
            times.append(time.perf_counter() - start)
        median = statistics.median(times) * 1000
        print(f"  {count:6} tasks {len(text) // 1024:6} KiB {median:8.2f} ms")


def scale_rows(rounds: int, more: int) -> None:
    """The command hooks with `more` tasks stored besides the 50 (issue 18: the PreToolUse
    target at 10,000 tasks), interleaved with `python3 -c pass`."""
    repo = scratch_repo(TODO)
    tg(repo, "start", "task-0", check=True)
    _store_tasks(repo, more)
    tg(repo, "status", "task-0", check=True)  # a write happened: the snapshot is rewritten
    cases = {f"PreToolUse {name}": ("PreToolUse", body) for name, body in inputs(repo).items()}
    edit = json.loads(cases["PreToolUse Edit in the task worktree (snapshot read)"][1])
    cases["PostToolUse after that Edit (recorded, no engine)"] = (
        "PostToolUse", json.dumps({**edit, "hook_event_name": "PostToolUse", "tool_response": {}})
    )  # fmt: skip
    fresh = {**edit, "session_id": "fresh", "hook_event_name": "SessionStart", "source": "startup"}
    cases["SessionStart (startup, new session)"] = ("SessionStart", json.dumps(fresh))
    resume = {**fresh, "session_id": edit["session_id"], "source": "resume"}  # holds task-0
    cases["SessionStart (resume, holding a task: engine)"] = ("SessionStart", json.dumps(resume))
    rows: dict[str, list[float]] = {"python3 -c pass": []}
    rows.update({name: [] for name in cases})
    tree = against()
    if tree is not None:
        rows.update({f"before: {name}": [] for name in cases if name in COMPARED})
    CPU.clear()
    for _ in range(rounds):
        floor_cmd = [sys.executable, "-c", "pass"]
        rows["python3 -c pass"].append(timed_cpu("python3 -c pass", floor_cmd, repo, ""))
        for name, (event, body) in cases.items():
            rows[name].append(timed_cpu(name, installed_command(event), repo, body))
            if f"before: {name}" in rows:
                before = f"before: {name}"
                rows[before].append(timed_cpu(before, _before(tree, event), repo, body))
    print(f"command hooks with {TASKS + more} tasks in the store (hook snapshot "
          f"{_snapshot_kib(repo)} KiB), {rounds} rounds, {_load()}")  # fmt: skip
    if tree is not None:
        print(f"before: {tree / 'src' / 'taskgate' / 'hooks' / 'launch.py'}")
    _print_rows(rows, 68 if tree is not None else 60)


def _load() -> str:
    import os

    one, five, _ = os.getloadavg()
    return f"{os.cpu_count()} CPUs, load average {one:.1f} (5 min {five:.1f})"


if __name__ == "__main__":
    sys.exit(main())
