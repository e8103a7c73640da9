"""The dashboard's routes, API and security, in-process (Starlette TestClient) on real repos."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SRC, Repo, make_repo
from flow import PASSING_BUILD, to_awaiting, to_synthesis
from server_helpers import BASE, dashboard, fingerprint

TASK = "add-login"


def _status(repo: Repo, task: str = TASK) -> dict:  # type: ignore[type-arg]
    return repo.ok("status", task, "--json").json()  # type: ignore[no-any-return]


def _at_plan(repo: Repo) -> None:
    to_synthesis(repo, TASK)
    repo.ok("present", TASK)


@pytest.fixture
def brepo(tmp_path: Path) -> Repo:
    """A repository whose validation passes (for the change review)."""
    return make_repo(tmp_path / "repo", config=PASSING_BUILD)


def _at_changes(repo: Repo) -> None:
    to_awaiting(repo, TASK)
    repo.ok("present", TASK)


# -- imports -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv", [["status"], ["todo"], ["--help"], ["hook", "PreToolUse"], ["hook", "PostToolUse"]]
)
def test_commands_that_do_not_serve_import_no_web_stack(repo: Repo, argv: list[str]) -> None:
    fixture = Path(__file__).parent / "fixtures" / "hooks" / "pre_tool_use_write.json"
    stdin = fixture.read_text().replace("REPO", str(repo.path))
    code = (
        "import sys\nfrom taskgate.cli.main import main\n"
        f"try:\n    main({[*argv]!r})\nexcept SystemExit:\n    pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('starlette', 'uvicorn', 'jinja2', 'anyio', 'markupsafe') "
        "or m.startswith('taskgate.server'))\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC), "TASKGATE_SESSION": "s1"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=repo.path, env=env, input=stdin,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert "HEAVY []" in proc.stderr, proc.stderr


# -- login and the secret ------------------------------------------------------------------------


def test_login_sets_a_strict_httponly_cookie_and_wrong_tokens_get_nothing(
    repo: Repo, tmp_path: Path
) -> None:
    with dashboard(repo.path, tmp_path / "st", login=False) as d:
        assert d.client.get("/").status_code == 401
        bad = d.client.get("/login?token=" + "x" * 43)
        assert bad.status_code == 403 and "set-cookie" not in bad.headers
        assert d.client.get("/").status_code == 401
        good = d.client.get(f"/login?token={d.token}")
        cookie = good.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and d.token not in cookie
        page = d.client.get("/")
        assert page.status_code == 200 and "add-login" in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]
    secret_file = tmp_path / "st" / "secret"
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600


def test_api_needs_the_cookie_or_the_bearer_secret(repo: Repo, tmp_path: Path) -> None:
    with dashboard(repo.path, tmp_path / "st", login=False) as d:
        assert d.client.get("/api/board").status_code == 401
        assert d.client.get("/events").status_code == 401
        wrong = d.client.get("/api/board", headers={"authorization": "Bearer nope"})
        assert wrong.status_code == 401
        r = d.client.get("/api/board", headers={"authorization": f"Bearer {d.token}"})
        assert r.status_code == 200 and r.json()["columns"][0]["state"] == "NOT_STARTED"


@pytest.mark.parametrize("host", ["evil.example:7457", "127.0.0.1:9", "attacker.test", ""])
def test_a_foreign_host_header_is_refused_before_any_route(
    repo: Repo, tmp_path: Path, host: str
) -> None:
    """DNS rebinding: a page on another name that resolves to 127.0.0.1 sends its own Host."""
    with dashboard(repo.path, tmp_path / "st") as d:
        for path in ("/", f"/login?token={d.token}", "/api/board"):
            r = d.client.get(path, headers={"host": host})
            assert r.status_code == 421, (path, r.status_code)
            assert "set-cookie" not in r.headers


# -- board and API -------------------------------------------------------------------------------


def test_board_shows_every_task_with_availability_and_the_waiting_checkpoint(
    repo: Repo, tmp_path: Path
) -> None:
    _at_plan(repo)
    with dashboard(repo.path, tmp_path / "st") as d:
        board = d.client.get("/api/board").json()
        by_col = {c["state"]: {t["task"]: t for t in c["tasks"]} for c in board["columns"]}
        card = by_col["SYNTHESIS"][TASK]
        assert card["waiting_for"] == "plan" and card["session_id"] == "s1"
        assert card["risk_level"] and {a["agent"] for a in card["agents"]}
        assert by_col["NOT_STARTED"]["needs-login"]["availability"] == "blocked"
        assert by_col["NOT_STARTED"]["fix-typo"]["availability"] == "available"
        assert board["waiting"] == [TASK]
        html = d.client.get("/").text
        assert 'id="col-SYNTHESIS"' in html and "plan approval waits for you" in html


def test_task_api_exports_the_whole_record(brepo: Repo, tmp_path: Path) -> None:
    _at_changes(brepo)
    with dashboard(brepo.path, tmp_path / "st") as d:
        rec = d.client.get(f"/api/tasks/{TASK}").json()
    assert rec["state"] == "AWAITING_USER_APPROVAL"
    assert rec["checkpoint"]["kind"] == "changes" and rec["checkpoint"]["approvable"]
    assert rec["checkpoint"]["bound_to"] == rec["change"]["head"]
    assert [f["path"] for f in rec["change"]["files"]] == ["src/auth/login.py"]
    assert {e["kind"] for e in rec["events"]} >= {"transition", "presentation", "validation"}
    assert [t["to"] for t in rec["transitions"]][-1] == "AWAITING_USER_APPROVAL"
    assert rec["audit"]["verdict"] in ("PASSED", "FAILED") and rec["audit"]["checks"]
    assert rec["recovery"]["hint"] and rec["validations"][-1]["success"] is True
    assert {v["decision"] for v in rec["verdicts"]} == {"APPROVED"}


def test_task_page_renders_timeline_plan_hash_and_coloured_diff(
    brepo: Repo, tmp_path: Path
) -> None:
    _at_changes(brepo)
    with dashboard(brepo.path, tmp_path / "st") as d:
        html = d.client.get(f"/tasks/{TASK}").text
        rec = d.client.get(f"/api/tasks/{TASK}").json()
    assert '<svg class="timeline"' in html and "agent quality" in html
    assert rec["plan"]["plan_hash"] in html
    assert "src/auth/login.py" in html and '<span class="k">def</span>' in html
    assert 'name="bound_to" value="' + rec["change"]["head"] + '"' in html


def test_markdown_from_task_md_is_escaped(repo: Repo, tmp_path: Path) -> None:
    _at_plan(repo)
    task_md = repo.task_dir(TASK) / "task.md"
    task_md.write_text(
        task_md.read_text() + "\n<script>alert(1)</script>\n[x](javascript:alert(2))\n"
    )
    with dashboard(repo.path, tmp_path / "st") as d:
        html = d.client.get(f"/tasks/{TASK}").text
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)" in html
    assert 'href="javascript' not in html


def test_unknown_and_not_started_tasks(repo: Repo, tmp_path: Path) -> None:
    with dashboard(repo.path, tmp_path / "st") as d:
        assert d.client.get("/tasks/no-such-task").status_code == 404
        assert d.client.get("/tasks/..%2Fetc").status_code == 404
        page = d.client.get("/tasks/needs-login")
        assert page.status_code == 200 and "blocked" in page.text and "add-login" in page.text
        assert d.client.get("/api/tasks/needs-login").status_code == 404


# -- the checkpoints -----------------------------------------------------------------------------


def test_approve_plan_moves_to_implementation_with_provenance_dashboard(
    repo: Repo, tmp_path: Path
) -> None:
    _at_plan(repo)
    with dashboard(repo.path, tmp_path / "st") as d:
        page = d.client.get(f"/tasks/{TASK}").text
        bound = d.bound(page)
        r = d.post(f"/tasks/{TASK}/approve", {"csrf": d.csrf(page), "kind": "plan",
                                               "bound_to": bound})  # fmt: skip
        assert r.status_code == 200, r.text
        assert r.json()["state_after"] == "IMPLEMENTATION"
    status = _status(repo)
    assert status["state"] == "IMPLEMENTATION"
    [approval] = [a for a in status["approvals"] if a["kind"] == "plan"]
    assert approval["provenance"] == "dashboard" and approval["bound_to"] == bound
    audit = repo.run("audit", TASK, "--json").json()
    check = next(c for t in audit["tasks"] for c in t["checks"] if "approval" in c["id"])
    assert check["passed"], check
    log = [
        json.loads(line) for line in (tmp_path / "st" / "dashboard.log").read_text().splitlines()
    ]
    assert log[-1]["at"].endswith("Z") and log[-1]["outcome"] == "accepted"
    assert log[-1]["channel"] == "dashboard" and log[-1]["bound_to"] == bound
    assert stat.S_IMODE((tmp_path / "st" / "dashboard.log").stat().st_mode) == 0o600


def test_approval_is_bound_to_what_the_page_showed(repo: Repo, tmp_path: Path) -> None:
    _at_plan(repo)
    with dashboard(repo.path, tmp_path / "st") as d:
        page = d.client.get(f"/tasks/{TASK}").text
        csrf, bound = d.csrf(page), d.bound(page)
        # The plan changes after the page was rendered: the old form must not approve it.
        task_md = repo.task_dir(TASK) / "task.md"
        task_md.write_text(task_md.read_text() + "\n### Extra step\n- also delete the database\n")
        before = fingerprint(repo.path)
        r = d.post(f"/tasks/{TASK}/approve", {"csrf": csrf, "kind": "plan", "bound_to": bound})
        assert r.status_code == 409 and "changed since this page showed it" in r.json()["error"]
        assert fingerprint(repo.path) == before
        # A made-up hash is refused too; and the page now says why it cannot be approved.
        r = d.post(f"/tasks/{TASK}/approve", {"csrf": csrf, "kind": "plan", "bound_to": "0" * 64})
        assert r.status_code == 409 and fingerprint(repo.path) == before
        fresh = d.client.get(f"/tasks/{TASK}").text
        assert 'id="approve"' not in fresh and "changed after it was presented" in fresh
    assert _status(repo)["state"] == "SYNTHESIS" and not _status(repo)["approvals"]


def test_a_new_commit_voids_the_change_review_form(brepo: Repo, tmp_path: Path) -> None:
    from flow import commit_in

    _at_changes(brepo)
    with dashboard(brepo.path, tmp_path / "st") as d:
        page = d.client.get(f"/tasks/{TASK}").text
        csrf, bound = d.csrf(page), d.bound(page)
        commit_in(brepo.worktree(TASK), "src/auth/extra.py", "x = 1\n", "[agent:quality] sneak")
        before = fingerprint(brepo.path)
        r = d.post(f"/tasks/{TASK}/approve", {"csrf": csrf, "kind": "changes", "bound_to": bound})
        assert r.status_code == 409 and fingerprint(brepo.path) == before
    assert not _status(brepo)["checkpoint"]["approved"]


def test_request_changes_at_the_change_review_goes_back_with_the_exact_text(
    brepo: Repo, tmp_path: Path
) -> None:
    _at_changes(brepo)
    # Words a keyword classifier would read as an approval: the button decides, not keywords.
    text = "Looks good, approved except: please rename login() to sign_in() <b>now</b>"
    with dashboard(brepo.path, tmp_path / "st") as d:
        page = d.client.get(f"/tasks/{TASK}").text
        r = d.post(
            f"/tasks/{TASK}/request-changes",
            {"csrf": d.csrf(page), "kind": "changes", "bound_to": d.bound(page), "text": text},
        )
        assert r.status_code == 200, r.text
        assert r.json()["state_after"] == "IMPLEMENTATION"
        html = d.client.get(f"/tasks/{TASK}").text
        assert "please rename login() to sign_in() &lt;b&gt;now&lt;/b&gt;" in html
    status = _status(brepo)
    assert status["state"] == "IMPLEMENTATION"
    [entry] = status["feedback"]
    assert entry["text"] == text and entry["provenance"] == "dashboard"
    assert entry["kind"] == "changes" and not [a for a in status["approvals"] if not a["revoked_at"]
                                                and a["kind"] == "changes"]  # fmt: skip


def test_request_changes_on_the_plan_stays_in_synthesis(repo: Repo, tmp_path: Path) -> None:
    _at_plan(repo)
    with dashboard(repo.path, tmp_path / "st") as d:
        page = d.client.get(f"/tasks/{TASK}").text
        form = {"csrf": d.csrf(page), "kind": "plan", "bound_to": d.bound(page)}
        before = fingerprint(repo.path)
        empty = d.post(f"/tasks/{TASK}/request-changes", {**form, "text": "   "})
        assert empty.status_code == 400 and fingerprint(repo.path) == before
        r = d.post(f"/tasks/{TASK}/request-changes", {**form, "text": "Split the plan in two"})
        assert r.status_code == 200 and r.json()["state_after"] == "SYNTHESIS"
    status = _status(repo)
    assert status["feedback"][-1]["text"] == "Split the plan in two"
    assert status["feedback"][-1]["kind"] == "plan"


def test_no_form_post_redirects_back_to_the_task(repo: Repo, tmp_path: Path) -> None:
    """Without JavaScript the form posts and lands on the task page again."""
    _at_plan(repo)
    with dashboard(repo.path, tmp_path / "st") as d:
        page = d.client.get(f"/tasks/{TASK}").text
        r = d.post(
            f"/tasks/{TASK}/approve",
            {"csrf": d.csrf(page), "kind": "plan", "bound_to": d.bound(page)},
            json_reply=False,
        )
        assert r.status_code == 303 and r.headers["location"] == f"/tasks/{TASK}?flash=approved"
        assert "Approved." in d.client.get(r.headers["location"]).text


# -- CSRF and friends: every refusal changes nothing ---------------------------------------------


ATTACKS = ("no-origin", "wrong-origin", "null-origin", "no-csrf", "wrong-csrf", "cross-site",
           "text-plain", "get", "other-session", "no-cookie")  # fmt: skip


def test_forged_requests_are_refused_and_change_nothing(repo: Repo, tmp_path: Path) -> None:
    """Every way round the form: refused (401/403/405), logged, the store unchanged."""
    _at_plan(repo)
    with dashboard(repo.path, tmp_path / "st") as d:
        page = d.client.get(f"/tasks/{TASK}").text
        form = {"csrf": d.csrf(page), "kind": "plan", "bound_to": d.bound(page)}
        path = f"/tasks/{TASK}/approve"
        before = fingerprint(repo.path)
        for attack in ATTACKS:
            logged = len(d.server.log)
            if attack == "no-cookie":
                d.client.cookies.clear()
                r = d.post(path, form)
            elif attack == "no-origin":
                r = d.post(path, form, origin=None)
            elif attack == "wrong-origin":
                r = d.post(path, form, origin="http://evil.example")
            elif attack == "null-origin":
                r = d.post(path, form, origin="null")
            elif attack == "no-csrf":
                r = d.post(path, {k: v for k, v in form.items() if k != "csrf"})
            elif attack == "wrong-csrf":
                r = d.post(path, {**form, "csrf": "forged"})
            elif attack == "cross-site":
                r = d.post(path, form, **{"sec-fetch-site": "cross-site"})
            elif attack == "text-plain":
                body = "&".join(f"{k}={v}" for k, v in form.items())
                r = d.client.post(path, content=body, headers={"content-type": "text/plain",
                                                               "origin": BASE})  # fmt: skip
            elif attack == "other-session":  # a second login's cookie with the first's token
                other = d.client.get(f"/login?token={d.token}")
                assert other.status_code == 200
                r = d.post(path, form)
            else:
                r = d.client.get(path + "?" + "&".join(f"{k}={v}" for k, v in form.items()))
            assert r.status_code in (401, 403, 405), (attack, r.status_code, r.text)
            assert fingerprint(repo.path) == before, attack
            if attack != "get":
                assert len(d.server.log) == logged + 1, attack
                entry = d.server.log[-1]
                assert entry["outcome"] == "refused" and entry["channel"] == "dashboard", attack
    assert _status(repo)["state"] == "SYNTHESIS" and not _status(repo)["approvals"]
    lines = (tmp_path / "st" / "dashboard.log").read_text().splitlines()
    assert len(lines) == len(ATTACKS) - 1


def test_a_damaged_store_is_shown_with_what_to_do(repo: Repo, tmp_path: Path) -> None:
    from conftest import edit_store
    from flow import to_requirements

    to_requirements(repo, TASK)
    edit_store(repo, "UPDATE tasks SET state = 'BOGUS' WHERE name = ?", TASK)
    with dashboard(repo.path, tmp_path / "st") as d:
        board = d.client.get("/api/board").json()
        [column] = [c for c in board["columns"] if c["state"] == "UNREADABLE"]
        assert [t["task"] for t in column["tasks"]] == [TASK]
        assert "unreadable state: taskgate recover" in d.client.get("/").text
        rec = d.client.get(f"/api/tasks/{TASK}").json()
        assert rec["recovery"]["diagnosis"]["corrupt"] is True
        edit_store(repo, "UPDATE tasks SET extra = 'not json' WHERE name = ?", TASK)
        page = d.client.get("/")
        assert page.status_code == 503 and "hint: run 'taskgate recover'" in page.text
        api = d.client.get("/api/board")
        assert api.status_code == 503 and api.json()["exit_code"] == 5


def test_a_change_approved_in_the_dashboard_completes(brepo: Repo, tmp_path: Path) -> None:
    _at_changes(brepo)
    with dashboard(brepo.path, tmp_path / "st") as d:
        page = d.client.get(f"/tasks/{TASK}").text
        form = {"csrf": d.csrf(page), "kind": "changes", "bound_to": d.bound(page)}
        r = d.post(f"/tasks/{TASK}/approve", form)
        assert r.status_code == 200 and r.json()["state_after"] == "AWAITING_USER_APPROVAL"
        after = d.client.get(f"/tasks/{TASK}").text
        assert 'id="approve"' not in after and "the change is approved" in after
    brepo.ok("complete", TASK)
    status = _status(brepo)
    assert status["state"] == "COMPLETE"
    assert [a["provenance"] for a in status["approvals"] if a["kind"] == "changes"] == ["dashboard"]


def test_board_follows_todo_md_and_the_changelog(repo: Repo, tmp_path: Path) -> None:
    """The board's caches never hide a change of todo.md, changelog.md or the store."""
    from flow import to_requirements

    with dashboard(repo.path, tmp_path / "st") as d:

        def cards() -> dict[str, dict]:  # type: ignore[type-arg]
            board = d.client.get("/api/board").json()
            return {t["task"]: t for c in board["columns"] for t in c["tasks"]}

        assert cards()["needs-login"]["availability"] == "blocked"
        todo = repo.path / "todo.md"
        todo.write_text(todo.read_text() + "\n## late-task: Added later\n- Purpose: p\n"
                        "- Scope: s\n- Components: c\n")  # fmt: skip
        assert cards()["late-task"]["availability"] == "available"
        to_requirements(repo, TASK)
        assert cards()[TASK]["state"] == "REQUIREMENTS"
        (repo.path / "changelog.md").write_text("# Changelog\n\n## add-login: done\n")
        assert cards()["needs-login"]["availability"] == "available"
        todo.write_text("# Tasks\n\n## a: x\n## a: again\n")
        board = d.client.get("/api/board").json()
        assert board["todo_error"] and TASK in {t["task"] for c in board["columns"]
                                                for t in c["tasks"]}  # fmt: skip
