"""File kinds by name: build, CI, code, documentation, configuration, tests (D-WFV-2, C-39)."""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Sequence

# risk.py builds its language-neutral default patterns from these tuples so that the
# risk table and change-type detection never disagree about what a build or CI file is.

CODE_EXTENSIONS: tuple[str, ...] = (
    ".py", ".pyi", ".java", ".kt", ".scala", ".groovy", ".ts", ".tsx", ".js", ".jsx", ".mjs",
    ".cjs", ".vue", ".svelte", ".go", ".rs", ".c", ".h", ".cc", ".cpp", ".hpp", ".cs", ".rb",
    ".php", ".swift", ".m", ".dart", ".lua", ".pl", ".sh", ".bash", ".sql", ".ex", ".exs",
)  # fmt: skip
DOC_EXTENSIONS = (".md", ".markdown", ".rst", ".txt", ".adoc", ".log")
_DOC_ASSET_EXTENSIONS = (".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp")
CONFIG_EXTENSIONS = (".properties", ".yml", ".yaml", ".json", ".toml", ".ini", ".cfg", ".conf",
                     ".env", ".xml")  # fmt: skip
# Basename globs (gitignore patterns without "/" mean the same). C-39: never config-only.
BUILD_FILE_GLOBS: tuple[str, ...] = (
    "pom.xml", "pyproject.toml", "setup.py", "setup.cfg", "requirements*.txt", "Pipfile",
    "Pipfile.lock", "poetry.lock", "uv.lock", "tox.ini", "noxfile.py", "package.json",
    "package-lock.json", "yarn.lock", "pnpm-lock.yaml", "tsconfig*.json", "go.mod", "go.sum",
    "Cargo.toml", "Cargo.lock", "Makefile", "GNUmakefile", "*.mk", "CMakeLists.txt",
    "build.gradle", "build.gradle.kts", "settings.gradle", "settings.gradle.kts", "gradlew",
    "mvnw", "build.xml", "Dockerfile", "meson.build", "BUILD.bazel", "WORKSPACE",
)  # fmt: skip
CI_FILE_GLOBS: tuple[str, ...] = (
    ".gitlab-ci.yml", ".travis.yml", "azure-pipelines.yml", "bitbucket-pipelines.yml",
    "Jenkinsfile", ".pre-commit-config.yaml",
)  # fmt: skip
CI_DIRS = (".github", ".circleci", ".gitlab")
# Style enforcement, like checkstyle in D-RSK-1; also FORMATTING_RULES when modified.
STYLE_CONFIG_GLOBS: tuple[str, ...] = (
    "checkstyle*.xml", ".editorconfig", ".prettierrc*", "prettier.config.*", ".eslintrc*",
    "eslint.config.*", "ruff.toml", ".ruff.toml", ".flake8", ".pylintrc", ".clang-format",
    "rustfmt.toml", ".rustfmt.toml", ".golangci.y*ml", ".stylelintrc*",
)  # fmt: skip


def _basename_regex(globs: Sequence[str]) -> re.Pattern[str]:
    return re.compile("|".join(fnmatch.translate(g) for g in globs))


@functools.cache
def _regexes() -> tuple[re.Pattern[str], ...]:
    """build, ci, style, doc name, test name: compiled on first use, not at import (1.3 ms of
    every command that imports the guards, issue 18)."""
    return (
        _basename_regex(BUILD_FILE_GLOBS),
        _basename_regex(CI_FILE_GLOBS),
        _basename_regex(STYLE_CONFIG_GLOBS),
        re.compile(
            r"(readme|license|licence|changelog|changes|copying|notice|authors|contributing"
            r"|code_of_conduct|history)([._-].*)?",
            re.IGNORECASE,
        ),
        re.compile(
            r"(test_.*\.py|.*_test\.(py|go)|conftest\.py|.*Tests?\.(java|kt|scala|cs)"
            r"|.*\.(test|spec)\.[cm]?[jt]sx?)"
        ),
    )


_TEST_DIRS = frozenset({"test", "tests", "__tests__", "testdata", "spec", "specs"})


def file_kind(path: str) -> str:
    """One of build, ci, code, doc, config, other for a repo-relative path (D-WFV-2, C-39)."""
    segments = path.split("/")
    name = segments[-1]
    lower = name.lower()
    build_re, ci_re, _, doc_name_re, _ = _regexes()
    if build_re.match(name):
        return "build"
    if ci_re.match(name) or (len(segments) > 1 and segments[0] in CI_DIRS):
        return "ci"
    if lower.endswith(CODE_EXTENSIONS):
        return "code"
    if lower.endswith(DOC_EXTENSIONS) or doc_name_re.fullmatch(name):
        return "doc"
    if segments[0] in ("docs", "doc") and lower.endswith(_DOC_ASSET_EXTENSIONS):
        return "doc"
    if lower.endswith(CONFIG_EXTENSIONS) or (lower.startswith(".") and "." not in lower[1:]):
        return "config"
    return "other"


def is_test_path(path: str) -> bool:
    """True for test sources by directory or file-name convention (Java, Python, Go, JS/TS)."""
    segments = path.split("/")
    return bool(_TEST_DIRS.intersection(segments[:-1])) or bool(
        _regexes()[4].fullmatch(segments[-1])
    )


def is_style_config(path: str) -> bool:
    """True for style-enforcement configuration such as checkstyle.xml or ruff.toml."""
    return bool(_regexes()[2].match(path.rsplit("/", 1)[-1]))
