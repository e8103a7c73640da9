"""Claude Code integration: the `taskgate hook EVENT` dispatcher and `taskgate hooks install`."""
