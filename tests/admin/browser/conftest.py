"""Browser tests: Playwright for Python drives Debian's Chromium, headless, against
pytest-django's live server.

The browser is the system's, never one that ``playwright install`` downloads (that needs a
CDN this project cannot reach): ``$RATELIMITS_CHROMIUM`` (a path or a command name) when
set, else ``chromium`` or ``chromium-browser`` on ``PATH`` (Debian: ``apt-get install
chromium``; ``.ci/run`` installs it).

Without a browser the tests are skipped with the reason, except when ``CI`` is set (CI
runs with ``CI=true``): there a missing browser is a failure, so a broken install cannot
pass as a green run that tested nothing in a browser.

The live server is pytest-django's ``live_server``: a thread of this process, so it uses
the test database (transactional: rows the test commits are visible to it) and the Redis
server that ``tests/conftest.py`` started.

Screenshots go to ``test-output/screenshots/<test name>/`` at the repository root, plus a
``failure.png`` of the page when a test fails.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

ROOT = Path(__file__).resolve().parents[3]
SCREENSHOTS = ROOT / "test-output" / "screenshots"
CHROMIUM_ENV = "RATELIMITS_CHROMIUM"
CHROMIUM_NAMES = ("chromium", "chromium-browser")
TIMEOUT_MS = 10_000  # per Playwright action; a broken page fails fast instead of in 30 s


def in_ci() -> bool:
    """``CI`` is set to anything but an empty, ``0``, ``false`` or ``no`` value."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def find_chromium() -> tuple[str | None, str]:
    """The Chromium executable to drive, or None and why none was found."""
    override = os.environ.get(CHROMIUM_ENV, "").strip()
    if override:
        found = shutil.which(override)  # a path is checked as it is, a name on PATH
        if found:
            return found, ""
        return None, (
            f"{CHROMIUM_ENV}={override!r} is not an executable "
            "(point it at a Chromium, or unset it to use chromium on PATH)"
        )
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found, ""
    return None, f"no Chromium found (apt-get install chromium, or set {CHROMIUM_ENV})"


def no_browser(reason: str) -> NoReturn:
    """Skip with ``reason``; fail instead when ``CI`` is set."""
    if in_ci():
        pytest.fail(f"{reason}; CI is set, so a missing browser is a failure", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def chromium_executable() -> str:
    executable, reason = find_chromium()
    if executable is None:
        no_browser(reason)
    return executable


@pytest.fixture(scope="package")
def browser(chromium_executable: str) -> Iterator[Browser]:
    """One headless Chromium for the browser tests of this package.

    While Playwright's sync API is running, its asyncio event loop counts as running in
    this thread, and Django refuses ORM calls from a thread with a running loop
    (``SynchronousOnlyOperation``), also pytest-django's own database teardown. The test
    code is still plain synchronous code (Playwright's loop only runs while a Playwright
    call waits), so ``DJANGO_ALLOW_ASYNC_UNSAFE`` is set for exactly as long as
    Playwright runs, and restored afterwards for the rest of the suite. The live server's
    thread has no event loop and is not affected either way.
    """
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        no_browser("playwright is not installed (pip install -r requirements.txt)")

    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    playwright = sync_playwright().start()
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        # chromium_sandbox=False passes --no-sandbox: Chromium's sandbox cannot run as
        # root (CI) nor in most containers, and the browser only ever loads this test
        # run's own live server.
        browser = playwright.chromium.launch(
            executable_path=chromium_executable,
            headless=True,
            chromium_sandbox=False,
            args=["--disable-dev-shm-usage"],
        )
        try:
            yield browser
        finally:
            browser.close()
    finally:
        playwright.stop()
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """Keep each phase's report on the item, for the ``page`` fixture's failure shot."""
    report = yield
    setattr(item, f"_report_{report.when}", report)
    return report


def _test_dir_name(node: pytest.Item) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", node.name).strip("_")[:120]


@pytest.fixture
def screenshot_dir(request: pytest.FixtureRequest) -> Path:
    """``test-output/screenshots/<test name>/``, emptied for this run of the test."""
    path = SCREENSHOTS / _test_dir_name(request.node)
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


@pytest.fixture
def page(browser: Browser, live_server, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A page in a fresh browser context (no cookies) whose base URL is the live server."""
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1440, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    try:
        yield page
    finally:
        report = getattr(request.node, "_report_call", None)
        if report is not None and report.failed:
            path = SCREENSHOTS / _test_dir_name(request.node) / "failure.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                page.screenshot(path=path, full_page=True)
            except Exception as error:  # the page may be what broke
                print(f"no failure screenshot: {error}")
            else:
                print(f"failure screenshot: {path}")
        context.close()
