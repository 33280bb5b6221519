"""The browser the console tests drive: Debian's chromium, headless, through its chromedriver
(selenium). ``python -m compat.deps`` installs both; without them the tests fail, never skip.
The flags keep chromium from reaching out on its own (this machine refuses those connections)
and give it a fresh profile."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator

import pytest
from selenium import webdriver

from compat.deps import DepsError, ensure_debian_tools

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1400,900")


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    try:
        tools = ensure_debian_tools(quiet=True)
    except DepsError as exc:
        pytest.fail(str(exc))
    profile = tempfile.mkdtemp(prefix="kbroker-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = tools["chromium"]
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=tools["chromedriver"]), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
