"""`curate view`'s site in a real headless Chromium, opened from file:// (no server):
the figures on screen against `curate report --format json` and `curate compare`, filter,
sort, search, a sample's view, hostile text, and the virtualised table.

Screenshots of the front page and of a sample view are taken here; with
CURATE_SCREENSHOTS_DIR set (`make screenshots`: docs/images) they are kept there.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from curate.core.outcome import CATEGORIES
from curate.view import build_site
from tests.view.cdp import NO_BROWSER, Browser, Page, browser, find_chromium
from tests.view.runs import HOSTILE_ID, PAYLOAD, write_run

pytestmark = pytest.mark.skipif(find_chromium() is None, reason=NO_BROWSER)

WIDTH, HEIGHT = 1400, 900
READY = "document.getElementById('count').getAttribute('data-count')"
SAMPLE_READY = "document.getElementById('sample').getAttribute('data-ready')"


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    with browser() as b:
        yield b


def _open(chromium: Browser, site: Path) -> Page:
    page = chromium.page()
    page.set_size(WIDTH, HEIGHT)
    page.navigate((site / "index.html").as_uri())
    page.wait_for(READY)
    return page


@pytest.fixture
def page(chromium: Browser, site: Path) -> Iterator[Page]:
    p = _open(chromium, site)
    yield p
    assert p.exceptions == []  # no script error on the page, whatever the test did
    p.close()


def _shot(page: Page, name: str, tmp_path: Path) -> Path:
    target = Path(os.environ.get("CURATE_SCREENSHOTS_DIR") or tmp_path)
    path = page.screenshot(target / name)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    return path


def _count(page: Page) -> int:
    return int(page.eval(READY))


def _set(page: Page, element: str, value: Any) -> int:
    """Set a control as a person would (value, then its event); the count shown after."""
    event = "input" if element in ("f-search", "f-min", "f-max", "f-trunc") else "change"
    prop = "checked" if element in ("f-suspect", "f-significant") else "value"
    page.eval(
        "document.getElementById('count').removeAttribute('data-count');"
        f"var e = document.getElementById({json.dumps(element)}); e.{prop} = {json.dumps(value)};"
        f"e.dispatchEvent(new Event({json.dumps(event)}, {{bubbles: true}})); true"
    )
    return int(page.wait_for(READY))


def _rows(page: Page) -> list[list[str]]:
    """The table rows on screen, top to bottom, as cell texts."""
    return page.eval(
        "Array.from(document.querySelectorAll('#spacer .row'))"
        ".sort(function (a, b) { return parseFloat(a.style.top) - parseFloat(b.style.top); })"
        ".map(function (r) { return Array.from(r.children).map(function (c) {"
        " return c.textContent; }); })"
    )


def _column(page: Page, key: str) -> int:
    keys = page.eval(
        "Array.from(document.querySelectorAll('#table-head span'))"
        ".map(function (s) { return s.getAttribute('data-sort'); })"
    )
    return keys.index(key)


def _value(report: dict[str, Any], key: str) -> Any:
    value: Any = report
    for part in key.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def test_front_page_figures_equal_the_report_json(
    page: Page, reports: list[dict[str, Any]], compared: dict[str, Any], tmp_path: Path
) -> None:
    shown = page.eval(
        "Array.from(document.querySelectorAll('.card[data-run]')).map(function (card) {"
        " return Array.from(card.querySelectorAll('td[data-key]')).map(function (td) {"
        " return [td.getAttribute('data-key'), td.textContent]; }); })"
    )
    assert len(shown) == len(reports)
    for cells, report in zip(shown, reports, strict=True):
        keys = {key for key, _ in cells}
        assert {"samples", "mean_score", "gate.expected_open_fraction"} <= keys
        assert {f"categories.{c}" for c in CATEGORIES} <= keys
        for key, text in cells:
            assert text == json.dumps(_value(report, key)), key
    cells = page.eval(
        "Array.from(document.querySelectorAll('#comparison td[data-key]')).map(function (td) {"
        " return [td.getAttribute('data-key'), td.textContent]; })"
    )
    assert len(cells) == len(compared["sets"]) + len(compared["transitions"])
    for key, text in cells:
        assert text == json.dumps(_value(compared, key)), key
    assert page.eval("document.getElementById('loading').hidden") is True
    # The plots are curate's own PNGs, loaded (not broken images).
    loaded = page.eval(
        "Array.from(document.images).map(function (i) { return i.complete && i.naturalWidth; })"
    )
    assert len(loaded) >= 8 and all(loaded)
    _shot(page, "view-front.png", tmp_path)


def test_filters_count_what_the_report_counts(
    page: Page, reports: list[dict[str, Any]], compared: dict[str, Any]
) -> None:
    assert _count(page) == reports[0]["samples"] + reports[0]["unscored_samples"]
    for j, report in enumerate(reports):
        _set(page, "f-run", str(j))
        for code, category in enumerate(CATEGORIES):
            assert _set(page, "f-category", str(code)) == report["categories"][category]
        # A sample whose every rollout failed has no category: it is counted as unscored.
        assert _set(page, "f-category", "-1") == report["unscored_samples"] == 1
        assert _rows(page)[0][1] == "(unscored)"
        _set(page, "f-category", "")
        assert _set(page, "f-suspect", True) == report["suspect_labels"]["count"]
        _set(page, "f-suspect", False)
        groups = page.eval(
            "Array.from(document.getElementById('f-group').options).map(function (o) {"
            " return [o.value, o.textContent]; })"
        )
        by_group = {g["group"]: g["samples"] for g in report["by_group"]}
        for value, name in groups[1:]:
            # The report's groups count scored samples; the table lists unscored ones too.
            unscored = page.eval(
                "(function (g, j) { var t = curateView.state.table, r = t.runs[j], n = 0;"
                " for (var i = 0; i < t.id.length; i++) {"
                "  if (t.group[i] === g && r.category[i] < 0 && r.n[i] !== null) { n++; } }"
                f" return n; }})({value}, {j})"
            )
            assert _set(page, "f-group", value) == by_group[name] + unscored
        _set(page, "f-group", "")
    # The first run against the last: each change set as `curate compare` counts it.
    sets = page.eval(
        "Array.from(document.getElementById('f-set').options).map(function (o) {"
        " return [o.value, o.textContent]; })"
    )
    for value, name in sets[1:-1]:
        assert _set(page, "f-set", value) == compared["sets"][name.replace(" ", "_")]["count"]
    _set(page, "f-set", "")
    assert _set(page, "f-significant", True) == compared["significant"]


def test_sorting_orders_rows_and_keeps_missing_values_last(page: Page, tmp_path: Path) -> None:
    column = _column(page, "pass_rate")
    page.eval("document.querySelector('#table-head [data-sort=pass_rate]').click(); true")
    up = [float(r[column]) for r in _rows(page) if r[column]]
    assert up == sorted(up) and len(up) >= 20
    page.eval("document.querySelector('#table-head [data-sort=pass_rate]').click(); true")
    down = [float(r[column]) for r in _rows(page) if r[column]]
    assert down == sorted(down, reverse=True)
    assert page.eval("document.querySelector('#table-head .sorted-desc').textContent") == (
        "pass rate"
    )
    ids = _column(page, "id")
    page.eval("document.querySelector('#table-head [data-sort=id]').click(); true")
    names = [r[ids] for r in _rows(page)]
    assert names == sorted(names)
    page.eval("document.querySelector('#table-head [data-sort=pass_rate]').click(); true")
    page.eval("document.getElementById('table-section').scrollIntoView(); true")
    _shot(page, "view-table.png", tmp_path)


def test_search_reads_prompts_and_references(page: Page) -> None:
    assert _set(page, "f-search", "buys 13 more") == 1  # one prompt says it
    assert _rows(page)[0][0] == "q010"
    # A reference's text (as stored: GSM8K's '#### N' line): sample q002 and the hostile one.
    assert _set(page, "f-search", "#### 7") == 2
    assert _set(page, "f-search", "no sample says this") == 0
    assert _set(page, "f-search", "") == page.eval("curateView.state.table.id.length")


def test_a_sample_shows_turns_reference_and_every_rollout_side_by_side(
    page: Page, tmp_path: Path
) -> None:
    _set(page, "f-search", "buys 6 more")  # q003: its last rollout failed in both runs
    page.eval("document.querySelector('#spacer .row').click(); true")
    assert page.wait_for(SAMPLE_READY) == "q003"
    view = page.eval(
        "(function () { var s = document.getElementById('sample'); return {"
        " front: document.getElementById('front').hidden,"
        " turns: Array.from(s.querySelectorAll('.turn .role')).map(function (r) {"
        "   return r.textContent; }),"
        " columns: s.querySelectorAll('.run-col').length,"
        " rollouts: s.querySelectorAll('.rollout').length,"
        " errors: Array.from(s.querySelectorAll('.rollout.error .error-text')).map("
        "   function (e) { return e.textContent; }),"
        " reasoningOpen: Array.from(s.querySelectorAll('details.reasoning')).map("
        "   function (d) { return d.open; }),"
        " reference: s.querySelector('.reference pre').textContent,"
        " answers: s.querySelectorAll('.rollout .extracted').length"
        "}; })()"
    )
    assert view["front"] is True
    assert view["turns"] == ["system", "user"]
    assert view["columns"] == 2 and view["rollouts"] == 8
    assert view["errors"] == ["backend: HTTP 500 from the endpoint (retried 3 times)"] * 2
    assert view["reasoningOpen"] and not any(view["reasoningOpen"])  # folded away
    assert view["reference"] == "9"  # as graded: the '#### 9' line's answer
    assert view["answers"] == 6  # every scored rollout's extracted answer
    _shot(page, "view-sample.png", tmp_path)
    page.eval("history.back(); true")
    page.wait_for("!document.getElementById('front').hidden")


def test_hostile_text_is_shown_as_text_and_runs_nothing(page: Page) -> None:
    assert _set(page, "f-search", "evil<img") == 1
    page.eval("document.querySelector('#spacer .row').click(); true")
    assert page.wait_for(SAMPLE_READY) == HOSTILE_ID
    page.eval(
        "document.querySelectorAll('#sample details').forEach(function (d) { d.open = true; });true"
    )
    page.eval("new Promise(function (done) { setTimeout(done, 300); })")  # async handlers
    seen = page.eval(
        "(function () { var s = document.getElementById('sample'); return {"
        " pwned: typeof window.__pwned === 'undefined' ? null : String(window.__pwned),"
        " title: document.title,"
        " markup: s.querySelectorAll('img, script, svg, iframe, style, object, embed').length,"
        " links: Array.from(s.querySelectorAll('a')).map(function (a) {"
        "   return a.getAttribute('href'); }),"
        " heading: s.querySelector('.sample-id').textContent,"
        " completion: s.querySelector('.completion').textContent,"
        " error: s.querySelector('.error-text').textContent,"
        " prompt: s.querySelectorAll('.turn pre')[1].textContent,"
        " shown: document.body.style.display"
        "}; })()"
    )
    assert seen["pwned"] is None and seen["title"] == "curate view"
    assert seen["markup"] == 0 and seen["links"] == ["#"]  # only the page's own back link
    assert seen["heading"] == HOSTILE_ID
    assert seen["completion"] == PAYLOAD and seen["error"] == PAYLOAD
    assert seen["prompt"] == PAYLOAD
    # The table row shows the hostile id as text too.
    page.eval("location.hash = ''; true")
    page.wait_for("!document.getElementById('front').hidden")
    assert _rows(page)[0][0] == HOSTILE_ID
    assert page.eval("typeof window.__pwned") == "undefined"


def test_the_table_is_virtualised_and_scrolls_to_the_end(chromium: Browser, tmp_path: Path) -> None:
    run = write_run(tmp_path / "big", samples=5_000, runs=2, hostile=False)
    build_site([run], tmp_path / "site")
    page = _open(chromium, tmp_path / "site")
    try:
        assert _count(page) == 5_000
        assert page.eval("document.querySelectorAll('#spacer .row').length") < 80
        page.eval("var v = document.getElementById('viewport'); v.scrollTop = v.scrollHeight; true")
        page.wait_for(
            "Array.from(document.querySelectorAll('#spacer .row')).some(function (r) {"
            " return r.firstChild.textContent === 'q999'; })"  # the last id in sort order
        )
        assert page.eval("document.querySelectorAll('#spacer .row').length") < 80
        # A sample far down loads its own chunk only.
        page.eval("location.hash = 'sample=q999'; true")
        assert page.wait_for(SAMPLE_READY) == "q999"
        assert page.eval("Object.keys(curateView.state.chunks)") == ["9"]
    finally:
        page.close()


def test_a_page_without_its_data_says_so(chromium: Browser, site: Path, tmp_path: Path) -> None:
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "index.html").write_bytes((site / "index.html").read_bytes())
    page = chromium.page()
    try:
        page.navigate((alone / "index.html").as_uri())
        text = page.wait_for(
            "document.readyState === 'complete' && !document.getElementById('loading').hidden"
            " && document.getElementById('loading').textContent"
        )
        assert "did not load" in text
    finally:
        page.close()
