"""Browse -> filter -> open -> steps, diff, re-run; deep links; hostile content stays text."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Dialog, Page, expect

from tests.browser.support import (
    StreamlitServer,
    click_grid_row,
    cut_controls,
    screenshot,
    wait_idle,
)
from tests.support import EHRSQL_SQLITE, ImportedWorkspace, make_trajectory, require_shared
from trajectories.model import Step, StepKind, Task
from trajectories.workspace import Workspace

pytestmark = pytest.mark.browser

XSS_QUESTION = ('Which drugs? <script>window.__pwned = 1</script>'
                '<img src="x" onerror="window.__pwned = 2"> [click](javascript:alert(1))')


def hostile_trajectory() -> object:
    return make_trajectory(
        task=Task(id="xss-1", question=XSS_QUESTION, intent="Medications", scope="patient",
                  ground_truth=[["<b>aspirin</b>"]], reference_sql="SELECT 1",
                  answer_format="<iframe src=javascript:alert(1)>"),
        steps=[
            Step(kind=StepKind.MESSAGE, role="user",
                 content='<script>window.__pwned = 3</script> hello'),
            Step(kind=StepKind.SQL, code="SELECT '<img src=x onerror=alert(1)>'",
                 observation='[("<svg onload=window.__pwned=4>",)]'),
            Step(kind=StepKind.TOOL_CALL, name="<b>tool</b>", arguments='{"a": <broken',
                 observation="<script>window.__pwned = 5</script>", error=True),
            Step(kind=StepKind.MESSAGE, role="assistant",
                 content='![x](http://127.0.0.1:9/leak.png) <a href="javascript:alert(1)">x</a>'),
        ],
        final_answer="<script>window.__pwned = 6</script>",
    ).with_id()


#: Rows of the long observation a late step of the long trajectory carries (over the size at
#: which an observation starts collapsed).
LONG_ROWS = 80


def long_trajectory() -> object:
    """Thirty SQL steps, each with a small result table, and a long result near the end: the
    steps beyond the first screen must be there and open like the first ones."""
    steps = [Step(kind=StepKind.MESSAGE, role="user", content="How many admissions per drug?")]
    for i in range(1, 31):
        rows = [(f"drug-{i}-{r}", r) for r in range(3)]
        steps.append(Step(kind=StepKind.SQL, code=f"SELECT drug, n FROM t{i} -- step {i}",
                          observation=str(rows)))
    long_rows = [(f"late-row-{r}", "<img src=x onerror=window.__pwned=7>") for r in
                 range(LONG_ROWS)]
    steps.append(Step(kind=StepKind.SQL, code="SELECT drug, note FROM late",
                      observation=str(long_rows)))
    return make_trajectory(
        task=Task(id="long-1", question="How many admissions per drug, step by step?",
                  intent="Medications", scope="population", ground_truth=[["a", 1]],
                  reference_sql="SELECT 1"),
        steps=steps,
    ).with_id()


@pytest.fixture(scope="module")
def viewer_server(real_workspace: ImportedWorkspace, tmp_path_factory: pytest.TempPathFactory,
                  ) -> Iterator[tuple[StreamlitServer, Workspace, str]]:
    root = tmp_path_factory.mktemp("viewer") / "ws"
    shutil.copytree(real_workspace.root, root)  # every real log, imported once per session
    ws = Workspace(root)
    hostile = hostile_trajectory()
    ws.add([(hostile, None), (long_trajectory(), None)])  # type: ignore[list-item]
    ws.set_ehr_database(require_shared(EHRSQL_SQLITE))
    server = StreamlitServer(root)
    try:
        yield server, ws, str(hostile.id)  # type: ignore[attr-defined]
    finally:
        server.stop()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1500, "height": 1000})
    pg = context.new_page()
    yield pg
    context.close()


def test_browse_filter_open_rerun(viewer_server: tuple[StreamlitServer, Workspace, str],
                                  page: Page) -> None:
    server, ws, _ = viewer_server
    page.goto(f"{server.url}/browse")
    wait_idle(page)
    total = ws.summary()["trajectories"]
    expect(page.get_by_text(f"{total:,} trajectories match")).to_be_visible()
    page.get_by_role("radio", name="failed", exact=True).click()
    wait_idle(page)
    failed = ws.summary()["failed"]
    expect(page.get_by_text(f"{failed:,} trajectories match")).to_be_visible()
    screenshot(page, "browse-failed")
    click_grid_row(page, 0)
    page.wait_for_url(re.compile(r".*/trajectory\?id=\w+"), timeout=30_000)
    wait_idle(page)
    tid = page.url.split("id=")[1]
    opened = ws.get(tid)
    assert opened is not None and not ws.frame().set_index("id").loc[tid, "success"]
    expect(page.get_by_text("Final answer vs ground truth")).to_be_visible()
    expect(page.get_by_text("Reference SQL", exact=True)).to_be_visible()
    # SQL steps, answers and the reference SQL as plain blocks: no highlighted code block
    # (its script cost every deep link about 0.4 s of browser CPU).
    visible_code = page.locator("pre.faillab-code >> visible=true")
    expect(visible_code.first).to_be_visible()
    assert visible_code.count() >= 3
    assert page.locator("[data-testid='stCode']").count() == 0
    # Re-run the reference SQL against the real EHRSQL database.
    page.get_by_role("button", name="Re-run reference SQL").click()
    wait_idle(page)
    rerun_caption = re.compile(r"Re-run against mimic_iv\.sqlite: \d+ row")
    expect(page.get_by_text(rerun_caption)).to_be_visible()
    screenshot(page, "trajectory-rerun")
    # Keyboard: J/K move through the steps (as on Annotate), the trajectory stays.
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    page.keyboard.press("j")
    page.keyboard.press("j")
    current = page.locator(".st-key-steps_pane .faillab-step.faillab-step-current")
    expect(current).to_have_count(1, timeout=30_000)
    second = current.inner_text()
    page.keyboard.press("k")
    expect(current).not_to_have_text(second, timeout=30_000)
    assert page.url.endswith(f"id={tid}")
    # ] goes to the next failure (a fragment rerun: the deep link follows it), [ back.
    page.keyboard.press("]")
    page.wait_for_url(lambda url: "id=" in url and url.split("id=")[1] != tid, timeout=30_000)
    after = page.url.split("id=")[1]
    expect(page.get_by_text(f"Trajectory {after}", exact=False)).to_be_visible()
    wait_idle(page)
    page.keyboard.press("[")
    page.wait_for_url(lambda url: url.endswith(f"id={tid}"), timeout=30_000)
    expect(page.get_by_text(f"Trajectory {tid}", exact=False)).to_be_visible()


def test_deep_link_opens_the_trajectory(viewer_server: tuple[StreamlitServer, Workspace, str],
                                        page: Page) -> None:
    server, ws, _ = viewer_server
    row = ws.list(failed=True)[3]
    traj = ws.get(row["id"])
    assert traj is not None
    page.goto(f"{server.url}/trajectory?id={row['id']}")
    wait_idle(page)
    expect(page.get_by_text(traj.task.question[:40], exact=False).first).to_be_visible()
    expect(page.get_by_text(f"Trajectory {row['id']}", exact=False)).to_be_visible()
    screenshot(page, "trajectory-deep-link")


def test_hostile_content_is_shown_as_text(viewer_server: tuple[StreamlitServer, Workspace, str],
                                          page: Page) -> None:
    server, _, hostile_id = viewer_server
    dialogs: list[str] = []

    def on_dialog(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(f"{server.url}/trajectory?id={hostile_id}")
    wait_idle(page)
    page.get_by_text("Expand all", exact=True).click()
    wait_idle(page)
    body = page.inner_text("body")
    assert "<script>window.__pwned = 1</script>" in body
    assert 'onerror="window.__pwned = 2"' in body
    # The answer panel is one HTML block too: the answer, the truth and the format as text.
    assert "<script>window.__pwned = 6</script>" in body
    assert "<iframe src=javascript:alert(1)>" in body and "<b>aspirin</b>" in body
    assert page.evaluate("() => window.__pwned") is None
    assert page.locator("img[src='x'], iframe, svg[onload]").count() == 0
    # The recorded result is a light HTML table whose cell shows the hostile text as text.
    cell = page.locator(".faillab-table td", has_text="<svg onload=window.__pwned=4>")
    expect(cell).to_have_count(1)
    expect(page.get_by_text("SELECT '<img src=x onerror=alert(1)>'").first).to_be_visible()
    assert not dialogs
    assert not any("leak.png" in url for url in requests)
    screenshot(page, "trajectory-hostile")


def test_overview_page(viewer_server: tuple[StreamlitServer, Workspace, str],
                       page: Page) -> None:
    server, ws, _ = viewer_server
    page.goto(f"{server.url}/overview")
    wait_idle(page)
    expect(page.get_by_text("By run and model")).to_be_visible()
    # The address works as a page of its own, not as a "Page not found" over the default one.
    expect(page.get_by_text("Page not found")).to_have_count(0)
    assert page.url.endswith("/overview")
    expect(page.locator("[data-testid='stMetricValue']").first).to_have_text(
        f"{ws.summary()['trajectories']:,}")
    screenshot(page, "overview")


def caption_text(page: Page) -> str:
    return page.get_by_text(re.compile(r"trajectories match · rows")).first.inner_text()


def test_browse_pages_sorts_over_everything_and_keeps_filters_in_the_url(
        viewer_server: tuple[StreamlitServer, Workspace, str], page: Page) -> None:
    server, ws, _ = viewer_server
    frame = ws.frame()
    assert len(frame) > 100, "the test needs more than one page of trajectories"
    pages = -(-len(frame) // 100)
    # A shared link: most turns first, second page.
    page.goto(f"{server.url}/browse?sort=n_turns&desc=1&page=2")
    wait_idle(page)
    assert caption_text(page).startswith(
        f"{len(frame):,} trajectories match · rows 101–{min(200, len(frame)):,} · "
        f"page 2 of {pages}")
    screenshot(page, "browse-url-page-2")
    # The first row of page 2 is the 101st trajectory by turns over the whole set.
    click_grid_row(page, 0)
    page.wait_for_url(re.compile(r".*/trajectory\?id=\w+"), timeout=30_000)
    tid = page.url.split("id=")[1]
    turns = sorted(frame["n_turns"].astype(int), reverse=True)
    assert int(frame.set_index("id").loc[tid, "n_turns"]) == turns[100]
    wait_idle(page)
    # Back through the menu: sort and page survive and return to the URL.
    page.get_by_role("link", name="Browse").click()
    wait_idle(page)
    assert caption_text(page).startswith(f"{len(frame):,} trajectories match · rows 101")
    assert "sort=n_turns" in page.url and "page=2" in page.url
    # A filter starts again at page 1 and goes into the URL, and survives a reload.
    page.get_by_role("radio", name="failed", exact=True).click()
    wait_idle(page)
    failed = int((frame["success"] == False).sum())  # noqa: E712 - a nullable column
    assert caption_text(page).startswith(f"{failed:,} trajectories match · rows 1–")
    assert "outcome=failed" in page.url
    page.reload()
    wait_idle(page)
    assert caption_text(page).startswith(f"{failed:,} trajectories match · rows 1–")
    expect(page.get_by_role("radio", name="failed", exact=True)).to_be_checked()


def test_browse_fragment_keeps_the_url_in_step_and_rows_open(
        viewer_server: tuple[StreamlitServer, Workspace, str], page: Page) -> None:
    """Paging, sorting and filtering rerun only the Browse fragment: the URL still follows
    each change, and a row chosen after them still opens its trajectory (a page switch from
    inside the fragment)."""
    server, ws, _ = viewer_server
    frame = ws.frame()
    pages = -(-len(frame) // 100)
    page.goto(f"{server.url}/browse")
    wait_idle(page)
    page.get_by_role("button", name="Next ▶").click()
    wait_idle(page)
    expect(page.get_by_text(re.compile(r"rows 101–"))).to_be_visible()
    assert caption_text(page).endswith(f"page 2 of {pages}")
    page.wait_for_url(re.compile(r".*page=2"), timeout=10_000)
    page.get_by_text("Descending", exact=True).click()
    wait_idle(page)
    page.wait_for_url(re.compile(r".*desc=1"), timeout=10_000)
    assert caption_text(page).startswith(f"{len(frame):,} trajectories match · rows 1–")
    assert "page=" not in page.url  # a new sort starts again at page 1
    page.get_by_role("radio", name="failed", exact=True).click()
    wait_idle(page)
    failed = int((frame["success"] == False).sum())  # noqa: E712 - a nullable column
    expect(page.get_by_text(f"{failed:,} trajectories match")).to_be_visible()
    assert "outcome=failed" in page.url and "desc=1" in page.url
    # Opening a row from inside the fragment still switches to the trajectory page.
    click_grid_row(page, 0)
    page.wait_for_url(re.compile(r".*/trajectory\?id=\w+"), timeout=30_000)
    tid = page.url.split("id=")[1]
    assert not frame.set_index("id").loc[tid, "success"]
    wait_idle(page)
    expect(page.get_by_text(f"Trajectory {tid}", exact=False)).to_be_visible()


def test_late_steps_are_drawn_and_open(viewer_server: tuple[StreamlitServer, Workspace, str],
                                       page: Page) -> None:
    server, _, _ = viewer_server
    traj = long_trajectory()
    page.goto(f"{server.url}/trajectory?id={traj.id}")  # type: ignore[attr-defined]
    wait_idle(page)
    expect(page.get_by_text("Reference SQL", exact=True)).to_be_visible()
    pane = page.locator(".st-key-steps_pane")
    # Every step is on the page from the first run, the last ones too, with their tables.
    expect(pane.locator(".faillab-step-title")).to_have_count(31)  # 31 actions; messages apart
    late = pane.get_by_text("30. SQL", exact=True)
    late.scroll_into_view_if_needed()
    expect(late).to_be_visible()
    expect(pane.locator(".faillab-table td", has_text="drug-30-2")).to_be_visible()
    # One re-run box for the steps instead of a button in each; opened, it reaches every step.
    expect(pane.get_by_role("button", name="Re-run")).to_have_count(0)
    page.get_by_text(re.compile(r"^Re-run a step's SQL \(31 SQL steps\)$")).click()
    wait_idle(page)
    expect(page.get_by_role("button", name=re.compile(r"^Re-run step \d+"))).to_have_count(31)
    page.get_by_role("button", name="Re-run step 30", exact=True).click()
    wait_idle(page)
    # No table t30 in the EHR: the re-run's error, named as the re-run's and the step's. The
    # re-run starts a sandbox worker first, which on a loaded machine can take seconds.
    expect(page.get_by_text(re.compile(r"^Re-run error \(step 30\):"))).to_be_visible(
        timeout=20_000)
    # The long result of the last step is collapsed; opening it shows its rows.
    opener = pane.get_by_text(re.compile(r"^Observation \([\d,]+ characters\)$"))
    opener.scroll_into_view_if_needed()
    opener.click()
    wait_idle(page)
    expect(pane.locator("[data-testid='stDataFrame']")).to_have_count(1)
    assert page.evaluate("() => window.__pwned") is None
    screenshot(page, "trajectory-late-steps")


@pytest.mark.parametrize("size", [(1280, 800), (1440, 900)])
def test_no_control_is_cut_short_on_overview_browse_or_a_trajectory(
        viewer_server: tuple[StreamlitServer, Workspace, str], browser: Browser,
        size: tuple[int, int]) -> None:
    server, ws, _ = viewer_server
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    page = context.new_page()
    try:
        page.goto(f"{server.url}/")
        wait_idle(page)
        expect(page.locator("[data-testid='stMetricLabel']").filter(
            has_text="Recorded ≠ exact")).to_be_visible()
        assert cut_controls(page) == []
        page.goto(f"{server.url}/browse")
        wait_idle(page)
        expect(page.get_by_text("Recorded ≠ exact", exact=True)).to_be_visible()
        assert cut_controls(page) == []
        # A failure in the middle of the list: both Prev and Next failure are live.
        failed = ws.frame().query("success == False")["id"].tolist()
        page.goto(f"{server.url}/trajectory?id={failed[len(failed) // 2]}")
        wait_idle(page)
        expect(page.get_by_text("Reference SQL", exact=True)).to_be_visible()
        assert cut_controls(page) == []
    finally:
        context.close()
