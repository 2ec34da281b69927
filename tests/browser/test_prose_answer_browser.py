"""Prose answers read as Markdown, safely, in Chromium on real LM Studio answers: the Trajectory
page draws a model's ``* **Patient ID:** 10004235`` list and its tables as a list and tables (not
raw text in a narrow monospace box), Annotate does the same, and a hostile answer
(``<img onerror>``, ``<script>``, a javascript: link) shows as the text it is, running nothing.
The real exports are read from ../shared (never copied into the repository)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Dialog, Page, expect

from faillab_core.settings import Settings
from labeling.store import open_store
from tests.browser.support import StreamlitServer, local_sign_in, screenshot, wait_idle
from tests.support import LMSTUDIO_SAMPLE, make_trajectory, require_shared
from trajectories.importers.tasks import load_tasks
from trajectories.model import Outcome, Task
from trajectories.workspace import Workspace

pytestmark = pytest.mark.browser

HOSTILE = ("**Result** for <img src=x onerror=\"window.__pwned=1;alert(1)\"> patients:\n\n"
           "* <script>window.__pwned=2</script> one\n"
           "* [click](javascript:window.__pwned=3) two\n")
VIEWPORT = {"width": 1280, "height": 800}


@pytest.fixture(scope="module")
def lmstudio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StreamlitServer, str,
                                                                          str, str]]:
    sample = require_shared(LMSTUDIO_SAMPLE)
    root = tmp_path_factory.mktemp("prose") / "ws"
    ws = Workspace(root).create()
    ws.import_files(sorted(sample.glob("*.conversation.json")),
                    tasks=load_tasks(sample / "EHRSQL_benchmark.csv"))
    by_answer = {str(row["id"]): ws.get(str(row["id"])) for row in ws.list()}
    listed = next(t for t, traj in by_answer.items()
                  if traj is not None and "* **Patient ID:** 10004235" in str(traj.final_answer))
    table = next(t for t, traj in by_answer.items()
                 if traj is not None and "| Field | Value |" in str(traj.final_answer))
    hostile = make_trajectory(
        task=Task(id="hostile-prose", question="How many?", ground_truth="0"),
        final_answer=HOSTILE,
        outcome=Outcome(success=False, source="human")).with_id()
    ws.add([(hostile, None)])
    # The sample's people judged these answers right or left them to the judge: a lead's verdict
    # makes the listed one a failure, in ana's queue on Annotate.
    store = open_store(Settings.from_env({}, workspace=root).annotations_url())
    try:
        store.users.add("ana", "annotator")
        store.users.add("lea", "lead")
        store.verdicts.record(listed, "incorrect", "lea", note="wrong count")
        store.queues.assign([listed], ["ana"], overlap=1)
    finally:
        store.close()
    server = StreamlitServer(root, env={"FAILLAB_AUTH": "none", "FAILLAB_DATABASE_URL": ""})
    try:
        yield server, listed, table, str(hostile.id)
    finally:
        server.stop()


def _open(browser: Browser, server: StreamlitServer, tid: str) -> Page:
    page = browser.new_context(viewport=VIEWPORT).new_page()  # type: ignore[arg-type]
    page.goto(f"{server.url}/trajectory?id={tid}")
    wait_idle(page, 60_000)
    return page


def test_a_real_answer_reads_as_markdown_on_the_trajectory_page(
        browser: Browser, lmstudio: tuple[StreamlitServer, str, str, str]) -> None:
    server, listed, table, _ = lmstudio
    page = _open(browser, server, listed)
    try:
        answer = page.locator(".st-key-answer_prose_final")
        expect(answer.locator("li strong").first).to_have_text("Patient ID:", timeout=30_000)
        expect(answer).not_to_contain_text("**Patient ID")
        # The gold ("0") keeps its compact box; the prose gets no row diff of noise.
        expect(page.get_by_text("A prose answer: no row diff")).to_be_visible(timeout=30_000)
        screenshot(page, "trajectory-prose-answer")
        page.goto(f"{server.url}/trajectory?id={table}")
        wait_idle(page, 60_000)
        answer = page.locator(".st-key-answer_prose_final")
        expect(answer.locator("table th").first).to_have_text("Field", timeout=30_000)
        expect(answer.locator("table td strong").first).to_have_text("ICU unit")
    finally:
        page.context.close()


def test_a_hostile_prose_answer_stays_text(
        browser: Browser, lmstudio: tuple[StreamlitServer, str, str, str]) -> None:
    server, _, _, hostile = lmstudio
    dialogs: list[str] = []
    page = browser.new_context(viewport=VIEWPORT).new_page()  # type: ignore[arg-type]

    def heard(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", heard)
    try:
        page.goto(f"{server.url}/trajectory?id={hostile}")
        wait_idle(page, 60_000)
        answer = page.locator(".st-key-answer_prose_final")
        expect(answer.locator("strong").first).to_have_text("Result", timeout=30_000)
        expect(answer).to_contain_text('<img src=x onerror="window.__pwned=1;alert(1)">')
        expect(answer).to_contain_text("<script>window.__pwned=2</script>")
        expect(answer).to_contain_text("[click](javascript:window.__pwned=3)")
        assert answer.locator("img, script, a").count() == 0
        page.wait_for_timeout(500)
        assert page.evaluate("() => window.__pwned") is None and dialogs == []
    finally:
        page.context.close()


def test_annotate_reads_a_real_answer_as_markdown(
        browser: Browser, lmstudio: tuple[StreamlitServer, str, str, str]) -> None:
    server, *_ = lmstudio
    # Her one item is the real answer with a bulleted, bold list.
    page = local_sign_in(browser, server, "ana", "annotate", VIEWPORT)
    try:
        answer = page.locator(".st-key-annotate_prose_answer")
        expect(answer.locator("li strong").first).to_have_text("Patient ID:", timeout=60_000)
        assert "**" not in answer.inner_text()
        screenshot(page, "annotate-prose-answer")
    finally:
        page.context.close()
