"""The plugin's hook program (src/taskgate/plugin: hooks/hooks.json runs bin/hook) starts no
program found on PATH when taskgate is installed in an environment: an unconfined agent can
put a `python3` or an `sh` in a directory early on the session's PATH (~/.local/bin), which
would then answer every hook (docs/security.md, "The git the hooks run")."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from taskgate.hooks.install import PLUGIN_PROGRAM, hook_command, plugin_dir

_STUB = "import sys\nprint('launch.py', sys.argv[1:], sys.flags.no_site)\n"


def _installed(root: Path) -> Path:
    """A package laid out as pip installs it in an environment, its launch.py a stub; the
    environment's bin/python3 is this interpreter. Returns the plugin's directory."""
    package = root / "env" / "lib" / "python3.11" / "site-packages" / "taskgate"
    shutil.copytree(plugin_dir(), package / "plugin")
    (package / "hooks").mkdir()
    (package / "hooks" / "launch.py").write_text(_STUB)
    (root / "env" / "bin").mkdir()
    (root / "env" / "bin" / "python3").symlink_to(sys.executable)
    return package / "plugin"


def _planted(root: Path) -> tuple[Path, Path]:
    """A directory of programs an agent wrote (python3, sh, taskgate), each leaving a mark."""
    bin_dir, mark = root / "planted", root / "ran"
    bin_dir.mkdir()
    for name in ("python3", "sh", "taskgate"):
        program = bin_dir / name
        program.write_text(f"#!/bin/dash\necho {name} >> '{mark}'\necho planted {name}\n")
        program.chmod(0o755)
    return bin_dir, mark


def _run(command: list[str], plugin: Path, planted: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{planted}{os.pathsep}{os.environ['PATH']}",
           "CLAUDE_PLUGIN_ROOT": str(plugin)}  # fmt: skip
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


def test_the_plugin_runs_its_environments_interpreter_not_one_on_path(tmp_path: Path) -> None:
    plugin = _installed(tmp_path)
    planted, mark = _planted(tmp_path)
    # as Claude Code runs a hook command: through a shell, the session's PATH first
    out = _run(["/bin/sh", "-c", hook_command(PLUGIN_PROGRAM, "PreToolUse")], plugin, planted)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "launch.py ['PreToolUse'] 1"  # the stub, with -S
    assert not mark.exists(), mark.read_text()


def test_a_source_checkout_falls_back_to_the_python3_on_path(tmp_path: Path) -> None:
    """Documented: without an environment's interpreter beside the package (a source checkout,
    a --user install) the plugin uses PATH's python3."""
    package = tmp_path / "src" / "taskgate"
    shutil.copytree(plugin_dir(), package / "plugin")
    (package / "hooks").mkdir()
    (package / "hooks" / "launch.py").write_text(_STUB)
    planted, mark = _planted(tmp_path)
    out = _run(["/bin/sh", str(package / "plugin" / "bin" / "hook"), "Stop"],
               package / "plugin", planted)  # fmt: skip
    assert out.stdout.strip() == "planted python3" and mark.read_text() == "python3\n"
