"""Where one repository's taskgate files live: the Layout the hooks pass around.

Its own module (it was in hooks/policy.py, which policy.py still re-exports) so that the
hooks that need no tool-use rules — UserPromptSubmit of a session holding a task, on every
prompt — do not load them (issue 18, fifth pass).
"""

from __future__ import annotations

import os


class Layout:
    """Where one repository's taskgate files live (realpaths)."""

    __slots__ = ("common_dir", "repo", "state_dir", "tasks_root")

    def __init__(self, repo: str, common_dir: str, state_dir: str, tasks_root: str) -> None:
        self.repo = os.path.realpath(repo)
        self.common_dir = os.path.realpath(common_dir)
        self.state_dir = os.path.realpath(state_dir)
        self.tasks_root = os.path.realpath(tasks_root)
