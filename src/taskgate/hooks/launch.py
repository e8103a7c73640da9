"""The program behind the hook commands that `taskgate hooks install` writes (issue 7 speed).

Claude Code runs `PYTHON -S .../taskgate/hooks/launch.py EVENT` before or after every tool
call. `-S` skips the site module (about 3 ms, more with .pth files), and taskgate needs
nothing outside the standard library, so the directory that holds the `taskgate` package is
all the import path this process needs. Kept tiny: a script run by path is compiled on every
start, unlike the modules it imports.
"""

import os
import sys

sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from taskgate.hooks.dispatch import run_hook  # noqa: E402  (needs the path set above)

HOOK_PROCESS = True  # store/hook_tx.py leaves its store connection open: see _linger there
code = run_hook(sys.argv[1:])
# Everything is written and committed: end without the interpreter's teardown (it would
# close the store connection, checkpointing the database: issue 18).
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
