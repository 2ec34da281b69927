"""Labels per minute with and without clusters, in a real Chromium through Playwright.

Starts `faillab serve` on a workspace of failures (with sign-in off and a scratch label store),
then, as one annotator:

- without clusters: the Annotate page, one key press per failure (the keyboard path, the fastest
  the page allows), for --items failures;
- with clusters: the Clusters page, one category choice and one press of the label button per
  cluster of two or more, largest first, until --items failures are labelled.

Both figures are the machine's side only (no reading time): they bound what the page lets a
person do. The number of decisions per label is the other half: a person reads once per decision.
Not a test: figures go to docs/evaluation.md.

    .venv/bin/python bench/bench_clusters.py --workspace /tmp/clusters_ws --items 40
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_browser as bb

PORT = 8681  # this bench's own port (the team's ports are split per engineer)


def _choose(page: Page, label: str, option: str) -> None:
    page.get_by_label(label, exact=False).first.click()
    page.get_by_role("option", name=option, exact=True).first.click()
    bb.wait_idle(page)


def without_clusters(page: Page, url: str, items: int) -> dict[str, Any]:
    page.goto(f"{url}/annotate")
    bb.wait_idle(page)
    bb.identify(page, "bench-one-by-one")
    take = page.get_by_role("button", name="Take")
    take.first.wait_for(timeout=60_000)
    bb.timed_rerun(page, take.first.click)
    page.wait_for_timeout(500)  # key listeners attach after the first paint
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    start = time.perf_counter()
    for i in range(items):
        key = str(1 + i % 6)
        bb.timed_rerun(page, lambda key=key: page.locator("body").press(key))
    seconds = time.perf_counter() - start
    return {"labels": items, "decisions": items, "seconds": round(seconds, 2),
            "labels_per_minute": round(60 * items / seconds, 1)}


def with_clusters(page: Page, url: str, items: int) -> dict[str, Any]:
    page.goto(f"{url}/clusters")
    bb.wait_idle(page, timeout_ms=180_000)
    bb.identify(page, "bench-clusters")
    page.get_by_text("Label ", exact=False).first.wait_for(timeout=180_000)
    options = page.get_by_label("Cluster", exact=True)
    labelled = decisions = 0
    start = time.perf_counter()
    index = 0
    while labelled < items:
        if index:
            options.first.click()
            choices = page.get_by_role("option")
            if index >= choices.count():
                break
            choices.nth(index).click()
            bb.wait_idle(page)
        button = page.get_by_role("button", name="Label ")
        text = button.first.inner_text()
        size = int(text.split()[1])
        _choose(page, "Category for the whole cluster", "SQL Logic Error")
        bb.timed_rerun(page, button.first.click)
        labelled += size
        decisions += 1
        index += 1
    seconds = time.perf_counter() - start
    return {"labels": labelled, "decisions": decisions, "seconds": round(seconds, 2),
            "labels_per_minute": round(60 * labelled / seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--items", type=int, default=40)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="faillab-bench-clusters-"))
    env = {"FAILLAB_AUTH": "none", "FAILLAB_DATABASE_URL": f"sqlite:///{scratch}/labels.sqlite"}
    bb._free_port = lambda: PORT  # serve() asks for a port; this bench keeps to its own
    results: dict[str, Any] = {}
    try:
        with bb.serve(args.workspace, env) as url, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=bb.CHROMIUM, args=bb.LAUNCH_ARGS)
            page = browser.new_context(viewport=bb.VIEWPORT).new_page()
            results["without_clusters"] = without_clusters(page, url, args.items)
            page = browser.new_context(viewport=bb.VIEWPORT).new_page()
            results["with_clusters"] = with_clusters(page, url, args.items)
            browser.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
