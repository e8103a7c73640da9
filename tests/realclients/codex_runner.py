"""The real Codex CLI (0.169.0) as a person runs it, for the real-client tests: the hermetic
HOME with Codex's config pointing at the mock Responses API server, codex and this checkout's
taskgate on PATH, `codex exec --json` runs whose model is scripted call by call."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import Repo
from realclients.clients import codex_bin, offline_command, offline_env
from realclients.mock_openai import KEY_ENV, MockOpenAI, Turn, codex_config, message

SRC = Path(__file__).resolve().parents[2] / "src"


def offline_codex(bin_dir: Path, mock: MockOpenAI) -> Path:
    """`bin_dir/codex`: the pinned codex in network and pid namespaces of its own
    (clients.offline_command), its 127.0.0.1:PORT served from the mock's unix socket, so
    nothing Codex or a command it runs starts can reach any network."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    wrapper = bin_dir / "codex"
    inner = shlex.join(offline_command([str(codex_bin())], mock.unix_socket, mock.port))
    wrapper.write_text(f'#!/bin/sh\nexec {inner} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


@dataclass
class CodexRun:
    """A finished `codex exec --json` run."""

    code: int
    out: str
    err: str

    def events(self) -> list[dict[str, object]]:
        return [json.loads(line) for line in self.out.splitlines() if line.startswith("{")]


@dataclass
class Codex:
    """The real codex in the hermetic HOME, its model the scripted mock."""

    home: Path
    tmp: Path
    mock: MockOpenAI
    bin_dir: Path  # `codex` there is offline_codex()

    def env(self) -> dict[str, str]:
        path = os.pathsep.join([str(self.bin_dir), str(Path(sys.executable).parent),
                                os.environ.get("PATH", "")])  # fmt: skip
        return offline_env(self.home, self.tmp, {KEY_ENV: "not-a-real-key", "PATH": path})

    def exec(
        self,
        cwd: Path,
        *calls: dict[str, object] | Callable[[Turn], dict[str, object]],
        prompt: str = "go",
        resume: str = "",
        extra: tuple[str, ...] = (),
        sandbox: str = "danger-full-access",
    ) -> CodexRun:
        """One `codex exec` (`resume`: of that session) whose model makes `calls` one per
        turn (a call may be a function of the request), then says done. By default without
        Codex's sandbox, so that only the hooks stand between a call and the file."""
        already = self.mock.turns[-1].calls_made() if resume and self.mock.turns else 0

        def script(turn: Turn) -> list[dict[str, object]]:
            done = turn.calls_made() - already
            if done >= len(calls):
                return [message("done")]
            call = calls[done]
            return [call(turn) if callable(call) else call]

        self.mock.script = script
        mode = ["--sandbox", sandbox] if sandbox else []  # "": the config's (a profile's)
        cmd = [str(self.bin_dir / "codex"), "exec", "--json", *mode, "--cd", str(cwd), *extra,
               *(["resume", resume] if resume else []), "-"]  # fmt: skip
        proc = subprocess.run(cmd, input=prompt, env=self.env(), capture_output=True, text=True,
                              timeout=120, check=False)  # fmt: skip
        assert not self.mock.errors, self.mock.errors
        return CodexRun(proc.returncode, proc.stdout, proc.stderr)

    def taskgate(self, repo: Repo, *args: str) -> subprocess.CompletedProcess[str]:
        """The taskgate CLI with codex on PATH (as the person runs it)."""
        env = {**self.env(), "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2] / "src")
        return subprocess.run([sys.executable, "-m", "taskgate", *args], cwd=repo.path, env=env,
                              capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


@pytest.fixture(name="codex")
def codex_fixture(tmp_path: Path) -> Iterator[Codex]:
    """Codex in the test's hermetic HOME with its mock model server (import this fixture)."""
    home = Path(os.environ["HOME"])
    # Codex runs commands in a login shell, whose /etc/profile resets PATH: like a person's
    # own profile, this one puts taskgate (this checkout's) on it.
    bin_dir = Path(sys.executable).parent
    (home / ".profile").write_text(f'export PATH="{bin_dir}:$PATH"\n')
    with MockOpenAI(lambda turn: [message("done")]) as mock:
        codex_config(home, mock)
        wrapper = offline_codex(tmp_path / "codex-bin", mock)
        yield Codex(home, tmp_path / "codex-tmp", mock, wrapper.parent)


# A minimal MCP server (stdio, one JSON-RPC message per line) with one write tool.
MCP_SERVER = """
import json, pathlib, sys
def reply(id, result):
    print(json.dumps({"jsonrpc": "2.0", "id": id, "result": result}), flush=True)
schema = {"type": "object", "required": ["path", "content"],
          "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}
for line in sys.stdin:
    msg = json.loads(line)
    method, id = msg.get("method"), msg.get("id")
    if method == "initialize":
        reply(id, {"protocolVersion": msg["params"]["protocolVersion"],
                   "capabilities": {"tools": {}}, "serverInfo": {"name": "fs", "version": "1"}})
    elif method == "tools/list":
        reply(id, {"tools": [{"name": "write_file", "description": "Write a file",
                              "inputSchema": schema}]})
    elif method == "tools/call":
        args = msg["params"]["arguments"]
        pathlib.Path(args["path"]).write_text(args["content"])
        reply(id, {"content": [{"type": "text", "text": "wrote " + args["path"]}]})
    elif id is not None:
        reply(id, {})
"""
