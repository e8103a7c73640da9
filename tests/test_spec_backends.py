"""The spec roles on the task agents' backends, end to end through the real CLI: fake `claude`
and `codex` executables that print the real CLIs' output formats (as in test_agent_claude.py
and test_agent_codex.py), and the command backend from taskgate.toml and --agent-command.
A failing or garbage-speaking agent stops the step with exit 10 and changes nothing; the next
`spec resume` retries it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import Repo
from taskgate.agents.config import AgentSettings
from taskgate.spec.agents import AgentFailed
from taskgate.spec.backends import CliSpecBackend, SpecConfig
from test_agent_command import fake

DESC = "Export monthly reports as CSV"
FID = "001-export-monthly-report-csv"

# The person-free part of every fake: the four roles, deterministic. The validator reports
# one critical gap until an answer is in the spec; the classifier asks one question for all.
ROLES = """
import json, os, pathlib, re, subprocess, sys, time

def answer(role, req):
    if role == "spec-writer":
        lines = ["# Spec: " + req["description"], "", "## Requirements", "",
                 "- **FR-001**: " + req["description"]]
        for n, c in enumerate(req["clarifications"], start=2):
            lines.append("- **FR-%03d**: %s" % (n, c["answer"]))
        return {"spec": "\\n".join(lines)}
    if role == "validator":
        if "FR-002" in req["spec"]:
            return {"gaps": []}
        return {"gaps": [{"key": "actors", "severity": "critical", "summary": "Who uses it",
                          "section": "User Scenarios"}]}
    if role == "checklist":
        ids = re.findall(r"FR-\\d{3}", req["spec"])
        return {"checklist": "\\n".join("- [ ] CHK-%03d %s is testable (%s)" % (n, i, i)
                                        for n, i in enumerate(ids, start=1))}
    return {"questions": [{"summary": "Users", "text": "Who uses the export?",
                           "gaps": [g["id"] for g in req["gaps"]]}]}

def request_from(prompt):
    role = re.search(r"You are the ([a-z-]+) of", prompt).group(1)
    block = re.search(r"```json\\n(.*?)\\n```", prompt, re.DOTALL).group(1)
    return role, json.loads(block)

def log(**fields):
    path = pathlib.Path(os.environ["FAKE_LOG"])
    seen = {k: v for k, v in os.environ.items() if k.startswith(("TASKGATE", "GIT_"))}
    with path.open("a") as out:
        out.write(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "env": seen,
                              **fields}) + "\\n")

behaviour = os.environ.get("FAKE_MODE", "ok")
"""


def script(body: str) -> str:
    """A fake's program: the roles, then its own way of talking."""
    return ROLES + body


FAKE_CLAUDE = script("""
prompt = sys.stdin.read()
role, req = request_from(prompt)
log(role=role)
def result(text, subtype="success", is_error=False):
    data = {"type": "result", "subtype": subtype, "is_error": is_error, "duration_ms": 900,
            "duration_api_ms": 800, "num_turns": 2, "session_id": "sess-9",
            "total_cost_usd": 0.004, "usage": {"input_tokens": 10, "output_tokens": 20}}
    if text is not None:
        data["result"] = text
    print(json.dumps(data))
if behaviour == "ok":
    result("Here it is.\\n\\n```json\\n" + json.dumps(answer(role, req)) + "\\n```")
elif behaviour == "prose":
    result("The specification looks complete to me; no changes needed.")
elif behaviour == "html":
    print("<html>502 Bad Gateway</html>")
elif behaviour == "max_turns":
    result(None, subtype="error_max_turns", is_error=True)
""")

FAKE_CODEX = script("""
args = sys.argv[1:]
prompt = sys.stdin.read() if args[-1] == "-" else args[-1]
role, req = request_from(prompt)
log(role=role)
def emit(kind, **fields):
    print(json.dumps({"type": kind, **fields}), flush=True)
emit("thread.started", thread_id="0199a213-81c0-7800-8aa1-bbab2a035a53")
emit("turn.started")
if behaviour == "ok":
    emit("item.completed", item={"id": "item_0", "type": "reasoning", "text": "reading"})
    text = "Done.\\n" + json.dumps(answer(role, req))
    emit("item.completed", item={"id": "item_1", "type": "agent_message", "text": text})
    pathlib.Path(args[args.index("--output-last-message") + 1]).write_text(text)
    emit("turn.completed", usage={"input_tokens": 2476, "cached_input_tokens": 2444,
                                  "output_tokens": 122})
elif behaviour == "turn_failed":
    emit("error", message="stream disconnected before completion")
    emit("turn.failed", error={"message": "stream disconnected before completion"})
    sys.exit(1)
elif behaviour == "hang":
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    time.sleep(600)
""")

FAKE_COMMAND = script("""
role, req = sys.argv[-1], json.load(sys.stdin)
approve = subprocess.run([sys.executable, "-m", "taskgate", "approve", "add-login", "plan"],
                         capture_output=True, text=True)
log(role=role, prompt=pathlib.Path(os.environ["TASKGATE_PROMPT_FILE"]).read_text(),
    approve=[approve.returncode, approve.stderr])
if behaviour == "ok":
    print("thinking...")
    print(json.dumps(answer(role, req)))
elif behaviour == "result_file":
    pathlib.Path(os.environ["TASKGATE_RESULT_FILE"]).write_text(json.dumps(answer(role, req)))
    print("see the result file")
elif behaviour == "garbage":
    print("Sure! Here is your spec: it is great.")
elif behaviour == "crash":
    sys.stderr.write("Traceback: model quota exceeded\\n")
    sys.exit(3)
""")


# The fakes log every call to a file outside the repository, which the agents' sandbox would
# refuse (issue 14): these tests run the roles unconfined; test_spec_sandbox.py confines them.
UNCONFINED = '[agents]\nsandbox = "none"\n\n'


def configure(repo: Repo, tmp_path: Path, name: str, body: str, spec: str, agents: str) -> Path:
    """A fake `name` executable and a taskgate.toml choosing it for the spec roles."""
    exe = fake(tmp_path / "bin", name, body)
    log = tmp_path / f"{name}.log"
    agents = agents.replace("EXE", str(exe))
    text = f'[spec]\n{spec}\n\n[agents.{name}]\n{agents}\nenv = {{ FAKE_LOG = "{log}" }}\n'
    (repo.path / "taskgate.toml").write_text(UNCONFINED + text)
    return log


def calls(log: Path) -> list[dict[str, Any]]:
    """Every recorded invocation of a fake, in order."""
    return [json.loads(line) for line in log.read_text().splitlines()]


def workflow(repo: Repo) -> Path:
    """specs/NNN-name of the feature."""
    return repo.path / "specs" / FID


def run_to_completion(repo: Repo, **env: str) -> None:
    """spec new waits for the one question (no terminal); the answer finishes the spec."""
    first = repo.run("spec", "new", DESC, "--json", env=env)
    assert first.code == 4, (first.out, first.err)
    assert [q["id"] for q in first.json()["pending_questions"]] == ["C1.1"]
    done = repo.run("spec", "answer", FID, "--answer", "C1.1=The finance team", "--json", env=env)
    assert done.code == 0, (done.out, done.err)
    assert done.json()["termination_reason"] == "success"
    spec = (workflow(repo) / "spec.md").read_text()
    assert "**FR-002**: The finance team" in spec
    checklist = (workflow(repo) / "checklists/requirements.md").read_text()
    assert "CHK-002 FR-002" in checklist
    assert (workflow(repo) / "quality-report.md").exists()


def test_claude_runs_every_role(repo: Repo, tmp_path: Path) -> None:
    log = configure(
        repo, tmp_path, "claude", FAKE_CLAUDE,
        spec='backend = "claude"\nmodel = "sonnet"',
        agents='executable = "EXE"\nallowed_tools = ["Read", "Edit", "Write"]',
    )  # fmt: skip
    run_to_completion(repo)
    seen = calls(log)
    roles = [c["role"] for c in seen]
    assert set(roles) == {"spec-writer", "validator", "checklist", "gap-classifier"}
    assert roles[:2] == ["spec-writer", "validator"]
    argv = seen[0]["argv"]
    assert argv[:3] == ["-p", "--output-format", "json"]
    assert argv[argv.index("--permission-mode") + 1] == "default"
    # The task agents' permissions ([agents.claude]) are not the spec roles': read only.
    assert argv[argv.index("--allowedTools") + 1] == "Read,Glob,Grep"
    assert argv[argv.index("--model") + 1] == "sonnet"
    assert seen[0]["cwd"] == str(repo.path)
    env = seen[0]["env"]
    assert env["TASKGATE_AGENT"] == "spec-writer" and env["TASKGATE_SPEC"] == FID
    assert env["TASKGATE_SPEC_DIR"] == str(workflow(repo))
    assert "TASKGATE_SESSION" not in env and env["GIT_TERMINAL_PROMPT"] == "0"
    files = workflow(repo) / ".workflow/agents"
    assert "You are the checklist" in (files / "checklist.prompt.md").read_text()
    assert '"session_id": "sess-9"' in (files / "checklist.output.txt").read_text()


def test_codex_runs_every_role(repo: Repo, tmp_path: Path) -> None:
    log = configure(
        repo, tmp_path, "codex", FAKE_CODEX,
        spec='backend = "codex"',
        agents='executable = "EXE"\nsandbox = "workspace-write"\nmodel = "gpt-5-codex"',
    )  # fmt: skip
    run_to_completion(repo)
    seen = calls(log)
    assert {c["role"] for c in seen} == {"spec-writer", "validator", "checklist", "gap-classifier"}
    argv = seen[0]["argv"]
    assert argv[:5] == ["exec", "--json", "--sandbox", "read-only", "--cd"]
    assert argv[5] == str(repo.path) == seen[0]["cwd"]
    last = argv[argv.index("--output-last-message") + 1]
    assert last == str(workflow(repo) / ".workflow/agents/spec-writer.last-message.txt")
    assert "--add-dir" not in argv and argv[argv.index("--model") + 1] == "gpt-5-codex"
    assert argv[-1] == "-"


def test_command_backend_from_taskgate_toml(repo: Repo, tmp_path: Path) -> None:
    log = configure(
        repo, tmp_path, "command", FAKE_COMMAND,
        spec='backend = "command"\ntimeout_minutes = 5', agents='command = ["EXE", "--fast"]',
    )  # fmt: skip
    run_to_completion(repo, FAKE_MODE="result_file", GIT_DIR="/elsewhere")
    first = calls(log)[0]
    assert first["argv"] == ["--fast", "spec-writer"] and first["cwd"] == str(repo.path)
    assert "You are the spec-writer" in first["prompt"]
    assert "GIT_DIR" not in first["env"] and first["env"]["TASKGATE_SPEC_ROLE"] == "spec-writer"
    code, err = first["approve"]
    assert code == 1 and "TASKGATE_AGENT is set" in err  # a spec agent cannot approve


def test_agent_command_is_the_command_backend(repo: Repo, tmp_path: Path) -> None:
    exe = fake(tmp_path / "bin", "spec-agent", FAKE_COMMAND)
    (repo.path / "taskgate.toml").write_text(UNCONFINED)
    env = {"FAKE_LOG": str(tmp_path / "log")}
    first = repo.run("spec", "new", DESC, "--agent-command", str(exe), env=env)
    assert first.code == 4, first.err
    # The command is recorded with the workflow: answering needs no flag.
    done = repo.run("spec", "answer", FID, "--answer", "C1.1=Accountants", env=env)
    assert done.code == 0, done.err
    assert calls(tmp_path / "log")[0]["env"]["TASKGATE_AGENT"] == "spec-writer"


def snapshot(repo: Repo) -> dict[str, bytes]:
    """Every file of the workflow except the agents' transcripts."""
    root = workflow(repo)
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".workflow/agents" not in str(p)
    }


@pytest.mark.parametrize(
    ("name", "body", "mode", "words"),
    [
        ("claude", FAKE_CLAUDE, "prose", "(claude) replied without a JSON object"),
        ("claude", FAKE_CLAUDE, "html", "claude printed no result object"),
        ("claude", FAKE_CLAUDE, "max_turns", "claude run failed (error_max_turns)"),
        ("codex", FAKE_CODEX, "turn_failed", "stream disconnected before completion"),
        ("command", FAKE_COMMAND, "garbage", "(command) replied without a JSON object"),
        ("command", FAKE_COMMAND, "crash", "exited with code 3: Traceback: model quota"),
    ],
)
def test_a_failing_agent_stops_the_step_and_resume_retries_it(
    repo: Repo, tmp_path: Path, name: str, body: str, mode: str, words: str
) -> None:
    agents = 'command = ["EXE"]' if name == "command" else 'executable = "EXE"'
    configure(repo, tmp_path, name, body, spec=f'backend = "{name}"', agents=agents)
    first = repo.run("spec", "new", DESC, env={"FAKE_MODE": "ok"})
    assert first.code == 4, first.err
    before = snapshot(repo)
    answer = ("spec", "answer", FID, "--answer", "C1.1=The finance team")
    broken = repo.run(*answer, env={"FAKE_MODE": mode})
    assert broken.code == 10, (broken.out, broken.err)
    assert "spec agent spec-writer" in broken.err and words in broken.err, broken.err
    assert "spec resume" in broken.err  # what to do next
    # The answers were saved before B2 (C-54); the failed B2 saved nothing and wrote no spec.
    after = snapshot(repo)
    assert after["spec.md"] == before["spec.md"]
    state = json.loads(after[".workflow/state.json"])
    assert state["loop_status"] == "clarifying" and state["user_answers"]
    status = repo.ok("spec", "status", FID, "--json").json()
    assert status["resume_point"] == "B2" and status["integrity"] == []
    done = repo.run("spec", "resume", FID, "--json", env={"FAKE_MODE": "ok"})
    assert done.code == 0 and done.json()["termination_reason"] == "success", done.err


def test_configuration_errors_name_the_key(repo: Repo) -> None:
    toml = repo.path / "taskgate.toml"
    toml.write_text('[spec]\nbackend = "gpt"\n')
    bad = repo.run("spec", "new", DESC)
    assert bad.code == 2 and "[spec]" in bad.err and "backend must be one of" in bad.err
    toml.write_text('[spec]\nbackend = "claude"\ncommand = ["x"]\n')
    bad = repo.run("spec", "new", DESC)
    assert bad.code == 2 and "unknown key 'command'" in bad.err
    assert repo.run("spec", "new", DESC, "--demo").code == 0  # the demo ignores [spec]
    toml.write_text('[spec]\nbackend = "command"\n')  # and no command anywhere
    missing = repo.run("spec", "new", "Another feature")
    assert missing.code == 2 and "needs command" in missing.err


def test_a_hanging_agent_times_out_with_its_process_group(tmp_path: Path) -> None:
    exe = fake(tmp_path / "bin", "codex", FAKE_CODEX)
    settings = SpecConfig().settings("codex")
    backend = CliSpecBackend(
        AgentSettings("codex", {**settings.options, "executable": str(exe)}, env={
            "FAKE_LOG": str(tmp_path / "log"), "FAKE_MODE": "hang"}, sandbox="none"),
        cwd=tmp_path, files_dir=tmp_path / "files", feature_id="001-x", timeout_s=0.5,
    )  # fmt: skip
    started = time.monotonic()
    with pytest.raises(AgentFailed, match=r"no reply within 0\.5 s; the agent's process group"):
        backend.invoke("validator", {"feature_id": "001-x", "spec": "# x", "iteration": 1})
    assert time.monotonic() - started < 10
