"""Spec workflows in the dashboard: pending clarification questions answered in the browser,
bound to the questions the page showed; the loop then goes on from the terminal."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import Repo
from server_helpers import dashboard

DESC = "Add user authentication with email and password"
FID = "001-user-authentication-email-password"


@pytest.fixture
def repo(repo: Repo) -> Repo:
    """conftest's repository with the scripted spec agents declared (issue 17)."""
    with (repo.path / "taskgate.toml").open("a", encoding="utf-8") as f:
        f.write('\n[spec]\nbackend = "scripted"\n')
    return repo


def _state(repo: Repo) -> bytes:
    return (repo.path / "specs" / FID / ".workflow" / "state.json").read_bytes()


def _form(page: str) -> dict[str, str]:
    fields = dict(re.findall(r'name="(csrf|iteration|shown)" value="([^"]*)"', page))
    assert set(fields) == {"csrf", "iteration", "shown"}, page
    return fields


def test_questions_are_answered_in_the_browser_and_the_loop_goes_on(
    repo: Repo, tmp_path: Path
) -> None:
    first = repo.run("spec", "new", DESC)
    assert first.code == 4, first.err  # no terminal: it waits for answers
    with dashboard(repo.path, tmp_path / "st") as d:
        listed = d.client.get("/api/specs").json()
        assert [(r["feature_id"], r["waiting_for_answers"]) for r in listed] == [(FID, True)]
        assert "your answers (3)" in d.client.get("/specs").text
        page = d.client.get(f"/specs/{FID}").text
        form = _form(page)
        assert form["shown"] == "C1.1,C1.2,C1.3" and 'id="send-answers"' in page
        before = _state(repo)
        # Missing an answer, a forged origin, questions that are not the pending ones: refused,
        # and the saved state is byte-identical.
        partial = d.post(f"/specs/{FID}/answer", {**form, "answer.C1.1": "staff"})
        assert partial.status_code == 400 and "C1.2" in partial.json()["error"]
        answers = {"answer.C1.1": "staff", "answer.C1.2": "90 days", "answer.C1.3": "retry"}
        forged = d.post(f"/specs/{FID}/answer", {**form, **answers}, origin="http://evil.test")
        assert forged.status_code == 403
        stale = d.post(f"/specs/{FID}/answer", {**form, **answers, "iteration": "7"})
        assert stale.status_code == 409 and "changed since this page" in stale.json()["error"]
        assert _state(repo) == before
        ok = d.post(f"/specs/{FID}/answer", {**form, **answers})
        assert ok.status_code == 200 and "taskgate spec resume" in ok.json()["message"], ok.text
        again = d.post(f"/specs/{FID}/answer", {**form, **answers})
        assert again.status_code == 409  # answered already: the page is stale
        assert "go on in your terminal" in d.client.get(f"/specs/{FID}").text
        assert d.server.log[-2]["outcome"] == "accepted"
        assert d.server.log[-2]["channel"] == "dashboard"
    status = repo.ok("spec", "status", FID, "--json").json()
    assert status["resume_point"] == "B2" and status["integrity"] == []
    resumed = repo.run("spec", "resume", FID, "--json")
    assert resumed.code == 4 and resumed.json()["current_iteration"] == 2  # C2.1 next
