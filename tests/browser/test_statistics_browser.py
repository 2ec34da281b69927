"""The Statistics page in a real browser: a first screen without plotly, the data grid or the
filters' widgets (the chart above the fold), the filters and the interactive chart and table on
request, hostile run names as text, a lazily built export."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from analysis.quick_charts import CHART_CLASS, TABLE_CLASS
from tests.browser.support import StreamlitServer, wait_idle
from tests.support import make_trajectory
from trajectories.model import Run, Task
from trajectories.workspace import Workspace

pytestmark = pytest.mark.browser

# As long as real run names (a hundred characters): the filter chips show it whole.
HOSTILE_RUN = ('<img src=x onerror="window.__pwned=1">run-tool-calling-gemini-2.0-flash-0.0_'
               'range_0--1_user-gpt-4o-mini-llm_0427224609_valid')
# Every filter chip is visible to its right edge: nothing (the clear button, the fade at the
# end of a full row) is drawn over it, and no text in it is cut short.
CHIPS_UNCOVERED = """() => [...document.querySelectorAll(
    "[data-testid='stMultiSelect'] [data-tag]")].map((tag) => {
  const box = tag.getBoundingClientRect();
  const hit = document.elementFromPoint(box.right - 3, box.top + box.height / 2);
  const cut = [tag, ...tag.querySelectorAll('*')].some((e) => e.scrollWidth > e.clientWidth + 1);
  return [tag.innerText, box.width > 0 && tag.contains(hit) && !cut];
})"""
SCRIPTS = """() => performance.getEntriesByType('resource').map((r) => r.name)
    .filter((n) => n.endsWith('.js')).map((n) => n.split('/').pop())"""


@pytest.fixture(scope="module")
def stats_server(tmp_path_factory: pytest.TempPathFactory,
                 demo_workspace: Path) -> Iterator[StreamlitServer]:
    root = tmp_path_factory.mktemp("statistics") / "ws"
    shutil.copytree(demo_workspace, root)
    task = Task(id="hostile-1", question="How many admissions?", intent="Demographics",
                scope="population", ground_truth=[["1"]], reference_sql="SELECT 1")
    run = Run(name=HOSTILE_RUN, model="<b>model</b>", temperature=0.0, rollout=0)
    Workspace(root).add([(make_trajectory(task=task, run=run, final_answer="1").with_id(),
                          None)])
    server = StreamlitServer(root)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1440, "height": 900}, accept_downloads=True)
    pg = context.new_page()
    yield pg
    context.close()


def test_first_screen_draws_without_plotly_or_the_grid(stats_server: StreamlitServer,
                                                       page: Page) -> None:
    page.goto(f"{stats_server.url}/statistics")
    wait_idle(page)
    chart = page.locator(f".{CHART_CLASS}[data-chart='success']")
    expect(chart).to_be_visible()
    expect(page.locator(f".{TABLE_CLASS}").first).to_be_visible()
    # The first chart starts on the first screen; the filters wait behind their button.
    box = chart.bounding_box()
    assert box is not None and box["y"] < 900, box
    assert page.locator("[data-testid='stMultiSelect']").count() == 0
    expect(page.get_by_text("runs: all", exact=False)).to_be_visible()
    # The hostile run name is shown as its literal text, in the chart and in the table.
    expect(chart.get_by_text(HOSTILE_RUN, exact=False)).to_be_visible()
    # A hundred-character run name wraps in its row: every column of the heat map fits the
    # page at 1440 px (unwrapped, the numbers were past the right edge).
    overflow = chart.locator("div[style*='overflow-x']").first.evaluate(
        "(el) => el.scrollWidth - el.clientWidth")
    assert overflow <= 1, overflow
    assert page.evaluate("() => window.__pwned") is None
    assert page.locator(f".{CHART_CLASS} img, .{TABLE_CLASS} img").count() == 0
    # Neither plotly's nor the data grid's scripts were fetched for the first screen.
    scripts = page.evaluate(SCRIPTS)
    assert not [s for s in scripts if s.startswith(("PlotlyChart", "DataFrame", "Multiselect",
                                                    "DownloadButton"))], scripts
    assert page.locator(".js-plotly-plot").count() == 0
    assert page.locator("[data-testid='stDataFrame']").count() == 0

    # The filters: every chip whole, the hostile run name as text; taking a run out keeps the
    # menu open and the line under the button says what is counted now.
    page.get_by_role("button", name="Filters").click()
    chips = page.locator("[data-testid='stMultiSelect'] [data-tag]")
    expect(chips.first).to_be_visible()
    uncovered = page.evaluate(CHIPS_UNCOVERED)
    assert len(uncovered) >= 8 and all(ok for _, ok in uncovered), uncovered
    hostile = chips.filter(has_text=HOSTILE_RUN)
    expect(hostile).to_have_count(1)
    runs = page.locator("[data-testid='stMultiSelect']").first.locator("[data-tag]").count()
    hostile.get_by_role("button").click()  # the chip's remove cross
    wait_idle(page)
    expect(page.get_by_text(f"runs: {runs - 1} of {runs}", exact=False)).to_be_visible()
    expect(page.locator("[data-testid='stMultiSelect']").first).to_be_visible()
    assert page.evaluate("() => window.__pwned") is None
    page.keyboard.press("Escape")

    # On request: the plotly chart, then the sortable grid, of the open tab.
    page.get_by_text("Interactive chart", exact=True).click()
    wait_idle(page)
    expect(page.locator(".js-plotly-plot .main-svg").first).to_be_visible(timeout=30_000)
    page.get_by_text("Interactive table", exact=True).click()
    wait_idle(page)
    expect(page.locator("[data-testid='stDataFrame']")).to_have_count(1, timeout=30_000)
    assert page.evaluate("() => window.__pwned") is None


def test_label_chart_states_what_it_counts_and_exports_on_click(
        stats_server: StreamlitServer, page: Page, tmp_path: Path) -> None:
    page.goto(f"{stats_server.url}/statistics")
    wait_idle(page)
    page.get_by_role("tab", name="Failure taxonomy").click()
    wait_idle(page)
    chart = page.locator(f".{CHART_CLASS}[data-chart='taxonomy']")
    expect(chart).to_contain_text("Labels: human-confirmed only (the default)")
    page.get_by_role("button", name="Filters").click()
    page.get_by_text("include LLM-only", exact=True).click()
    wait_idle(page)
    page.keyboard.press("Escape")
    expect(chart).to_contain_text("Labels: include LLM-only (default: human-confirmed only)")
    # The chart's HTML export is the plotly figure, built on click, with the same statement.
    page.get_by_role("button", name="Export").click()
    with page.expect_download(timeout=60_000) as download:
        page.get_by_role("button", name="Chart as HTML").click()
    saved = tmp_path / "taxonomy_chart.html"
    download.value.save_as(saved)
    text = saved.read_text(encoding="utf-8")
    assert "Labels: include LLM-only (default: human-confirmed only)" in text
    assert "plotly" in text.lower()
