"""Real headless Chromium (Debian's chromium + chromedriver) for the browser tests."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMEDRIVER = shutil.which("chromedriver")
# CI keeps this folder (ignored by git): screenshots of the pages as the tests left them.
SCREENSHOTS = Path(os.environ.get("SPECTATOR_SCREENSHOT_DIR", "var/screenshots"))
needs_chromium = pytest.mark.skipif(CHROMEDRIVER is None, reason="chromedriver missing: `make install` installs it")


@pytest.fixture
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,2200"):
        options.add_argument(arg)
    options.binary_location = shutil.which("chromium") or ""
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def wait_until(browser: Any, condition: Any, timeout: float = 15) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, timeout, poll_frequency=0.2).until(condition)


def log_in(browser: Any, base_url: str, username: str, password: str, next_path: str) -> None:
    from selenium.webdriver.common.by import By

    browser.get(f"{base_url}/login/?next={next_path}")
    browser.find_element(By.NAME, "username").send_keys(username)
    browser.find_element(By.NAME, "password").send_keys(password)
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_until(browser, lambda b: b.current_url.endswith(next_path))


def plotted(browser: Any, selector: str) -> Any:
    """The traces plotly.js holds on a chart element ({name, x, y} each), or None before it has drawn."""
    return browser.execute_script(
        "const el = document.querySelector(arguments[0]);"
        "return el && el.data ? el.data.map(t => ({name: t.name, x: t.x, y: t.y})) : null;", selector)
