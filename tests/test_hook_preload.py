"""hooks/preload.py (issue 18): the modules a hook process preloads are the ones the import
system would give it, each list names only modules its event imports anyway, and whatever
the preloader cannot vouch for (stale, missing, foreign or hash-based bytecode, a module
that raises) is left to the import system, which then behaves as it always does."""

from __future__ import annotations

import compileall
import importlib.util
import json
import os
import py_compile
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import Repo
from flow import implementation_fixtures
from taskgate.hooks import preload
from test_hooks_dispatch import TASK, fixture

SRC = Path(__file__).resolve().parent.parent / "src"
LAUNCH = SRC / "taskgate" / "hooks" / "launch.py"

# Runs launch.py as the hook runs it (python -S, as __main__), with preload.load recording the
# names it is given instead of loading them; at the end it prints those names and the taskgate
# modules the process imported.
_RECORDING = """
import sys
LAUNCH = sys.argv[1]
sys.argv = [LAUNCH, *sys.argv[2:]]
sys.path[0] = {src!r}
import taskgate.hooks.preload as preload
asked = []
preload.load = lambda names: asked.extend(names)
source = open(LAUNCH).read().replace(
    "os._exit(code)",
    "sys.stderr.write('\\\\nMODULES ' + json_dumps([asked, sorted(m for m in sys.modules "
    "if m.startswith('taskgate'))]) + '\\\\n'); os._exit(code)")
from taskgate.hooks.jsonio import dumps as json_dumps
globals()["__file__"] = LAUNCH
exec(compile(source, LAUNCH, "exec"), globals())
"""


implementation, impl = implementation_fixtures("preload", TASK)


def _inputs(repo: Repo) -> dict[str, dict[str, Any]]:
    notes = repo.worktree(TASK) / "notes.md"
    return {
        "a prompt of the session holding the task": fixture(
            "user_prompt_submit", repo, session_id="s1", prompt="what is the status?"
        ),
        "a prompt of a session holding none": fixture(
            "user_prompt_submit", repo, session_id="s9", prompt="what is the status?"
        ),
        "Stop": fixture("stop", repo, session_id="s1"),
        "PreToolUse Bash": fixture("pre_tool_use_bash", repo, session_id="s1"),
        "PreToolUse Edit": fixture(
            "pre_tool_use_edit", repo, session_id="s1", tool_input={"file_path": str(notes)}
        ),
        "PostToolUse Edit": fixture(
            "post_tool_use_write", repo, session_id="s1", tool_input={"file_path": str(notes)}
        ),
        "PostToolUse Edit of a session holding no task": fixture(
            "post_tool_use_write", repo, session_id="s9", tool_input={"file_path": str(notes)}
        ),
        "PostToolUse Bash writing a file": fixture(
            "post_tool_use_write",
            repo,
            session_id="s1",
            tool_name="Bash",
            tool_input={"command": f"echo x > {notes}"},
        ),
        "SessionStart of a new session": fixture(
            "session_start", repo, session_id="s7", source="startup"
        ),
        "SessionStart resuming the session holding the task": fixture(
            "session_start", repo, session_id="s1", source="resume"
        ),
        "SessionStart after /clear": fixture(
            "session_start", repo, session_id="s1", source="clear"
        ),
        "SessionStart after compaction": fixture(
            "session_start", repo, session_id="s2", source="compact"
        ),
    }


def _recorded(repo: Repo, data: dict[str, Any], tmp_path: Path) -> tuple[list[str], set[str]]:
    driver = tmp_path / "driver.py"
    driver.write_text(_RECORDING.format(src=str(SRC)))
    env = {k: v for k, v in os.environ.items() if k != "TASKGATE_SESSION"}
    out = subprocess.run(
        [sys.executable, "-S", str(driver), str(LAUNCH), data["hook_event_name"]],
        cwd=repo.path, env=env, input=json.dumps(data), capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    asked, loaded = json.loads(out.stderr.rsplit("MODULES ", 1)[1])
    return asked, set(loaded)


def test_each_list_names_only_modules_its_event_imports(impl: Repo, tmp_path: Path) -> None:
    """Without preloading, each event's usual path imports every module its list names (and
    the prompt of a session holding a task those of PROMPT_STEP, PostToolUse recording a
    call's writes those of POST_RECORD): a list that went stale would load modules for
    nothing."""
    seen_prompt_step = seen_post_record = False
    for label, data in _inputs(impl).items():
        asked, loaded = _recorded(impl, data, tmp_path)
        event = data["hook_event_name"]
        assert asked[: len(preload.EVENTS[event])] == list(preload.EVENTS[event]), label
        assert set(asked) <= loaded, (label, sorted(set(asked) - loaded))
        later = asked[len(preload.EVENTS[event]) :]
        if label == "a prompt of the session holding the task":
            assert later == list(preload.PROMPT_STEP), label
            seen_prompt_step = True
        elif label.startswith("PostToolUse"):
            assert later == list(preload.POST_RECORD), label
            seen_post_record = True
        for name in asked:  # parents first: each name's package is loaded or listed before it
            parent = name.rpartition(".")[0]
            assert parent in ("taskgate", "taskgate.hooks") or parent in asked[: asked.index(name)]
    assert seen_prompt_step and seen_post_record


_ATTRIBUTES = """
import json, sys
sys.path[0] = {src!r}
names = {names!r}
if {preloaded!r}:
    import taskgate.hooks.preload as preload

    class Refuse:  # the import system is not asked for any of them
        def find_spec(self, name, path=None, target=None):
            if name in names:
                raise AssertionError("imported, not preloaded: " + name)

    sys.meta_path.insert(0, Refuse())
    preload.load(tuple(names))
    sys.meta_path.pop(0)
else:
    for name in names:
        __import__(name)
out = {{}}
for name in names:
    m = sys.modules[name]
    s = m.__spec__
    out[name] = [
        m.__name__, m.__file__, m.__cached__, m.__package__, getattr(m, "__path__", None),
        s.name, s.origin, s.cached, s.parent, s.has_location, s.submodule_search_locations,
        s.loader_state, type(m.__loader__).__name__, m.__loader__.name, m.__loader__.path,
        s.loader is m.__loader__, m.__doc__,
        sorted(k for k, v in vars(m).items() if k != "preload" or type(v) is not type(sys)),
        getattr(sys.modules[name.rpartition(".")[0]], name.rpartition(".")[2]) is m
        if "." in name else None,
        m.__loader__.get_resource_reader(name) is not None if s.submodule_search_locations
        else None,
    ]
print(json.dumps(out))
"""


def _attributes(names: list[str], preloaded: bool, src: Path = SRC) -> dict[str, Any]:
    code = _ATTRIBUTES.format(src=str(src), names=names, preloaded=preloaded)
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def test_a_preloaded_module_is_the_module_the_import_system_makes() -> None:
    compileall.compile_dir(SRC / "taskgate", quiet=1)  # bytecode as an installed package has it
    names = ["taskgate", "taskgate.hooks"]
    for listed in (*preload.EVENTS.values(), preload.PROMPT_STEP, preload.POST_RECORD):
        names += [n for n in listed if n not in names]
    assert _attributes(names, preloaded=True) == _attributes(names, preloaded=False)


def _copy(tmp_path: Path) -> Path:
    """A compiled copy of the package, to spoil."""
    src = tmp_path / "src"
    shutil.copytree(SRC / "taskgate", src / "taskgate",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(src)], check=True)
    return src


_LOAD = """
import json, sys
sys.path[0] = {src!r}
import taskgate.hooks.preload as preload
names = {names!r}
preload.load(tuple(names))
loaded = [n for n in names if n in sys.modules]
try:
    __import__({last!r})
    outcome = getattr(sys.modules[{last!r}], "MARK", "no mark")
except Exception as exc:
    outcome = type(exc).__name__ + ": " + str(exc)
print(json.dumps([loaded, outcome]))
"""


def _load(src: Path, names: list[str]) -> tuple[list[str], str]:
    code = _LOAD.format(src=str(src), names=names, last=names[-1])
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    loaded, outcome = json.loads(out.stdout)
    return loaded, outcome


NAMES = ["taskgate.store", "taskgate.store.canon", "taskgate.store.schema"]


def _schema(src: Path) -> Path:
    return src / "taskgate" / "store" / "schema.py"


def _cached(source: Path) -> Path:
    return Path(importlib.util.cache_from_source(str(source)))


def _edit(source: Path, text: str) -> None:
    """Change the source behind its bytecode's back: the same size and mtime would fool the
    import system too, so both differ."""
    info = source.stat()
    source.write_text(source.read_text() + text)
    os.utime(source, (info.st_atime, info.st_mtime + 10))


def test_stale_bytecode_is_never_run(tmp_path: Path) -> None:
    src = _copy(tmp_path)
    assert _load(src, NAMES) == (NAMES, "no mark")
    _edit(_schema(src), "\nMARK = 'fresh source'\n")
    loaded, outcome = _load(src, NAMES)
    assert loaded == NAMES[:2] and outcome == "fresh source"  # left to the import system


@pytest.mark.parametrize("spoil", ["missing", "foreign magic", "hash-based", "no source"])
def test_bytecode_the_import_system_would_not_take_as_it_is_is_left_to_it(
    tmp_path: Path, spoil: str
) -> None:
    src = _copy(tmp_path)
    source, cached = _schema(src), _cached(_schema(src))
    if spoil == "missing":
        cached.unlink()
    elif spoil == "foreign magic":
        data = cached.read_bytes()
        cached.write_bytes(b"\x00\x00" + data[2:])
    elif spoil == "hash-based":
        checked = py_compile.PycInvalidationMode.CHECKED_HASH
        py_compile.compile(str(source), str(cached), invalidation_mode=checked)
        _edit(source, "\nMARK = 'fresh source'\n")
    else:
        source.unlink()  # a sourceless module: the import system's business
    loaded, outcome = _load(src, NAMES)
    assert loaded == NAMES[:2], spoil
    expected = {"missing": "no mark", "foreign magic": "no mark", "hash-based": "fresh source"}
    if spoil == "no source":
        assert outcome.startswith("ModuleNotFoundError"), outcome
    else:
        assert outcome == expected[spoil], spoil


def test_a_module_that_raises_raises_at_its_import(tmp_path: Path) -> None:
    src = _copy(tmp_path)
    _edit(_schema(src), "\nraise RuntimeError('schema cannot load')\n")
    py_compile.compile(str(_schema(src)), str(_cached(_schema(src))))
    loaded, outcome = _load(src, NAMES)
    assert loaded == NAMES[:2]  # taken out again
    assert outcome == "RuntimeError: schema cannot load"
