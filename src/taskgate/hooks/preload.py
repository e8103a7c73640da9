"""Loading the modules a hook process is about to import, in one pass (issue 18).

A command hook is a new interpreter per event; most of what it runs beyond the interpreter's
own start is importing taskgate's modules, and about 40 µs of each of those goes to the
import system finding the module (a walk over sys.meta_path and the path finder's checks)
and building its spec, before its cached bytecode is even read: 0.7 ms of the prompt hook's
nineteen. Where the hook knows which modules come next (hooks/launch.py for the event,
hooks/prompt.py once a session holds a task), `load` puts them in place directly: for each
module, its source and cached bytecode at the place the path finder would find them (a
package's `__init__.py` or `<name>.py` in the parent package's directory, the bytecode where
importlib.util.cache_from_source says), the bytecode accepted exactly when the import system
would accept it (the interpreter's magic number, a timestamp pyc whose recorded mtime and size
are the source's), and the module given the same `__spec__`, `__loader__`, `__file__`,
`__cached__`, `__package__` and `__path__` the import system gives it (tests/
test_hook_preload.py compares them), then executed and bound in its parent package.

Anything else stops the pass and leaves the rest to the import system, which then does what it
always does: a module already imported, a source or bytecode missing or unreadable, stale or
hash-based bytecode (it recompiles, or checks the hash), or a module whose code raises (taken
out of sys.modules again, so that the import statement that needs it raises the error where
it always would). The lists name only modules the event imports on its usual path, parents
first; a test fails when one names a module that path does not import. Under `-X importtime`
nothing is preloaded, so that the import system's report names every module (the tests and
bench/hook_latency.py read the hook's modules from it).
"""

from __future__ import annotations

import os
import sys
from marshal import loads

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The taskgate modules each event imports in a governed repository whatever path it takes in
# dispatch.py's handlers, in the order they are first imported; the rest of an event's modules
# are imported as usual. (Outside any taskgate repository the store's modules among them are
# loaded for nothing: about 0.1 ms.)
_FIRST = ("taskgate.hooks.jsonio", "taskgate.hooks.dispatch")
_STORE = ("taskgate.store", "taskgate.store.snapshot")
_PROMPT = (*_FIRST, "taskgate.hooks.quick", "taskgate.hooks.context", *_STORE,
           "taskgate.store.canon")  # fmt: skip
_TOOL = (*_FIRST, "taskgate.hooks.context", "taskgate.hooks.policy", "taskgate.hooks.judge",
         *_STORE, "taskgate.store.dbfile", "taskgate.store.canon")  # fmt: skip
_START = (*_FIRST, "taskgate.hooks.entries", "taskgate.hooks.settings_check",
          "taskgate.hooks.context", "taskgate.server", "taskgate.server.peers",
          "taskgate.hooks.quick", "taskgate.hooks.resume", "taskgate.store",
          "taskgate.store.hook_tx", "taskgate.store.schema", "taskgate.store.snapshot",
          "taskgate.store.snapshot_clock")  # fmt: skip
EVENTS: dict[str, tuple[str, ...]] = {
    "UserPromptSubmit": _PROMPT,
    "Stop": _PROMPT,
    "PreToolUse": _TOOL,
    "PostToolUse": _FIRST,  # what follows depends on the tool and the Bash line
    "SessionStart": _START,
}
# What a prompt of a session holding a task loads next (hooks/prompt.record): the effect
# check, the message classifier, the store's write transaction and the anchor.
PROMPT_STEP = (
    "taskgate.hooks.effects", "taskgate.protocol", "taskgate.protocol.messages",
    "taskgate.protocol.names", "taskgate.store.hook_tx", "taskgate.store.schema",
    "taskgate.anchor_write", "taskgate.looseobject", "taskgate.gitplumb",
)  # fmt: skip

# What PostToolUse loads to record a call's writes (hooks/quick.record), after the effect check.
POST_RECORD = (
    "taskgate.hooks.quick", "taskgate.hooks.policy", "taskgate.store", "taskgate.store.hook_tx",
    "taskgate.store.schema", "taskgate.store.snapshot", "taskgate.store.snapshot_clock",
)  # fmt: skip

_EMPTY_FLAGS = b"\0\0\0\0"  # PEP 552: a timestamp pyc


def load(names: tuple[str, ...]) -> None:
    """Import `names` (parents first) as the import system would, as far as it can vouch for
    doing exactly that; the first it cannot is left, with the rest, to the import system."""
    if "importtime" in sys._xoptions:
        return  # -X importtime: the import system imports them all, so its report names them
    external = sys.modules["_frozen_importlib_external"]  # the import system's own code
    bootstrap = sys.modules["_frozen_importlib"]
    for name in names:
        if name in sys.modules:
            continue
        parent_name, _, child = name.rpartition(".")
        parent = sys.modules.get(parent_name)
        path = getattr(parent, "__path__", None)
        if not path or len(path) != 1:
            return
        try:
            found = _cached_code(external, path[0], child)
        except (OSError, ValueError, EOFError, TypeError):
            return
        if found is None:
            return
        source, cached, code, package_dir = found
        loader = external.SourceFileLoader(name, source)
        spec = bootstrap.ModuleSpec(name, loader, origin=source, is_package=bool(package_dir))
        spec.cached = cached
        spec.has_location = True
        module = type(sys)(name)
        module.__spec__ = spec
        module.__loader__ = loader
        module.__file__ = source
        module.__cached__ = cached  # type: ignore[attr-defined]
        module.__package__ = name if package_dir else parent_name
        if package_dir:
            spec.submodule_search_locations = [package_dir]
            module.__path__ = [package_dir]
        sys.modules[name] = module
        try:
            exec(code, module.__dict__)
        except Exception:
            sys.modules.pop(name, None)
            return  # the import statement that needs it runs it again and raises there
        setattr(parent, child, module)


def _cached_code(external: Any, folder: str, child: str) -> tuple[str, str, Any, str] | None:
    """(source, bytecode path, code, package directory or "") of module `child` in `folder`,
    or None when its bytecode is not one the import system would take as it is."""
    package_dir = os.path.join(folder, child)
    source = os.path.join(package_dir, "__init__.py")
    try:
        found = os.stat(source)
    except FileNotFoundError:
        package_dir = ""
        source = os.path.join(folder, child + ".py")
        found = os.stat(source)
    cached = str(external.cache_from_source(source))
    with open(cached, "rb") as handle:
        data = handle.read()
    if (
        data[:4] != external.MAGIC_NUMBER
        or data[4:8] != _EMPTY_FLAGS
        or data[8:12] != (int(found.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
        or data[12:16] != (found.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    ):
        return None
    return source, cached, loads(memoryview(data)[16:]), package_dir
