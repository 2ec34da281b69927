"""A trajectory link opened in a fresh browser, against Potato's item page, in the same run.

Issue 42, item 5: a link to one trajectory, opened in a browser that has never seen the app,
shows its steps in at most 1.0 s (p95) and no slower than Potato's item page (a self-hosted
annotation tool a team might pick instead) on the same machine in the same run.

Both sides show the same 10 real LM Studio conversations (the shared
``m3-lmstudio-sample``): faillab imports them into a scratch workspace; Potato gets them as its
agent-trace items through the converter and config in ``shared/peers/potato/`` (its own project
in a scratch folder, served from its own venv: never a dependency of this project). Each
measurement opens a new browser context (empty cache, no cookies) and times, from navigation:

- faillab: ``/trajectory?id=<id>`` until a first step card is drawn (``steps``: the server's
  first screen, ``app/first_screen.py``, or the page's own steps pane, whichever comes first),
  until the page's own steps pane is drawn (``interactive``: keys and buttons work), and until
  the page is complete (its last section, "Reference SQL", drawn and the app idle);
- Potato: its sign-in page, a new name typed and submitted (Potato has no deep link to an
  item), until the item's first trace step is drawn (``steps``) and until the item's question
  text is.

"Drawn" is read in the browser: a script added before the page's own records the wall clock at
the animation frame after a matching element enters the document; times run from just before
navigation. The two sides alternate (which goes first alternates too), so load on the machine
falls on both. Figures are median and p95 over --runs; paste them into docs/benchmarks.md.

    .venv/bin/python bench/bench_page_speed.py --runs 20 \
        --potato /tmp/potato-bench/venv/bin/potato   # pip install potato-annotation there

Without --potato (or when it cannot start) only faillab is measured, and the output says so.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench_browser import (
    CHROMIUM,
    LAUNCH_ARGS,
    TRAJECTORY_READY,
    VIEWPORT,
    _free_port,
    figures,
    serve,
    wait_idle,
)
from playwright.sync_api import Browser, Page, sync_playwright

ROOT = Path(__file__).resolve().parent.parent
#: The server-drawn first screen's element (app/first_screen.py's FIRST_SCREEN_ID).
FIRST_SCREEN_ID = "faillab-first-screen"
SHARED = ROOT.parent / "shared"
SAMPLE = SHARED / "data" / "trajectories" / "m3-lmstudio-sample"
PEER = SHARED / "peers" / "potato"
#: The first step card of the trajectory page's steps pane (app/widgets/steps.py).
FIRST_STEP = ".st-key-steps_pane .faillab-step"
#: Potato's item page: a step of its agent-trace display, and the item's question text.
POTATO_STEP = ".agent-trace-step"
POTATO_TEXT = ".display-type-text .text-display-content"
_SHOWS = """(text) => {
  const main = document.querySelector("[data-testid='stMain']");
  const app = document.querySelector("[data-testid='stApp']");
  return !!main && main.innerText.includes(text)
      && !main.querySelector("[data-testid='stSkeleton']")
      && app.getAttribute('data-test-script-state') === 'notRunning';
}"""


def build_workspace(scratch: Path) -> tuple[Path, list[str]]:
    """The sample's ten conversations with their task rows, imported by the CLI."""
    root = scratch / "ws"
    conversations = sorted(str(p) for p in SAMPLE.glob("*.conversation.json"))
    faillab = Path(sys.executable).with_name("faillab")
    subprocess.run([str(faillab), "import", "--workspace", str(root), *conversations,
                    "--tasks", str(SAMPLE / "EHRSQL_benchmark.csv")],
                   check=True, capture_output=True)
    sys.path.insert(0, str(ROOT))
    from trajectories.workspace import Workspace

    ids = [str(r["id"]) for r in Workspace(root).list(limit=100)]
    return root, ids


@contextmanager
def serve_potato(potato: Path, scratch: Path) -> Iterator[str]:
    """Potato's own project for the same ten conversations, served until the block ends."""
    project = scratch / "potato"
    (project / "data").mkdir(parents=True)
    shutil.copy(PEER / "config.yaml", project / "config.yaml")
    subprocess.run([sys.executable, str(PEER / "lmstudio_to_potato.py"), str(SAMPLE),
                    str(project / "data" / "traces.jsonl")], check=True, capture_output=True)
    port = _free_port()
    log = open(scratch / "potato.log", "w")  # noqa: SIM115
    proc = subprocess.Popen([str(potato), "start", "config.yaml", "-p", str(port)],
                            cwd=project, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"Potato did not start; see {log.name}")
            try:
                with urllib.request.urlopen(url + "/", timeout=2):
                    break
            except OSError:
                time.sleep(0.3)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


#: Added to every page before its own scripts: the wall clock (ms) at the animation frame after
#: an element matching each named selector first enters the document.
_MARKS = """(want) => {
  const marks = {};
  window.__benchMarks = marks;
  const check = () => {
    for (const [name, selector] of Object.entries(want)) {
      if (!(name in marks) && document.querySelector(selector)) {
        marks[name] = null;
        requestAnimationFrame(() => { marks[name] = Date.now(); });
      }
    }
  };
  new MutationObserver(check).observe(document, {childList: true, subtree: true});
}"""


def fresh_page(browser: Browser, marks: dict[str, str]) -> Page:
    context = browser.new_context(viewport=VIEWPORT)
    context.add_init_script(f"({_MARKS})({json.dumps(marks)})")
    return context.new_page()


def _marked(page: Page, name: str) -> float:
    """The mark's wall clock in seconds, once the browser has recorded it."""
    page.wait_for_function(f"() => (window.__benchMarks || {{}})[{json.dumps(name)}]",
                           timeout=60_000, polling=10)
    return float(page.evaluate(f"window.__benchMarks[{json.dumps(name)}]")) / 1000


def ours_once(browser: Browser, url: str, trajectory_id: str) -> dict[str, float]:
    page = fresh_page(browser, {"steps": f"#{FIRST_SCREEN_ID} .faillab-step, {FIRST_STEP}",
                                "interactive": FIRST_STEP})
    try:
        start = time.time()
        page.goto(f"{url}/trajectory?id={trajectory_id}", wait_until="commit")
        steps = _marked(page, "steps") - start
        interactive = _marked(page, "interactive") - start
        page.wait_for_function(_SHOWS, arg=TRAJECTORY_READY, timeout=60_000, polling=10)
        return {"steps": steps, "interactive": interactive, "complete": time.time() - start}
    finally:
        page.context.close()


def potato_once(browser: Browser, url: str, name: str) -> dict[str, float]:
    page = fresh_page(browser, {"steps": POTATO_STEP, "text": POTATO_TEXT})
    try:
        start = time.time()
        page.goto(url + "/")
        page.fill("#login-email", name)
        page.click("button.potato-form-submit")
        steps = _marked(page, "steps") - start
        return {"steps": steps, "complete": _marked(page, "text") - start}
    finally:
        page.context.close()


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def run(runs: int, potato: Path | None) -> dict[str, Any]:
    scratch = Path(tempfile.mkdtemp(prefix="faillab-page-speed-"))
    env = {"FAILLAB_AUTH": "none",
           "FAILLAB_DATABASE_URL": f"sqlite:///{scratch}/labels.sqlite"}
    results: dict[str, Any] = {"runs": runs, "cores": os.cpu_count(), "load_before": loadavg()}
    try:
        workspace, ids = build_workspace(scratch)
        with contextlib.ExitStack() as stack:
            ours_url = stack.enter_context(serve(workspace, env))
            peer_url = None
            if potato is not None:
                try:
                    peer_url = stack.enter_context(serve_potato(potato, scratch))
                except Exception as err:  # measured alone, and the output says why
                    results["potato"] = f"not measured: {err}"
            else:
                results["potato"] = "not measured: no --potato given"
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
                # Warm each server once (first imports, caches), as a running server is.
                warm = fresh_page(browser, {})
                warm.goto(f"{ours_url}/trajectory?id={ids[0]}")
                wait_idle(warm)
                warm.wait_for_function(_SHOWS, arg=TRAJECTORY_READY, timeout=90_000)
                warm.context.close()
                if peer_url:
                    potato_once(browser, peer_url, "warm-up")
                ours: list[dict[str, float]] = []
                theirs: list[dict[str, float]] = []
                for i in range(runs):
                    tid = ids[i % len(ids)]
                    order = [0, 1] if i % 2 == 0 else [1, 0]
                    for side in order:
                        if side == 0:
                            ours.append(ours_once(browser, ours_url, tid))
                        elif peer_url:
                            theirs.append(potato_once(browser, peer_url, f"bench-{i}"))
                browser.close()
        results["faillab_steps"] = figures([r["steps"] for r in ours])
        results["faillab_interactive"] = figures([r["interactive"] for r in ours])
        results["faillab_complete"] = figures([r["complete"] for r in ours])
        if theirs:
            results["potato_steps"] = figures([r["steps"] for r in theirs])
            results["potato_text"] = figures([r["complete"] for r in theirs])
        results["load_after"] = loadavg()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--potato", type=Path,
                        help="Potato's `potato` command (in a venv of its own).")
    args = parser.parse_args()
    if not SAMPLE.is_dir():
        sys.exit(f"the shared sample is not at {SAMPLE}")
    print(json.dumps(run(args.runs, args.potato), indent=2))


if __name__ == "__main__":
    main()
