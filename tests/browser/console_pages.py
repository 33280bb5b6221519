"""What the console tests do with a page: open a view and wait until it has rendered, follow a
link, read a table as shown, save a screenshot.

Screenshots go to build/screenshots (ignored by git), so a test run leaves the tree as it was;
``KBROKER_SCREENSHOTS=docs/screenshots`` writes them where the README shows them from."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / os.environ.get("KBROKER_SCREENSHOTS", "build/screenshots")
PAGE_TIMEOUT_S = 20.0


def _rendered(driver: Any, view: str) -> None:
    """Wait until the console has rendered ``view`` (its URL's hash; console.js marks it)."""
    WebDriverWait(driver, PAGE_TIMEOUT_S).until(
        lambda d: d.find_element(By.ID, "main").get_attribute("data-loaded") == view)


def open_page(driver: Any, url: str) -> None:
    driver.get(url)
    _rendered(driver, f"#{url.split('#', 1)[1]}" if "#" in url else "")


def click_link(driver: Any, text: str, view: str) -> None:
    driver.find_element(By.LINK_TEXT, text).click()
    _rendered(driver, view)


def submit_form(driver: Any, form_id: str, fields: dict[str, str], result_id: str) -> str:
    """Fill ``fields`` of the form, submit it, and return the result text it shows."""
    form = driver.find_element(By.ID, form_id)
    for name, value in fields.items():
        field = form.find_element(By.NAME, name)
        field.clear()
        field.send_keys(value)
    form.find_element(By.TAG_NAME, "button").click()
    # Read in one script run: the view re-renders (a new result element) once the action is done.
    read = "const e = document.getElementById(arguments[0]); return e ? e.textContent : '';"
    text: str = WebDriverWait(driver, PAGE_TIMEOUT_S).until(lambda d: d.execute_script(read, result_id))
    return text


def rows_of(driver: Any, table: str) -> list[list[str]]:
    """The table's cells as shown, read in one script run: the throughput view re-renders every
    second, and cells read one by one could belong to a table already replaced."""
    rows: list[list[str]] = driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]),"
        " (row) => Array.from(row.querySelectorAll('td'), (td) => td.innerText.trim()))", f"#{table} tbody tr")
    return rows


def screenshot(driver: Any, page: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert driver.save_screenshot(str(SCREENSHOTS / f"{page}.png"))
