"""The job board in a real browser: headless Chromium (Debian's ``chromium``) driven by
Playwright, against a real dev server, ``jobctl worker`` and ``jobctl api`` (the ``stack`` fixture).

Nothing here is skipped: without Playwright or Chromium the tests fail and say what to install.
Screenshots of each state land in the test's output directory (printed at the end).
"""

from __future__ import annotations

import importlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from jobctl.starter.dev.devserver import DevServer
from tests.helpers.api import Stack
from tests.helpers.poll import eventually_sync
from tests.helpers.processes import Api, cli_env

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Dialog, Locator, Page, Route

pytestmark = pytest.mark.devserver

CHROMIUM = os.environ.get("JOBS_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
NOTE = "from the browser test"
SECOND = 1000  # Playwright timeouts are in milliseconds


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    try:
        sync_api = importlib.import_module("playwright.sync_api")
    except ImportError:
        pytest.fail(
            "Playwright for Python is missing: pip install playwright (no browser download)"
        )
    if not Path(CHROMIUM).is_file():
        pytest.fail(
            f"no Chromium at {CHROMIUM}: apt-get install -y chromium (or set JOBS_CHROMIUM)"
        )
    with sync_api.sync_playwright() as playwright:
        launched: Browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Where the screenshots go: ``JOBS_BOARD_SHOTS`` if set, else a pytest temp dir."""
    wanted = os.environ.get("JOBS_BOARD_SHOTS")
    folder = Path(wanted) if wanted else tmp_path_factory.mktemp("board-shots")
    folder.mkdir(parents=True, exist_ok=True)
    yield folder
    print(f"\nboard screenshots: {folder}")


@pytest.fixture
def dialogs() -> list[str]:
    """The dialogs the page opened (a note prompt, a confirm), as "type: message"."""
    return []


@pytest.fixture
def page(browser: Browser, dialogs: list[str]) -> Iterator[Page]:
    """A fresh page; every dialog is accepted with NOTE as its answer, and a JavaScript error
    anywhere fails the test."""
    context = browser.new_context(viewport={"width": 1500, "height": 1000})
    opened = context.new_page()
    errors: list[str] = []

    def on_dialog(dialog: Dialog) -> None:
        dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.accept(NOTE)

    opened.on("pageerror", lambda err: errors.append(str(err)))
    opened.on("dialog", on_dialog)
    yield opened
    context.close()
    assert not errors, f"JavaScript errors on the board: {errors}"


def card(page: Page, column: str, name: str) -> Locator:
    return page.locator(f'.column[data-column="{column}"] .card[data-name="{name}"]')


def see(page: Page, column: str, name: str, timeout: float = 60) -> Locator:
    found = card(page, column, name).first
    found.wait_for(state="visible", timeout=timeout * SECOND)
    return found


def add_job(page: Page, **fields: str) -> None:
    """Fill the form (text fields by name, ``kind`` and ``failure`` as choices) and submit."""
    form = page.locator("#job-form")
    if "kind" in fields:
        form.locator(f'input[name="kind"][value="{fields.pop("kind")}"]').check()
    if "failure" in fields:
        form.locator('select[name="failure"]').select_option(fields.pop("failure"))
    for name, value in fields.items():
        form.locator(f'[name="{name}"]').fill(value)
    form.locator('button[type="submit"]').click()
    page.wait_for_function(
        "() => /scheduled /.test(document.querySelector('#form-message').textContent)",
        timeout=30 * SECOND,
    )


def event_for(page: Page, job_id: str, kind: str) -> Locator:
    return page.locator(f'#events li[data-job-id="{job_id}"][data-kind="{kind}"]')


def takes_note(http: httpx.Client, path: str) -> bool:
    operation = http.get("/openapi.json").json()["paths"][path]["post"]
    return "note" in str(operation.get("requestBody", {}))


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def test_board_answers_counts_and_at_most_50_cards_per_column(stack: Stack) -> None:
    http = stack.http
    name = unique("many")
    ids = [unique("many") for _ in range(60)]
    for job_id in ids:
        answer = http.post(
            "/jobs", json={"id": job_id, "name": name, "handler": "log", "delay": "1h"}
        )
        assert answer.status_code == 201, answer.text
    try:
        board = eventually_sync(  # visibility is eventually consistent
            lambda: http.get("/board").json(),
            lambda answer: answer["columns"]["scheduled"]["count"] >= 60,
            interval=0.5,
            what="60 scheduled on the board",
        )
        assert list(board["columns"]) == [
            "scheduled",
            "pending",
            "running",
            "retrying",
            "dead",
            "done",
            "cancelled",
        ]
        scheduled = board["columns"]["scheduled"]
        assert scheduled["count"] >= 60 and len(scheduled["cards"]) == 50 == board["limit"]
        assert scheduled["exact"] is True
        mine = [c for c in scheduled["cards"] if c["name"] == name]
        assert mine and all(c["kind"] == "job" and c["run_at"] for c in mine)
        assert board["web_ui"] == "http://localhost:8233" and board["namespace"] == "default"
        # Five lists and at most five counts, plus one describe per job in flight (<= 50).
        assert board["cost"]["rpcs"] <= 10 + min(board["in_flight"], 50)
        # The snapshot is shared for a second: a request right after costs Temporal nothing.
        while http.get("/board").json()["cost"]["cached"]:
            pass
        assert http.get("/board").json()["cost"]["cached"] is True
        # An extra "note" on a control is harmless (used once the API knows it, ignored before).
        paused = http.post(f"/jobs/{ids[0]}/pause", json={"note": NOTE})
        assert paused.status_code == 200, paused.text
        gzipped = http.get("/board", headers={"Accept-Encoding": "gzip"})
        assert gzipped.headers["content-encoding"] == "gzip" and gzipped.json()["columns"]
        page = http.get("/")
        assert page.status_code == 200 and "/board/board.js" in page.text
        assert http.get("/board/board.css").headers["content-type"].startswith("text/css")
        assert http.get("/board/nope.js").status_code == 404
    finally:
        for job_id in ids:
            http.delete(f"/jobs/{job_id}")


def test_poison_job_crosses_the_board_to_the_dlq_and_requeue_runs_it_again(
    stack: Stack, page: Page, shots: Path, dialogs: list[str]
) -> None:
    name = unique("poison")
    page.goto(f"{stack.api.url}/")
    page.wait_for_function("() => /updated/.test(document.querySelector('#refresh').textContent)")
    add_job(
        page,
        name=name,
        kind="delay",
        delay="4",
        seconds="2",
        failure="poison",
        max_attempts="3",
        backoff_base="1",
    )
    scheduled = see(page, "scheduled", name, timeout=15)
    job_id = scheduled.get_attribute("data-job-id")
    assert job_id and job_id.startswith("job-")
    link = scheduled.locator("a").get_attribute("href")
    assert link == f"http://localhost:8233/namespaces/default/workflows/{job_id}"
    page.screenshot(path=shots / "1-scheduled.png", full_page=True)

    running = see(page, "running", name)
    assert "attempt 1 of 3" in running.inner_text()
    page.screenshot(path=shots / "2-running.png", full_page=True)

    retrying = see(page, "retrying", name)
    text = retrying.inner_text()
    assert "of 3" in text and "demo failure on attempt" in text
    page.screenshot(path=shots / "3-retrying.png", full_page=True)

    dead = see(page, "dead", name)
    text = dead.inner_text()
    assert "3 attempt(s)" in text and "demo failure on attempt 3 (always_fail)" in text
    page.screenshot(path=shots / "4-dead.png", full_page=True)
    for kind in ("scheduled", "started", "failed attempt 1", "backing off", "parked"):
        assert event_for(page, job_id, kind).count() >= 1, f"no {kind!r} event"

    dead.locator('button[data-action="requeue"]').click()
    see(page, "running", name)
    page.screenshot(path=shots / "5-requeued-running.png", full_page=True)
    assert event_for(page, job_id, "requeued").count() >= 1
    mine = page.locator(f'#events li[data-job-id="{job_id}"][data-kind="you: requeue"]')
    assert mine.count() == 1
    if takes_note(stack.http, "/dlq/{job_id}/requeue"):
        assert NOTE in mine.inner_text()
        assert any(d.startswith("prompt") for d in dialogs)

    # Round 2 fails the same way; discard it from the board, and it leaves the DLQ.
    again = page.locator(f'.column[data-column="dead"] .card[data-job-id="{job_id}"]')
    page.wait_for_function(
        """id => {
            const dead = document.querySelector('.column[data-column="dead"]');
            const c = [...dead.querySelectorAll('.card')].find(n => n.dataset.jobId === id);
            return c && /round 2/.test(c.textContent);
        }""",
        arg=job_id,
        timeout=60 * SECOND,
    )
    again.locator('button[data-action="discard"]').click()
    again.wait_for(state="detached", timeout=30 * SECOND)
    report = stack.http.get(f"/jobs/{job_id}").json()
    assert report["round"] == 2 and len(report["attempts"]) == 6


def test_cron_lite_slots_complete_in_done(stack: Stack, page: Page, shots: Path) -> None:
    name = unique("cron")
    page.goto(f"{stack.api.url}/")
    add_job(
        page,
        name=name,
        kind="cron",
        cron="*/2 * * * * *",
        timezone="UTC",
        seconds="0",
        failure="succeed",
    )
    # The cron's own card: a slot's job, started up to 10 s ahead, waits in the same column
    # under the same name (its id is "<cron id>@<slot>").
    cron = page.locator(
        f'.column[data-column="scheduled"] .card[data-name="{name}"]:not([data-job-id*="@"])'
    ).first
    cron.wait_for(state="visible", timeout=15 * SECOND)
    cron_id = cron.get_attribute("data-job-id")
    assert cron_id and "cron" in cron.inner_text() and "next slot" in cron.inner_text()
    try:
        page.wait_for_function(
            f"""() => document.querySelectorAll(
                '.column[data-column="done"] .card[data-name="{name}"]').length >= 3""",
            timeout=60 * SECOND,
        )
        slots = card(page, "done", name)
        assert all(
            (slots.nth(i).get_attribute("data-job-id") or "").startswith(f"{cron_id}@")
            for i in range(slots.count())
        )
        page.screenshot(path=shots / "6-cron-done.png", full_page=True)
        assert event_for(page, slots.first.get_attribute("data-job-id") or "", "done").count()

        cron.locator('button[data-action="pause"]').click()
        paused = page.locator(f'.card[data-job-id="{cron_id}"] .badge.paused')
        paused.wait_for(timeout=30 * SECOND)
        page.locator(f'.card[data-job-id="{cron_id}"] button[data-action="cancel"]').click()
        see(page, "cancelled", name, timeout=30)  # the board's place for cancelled jobs
        # Nothing of it left waiting (a slot started ahead before the pause runs, then ends).
        page.wait_for_function(
            f"""() => document.querySelectorAll(
                '.column[data-column="scheduled"] .card[data-name="{name}"]').length === 0""",
            timeout=15 * SECOND,
        )
    finally:
        stack.http.delete(f"/jobs/{cron_id}")


def test_pause_resume_trigger_from_a_card(stack: Stack, page: Page) -> None:
    name = unique("later")
    page.goto(f"{stack.api.url}/")
    add_job(page, name=name, kind="delay", delay="3600", seconds="0", failure="succeed")
    later = see(page, "scheduled", name, timeout=15)
    assert "runs in 60m" in later.inner_text()
    later.locator('button[data-action="pause"]').click()
    see(page, "scheduled", name).locator(".badge.paused").wait_for(timeout=30 * SECOND)
    see(page, "scheduled", name).locator('button[data-action="resume"]').click()
    see(page, "scheduled", name).locator('button[data-action="pause"]').wait_for(
        timeout=30 * SECOND
    )
    see(page, "scheduled", name).locator('button[data-action="trigger"]').click()
    see(page, "done", name)
    refused = page.locator("#form-message")
    assert "refused" not in refused.inner_text()


def test_the_page_is_public_the_board_needs_the_token(dev_server: DevServer, page: Page) -> None:
    token = "board-s3cret"
    api = Api(cli_env(dev_server.address, "board-auth", JOBS_API_TOKEN=token)).start()
    try:
        with httpx.Client(base_url=api.url, timeout=30) as http:
            for path in ("/", "/board/board.js", "/board/board.css"):
                assert http.get(path).status_code == 200, path
            assert http.get("/board").status_code == 401
            good = {"Authorization": f"Bearer {token}"}
            assert http.get("/board", headers=good).status_code == 200
        page.goto(f"{api.url}/")
        banner = page.locator("#banner")
        banner.wait_for(state="visible", timeout=15 * SECOND)
        assert "bearer token" in banner.inner_text()
        page.fill("#token", token)
        page.click("#token-form button")
        page.wait_for_function(
            "() => /updated/.test(document.querySelector('#refresh').textContent)",
            timeout=15 * SECOND,
        )
        assert page.evaluate("localStorage.getItem('jobs.board.token')") == token
        assert banner.is_hidden()
    finally:
        api.stop()


def test_the_api_docs_page_renders_with_no_request_beyond_the_api(stack: Stack, page: Page) -> None:
    """Issue 42: /docs loads Swagger UI from files installed with the package: every request
    the page makes goes to the API itself (any other is refused here, as offline), and the
    operations render."""
    api = httpx.URL(stack.api.url)
    elsewhere: list[str] = []

    def only_the_api(route: Route) -> None:
        url = httpx.URL(route.request.url)
        if (url.host, url.port) == (api.host, api.port):
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    page.route("**/*", only_the_api)
    page.goto(f"{stack.api.url}/docs")
    operation = page.locator(".opblock-summary-path", has_text="/jobs/batch").first
    operation.wait_for(state="visible", timeout=30 * SECOND)
    assert elsewhere == []
    assert page.locator(".opblock").count() > 10
