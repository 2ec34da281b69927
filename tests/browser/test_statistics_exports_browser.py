"""The Statistics page's exports in a real browser: the taxonomy chart's PNG is in colour (it
was solid black: Streamlit's placeholder template), and the LaTeX the page downloads is the
file `faillab stats taxonomy --format latex` writes for the same selection."""

from __future__ import annotations

import io
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from PIL import Image
from playwright.sync_api import Browser, Page

from analysis.exports_paper import PALETTE
from faillab.cli import main
from tests.browser.support import StreamlitServer, wait_idle

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory,
           prelabelled_demo_workspace: Path) -> Iterator[tuple[StreamlitServer, Path]]:
    root = tmp_path_factory.mktemp("stats_exports") / "ws"
    shutil.copytree(prelabelled_demo_workspace, root)
    running = StreamlitServer(root)
    try:
        yield running, root
    finally:
        running.stop()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1440, "height": 900}, accept_downloads=True)
    yield context.new_page()
    context.close()


def _download(page: Page, button: str, target: Path) -> bytes:
    page.get_by_role("button", name="Export").click()
    with page.expect_download(timeout=90_000) as download:
        page.get_by_role("button", name=button).click()
    download.value.save_as(target)
    page.keyboard.press("Escape")
    return target.read_bytes()


def test_the_pages_png_is_in_colour_and_its_latex_is_the_clis(
        server: tuple[StreamlitServer, Path], page: Page, tmp_path: Path) -> None:
    running, root = server
    page.goto(f"{running.url}/statistics")
    wait_idle(page)
    page.get_by_role("tab", name="Failure taxonomy").click()
    wait_idle(page)
    page.get_by_role("button", name="Filters").click()
    page.get_by_text("include LLM-only", exact=True).click()
    wait_idle(page)
    page.keyboard.press("Escape")
    png = _download(page, "Chart as PNG", tmp_path / "taxonomy.png")
    image = Image.open(io.BytesIO(png)).convert("RGB")
    colours = {rgb for _, rgb in image.getcolors(1 << 24) or []}
    series = {tuple(int(h[i:i + 2], 16) for i in (1, 3, 5)) for h in PALETTE[:-1]}
    assert len(series & colours) > 2 and (0, 0, 1) not in colours
    tex = _download(page, "Table as LaTeX", tmp_path / "taxonomy.tex")
    cli = tmp_path / "cli.tex"
    result = CliRunner().invoke(main, ["stats", "taxonomy", "--format", "latex", "--labels",
                                       "all", "--workspace",
                                       str(root), "--output", str(cli)])
    assert result.exit_code == 0, result.stderr
    assert tex == cli.read_bytes() and b"\\begin{table}" in tex
