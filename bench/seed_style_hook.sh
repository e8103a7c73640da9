#!/usr/bin/env bash
# A PreToolUse hook written the way the seeds' implementation was (bash + jq, one process per
# question), for bench/hook_latency.py only: the same decision as `taskgate hook PreToolUse` for
# a Write/Edit (store files denied, the main agent denied in IMPLEMENTATION), never installed.
set -u
INPUT=$(cat)
TOOL=$(printf '%s' "$INPUT" | jq -r '.tool_name // empty')
SESSION=$(printf '%s' "$INPUT" | jq -r '.session_id // empty')
CWD=$(printf '%s' "$INPUT" | jq -r '.cwd // empty')
FILE=$(printf '%s' "$INPUT" | jq -r '.tool_input.file_path // empty')
case "$TOOL" in
  Write|Edit|MultiEdit|NotebookEdit) ;;
  *) exit 0 ;;
esac
deny() {
  jq -n --arg r "$1" \
    '{hookSpecificOutput: {hookEventName: "PreToolUse", permissionDecision: "deny", permissionDecisionReason: $r}}'
  exit 0
}
ROOT=$(git -C "$CWD" rev-parse --show-toplevel 2>/dev/null) || exit 0
TASKS="$ROOT/.taskgate/tasks"
case "$FILE" in
  */state.db|*/task.json|*.flag|*/audit-trail.json|*/status.json) deny "state files are protected" ;;
esac
# R-LCK-20 as the seeds did it: read every lock file to find the session's task.
TASK=""
STATE=""
for lock in "$TASKS"/*/task.json; do
  [ -f "$lock" ] || continue
  owner=$(jq -r '.session_id // empty' "$lock")
  released=$(jq -r '.lock_released_at // empty' "$lock")
  if [ "$owner" = "$SESSION" ] && [ -z "$released" ]; then
    TASK=$(jq -r '.task_name' "$lock")
    STATE=$(jq -r '.state' "$lock")
  fi
done
[ -n "$TASK" ] || exit 0
if [ "$STATE" = "IMPLEMENTATION" ] && [[ "$FILE" == "$TASKS/$TASK/code/"* ]]; then
  deny "Guard 7: the main agent does not implement"
fi
exit 0
