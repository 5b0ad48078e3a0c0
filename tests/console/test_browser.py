"""The console in a real headless Chromium (Debian's chromium + chromium-driver, driven by selenium):
every page renders with real data from a running kaflite broker, with no browser console errors; the
message browser finds a record by offset and by timestamp through its form; the lab shows the
assignment kaflite.assign computes; the schemas pages show a registry's subjects, versions and diffs. Screenshots of every page are saved under the test's tmp dir (and
into $KAFLITE_SCREENSHOTS when set: that is how docs/img/console-*.png are refreshed)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from console_harness import BASE_TS, ORDER_V2, ORDERS_PARTITIONS, ConsoleCluster, ConsoleServer

from helpers import missing_module, require
from kaflite.assign.simulate import Group, Member, rebalance

require(missing_module("selenium"), module_level=True)
from selenium import webdriver  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
require(None if CHROMIUM and CHROMEDRIVER else
        "Debian's chromium and chromium-driver are not installed (./run.sh setup installs them as root)",
        module_level=True)


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("console-screenshots")


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = CHROMIUM
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--no-first-run", "--window-size=1360,900",
                f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=opts, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def web(console: ConsoleServer, browser: Any, shots: Path) -> Iterator[Any]:
    """open(path, shot_name) loads a page, checks the browser log, saves a screenshot."""

    def open_page(path: str, shot: str | None = None, http_error: int | None = None) -> Any:
        browser.get(console.url + path)
        return after_load(shot, http_error)

    def after_load(shot: str | None = None, http_error: int | None = None) -> Any:
        errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        if http_error is not None:  # the page itself answers this status on purpose; nothing else may fail
            assert any(f"status of {http_error}" in e["message"] for e in errors), errors
            errors = [e for e in errors if f"status of {http_error}" not in e["message"]]
        assert not errors, errors
        assert browser.find_element(By.CSS_SELECTOR, "header .brand").text == "kaflite console"
        if shot:  # the whole page (up to 2,400 px), through the DevTools protocol
            height = int(browser.execute_script("return document.documentElement.scrollHeight"))
            png = browser.execute_cdp_cmd("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": 1360, "height": min(height, 2400), "scale": 1}})["data"]
            (shots / f"{shot}.png").write_bytes(base64.b64decode(png))
        return browser

    open_page.after_load = after_load  # type: ignore[attr-defined]
    yield open_page
    target = os.environ.get("KAFLITE_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        for png in shots.glob("*.png"):
            shutil.copy(png, Path(target) / png.name)


def _navigate(browser: Any, action: Callable[[], None]) -> None:
    """Run an action that leaves the page (a click on a link or a submit) and wait for the next page."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    # The old document is marked with a window property; the next page is there when the mark is gone.
    # Waiting on an element's staleness instead raced chromium mid-navigation ("Node with given id does
    # not belong to the document", a WebDriverException that staleness_of does not catch).
    browser.execute_script("window.__kafliteOldPage = true;")
    action()

    def replaced(b: Any) -> bool:
        return bool(b.execute_script(
            "return window.__kafliteOldPage === undefined && document.readyState === 'complete';"))

    WebDriverWait(browser, 30, ignored_exceptions=(WebDriverException,)).until(replaced)


def _submit(browser: Any, button_id: str) -> None:
    """Click a form's submit button and wait until the next page has replaced this one."""
    _navigate(browser, browser.find_element(By.ID, button_id).click)


def _cells(browser: Any, table_id: str) -> list[list[str]]:
    rows = browser.find_elements(By.CSS_SELECTOR, f"#{table_id} tbody tr")
    return [[td.text.strip() for td in r.find_elements(By.TAG_NAME, "td")] for r in rows]


def test_overview_and_topics(web: Any, console_cluster: ConsoleCluster) -> None:
    b = web("/", "overview")
    assert b.find_element(By.ID, "health").text == "healthy"
    assert b.find_element(By.ID, "n-brokers").text == "1"
    assert int(b.find_element(By.ID, "n-groups").text) >= 2
    b = web("/topics", "topics")
    rows = {r[0]: r for r in _cells(b, "topics")}
    assert rows[console_cluster.orders][1] == str(ORDERS_PARTITIONS) and rows[console_cluster.orders][3] == "60"
    _navigate(b, b.find_element(By.LINK_TEXT, console_cluster.orders).click)
    web.after_load("topic")
    assert b.find_element(By.ID, "topic-name").text == console_cluster.orders
    assert len(_cells(b, "partitions")) == ORDERS_PARTITIONS and _cells(b, "configs")


def test_message_browser_by_offset_and_timestamp(web: Any, console_cluster: ConsoleCluster) -> None:
    p, o, key, _value, _ts = console_cluster.produced[25]
    b = web(f"/topics/{console_cluster.orders}/messages")
    Select(b.find_element(By.ID, "partition")).select_by_value(str(p))
    Select(b.find_element(By.ID, "mode")).select_by_visible_text("offset")
    field = b.find_element(By.ID, "offset")
    field.clear()
    field.send_keys(str(o))
    _submit(b, "go")
    web.after_load("messages")
    first = b.find_element(By.CSS_SELECTOR, "#messages tbody tr")
    assert (first.get_attribute("data-partition"), first.get_attribute("data-offset")) == (str(p), str(o))
    assert key.decode() in first.text
    # by timestamp: record 42 was produced at BASE_TS + 42 s
    target = BASE_TS + 42_000
    p42, o42 = next((r[0], r[1]) for r in console_cluster.produced if r[4] == target)
    Select(b.find_element(By.ID, "partition")).select_by_value(str(p42))
    Select(b.find_element(By.ID, "mode")).select_by_visible_text("timestamp")
    ts_field = b.find_element(By.ID, "timestamp")
    ts_field.clear()
    ts_field.send_keys(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(target / 1000)))
    _submit(b, "go")
    web.after_load()
    first = b.find_element(By.CSS_SELECTOR, "#messages tbody tr")
    assert (first.get_attribute("data-partition"), first.get_attribute("data-offset")) == (str(p42), str(o42))


def test_key_search_and_skew(web: Any, console_cluster: ConsoleCluster) -> None:
    b = web(f"/topics/{console_cluster.orders}/messages?q=customer-2&where=key&limit=100")
    assert "found in partition" in b.find_element(By.ID, "note").text
    assert "murmur2" in b.find_element(By.ID, "note").text
    keys = {r[3] for r in _cells(b, "messages")}
    assert keys == {"customer-2"}
    # partition "all" (the default): every partition's records, merged by timestamp
    b = web(f"/topics/{console_cluster.orders}/messages?limit=30")
    rows = _cells(b, "messages")
    by_time = sorted(console_cluster.produced, key=lambda r: r[4])[:30]
    assert [(int(r[0]), int(r[1])) for r in rows] == [(p, o) for p, o, *_ in by_time]
    assert {r[0] for r in rows} == {str(p) for p in range(ORDERS_PARTITIONS)}
    b = web(f"/topics/{console_cluster.events}/skew?key=hot", "skew")
    assert _cells(b, "heavy")[0][:2] == ["hot", "30"]
    assert b.find_elements(By.CSS_SELECTOR, "#per-partition svg rect")


def test_groups_pages(web: Any, console_cluster: ConsoleCluster) -> None:
    b = web("/groups", "groups")
    types = {r[0]: r[1] for r in _cells(b, "groups")}
    assert types[console_cluster.billing] == "classic" and types[console_cluster.audit] == "consumer"
    # wait for the console's sampler so that the lag chart has a line
    end = time.monotonic() + 10
    while time.monotonic() < end:
        b = web(f"/groups/{console_cluster.billing}")
        if len(b.find_elements(By.CSS_SELECTOR, "#lag-chart polyline")) >= 1:
            break
        time.sleep(0.5)
    web.after_load("group")
    assert b.find_element(By.ID, "group-type").text == "classic"
    lags = _cells(b, "lag")
    assert len(lags) == ORDERS_PARTITIONS and all(r[2] == "10" for r in lags)
    assert b.find_elements(By.CSS_SELECTOR, "#lag-chart polyline")
    b = web(f"/groups/{console_cluster.audit}", "group-consumer")
    assert b.find_element(By.ID, "group-type").text == "consumer"


def test_lab_shows_the_assignors_answer(web: Any) -> None:
    b = web("/lab")
    b.find_element(By.ID, "topics").send_keys("t0:3, t1:4")
    b.find_element(By.ID, "members").send_keys("C0: t0,t1\nC1: t0,t1\nC2: t1")
    b.find_element(By.ID, "leave").send_keys("C0")
    _submit(b, "run")
    web.after_load("lab")
    group = Group({"t0": 3, "t1": 4}, {"C0": Member(["t0", "t1"]), "C1": Member(["t0", "t1"]), "C2": Member(["t1"])})
    for s in ("range", "roundrobin", "sticky", "cooperative-sticky", "uniform", "server-range"):
        section = b.find_element(By.ID, f"run-{s}")
        shown = {}
        for row in section.find_elements(By.CSS_SELECTOR, "table.assignment tbody tr"):
            cells = row.find_elements(By.TAG_NAME, "td")
            shown[cells[0].text] = cells[2].text
        want = {m: ", ".join(str(tp) for tp in tps) for m, tps in rebalance(s, group).final.items()}
        assert shown == want, s
        assert section.find_elements(By.CSS_SELECTOR, "svg rect.owned")
    b = web("/lab?group=no-such-group", http_error=404)  # an unknown group: a one-line error, no traceback
    assert "unknown group" in b.find_element(By.ID, "error").text


def test_schemas_pages(web: Any) -> None:
    b = web("/schemas", "schemas")
    assert b.find_element(By.ID, "global-compatibility").text == "BACKWARD"
    rows = {r[0].split()[0]: r for r in _cells(b, "subjects")}
    assert sorted(rows) == ["events-value", "orders-value", "shop-users"]
    assert rows["orders-value"][1:4] == ["3", "2", "2"] and rows["events-value"][5] == "NONE"
    # the nav link and the subject link lead to the subject: versions, level, schema text, diff
    assert "on" in (b.find_element(By.ID, "nav-schemas").get_attribute("class") or "")
    _navigate(b, b.find_element(By.LINK_TEXT, "orders-value").click)
    web.after_load("subject")
    assert b.find_element(By.ID, "subject-name").text == "orders-value"
    assert [r[:2] for r in _cells(b, "versions")] == [["1", "1"], ["2", "2"], ["3", "3"]]
    assert _cells(b, "versions")[2][3] == "soft-deleted"
    assert b.find_element(By.ID, "shown-version").text == "2"
    assert json.loads(b.find_element(By.ID, "schema-text").text) == ORDER_V2
    added = b.find_elements(By.CSS_SELECTOR, "#schema-diff span.add")
    assert added and any("qty" in s.text for s in added)
    b = web("/schemas/no-such-subject", http_error=404)
    assert "40401" in b.find_element(By.TAG_NAME, "main").text


def test_access_page(web: Any, console_cluster: ConsoleCluster) -> None:
    """This module's broker has no authorizer: the page says so and lists the quotas; the principal form
    leads to one principal's view."""
    from kaflite.cli.quotas_cmd import alter

    alter(console_cluster.bootstrap, [("user", "erin")], {"consumer_byte_rate": "8192"}, [], 10.0)
    b = web("/access", "access")
    assert "SECURITY_DISABLED" in b.find_element(By.ID, "acl-note").text
    assert ["user 'erin'", "consumer_byte_rate=8192"] in _cells(b, "quotas")
    assert "on" in (b.find_element(By.ID, "nav-access").get_attribute("class") or "")
    b.find_element(By.ID, "principal-q").send_keys("User:erin")
    _submit(b, "principal-show")
    web.after_load()
    assert b.find_element(By.ID, "principal").text == "User:erin"
    assert _cells(b, "quotas") == [["user 'erin'", "consumer_byte_rate=8192"]]
