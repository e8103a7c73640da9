"""store/snapshot.read keeps the parse of each file version (issue 18: `taskgate serve` answers
hooks from warm state) and never serves a stale one: a replaced file, an edit in place with the
same size and mtime within one clock tick, and a deleted file are all seen at once (the text
is compared, not the file's metadata)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from taskgate.store import snapshot


def _write(state: Path, tasks: list[dict[str, Any]]) -> Path:
    path = state / snapshot.FILE_NAME
    tmp = path.with_suffix(".tmp")
    tmp.write_text(snapshot.render({"format": snapshot.FORMAT, "tasks": tasks}))
    os.replace(tmp, path)  # as the store writes it: a new file
    return path


def _task(name: str, state: str = "INIT") -> dict[str, Any]:
    return {"name": name, "state": state, "session": "s1", "agents": []}


def test_each_version_is_parsed_once_and_never_served_stale(tmp_path: Path) -> None:
    calls: list[int] = []

    def loads(text: str) -> Any:
        calls.append(1)
        return json.loads(text)

    path = _write(tmp_path, [_task("a")])
    first = snapshot.read(str(tmp_path), loads)
    assert first is not None and snapshot.read(str(tmp_path), loads) is first
    assert len(calls) == 1
    _write(tmp_path, [_task("b")])  # replaced
    second = snapshot.read(str(tmp_path), loads)
    assert second is not None and second.held_by("s1")[0]["name"] == "b"
    # Edited in place to the same size, its mtime set back: the ctime still moves.
    st = path.stat()
    text = path.read_text().replace('"INIT"', '"DONE"')
    assert len(text) == st.st_size
    with open(path, "r+", encoding="utf-8") as handle:
        handle.write(text)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    third = snapshot.read(str(tmp_path), loads)
    assert third is not None and third.held_by("s1")[0]["state"] == "DONE"
    path.unlink()
    assert snapshot.read(str(tmp_path), loads) is None
