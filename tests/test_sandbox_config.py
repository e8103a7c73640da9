"""`[agents] sandbox` parsing and the pure parts of the sandbox (no bubblewrap needed)."""

from __future__ import annotations

import hashlib
import zlib
from pathlib import Path

import pytest

from taskgate.agents import sandbox
from taskgate.agents.config import parse_agents_config
from taskgate.agents.gitshadow import _valid_object, ref_map
from taskgate.errors import UsageError


def test_the_default_is_auto_and_every_agent_gets_it(tmp_path: Path) -> None:
    config = parse_agents_config({}, tmp_path)
    assert config.sandbox == "auto" and config.settings("quality").sandbox == "auto"
    config = parse_agents_config(
        {"sandbox": "none", "sandbox_readable": ["cache", "/opt/x"]}, tmp_path
    )
    assert config.settings("architect").sandbox == "none"
    assert config.settings("architect").sandbox_readable == (tmp_path / "cache", Path("/opt/x"))


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ({"sandbox": "docker"}, "[agents] sandbox: must be one of auto, bwrap, none"),
        ({"sandbox": True}, "[agents] sandbox: must be one of"),
        ({"sandbox_readable": "cache"}, "[agents] sandbox_readable: must be a list of paths"),
        ({"sandbox_readable": [3]}, "[agents] sandbox_readable: must be a path string"),
    ],
)
def test_bad_values_name_the_key(tmp_path: Path, table: dict[str, object], words: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_agents_config(table, tmp_path)
    assert words in str(caught.value)


def test_none_is_unconfined_and_the_warning_says_what_that_means() -> None:
    choice = sandbox.choose("none")
    assert not choice.confined and "none" in choice.reason
    text = sandbox.warning(choice)
    assert text.startswith("warning: agents run unconfined")
    assert "approvals cannot be proven human" in text and "docs/security.md" in text
    assert sandbox.warning(sandbox.Choice(True, bwrap="/usr/bin/bwrap")) == ""


def test_a_missing_bubblewrap_is_named_with_the_install_hint() -> None:
    path, why = sandbox.probe("taskgate-no-such-bwrap")
    assert path == "" and "not installed" in why and "apt-get install bubblewrap" in why


def _loose(kind: bytes, body: bytes) -> tuple[bytes, str]:
    data = kind + b" " + str(len(body)).encode() + b"\0" + body
    return zlib.compress(data), hashlib.sha1(data).hexdigest()


def test_a_loose_object_is_checked_against_its_name() -> None:
    raw, name = _loose(b"blob", b"hello\n")
    assert name == "ce013625030ba8dba906f756967f9e9ca394464a"  # git hash-object
    assert _valid_object(raw, name, "sha1")
    assert not _valid_object(raw, "0" * 40, "sha1")  # another name
    assert not _valid_object(b"garbage", name, "sha1")
    assert not _valid_object(zlib.compress(b"blob 99\0hello\n"), name, "sha1")  # bad size
    assert not _valid_object(_loose(b"evil", b"x")[0], _loose(b"evil", b"x")[1], "sha1")


def test_ref_map_reads_packed_and_loose_refs_without_git(tmp_path: Path) -> None:
    (tmp_path / "refs" / "heads").mkdir(parents=True)
    (tmp_path / "packed-refs").write_text(
        "# pack-refs with: peeled fully-peeled sorted\n"
        f"{'a' * 40} refs/heads/main\n{'b' * 40} refs/tags/v1\n^{'c' * 40}\n"
    )
    (tmp_path / "refs" / "heads" / "main").write_text("d" * 40 + "\n")  # loose wins
    (tmp_path / "refs" / "heads" / "T-A").write_text("ref: refs/heads/main\n")
    (tmp_path / "refs" / "heads" / "x.lock").write_text("e" * 40)
    refs = ref_map(tmp_path)
    assert refs == {
        "refs/heads/main": "d" * 40,
        "refs/tags/v1": "b" * 40,
        "refs/heads/T-A": "ref: refs/heads/main",
    }
