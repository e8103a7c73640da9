"""The built-in scripted agents as an executable for the `command` backend.

    [agents]
    backend = "command"
    [agents.command]
    command = ["/usr/bin/python3", "/path/to/taskgate/bench/scripted_agent.py"]

Both by absolute path: the agent starts in its worktree, and a `python3` found on PATH may be
a shim that cannot run in the agents' sandbox (pyenv's needs ~/.pyenv, hidden with $HOME);
tests and benches use os.path.realpath(sys.executable).
It rebuilds the request from the documented environment (docs/agents.md, 'The command
backend') and the prompt on stdin (Files: and Team: lines), runs the scripted backend in this
process, and prints its answer. So a whole `taskgate run` does the demo's work through real
agent processes: what confinement (bench/confinement.py, tests/test_sandbox_run.py) needs.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

from taskgate.agents.base import AgentRequest, Mode, TaskBrief
from taskgate.agents.scripted import ScriptedBackend


def _listed(prompt: str, key: str) -> tuple[str, ...]:
    match = re.search(rf"^(?:.*\. )?{key}: (.*?)\.?$", prompt, re.MULTILINE)
    if match is None or match.group(1).startswith("("):
        return ()
    return tuple(x.strip() for x in match.group(1).split(",") if x.strip())


def main() -> int:
    """Answer one invocation like the scripted backend would."""
    env = os.environ
    prompt = sys.stdin.read()
    team = re.search(r"Team: ([^.]*)\.", prompt)
    request = AgentRequest(
        brief=TaskBrief(env["TASKGATE_TASK"], files=_listed(prompt, "Files")),
        agent=env["TASKGATE_AGENT"],
        mode=Mode.parse(env["TASKGATE_MODE"]),
        worktree=Path.cwd(),
        agent_dir=Path(env["TASKGATE_RESULT_FILE"]).parent,
        task_dir=Path(env["TASKGATE_TASK_DIR"]),
        report_path=Path(env["TASKGATE_REPORT_PATH"]),
        task_md=Path(env["TASKGATE_TASK_MD"]),
        prompt=prompt,
        team=tuple(t.strip() for t in team.group(1).split(",")) if team else (),
        round=int(env["TASKGATE_ROUND"]),
        attempt=int(env["TASKGATE_ATTEMPT"]),
        base_ref=env["TASKGATE_BASE_REF"],
    )
    result = ScriptedBackend().run(request)
    answer = {
        "status": result.status.value,
        "message": result.message,
        "reason": result.reason,
        "work_remaining": result.work_remaining,
        "verdict": result.verdict.value if result.verdict else None,
        # R-TRN-14: an implementer without a commit says why (absent in older taskgate)
        "no_change": getattr(result, "no_change", "") or None,
    }
    answer = {k: v for k, v in answer.items() if v is not None or k == "verdict"}
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
