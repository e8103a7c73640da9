"""No false alarms (issue 15): read-only commands that developers and agents really run are all
allowed to the main agent in IMPLEMENTATION, where it may not write at all. A referee that
cries wolf teaches people to switch it off. Counts by class are in docs/hooks.md."""

# ruff: noqa: E501  (tables of commands, one per entry, read better unwrapped)

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import Repo
from flow import implementation_template
from test_hooks_dispatch import TASK, decision, fixture, hook

W = "{W}"  # the task worktree
R = "{R}"  # the main worktree

READ_ONLY: dict[str, list[str]] = {
    "git read commands (also by absolute path, -C, --no-pager)": [
        "git status",
        "/usr/bin/git status",
        "/usr/bin/git -C {W} status --short",
        "git log --oneline -20",
        "git --no-pager log -p -3 --stat",
        "git -c color.ui=never log --graph --decorate --all -n 30",
        "git diff",
        "git diff --cached",
        "git diff main...HEAD --stat",
        "git diff HEAD~0 -- README.md",
        "git show HEAD",
        "git show HEAD:README.md",
        "git blame README.md",
        "git branch",
        "git branch -a -vv",
        "git branch --show-current",
        "git branch --list 'add-*'",
        "git tag -l",
        "git remote -v",
        "git rev-parse --show-toplevel",
        "git rev-parse HEAD",
        "git ls-files | head",
        "git ls-tree -r HEAD --name-only",
        "git grep -n TODO",
        "git describe --always",
        "git shortlog -sn",
        "git config --get user.name",
        "git config --list --show-origin",
        "git stash list",
        "git worktree list",
        "git reflog -10",
        "git for-each-ref --format='%(refname)' refs/heads",
        "git merge-base HEAD main",
        "git cat-file -p HEAD",
        "git rev-list --count HEAD",
        "git log --since=2.weeks --author=T --format='%h %s'",
        "cd {W} && git status && git diff --stat",
        "git -C {W} log --oneline main..HEAD",
        "GIT_PAGER=cat git log -1",
        "git fetch --dry-run 2>/dev/null || true",
    ],
    "test runners and linters (venv paths, python -m)": [
        "pytest -q",
        "pytest -x -q tests/test_login.py::test_ok",
        ".venv/bin/python -m pytest -q",
        "{R}/.venv/bin/python -m pytest -q 2>&1 | tail -20",
        ".venv/bin/pytest -q -k login",
        "python -m pytest --co -q",
        "python3 -m unittest discover -s tests",
        "uv run pytest -q",
        "poetry run pytest",
        "tox -e py311",
        "ruff check .",
        ".venv/bin/ruff check src tests",
        "ruff format --check .",
        "python -m ruff check --output-format=concise .",
        "mypy src",
        ".venv/bin/mypy --strict src/",
        "black --check .",
        "isort --check-only --diff .",
        "flake8 src",
        "pylint src --disable=all --enable=E",
        "pyright",
        "coverage report -m",
        "python -m pip list",
        "pip show requests",
        "pip freeze | grep -i django",
        "python -m mypy src && python -m pytest -q",
        "timeout 600 pytest -q",
        "nice -n 10 pytest -q",
        "env PYTHONPATH=src pytest -q",
        "PYTHONDONTWRITEBYTECODE=1 python -m pytest -q",
    ],
    "python -c / scripts that only read": [
        "python3 -c 'print(1)'",
        "/usr/bin/python3 -c 'print(1)'",
        "python -c 'import sys; print(sys.version)'",
        "python3 -c \"import json,sys; print(json.load(open('package.json'))['name'])\"",
        "python3 -c \"print(open('README.md').read()[:200])\"",
        "python3 -c 'import sys; sys.stdout.write(\"ok\\n\")'",
        "python3 -c \"import subprocess; subprocess.run(['pytest', '-q'])\"",
        "python3 -c 'import os; print(os.listdir(\".\"))'",
        "python3 -c 'import pathlib; print(pathlib.Path(\"README.md\").read_text())'",
        "python3 -c 'import platform; print(platform.python_version())'",
        "python3 -c \"import importlib.metadata as m; print(m.version('pip'))\"",
        "cat data.json | python3 -m json.tool",
        "python3 -c 'import os; print(os.environ.get(\"HOME\"))'",
        "python3 -c 'for i in range(3): print(i)'",
        "python3 -c \"import re; print(re.findall(r'\\d+', 'a1b22'))\"",
        "python3 - <<'EOF'\nimport sys\nprint(sys.path)\nEOF",
        'python3 -c \'import hashlib; print(hashlib.sha256(open("README.md","rb").read()).hexdigest())\'',
    ],
    "node, perl and ruby one-liners that print": [
        "node -e 'console.log(1)'",
        "node -e 'console.log(process.version)'",
        "node -p 'process.platform'",
        "node -e \"console.log(JSON.stringify(require('path').join('a','b')))\"",
        "node --version",
        "perl -ne 'print if /TODO/' README.md",
        "perl -e 'print \"hello\\n\"'",
        "ruby -e 'puts 1 + 1'",
        "ruby -e 'puts RUBY_VERSION'",
        "node -e 'console.log([1,2,3].map(x => x * 2).join(\",\"))'",
    ],
    "grep, find, jq and text pipelines": [
        "grep -rn TODO src",
        "grep -rIl 'def login' . | head",
        "rg -n 'login' --type py",
        "rg --files | wc -l",
        "find . -name '*.py' | xargs grep -l login",
        "find . -type f -name '*.md' -not -path './.git/*'",
        "find src -newer README.md -print",
        "find . -name '*.py' -exec grep -H def {} +",
        "find . -maxdepth 2 -type d | sort",
        "jq '.dependencies' package.json",
        "jq -r '.scripts | keys[]' package.json",
        "cat package.json | jq .version",
        "ls -la",
        "ls -R src | head -50",
        "tree -L 2",
        "wc -l src/*.py",
        "head -50 README.md",
        "tail -n 100 log.txt",
        "cat README.md | grep -i install | head -3",
        "sort -u names.txt | uniq -c",
        "cut -d: -f1 /etc/passwd | sort | head",
        "awk '{print $1}' README.md | sort | uniq -c | sort -rn | head",
        "awk -F, '$3 > 100 {print $1}' data.csv",
        "sed -n '1,20p' README.md",
        "sed 's/foo/bar/g' README.md | head",
        "diff -u README.md todo.md",
        "du -sh . 2>/dev/null",
        "stat README.md",
        "file README.md",
        "xargs -n1 echo < names.txt",
        "grep -c '' README.md && wc -c README.md",
        "tr 'a-z' 'A-Z' < README.md",
        "sha256sum README.md",
        "realpath README.md && dirname $(pwd)",
        "which python3 pytest node",
    ],
    "build tools in dry-run and other languages' test runners": [
        "make -n",
        "make -n test",
        "make --dry-run build",
        "make -qp | head",
        "npm test",
        "npm run test -- --watch=false",
        "npm run lint",
        "npx jest --ci",
        "npx vitest run",
        "yarn test",
        "pnpm test",
        "npm ls --depth=0",
        "cargo test",
        "cargo check --all-targets",
        "cargo clippy -- -D warnings",
        "cargo fmt --check",
        "go test ./...",
        "go vet ./...",
        "go list ./...",
        "mvn -q test",
        "./gradlew test",
        "gradle check",
        "dotnet test",
        "bundle exec rspec",
        "rspec spec/login_spec.rb",
        "phpunit",
        "mix test",
        "swift test",
        "deno test",
        "ctest --output-on-failure",
        "tsc --noEmit",
        "eslint src",
        "prettier --check .",
        "shellcheck scripts/*.sh",
        "gofmt -l .",
        "rustfmt --check src/main.rs",
    ],
    "shell constructs around reads": [
        "for f in src/*.py; do echo $f; wc -l $f; done",
        "if [ -f README.md ]; then cat README.md; fi",
        "[[ -d src ]] && ls src || echo none",
        "test -e pyproject.toml && echo yes",
        "{ git status; git log -1; } 2>&1 | head",
        "(cd src && ls)",
        "cd {W} && ls && cd - >/dev/null",
        'while read -r line; do echo "$line"; done < README.md',
        "case $(uname) in Linux) echo linux;; *) echo other;; esac",
        "f() { git log --oneline -1; }; f",
        "echo $HOME $PWD $PATH | tr ' ' '\\n'",
        "x=$(git rev-parse HEAD); echo $x",
        "export FOO=1 && env | grep FOO",
        "echo hi > /dev/null 2>&1",
        "ls nonexistent 2>/dev/null || true",
        "sleep 1; echo done",
        "date +%F && uptime",
        "printf '%s\\n' a b c | sort",
        "cat <<EOF\nhello\nEOF",
        "echo 'rm -rf /' # just text",
        "git status; echo $?",
        "time pytest -q",
        "diff <(git show HEAD:README.md) README.md",
        "ps aux | grep python | head",
        "taskgate status add-login",
        "taskgate audit add-login",
        "taskgate todo --json",
    ],
}
CASES = [(kind, command) for kind, commands in READ_ONLY.items() for command in commands]


@pytest.fixture(scope="module")
def implementation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Repo]:
    """add-login in IMPLEMENTATION, session s1: the main agent may not write."""
    with implementation_template(tmp_path_factory, "ro", TASK, second=False) as repo:
        yield repo


def data(repo: Repo, command: str, cwd: Path) -> dict[str, object]:
    command = command.replace(W, str(repo.worktree(TASK))).replace(R, str(repo.path))
    return fixture("pre_tool_use_bash", repo, tool_input={"command": command}, cwd=str(cwd))


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) >= 150


@pytest.mark.parametrize(
    ("kind", "command"), CASES, ids=[f"{k[:12]}-{i}" for i, (k, _) in enumerate(CASES)]
)
def test_read_only_commands_are_allowed_in_implementation(
    implementation: Repo, kind: str, command: str
) -> None:
    """Judged as the hook judges them, from the task worktree and from the repository root."""
    from taskgate.hooks.judge import judge

    for cwd in (implementation.worktree(TASK), implementation.path):
        verdict = judge(data(implementation, command, cwd))
        assert verdict.allow, f"{kind}: {command!r} from {cwd}: {verdict.message()}"


def test_the_installed_hook_agrees(implementation: Repo) -> None:
    """A sample through the installed hook command (python -S launch.py), as Claude Code runs."""
    for kind, commands in READ_ONLY.items():
        for command in commands[:2]:
            run = hook(implementation, json.dumps(data(implementation, command,
                                                       implementation.worktree(TASK))))  # fmt: skip
            assert decision(run) == ("allow", ""), (kind, command)
