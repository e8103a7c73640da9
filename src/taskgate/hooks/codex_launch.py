"""The program behind the hook commands `taskgate hooks install --client codex` writes.

Codex runs `PYTHON -S .../taskgate/hooks/codex_launch.py EVENT` for each hook event, like
launch.py for Claude Code, through hooks/codex_adapter.py (Codex's apply_patch and write_stdin
calls are judged as the writes they are).
"""

import os
import sys

sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from taskgate.hooks.codex_adapter import run_codex_hook  # noqa: E402  (needs the path set above)

# A hook's process: store/pg_wait.py gives its PostgreSQL waits a hook's bound, not a command's
# (Codex cancels a hook after 30 s). Not HOOK_PROCESS: this process exits normally (launch.py).
CODEX_HOOK_PROCESS = True
sys.exit(run_codex_hook(sys.argv[1:]))
