"""taskgate.toml holding only comments is read without tomllib (issue 18): the shortcut must
never accept a text tomllib would parse to anything but {} or refuse."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import SRC
from taskgate.engine import config as cfg

# Characters that matter to the shortcut: whitespace, newlines, comment marks, controls TOML
# forbids in comments, characters it allows there, and TOML syntax.
ALPHABET = st.sampled_from(
    [" ", "\t", "\n", "\r", "#", "a", "é", "\x85", "\ufeff", "\x00", "\x08", "\x0b", "\x1f",
     "\x7f", "=", "[", "]", '"', "x = 1", "[store]", "\u2028"]
)  # fmt: skip


def _tomllib(text: str) -> object:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return "error"


@settings(max_examples=3000)
@given(st.lists(ALPHABET, max_size=30).map("".join))
@example("# a\r")
@example("# a\rb\n")
@example("#\x7f")
@example("# a\r\n\r\n  \t# b\n")
@example("\ufeff# a")
def test_comments_only_means_tomllib_reads_nothing(text: str) -> None:
    if cfg.comments_only(text):
        assert _tomllib(text) == {}, repr(text)


@pytest.mark.parametrize(
    "text",
    ["", "\n", "# a", "# a\n\n  # b\r\n\t#\tc\n", cfg.DEFAULT_CONFIG_TEXT, "# é \x85 \u2028"],
)
def test_comment_files_take_the_shortcut(text: str) -> None:
    assert cfg.comments_only(text) and _tomllib(text) == {}
    assert cfg.parse_config(text) == cfg.Config(text=text)


@pytest.mark.parametrize("text", ["x", "# a\rb", "#\x00", "# a\r", "[store]", "\ufeff#"])
def test_anything_else_goes_to_tomllib(text: str) -> None:
    assert not cfg.comments_only(text)


def test_the_shortcut_and_tomllib_give_the_same_config(tmp_path: Path) -> None:
    text = cfg.DEFAULT_CONFIG_TEXT
    via_tomllib = text + "\n[protocol]\n"  # an empty table: tomllib parses the same config
    assert not cfg.comments_only(via_tomllib)
    a, b = cfg.parse_config(text), cfg.parse_config(via_tomllib)
    assert (a.workspace, a.protocol, a.validation, a.cleanup, a.risk, a.agents, a.worktree) == (
        b.workspace, b.protocol, b.validation, b.cleanup, b.risk, b.agents, b.worktree
    )  # fmt: skip


def test_a_syntax_error_is_still_reported() -> None:
    from taskgate.errors import UsageError

    with pytest.raises(UsageError, match="at line 2") as caught:
        cfg.parse_config("# fine\n[protocol\n")
    assert caught.value.hint == "fix the TOML syntax"


def test_loading_the_default_config_imports_no_tomllib(tmp_path: Path) -> None:
    (tmp_path / "taskgate.toml").write_text(cfg.DEFAULT_CONFIG_TEXT)
    code = (
        "import sys\nfrom pathlib import Path\nfrom taskgate.engine.config import load_config\n"
        f"load_config(Path({str(tmp_path)!r}))\nprint('tomllib' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True,
        env={"PYTHONPATH": str(SRC)},
    )  # fmt: skip
    assert out.stdout.strip() == "False"
