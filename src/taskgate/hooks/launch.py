"""The program behind the hook commands that `taskgate hooks install` writes (issue 7 speed).

Claude Code runs `PYTHON -S .../taskgate/hooks/launch.py EVENT` before or after every tool
call. `-S` skips the site module (about 3 ms, more with .pth files), and taskgate needs
nothing outside the standard library, so the directory that holds the `taskgate` package is
all the import path this process needs. Kept tiny: a script run by path is compiled on every
start, unlike the modules it imports.
"""

import gc
import os
import sys

# No cycle collection in a process that answers one event and ends: importing taskgate's
# modules alone triggered four young-generation passes, about 0.2 ms of the prompt hook (issue
# 18). The cyclic garbage it leaves is freed at exit: 5 MB more at the peak for a PreToolUse
# of a Bash command of 5,000 pipes, none for ordinary ones.
gc.disable()

sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# `from __future__ import annotations`, which begins every taskgate module, is a directive
# the compiler applied to the cached bytecode; at run time it only binds a name from the
# __future__ module, about 0.1 ms to load (issue 18). A stand-in serves that name; any other
# name asked of it loads the real module (PEP 562's module __getattr__).
_future = type(sys)("__future__")
_future.annotations = "annotations"  # type: ignore[attr-defined]


def _real_future(name: str) -> object:
    if name[:2] == "__":  # the import system asks modules for __path__ and the like
        raise AttributeError(name)
    if sys.modules.get("__future__") is _future:
        del sys.modules["__future__"]
    return getattr(__import__("__future__"), name)


_future.__getattr__ = _real_future  # type: ignore[method-assign]
sys.modules.setdefault("__future__", _future)
from taskgate.hooks.preload import EVENTS, load  # noqa: E402  (needs the path set above)

load(EVENTS.get(sys.argv[1] if len(sys.argv) > 1 else "", ()))  # hooks/preload.py: why
from taskgate.hooks.dispatch import run_hook  # noqa: E402

HOOK_PROCESS = True  # store/hook_tx.py leaves its store connection open: see _linger there
code = run_hook(sys.argv[1:])
# Everything is written and committed: end without the interpreter's teardown (it would
# close the store connection, checkpointing the database: issue 18).
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
