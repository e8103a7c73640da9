"""The dashboard's plain-Python parts: markdown, diff colouring, timeline, secret, watcher."""

from __future__ import annotations

import asyncio
import os
import re
import stat
import threading
from pathlib import Path

import pytest

from conftest import Repo
from flow import to_requirements
from taskgate.errors import UsageError
from taskgate.server import diffview, markdown, secret, timeline
from taskgate.server.run import check_bind, is_local
from taskgate.server.security import Gate, allowed_hosts, post_problem
from taskgate.server.watch import Hub, SqliteProbe, Watcher
from taskgate.store.records import EventRow, TaskRow, TaskSnapshot

# -- markdown ------------------------------------------------------------------------------------

HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[a](javascript:alert(1))",
    '[a](https://x.test/"onmouseover="alert(1))',
    "`<b>` **<i>bold</i>** *<u>*",
    "| <th> | x |\n|---|---|\n| <td onclick=1> | y |",
    "```html\n<script>x</script>\n```",
    "> <iframe src=//evil>",
    "- [x] <svg onload=alert(1)>",
    '# <a href="javascript:1">h</a>',
]


@pytest.mark.parametrize("text", HOSTILE)
def test_markdown_never_emits_markup_from_the_input(text: str) -> None:
    html = markdown.render(text)
    tags = re.findall(r"<\s*([a-zA-Z0-9]+)", html)
    allowed = {"p", "br", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "table",
               "thead", "tbody", "tr", "th", "td", "pre", "code", "strong", "em", "a",
               "blockquote", "hr", "span"}  # fmt: skip
    assert set(tags) <= allowed, html
    assert "javascript:" not in re.sub(
        r"&[a-z#0-9]+;", "", "".join(re.findall(r'href="[^"]*"', html))
    )
    assert not re.search(r"<[^>]* on[a-z]+=", html), html


def test_markdown_renders_what_plans_use() -> None:
    html = markdown.render(
        "# T: title\n\n## Implementation Plan\n\n| a | b |\n|---|---|\n| `x` | **y** |\n\n"
        "1. one\n2. two\n\n- [ ] open\n- [x] done\n\n```py\nx = 1\n```\n"
    )
    assert "<h1>T: title</h1>" in html and "<h2>Implementation Plan</h2>" in html
    assert "<td><code>x</code></td><td><strong>y</strong></td>" in html
    assert "<ol><li>one</li><li>two</li></ol>" in html and "&#9745;" in html
    assert '<pre><code class="lang-py">x = 1</code></pre>' in html


# -- diff ----------------------------------------------------------------------------------------

DIFF = """diff --git a/src/a.py b/src/a.py
new file mode 100644
index 0000000..1111111
--- /dev/null
+++ b/src/a.py
@@ -0,0 +1,3 @@
+def f(x):  # a "comment"
+    return "<b>" + 'x' + 42
+
diff --git a/docs/b.md b/docs/b.md
index 1..2 100644
--- a/docs/b.md
+++ b/docs/b.md
@@ -1,2 +1,2 @@
 keep
-old <tag>
+new <tag>
"""


def test_diff_is_split_per_file_coloured_and_escaped() -> None:
    files = diffview.parse(DIFF)
    assert [(f.path, f.status, f.added, f.deleted) for f in files] == [
        ("src/a.py", "added", 3, 0),
        ("docs/b.md", "modified", 1, 1),
    ]
    first = files[0].lines[1].html
    assert (
        '<span class="k">def</span>' in first
        and '<span class="c"># a &quot;comment&quot;</span>' in first
    )
    assert '<span class="s">&quot;&lt;b&gt;&quot;</span>' in files[0].lines[2].html
    assert '<span class="n">42</span>' in files[0].lines[2].html
    md = files[1].lines
    assert [(line.kind, line.old, line.new) for line in md] == [
        ("hunk", None, None), ("ctx", 1, 1), ("del", 2, None), ("add", None, 2),
    ]  # fmt: skip
    assert md[2].html == "old &lt;tag&gt;"


def test_a_hash_inside_a_string_is_no_comment() -> None:
    assert '<span class="c">' not in diffview.colour('x = "#not a comment"', "py")


def test_huge_files_are_cut_with_a_note() -> None:
    body = "".join(f"+line {i}\n" for i in range(diffview.MAX_FILE_LINES + 10))
    [f] = diffview.parse(f"diff --git a/x b/x\n@@ -0,0 +1 @@\n{body}")
    assert f.truncated and len(f.lines) == diffview.MAX_FILE_LINES


# -- timeline ------------------------------------------------------------------------------------


def _events(
    *specs: tuple[str, dict[str, object]], start: int = 0, step: int = 0
) -> tuple[EventRow, ...]:
    rows = []
    for i, (kind, payload) in enumerate(specs):
        sec = start + i * step
        at = f"2026-01-01T00:{sec // 60 % 60:02d}:{sec % 60:02d}Z"
        rows.append(EventRow("t", at, kind, payload, "", "", i + 1))
    return tuple(rows)


def _snap(events: tuple[EventRow, ...], state: str = "IMPLEMENTATION") -> TaskSnapshot:
    row = TaskRow("t", state, "s", "h", 1, "x", "x", required_agents=("quality", "test"))
    return TaskSnapshot(task=row, events=events)


def test_timeline_draws_states_agent_bars_and_marks_escaped() -> None:
    events = _events(
        ("transition", {"from": "INIT", "to": "CLASSIFIED"}),
        ("transition", {"from": "CLASSIFIED", "to": "REQUIREMENTS"}),
        ("agent_invoked", {"agent": "quality", "mode": "requirements"}),
        ("agent_completed", {"agent": "quality", "mode": "requirements", "status": "COMPLETE"}),
        ("presentation", {"kind": "plan", "bound_to": "abc"}),
        ("approval", {"kind": "plan", "bound_to": "abc", "provenance": "dashboard"}),
        ("validation", {"success": False, "failure_class": "<x>"}),
        ("verdict", {"agent": "test", "decision": "REJECTED", "reason": "<script>"}),
        ("agent_invoked", {"agent": "<evil>", "mode": "implementation"}),
    )
    svg = timeline.render(_snap(events))
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert svg.count('class="st st-') == 3  # INIT, CLASSIFIED, REQUIREMENTS
    assert svg.count('<rect class="bar') == 2  # quality's bar + the running <evil> bar
    assert "status-running" in svg and "agent &lt;evil&gt;" in svg
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    assert 'class="mk tri bad"' in svg and 'class="mk circle bad"' in svg
    assert "event order" in svg  # all in the first seconds: the axis is event order


def test_timeline_marks_builds_on_main_by_their_result() -> None:
    """Cleanup's build on main records `result`, not `success`: main exactly as validated
    (UNCHANGED) and a passing build are passes, a failing one is a failure."""
    events = _events(
        ("validation", {"on_main": True, "result": "UNCHANGED"}),
        ("validation", {"on_main": True, "result": "SUCCESS"}),
        ("validation", {"on_main": True, "result": "FAILURE", "failure_class": "test"}),
    )
    svg = timeline.render(_snap(events))
    assert svg.count('class="mk circle ok"') == 2 and svg.count('class="mk circle bad"') == 1
    assert "main: unchanged" in svg and "failed (test)" in svg


def test_timeline_uses_time_when_events_spread_over_time() -> None:
    events = _events(*[("transition", {"from": "INIT", "to": "CLASSIFIED"})] * 5, step=40)
    assert "time (UTC)" in timeline.render(_snap(events))


def test_timeline_of_2000_events_stays_small() -> None:
    specs = []
    for i in range(1000):
        specs += [("agent_invoked", {"agent": "quality", "mode": "implementation"}),
                  ("agent_completed", {"agent": "quality", "status": "COMPLETE"})]  # fmt: skip
        del i
    svg = timeline.render(_snap(_events(*specs)))
    assert svg.count('<rect class="bar') == 1000 and len(svg) < 600_000


# -- secret --------------------------------------------------------------------------------------


def test_secret_file_is_private_reused_and_rotated(tmp_path: Path) -> None:
    root = secret.state_root(
        None, {"XDG_STATE_HOME": str(tmp_path / "xdg"), "HOME": "/nonexistent"}
    )
    assert root == tmp_path / "xdg" / "taskgate"
    directory = secret.server_dir(root, tmp_path / "repo" / ".git")
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    path = directory / "secret"
    token = secret.load_or_create(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(token) >= 40
    assert secret.load_or_create(path) == token
    path.chmod(0o644)  # readable by others: never trusted again
    loose = secret.load_or_create(path)
    assert loose != token and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert secret.load_or_create(path, rotate=True) != loose


def test_state_root_defaults_under_home_and_honours_the_override(tmp_path: Path) -> None:
    assert secret.state_root(None, {"HOME": "/h"}) == Path("/h/.local/state/taskgate")
    assert secret.state_root(None, {"TASKGATE_STATE_DIR": "/s", "HOME": "/h"}) == Path("/s")
    assert secret.state_root(tmp_path, {"HOME": "/h"}) == tmp_path


# -- security helpers ----------------------------------------------------------------------------


def test_hosts_and_origins() -> None:
    gate = Gate("t" * 43, allowed_hosts("127.0.0.1", 8000))
    assert gate.host_ok("127.0.0.1:8000") and gate.host_ok("LOCALHOST:8000")
    assert not gate.host_ok("127.0.0.1:8001") and not gate.host_ok("evil.test:8000")
    assert not gate.host_ok(None) and not gate.origin_ok("null")
    assert gate.origin_ok("http://localhost:8000") and not gate.origin_ok("https://localhost:8000")
    session = gate.login("t" * 43)
    assert session is not None and gate.login("t" * 42) is None
    ok = dict(session=session, origin="http://127.0.0.1:8000", fetch_site="same-origin")
    assert post_problem(gate, **ok, csrf=session.csrf) == ""  # type: ignore[arg-type]
    assert "CSRF" in post_problem(gate, **ok, csrf="x")  # type: ignore[arg-type]


def test_non_local_binding_needs_the_explicit_flag() -> None:
    assert is_local("127.0.0.1") and is_local("::1") and is_local("localhost")
    assert not is_local("0.0.0.0") and not is_local("192.168.1.5")
    with pytest.raises(UsageError):
        check_bind("0.0.0.0", False)
    assert "WARNING" in check_bind("0.0.0.0", True)
    assert check_bind("127.0.0.1", False) == ""


# -- the watcher ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "store"])
def test_watcher_publishes_the_tasks_a_cli_command_changed(repo: Repo, kind: str) -> None:
    """`SqliteProbe` (data_version) and `StoreProbe` (any Store, e.g. PostgreSQL) alike."""
    from taskgate.server.watch import StoreProbe
    from taskgate.store.sqlite import SqliteStore

    to_requirements(repo, "add-login")
    hub = Hub()
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    hub.bind(loop)
    ws_db = repo.path / ".taskgate" / "state.db"
    files = (repo.path / "todo.md",)
    watcher = Watcher(
        (lambda: SqliteProbe(ws_db, files))
        if kind == "sqlite"
        else (lambda: StoreProbe(SqliteStore(ws_db, read_only=True), files)),
        hub,
        interval=0.01,
    )

    async def subscribe() -> asyncio.Queue[dict[str, object] | None]:
        return hub.subscribe()

    queue = asyncio.run_coroutine_threadsafe(subscribe(), loop).result(5)
    watcher.start()
    try:
        import time

        time.sleep(0.2)  # the watcher took its first reading
        repo.ok("agent", "set", "add-login", "quality", "WORKING")

        async def next_message() -> dict[str, object] | None:
            return await asyncio.wait_for(queue.get(), 10)

        message = asyncio.run_coroutine_threadsafe(next_message(), loop).result(15)
        assert message is not None and message["tasks"] == ["add-login"]
        (repo.path / "todo.md").write_text((repo.path / "todo.md").read_text() + "\n")
        os.utime(repo.path / "todo.md", ns=(1, 1))
        message = asyncio.run_coroutine_threadsafe(next_message(), loop).result(15)
        assert message is not None and message["tasks"] == []
    finally:
        watcher.stop()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)


def test_extra_hosts_for_a_remote_dashboard() -> None:
    gate = Gate("t" * 43, allowed_hosts("0.0.0.0", 8000, ["box.lan:8000"]))
    assert gate.host_ok("box.lan:8000") and gate.origin_ok("http://box.lan:8000")
    assert not gate.host_ok("other.lan:8000")
