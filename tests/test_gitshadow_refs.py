"""The sandbox's private copy of the refs while other commands move them (agents/gitshadow.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from taskgate.agents import gitshadow


def _refs(root: Path) -> Path:
    refs = root / "refs"
    (refs / "heads").mkdir(parents=True)
    (refs / "heads" / "main").write_text("0" * 40 + "\n")
    (refs / "heads" / "task-0-quality.lock").write_text("1" * 40 + "\n")
    return refs


def test_lock_files_are_left_out_of_the_copy(tmp_path: Path) -> None:
    refs = _refs(tmp_path)
    gitshadow._copy_refs(refs, tmp_path / "copy")
    assert sorted(p.name for p in (tmp_path / "copy" / "heads").iterdir()) == ["main"]


def test_a_ref_that_vanishes_during_the_copy_is_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refs = _refs(tmp_path)
    gone = refs / "heads" / "deleted-meanwhile"
    real = shutil.copytree

    top = tmp_path / "copy"

    def racing(src: Path, dest: Path, *args: object, **kwargs: object) -> object:
        real(src, dest, *args, **kwargs)  # type: ignore[arg-type]  # copytree recurses by name
        if Path(dest) == top:
            raise shutil.Error([(str(gone), str(dest), "[Errno 2] No such file or directory")])
        return dest

    monkeypatch.setattr(gitshadow.shutil, "copytree", racing)
    gitshadow._copy_refs(refs, top)  # no error: as a copy a moment later
    assert (tmp_path / "copy" / "heads" / "main").is_file()


def test_a_ref_still_there_that_cannot_be_copied_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refs = _refs(tmp_path)
    there = refs / "heads" / "main"

    def failing(src: Path, dest: Path, **kwargs: object) -> object:
        raise shutil.Error([(str(there), str(dest), "[Errno 13] Permission denied")])

    monkeypatch.setattr(gitshadow.shutil, "copytree", failing)
    with pytest.raises(shutil.Error):
        gitshadow._copy_refs(refs, tmp_path / "copy")
