"""The real Claude Code and Codex CLIs for the real-client suite: pinned, installed once, run
offline.

`ensure_clients()` installs both pinned npm packages into one cache directory outside the
repository (`$TASKGATE_CLIENTS_DIR`, else `${XDG_CACHE_HOME:-~/.cache}/taskgate-clients/
claude-code-<v>-codex-<v>` of the real home, read when this module is imported, before the
tests' hermetic HOME: the directory scripts/setup-tests.sh fills) and returns it. It fails
(never skips) when npm is missing: scripts/setup-tests.sh installs Node and npm first.

`offline_env()` is the environment a client runs with: a temporary HOME, the model API on
127.0.0.1, no telemetry, no auto-update, no non-essential traffic, temp files under the test's
directory. `offline_command()` runs it in a network namespace of its own, so nothing can reach
the network whatever the client tries. `run_claude()` runs `claude -p` with the prompt on stdin
and parses its result.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CLAUDE_CODE = ("@anthropic-ai/claude-code", "2.1.332")
CODEX = ("@openai/codex", "0.169.0")
PACKAGES = (CLAUDE_CODE, CODEX)
# The directory name scripts/setup-tests.sh uses, so that the suite finds what it installed.
_VERSIONS = "-".join(f"{name.rsplit('/', 1)[-1]}-{ver}" for name, ver in PACKAGES)
REAL_HOME = Path(os.path.expanduser("~"))  # before any fixture makes HOME hermetic
_REAL_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or REAL_HOME / ".cache")


class ClientsUnavailable(RuntimeError):
    """The pinned clients could not be installed (a failure, never a skip)."""


def cache_dir() -> Path:
    """Where the pinned clients live."""
    configured = os.environ.get("TASKGATE_CLIENTS_DIR")
    if configured:
        return Path(configured)
    return _REAL_CACHE / "taskgate-clients" / _VERSIONS


def _installed(root: Path) -> bool:
    for name, version in PACKAGES:
        manifest = root / "node_modules" / name / "package.json"
        try:
            if json.loads(manifest.read_text()).get("version") != version:
                return False
        except (OSError, ValueError):
            return False
    return (root / "node_modules" / ".bin" / "claude").exists() and (
        root / "node_modules" / ".bin" / "codex"
    ).exists()


def ensure_clients() -> Path:
    """The cache directory with both pinned clients installed (npm install when missing)."""
    root = cache_dir()
    if _installed(root):
        return root
    npm = shutil.which("npm")
    if npm is None:
        raise ClientsUnavailable(
            "npm is not installed; the real-client suite needs Node.js and npm "
            "(apt-get install nodejs npm, as .ci/run does)"
        )
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # H2's and this suite's processes may race
        if _installed(root):
            return root
        env = {k: v for k, v in os.environ.items() if not k.startswith("npm_config_")}
        env.update(HOME=str(REAL_HOME), npm_config_cache=str(root / ".npm-cache"))
        specs = [f"{name}@{version}" for name, version in PACKAGES]
        proc = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--prefix", str(root), *specs],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if proc.returncode != 0 or not _installed(root):
            raise ClientsUnavailable(
                f"npm install {' '.join(specs)} failed ({proc.returncode}):\n"
                f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
            )
    return root


def claude_bin() -> Path:
    """The pinned `claude` executable (installed on first use)."""
    return ensure_clients() / "node_modules" / ".bin" / "claude"


def codex_bin() -> Path:
    """The pinned `codex` executable (installed on first use)."""
    return ensure_clients() / "node_modules" / ".bin" / "codex"


# Variables of the developer's or the CI's own agent session that must not leak into a client.
_LEAKY_PREFIXES = ("CLAUDE", "ANTHROPIC_", "OPENAI_", "CODEX_", "TASKGATE_", "GIT_", "AI_AGENT")


def offline_env(home: Path, tmp: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a client process: hermetic HOME, no network beyond 127.0.0.1."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_LEAKY_PREFIXES)}
    tmp.mkdir(parents=True, exist_ok=True)
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home / ".cache"),
        TMPDIR=str(tmp),
        CLAUDE_CODE_TMPDIR=str(tmp),
        DISABLE_AUTOUPDATER="1",
        DISABLE_TELEMETRY="1",
        DISABLE_ERROR_REPORTING="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        # root in CI containers: bypassPermissions is refused for root outside a sandbox.
        IS_SANDBOX="1",
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
    )
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        env.pop(var, None)
    env.update(extra or {})
    return env


def offline_command(cmd: Sequence[str], unix_socket: str, port: int, before: str = "") -> list[str]:
    """`cmd` in network and pid namespaces of its own (bubblewrap): nothing it starts can reach
    any network; inside, socat serves 127.0.0.1:`port` from the mock's `unix_socket`, so
    the client's ANTHROPIC_BASE_URL / model provider URL is unchanged. `before`: shell run in
    the namespace before `cmd` (e.g. a server on its loopback). The namespace, socat and what
    `before` started with it, ends when `cmd` exits."""
    for tool in ("bwrap", "socat"):
        if shutil.which(tool) is None:
            raise ClientsUnavailable(f"{tool} is not installed (apt-get install bubblewrap socat)")
    bridge = (
        f"socat TCP-LISTEN:{port},bind=127.0.0.1,fork,reuseaddr UNIX-CONNECT:{unix_socket} & "
        f"for i in $(seq 500); do (: </dev/tcp/127.0.0.1/{port}) 2>/dev/null && break; "
        f'sleep 0.01; done; {before}\nexec "$@"'
    )
    return [
        "bwrap", "--dev-bind", "/", "/", "--proc", "/proc", "--unshare-net", "--unshare-pid",
        "--die-with-parent", "bash", "-c", bridge, "offline", *cmd,
    ]  # fmt: skip


@dataclass
class ClaudeRun:
    """A finished `claude -p` run."""

    code: int
    out: str
    err: str

    @property
    def result(self) -> dict[str, Any]:
        """The final result object of `--output-format json` (or the last stream-json line)."""
        lines = [line for line in self.out.strip().splitlines() if line.strip()]
        assert lines, f"claude printed nothing (exit {self.code}): {self.err[-2000:]}"
        data = json.loads(lines[-1])
        assert isinstance(data, dict), data
        return data

    @property
    def session_id(self) -> str:
        return str(self.result["session_id"])

    def events(self) -> list[dict[str, Any]]:
        """Every stream-json line."""
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]


def run_claude(
    prompt: str,
    *,
    cwd: Path,
    home: Path,
    port: int,
    unix_socket: str,
    args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    permission_mode: str = "bypassPermissions",
    output: str = "json",
    timeout: float = 90,
    before: str = "",
) -> ClaudeRun:
    """`claude -p --output-format OUTPUT --permission-mode MODE ARGS` with the prompt on stdin,
    offline: the model API is the mock's unix socket, seen inside as 127.0.0.1:`port`."""
    extra = {"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}", "ANTHROPIC_API_KEY": "dummy-key"}
    extra.update(env or {})
    cmd = [str(claude_bin()), "-p", "--output-format", output]
    if output == "stream-json":
        cmd.append("--verbose")
    cmd += ["--permission-mode", permission_mode, *args]
    proc = subprocess.run(
        offline_command(cmd, unix_socket, port, before),
        input=prompt,
        cwd=cwd,
        env=offline_env(home, home.parent / (home.name + "-tmp"), extra),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return ClaudeRun(proc.returncode, proc.stdout, proc.stderr)
