"""`taskgate demo`: a sample repository, two tasks, the whole protocol with built-in agents."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from taskgate.engine.core import Engine
from taskgate.engine.lifecycle import init
from taskgate.engine.workspace import find_workspace
from taskgate.errors import UsageError
from taskgate.git.cmd import git

TODO = """\
# Tasks

Work for the textkit sample project. Format: docs/todo-format.md in the taskgate repository.

## add-slugify: Add a slugify helper
- Purpose: titles need URL-safe names for the web pages
- Scope: a slugify function in src/textkit/slugify.py and its tests
- Components: slugify function, unit tests
- Files: src/textkit/slugify.py, tests/test_slugify.py

## polish-guide: Polish the user guide
- Purpose: the guide lacks a section on the new helper
- Scope: docs/guide.md only
- Components: documentation
- Files: docs/guide.md
- Depends: add-slugify
"""

FILES = {
    ".gitignore": "__pycache__/\n*.pyc\n",
    "README.md": "# textkit\n\nSmall text helpers. Run the tests with `python3 run_tests.py`.\n",
    "docs/guide.md": "# textkit guide\n\n`words(text)` splits text into words.\n",
    "src/textkit/__init__.py": '"""textkit: small text helpers."""\n',
    "src/textkit/words.py": (
        '"""Split text into words."""\n\n\ndef words(text: str) -> list[str]:\n'
        '    """The white-space separated words of `text`."""\n    return text.split()\n'
    ),
    "tests/test_words.py": (
        '"""Tests for words()."""\n\nimport importlib.util\nfrom pathlib import Path\n\n'
        '_SPEC = importlib.util.spec_from_file_location(\n    "words", Path(__file__).resolve()'
        '.parents[1] / "src/textkit/words.py"\n)\nassert _SPEC and _SPEC.loader\n'
        "_MOD = importlib.util.module_from_spec(_SPEC)\n_SPEC.loader.exec_module(_MOD)\n\n\n"
        'def test_words() -> None:\n    assert _MOD.words(" a  b ") == ["a", "b"]\n'
    ),
    "run_tests.py": '''\
"""The sample project's build: import every tests/test_*.py and run its test_* functions."""

import importlib.util
import sys
import traceback
from pathlib import Path

failed = ran = 0
for path in sorted(Path(__file__).resolve().parent.glob("tests/test_*.py")):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in sorted(n for n in dir(module) if n.startswith("test_")):
        ran += 1
        try:
            getattr(module, name)()
        except Exception:
            failed += 1
            traceback.print_exc()
print(f"Tests run: {ran}, Failures: {failed}")
if failed:
    print("There are test failures")
sys.exit(1 if failed else 0)
''',
}


def config_text(*, auto_approve: bool, build: list[str] | None = None) -> str:
    """taskgate.toml of the sample repository (`build`: the validation command)."""
    command = json.dumps(build or [sys.executable, "run_tests.py"])
    return (
        "# taskgate demo configuration\n\n[protocol]\n"
        "# The demo may approve checkpoints for you with --yes (recorded as automated).\n"
        f"allow_auto_approve = {'true' if auto_approve else 'false'}\n\n"
        f"[validation]\ncommands = [{command}]\n\n"
        '[agents]\nbackend = "scripted"\n'
    )


def create_sample(directory: Path, *, auto_approve: bool, build: list[str] | None = None) -> Path:
    """Write the sample project into `directory` (new or empty) as a git repository."""
    if directory.exists() and any(directory.iterdir()):
        raise UsageError(f"{directory} is not empty", hint="pass --dir with a new directory")
    directory.mkdir(parents=True, exist_ok=True)
    for rel, text in {
        **FILES,
        "todo.md": TODO,
        "taskgate.toml": config_text(auto_approve=auto_approve, build=build),
    }.items():
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    git("init", "-q", "-b", "main", cwd=directory)
    git("config", "user.name", "taskgate demo", cwd=directory)
    git("config", "user.email", "demo@taskgate.invalid", cwd=directory)
    git("add", ".", cwd=directory)
    git("commit", "-q", "-m", "textkit: initial sample project", cwd=directory)
    return directory


def prepare(directory: Path | None, *, auto_approve: bool, session: str) -> Engine:
    """A sample repository with taskgate initialised, and an engine on it."""
    target = directory or Path(tempfile.mkdtemp(prefix="taskgate-demo-")) / "textkit"
    create_sample(target.resolve(), auto_approve=auto_approve)
    engine = Engine(find_workspace(target), session_id=session, cwd=target)
    init(engine)
    return engine


def epilogue(engine: Engine) -> str:
    """What the demo leaves behind: main's history and the changelog."""
    repo = engine.ws.repo
    log = git("log", "--oneline", "--decorate=no", "main", cwd=repo).stdout.rstrip()
    branches = git("branch", "--format=%(refname:short)", cwd=repo).stdout.split()
    worktrees = git("worktree", "list", cwd=repo).stdout.strip().splitlines()
    changelog = (repo / "changelog.md").read_text(encoding="utf-8").rstrip()
    return "\n".join(
        [
            "",
            f"Repository: {repo}",
            "",
            "main:",
            *(f"  {line}" for line in log.splitlines()),
            "",
            f"branches: {', '.join(branches)}; worktrees: {len(worktrees)}",
            "",
            "changelog.md:",
            *(f"  {line}" for line in changelog.splitlines()),
            "",
            f"Inspect it: cd {repo} && taskgate --session demo status add-slugify",
        ]
    )
