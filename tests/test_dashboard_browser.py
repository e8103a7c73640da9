"""The dashboard in a real browser: Debian's chromium, headless, driven by Selenium through
Debian's chromedriver (nothing downloaded). The scenario of issue 19 on a `taskgate demo`
repository stopped at the plan checkpoint.

Screenshots of the board and of a task page are saved as test artifacts (in
$TASKGATE_ARTIFACTS, default the test's tmp dir); with TASKGATE_SCREENSHOTS=docs they also
replace docs/dashboard-board.png and docs/dashboard-task.png.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import SRC
from server_helpers import Running, fingerprint, start_server

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
TASK = "add-slugify"
DOCS = Path(__file__).resolve().parent.parent / "docs"

pytestmark = pytest.mark.skipif(
    not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
    reason="needs Debian's chromium and chromium-driver (scripts/setup-tests.sh installs them)",
)


def _taskgate(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    env.pop("TASKGATE_SESSION", None)
    return subprocess.run(
        [sys.executable, "-m", "taskgate", *args],
        cwd=repo, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    """`taskgate demo` without --yes: it stops at the plan checkpoint (exit 4)."""
    repo = tmp_path / "textkit"
    result = _taskgate(tmp_path, "demo", "--dir", str(repo))
    assert result.returncode == 4 and "waits for your plan approval" in result.stderr, result.stderr
    return repo


@pytest.fixture
def server(demo: Path, tmp_path: Path) -> Iterator[Running]:
    running = start_server(demo, tmp_path / "state")
    try:
        yield running
    finally:
        running.stop()
        err = running.proc.stderr.read() if running.proc.stderr else ""
        print("server stderr:", err)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        "--window-size=1400,1000",
    ):
        options.add_argument(flag)  # fmt: skip
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def _artifact(driver: Any, name: str, tmp_path: Path, *, full_height: bool = False) -> None:
    directory = Path(os.environ.get("TASKGATE_ARTIFACTS") or tmp_path / "artifacts")
    directory.mkdir(parents=True, exist_ok=True)
    if full_height:
        height = driver.execute_script("return document.body.scrollHeight")
        driver.set_window_size(1400, min(int(height) + 120, 2600))
    target = directory / f"dashboard-{name}.png"
    driver.save_screenshot(str(target))
    if os.environ.get("TASKGATE_SCREENSHOTS") == "docs":
        shutil.copyfile(target, DOCS / target.name)
    if full_height:
        driver.set_window_size(1400, 1000)


def _wait_state(driver: Any, state: str, timeout: float = 60) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, timeout, poll_frequency=0.1).until(
        lambda d: d.execute_script("return document.getElementById('state').textContent") == state,
        message=f"the page never showed {state}",
    )


def _status(repo: Path) -> dict[str, Any]:
    import json

    result = _taskgate(repo, "status", TASK, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def _post(url: str, data: str, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url, data=data.encode(), method="POST", headers={
        "Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json",
        **headers})  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_person_approves_and_requests_changes_in_the_browser(
    demo: Path, server: Running, browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    # The board: the task waits in SYNTHESIS for the plan approval.
    browser.get(server.login_url())  # the login page sets the cookie and opens the board
    WebDriverWait(browser, 30).until(
        lambda d: d.find_elements(
            By.CSS_SELECTOR, "#col-SYNTHESIS article[data-task='add-slugify']"
        )
    )
    WebDriverWait(browser, 30).until(lambda d: d.find_element(By.ID, "live").text == "live")
    assert "plan approval waits for you" in browser.find_element(By.ID, "col-SYNTHESIS").text
    assert browser.find_element(By.CSS_SELECTOR, "#col-NOT_STARTED [data-task='polish-guide']")
    _artifact(browser, "board", tmp_path)
    browser.find_element(By.ID, "filter").send_keys("polish")
    slug_card = "article[data-task='add-slugify']"
    assert not browser.find_element(By.CSS_SELECTOR, slug_card).is_displayed()
    assert browser.find_element(By.CSS_SELECTOR, "article[data-task='polish-guide']").is_displayed()
    browser.find_element(By.ID, "filter").clear()
    browser.find_element(By.ID, "filter").send_keys(" ")
    assert browser.find_element(By.CSS_SELECTOR, slug_card).is_displayed()

    # The task page: the plan and its hash, exactly what the store says was presented.
    browser.find_element(By.CSS_SELECTOR, "#col-SYNTHESIS a.name").click()
    _wait_state(browser, "SYNTHESIS")
    shown = browser.find_element(By.ID, "bound").text
    assert shown == browser.find_element(By.ID, "plan-hash").text and len(shown) == 64
    assert "Implementation Plan" in browser.find_element(By.ID, "plan-text").text
    browser.execute_script("window.__sameDocument = 'yes'")

    # Approve: the state advances live, without a reload.
    browser.find_element(By.ID, "approve").click()
    _wait_state(browser, "IMPLEMENTATION")
    assert browser.execute_script("return window.__sameDocument") == "yes"
    [approval] = _status(demo)["approvals"]
    assert approval["provenance"] == "dashboard" and approval["bound_to"] == shown

    # `taskgate run` drives it to the change review; the open page follows live.
    run = _taskgate(demo, "--session", "demo", "run", TASK)
    assert run.returncode == 4 and "change approval" in run.stderr, run.stderr
    _wait_state(browser, "AWAITING_USER_APPROVAL")
    assert browser.execute_script("return window.__sameDocument") == "yes"
    head = _status(demo)["checkpoint"]["commit_sha"]
    assert browser.find_element(By.ID, "bound").text == head
    assert "src/textkit/slugify.py" in browser.find_element(By.ID, "change").text
    # The plan was approved already: fold it, so the screenshot shows the change under review.
    browser.execute_script("document.getElementById('plan-text').closest('details').open = false")
    _artifact(browser, "task", tmp_path, full_height=True)

    # Forged requests from outside the page: refused, and the store is unchanged.
    form = f"kind=changes&bound_to={head}&text=forged&csrf=x"
    cookie = "; ".join(f"{c['name']}={c['value']}" for c in browser.get_cookies())
    before = fingerprint(demo)
    url = f"{server.base}/tasks/{TASK}/request-changes"
    assert _post(url, form, {"Origin": server.base}) == 401  # no cookie
    assert _post(url, form, {"Origin": "http://evil.example", "Cookie": cookie}) == 403
    assert fingerprint(demo) == before

    # Request changes with text: back to IMPLEMENTATION, the words in the agents' feedback.
    text = "Please also strip punctuation like '!' and '?' from slugs."
    browser.find_element(By.ID, "changes-text").send_keys(text)
    browser.find_element(By.ID, "request-changes").click()
    _wait_state(browser, "IMPLEMENTATION")
    assert browser.execute_script("return window.__sameDocument") == "yes"
    assert text in browser.find_element(By.ID, "feedback-list").text
    status = _status(demo)
    assert status["feedback"][-1]["text"] == text
    assert status["feedback"][-1]["provenance"] == "dashboard"
    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not severe, severe


class _EvilSite:
    """Another page on this machine (same site as the dashboard: same host, other port) that
    tries to approve the plan from the person's browser."""

    def __init__(self, html: str) -> None:
        import http.server
        import threading

        body = html.encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_other_pages_in_the_same_browser_cannot_approve(
    demo: Path, server: Running, browser: Any, tmp_path: Path
) -> None:
    """CSRF from a page on another local port (same site: the Strict cookie IS sent), and DNS
    rebinding (a name that resolves to 127.0.0.1): refused, the store unchanged."""
    import json
    import time

    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(server.login_url())
    WebDriverWait(browser, 30).until(lambda d: d.find_elements(By.ID, "col-SYNTHESIS"))
    record = json.loads(urllib.request.urlopen(urllib.request.Request(
        f"{server.base}/api/tasks/{TASK}", headers={"Authorization": f"Bearer {server.token}"}
    )).read())  # fmt: skip
    plan_hash = record["checkpoint"]["bound_to"]
    target = f"{server.base}/tasks/{TASK}/approve"
    evil = _EvilSite(
        f"""<html><body><form id="f" method="post" action="{target}">
        <input name="kind" value="plan"><input name="bound_to" value="{plan_hash}">
        <input name="csrf" value="guessed"></form>
        <script>
        fetch("{target}", {{method: "POST", mode: "no-cors", credentials: "include",
          headers: {{"Content-Type": "application/x-www-form-urlencoded"}},
          body: "kind=plan&bound_to={plan_hash}&csrf=guessed"}});
        setTimeout(function () {{ document.getElementById("f").submit(); }}, 300);
        </script></body></html>"""
    )
    before = fingerprint(demo)
    try:
        browser.get(evil.url)
        log = next(server.state_dir.glob("serve/*")) / "dashboard.log"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            lines = log.read_text().splitlines() if log.exists() else []
            if len(lines) >= 2:
                break
            time.sleep(0.1)
        entries = [json.loads(line) for line in lines]
        assert len(entries) >= 2 and {e["outcome"] for e in entries} == {"refused"}, entries
        assert all("Origin" in e["reason"] or "CSRF" in e["reason"] for e in entries), entries
        # DNS rebinding: a name that resolves to 127.0.0.1 (Chromium maps *.localhost to the
        # loopback address itself, no DNS needed); the page's Host is refused.
        port = server.base.rsplit(":", 1)[1]
        browser.get(f"http://rebind.localhost:{port}/")
        assert "answers only to its own address" in browser.find_element(By.TAG_NAME, "body").text
    finally:
        evil.close()
    assert fingerprint(demo) == before
    assert _status(demo)["state"] == "SYNTHESIS" and not _status(demo)["approvals"]
