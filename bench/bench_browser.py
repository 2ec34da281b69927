"""What the user waits for, measured in a real Chromium through Playwright.

Starts `faillab serve` on a workspace (the demo, or one built by bench_import.py) and times, from
the user's action to the end of the app's script run as the browser sees it:

- a near-empty page in a new session (the floor every page load pays)
- a trajectory deep link (`/trajectory?id=`) until fully rendered      target <= 1.0 s
- ]/[ (next/previous failure) on the trajectory page                    target <= 0.5 s
- Browse: a page change, a sort change and a filter change              target <= 0.5 s
- Statistics: the first visit                                            target <= 2 s
  (and in a new tab of a browser that has the app's scripts cached)
- the first SQL re-run on a trajectory                                   target <= 0.5 s
- a label key on the Annotate page until the next item is shown          target <= 0.5 s
- a label with its first faulty step (F, then a category key: the cursor
  starts on the diverging step) until the next item is shown             target <= 1.0 s

Each figure is the median and p95 over --repeat actions (default 20). Not a test: figures go to
docs/benchmarks.md.

    .venv/bin/python bench/bench_browser.py --workspace workspace            # the demo
    .venv/bin/python bench/bench_browser.py --build 50000 --ehr workspace/ehr/demo.sqlite

--build N makes a scratch workspace of N trajectories from the synthetic generator
(bench/synthetic.py) and removes it afterwards; --ehr attaches an EHR database for re-runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from annotate_marks import ITEM_KEY, NEXT_ITEM
from playwright.sync_api import Page, sync_playwright
from proc_cpu import tree_cpu

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from faillab.app.widgets.keymap import ITEM_NEXT, ITEM_PREVIOUS

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("FAILLAB_CHROMIUM", "/usr/bin/chromium")
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run",
               "--disable-dev-shm-usage"]
VIEWPORT = {"width": 1440, "height": 900}
# Text each page shows once it has rendered everything (its last section).
TRAJECTORY_READY = "Reference SQL"
STATISTICS_READY = "Export"
CHART_DRAWN = ".js-plotly-plot .main-svg"

# An action is finished when the app is idle again and the main area shows something other than
# before (a button press can take two script runs: the press, then the page switch it causes).
# A table's cells are drawn on a canvas, outside innerText; its accessible grid holds them as
# text, so a re-sort that changes only the rows (not one caption) still counts as a change.
_SHOWN = """(() => {
  const main = document.querySelector("[data-testid='stMain']") || document.body;
  const grids = [...main.querySelectorAll("[data-testid='stDataFrame'] table")];
  return main.innerText + grids.map((t) => t.textContent).join("|");
})()"""
_MAIN_TEXT = "() => " + _SHOWN
_DONE = """(before) => {
  const app = document.querySelector("[data-testid='stApp']");
  return app && app.getAttribute('data-test-script-state') === 'notRunning'
      && """ + _SHOWN + """ !== before;
}"""
_IDLE = """() => {
  const app = document.querySelector("[data-testid='stApp']");
  return app && app.getAttribute('data-test-connection-state') === 'CONNECTED'
      && app.getAttribute('data-test-script-state') === 'notRunning';
}"""

# What the browser has to draw for a page: DOM nodes, Streamlit elements and buttons in the
# main area (a count, unlike a time, does not depend on the machine's load).
_DOM_FACTS = """() => {
  const main = document.querySelector("[data-testid='stMain']");
  if (!main) return {};
  return {main_nodes: main.querySelectorAll('*').length,
          elements: main.querySelectorAll("[data-testid='stElementContainer']").length,
          buttons: main.querySelectorAll('button').length,
          step_blocks: main.querySelectorAll('.faillab-step').length};
}"""


#: The server's process id while it runs (its CPU is counted apart from the browser's).
SERVER_PID: list[int] = []


def _process_tree_cpu() -> dict[str, float]:
    """CPU seconds so far of the server's processes and of the browser side (bench/proc_cpu)."""
    return tree_cpu(SERVER_PID[:1])


def cpu_per_action(before: dict[str, float], n: int) -> dict[str, float]:
    after = _process_tree_cpu()
    return {f"{k}_cpu_s_per_action": round((after[k] - before[k]) / max(n, 1), 3)
            for k in before}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve(workspace: Path, env: dict[str, str], port: int = 0) -> Iterator[str]:
    port = port or _free_port()
    faillab = Path(sys.executable).with_name("faillab")
    log = open(Path(tempfile.gettempdir()) / f"bench-browser-{port}.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [str(faillab), "serve", "--workspace", str(workspace), "--port", str(port)],
        env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,  # one process group: the server and the Streamlit it starts
    )
    url = f"http://127.0.0.1:{port}"
    SERVER_PID[:] = [proc.pid]
    try:
        deadline = time.time() + 90
        while time.time() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"the server exited; see {log.name}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1):
                    break
            except OSError:
                time.sleep(0.2)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def wait_idle(page: Page, timeout_ms: int = 60_000) -> None:
    page.wait_for_selector("[data-testid='stApp']", timeout=timeout_ms)
    page.wait_for_function(_IDLE, timeout=timeout_ms)


# Where an action's time goes, seen from the page: the browser's clock (performance.now())
# at the action, at the first script run starting and the last one finishing (the app's
# script-state attribute), and when the finished content was seen. The observer watches the
# whole document, so it is in place before the app's root element exists (page loads).
_PHASE_INIT = """(() => {
  const phase = {start: performance.now(), connected: null, running: null, finished: null,
                 done: null};
  window.__benchPhase = phase;
  if (window.__benchPhaseObserver) window.__benchPhaseObserver.disconnect();
  window.__benchPhaseObserver = new MutationObserver((records) => {
    for (const r of records) {
      const value = r.target.getAttribute(r.attributeName);
      if (r.attributeName === 'data-test-connection-state') {
        if (value === 'CONNECTED' && phase.connected === null) phase.connected = performance.now();
      } else if (value === 'running') {
        if (phase.running === null) phase.running = performance.now();
      } else if (r.oldValue === 'running') {
        phase.finished = performance.now();
      }
    }
  });
  window.__benchPhaseObserver.observe(document, {
    subtree: true, attributes: true, attributeOldValue: true,
    attributeFilter: ['data-test-script-state', 'data-test-connection-state']});
})()"""
# For a page load the start is the navigation (performance.now() counts from it).
_PHASE_INIT_LOAD = _PHASE_INIT.replace("start: performance.now()", "start: 0")
_PHASE_READ = """() => {
  const p = window.__benchPhase;
  if (!p) return null;
  const since = (t) => t === null ? null : (t - p.start) / 1000;
  return {connected: since(p.connected), run_start: since(p.running),
          run_end: since(p.finished), done: since(p.done)};
}"""
#: Phases of the last action, per measurement (see ``phase_figures``).
PHASES: list[dict[str, float | None]] = []


def _mark_done(condition: str) -> str:
    """A wait condition that also stamps, in the page, the moment it first held."""
    return ("(arg) => { const ok = (" + condition + ")(arg); "
            "if (ok && window.__benchPhase && window.__benchPhase.done === null) "
            "window.__benchPhase.done = performance.now(); return ok; }")


def _record_phases(page: Page) -> None:
    with contextlib.suppress(Exception):  # a page without the observer has no phases
        if (phases := page.evaluate(_PHASE_READ)) is not None:
            PHASES.append(phases)


def timed_rerun(page: Page, action: Callable[[], None], timeout_ms: int = 60_000) -> float:
    """Seconds from the action until the app is idle with a changed main area."""
    before = page.evaluate(_MAIN_TEXT)
    page.evaluate(_PHASE_INIT)
    start = time.perf_counter()
    action()
    page.wait_for_function(_mark_done(_DONE), arg=before, timeout=timeout_ms, polling=10)
    elapsed = time.perf_counter() - start
    _record_phases(page)
    return elapsed


def timed_two_keys(page: Page, first: str, second: str, timeout_ms: int = 60_000) -> float:
    """Seconds from the first of two keys, pressed at a typist's pace, until the Annotate page
    shows the next item (the first key's own rerun, drawing the mark, does not count as done)."""
    before = page.evaluate(ITEM_KEY)
    page.evaluate(_PHASE_INIT)
    start = time.perf_counter()
    page.keyboard.press(first)
    page.keyboard.press(second)
    page.wait_for_function(_mark_done(NEXT_ITEM), arg=before, timeout=timeout_ms, polling=10)
    elapsed = time.perf_counter() - start
    _record_phases(page)
    return elapsed


_WATCH_RUNS = """() => {
  const app = document.querySelector("[data-testid='stApp']");
  window.__benchRuns = 0;
  if (window.__benchObserver) window.__benchObserver.disconnect();
  window.__benchObserver = new MutationObserver((records) => {
    for (const r of records) if (r.oldValue === 'running') window.__benchRuns += 1;
  });
  window.__benchObserver.observe(app, {attributes: true, attributeOldValue: true,
                                       attributeFilter: ['data-test-script-state']});
}"""
_RAN = """() => {
  const app = document.querySelector("[data-testid='stApp']");
  return window.__benchRuns > 0 && app.getAttribute('data-test-script-state') === 'notRunning'
      && !document.querySelector("[data-testid='stSkeleton']");
}"""


def timed_run(page: Page, action: Callable[[], None], timeout_ms: int = 60_000) -> float:
    """Seconds from the action until a script run it caused has finished (for actions whose
    result is not text, such as a re-sort: the table's cells are drawn on a canvas)."""
    page.evaluate(_WATCH_RUNS)
    start = time.perf_counter()
    action()
    page.wait_for_function(_RAN, timeout=timeout_ms, polling=10)
    return time.perf_counter() - start


_SHOWS = """(text) => {
  const app = document.querySelector("[data-testid='stApp']");
  const main = document.querySelector("[data-testid='stMain']");
  return app && app.getAttribute('data-test-connection-state') === 'CONNECTED'
      && app.getAttribute('data-test-script-state') === 'notRunning'
      && main && main.innerText.includes(text)
      && !document.querySelector("[data-testid='stSkeleton']");
}"""


_MOVED = """([before, ready]) => {
  const id = new URLSearchParams(window.location.search).get('id');
  const app = document.querySelector("[data-testid='stApp']");
  const main = document.querySelector("[data-testid='stMain']");
  return id && id !== before && app
      && app.getAttribute('data-test-connection-state') === 'CONNECTED'
      && app.getAttribute('data-test-script-state') === 'notRunning'
      && main && main.innerText.includes('Trajectory ' + id) && main.innerText.includes(ready)
      && !document.querySelector("[data-testid='stSkeleton']");
}"""


def current_id(page: Page) -> str:
    return str(page.evaluate("() => new URLSearchParams(window.location.search).get('id')"))


def timed_move(page: Page, key: str, timeout_ms: int = 60_000) -> float:
    """Seconds from a ``]``/``[`` press until the page shows the other trajectory, complete.

    ``]``/``[`` switch trajectories (a fragment rerun that also changes the URL), so "the main
    text changed" fires on the half-drawn transition; what counts is the new id in the URL and
    its page drawn to the end with no placeholder left."""
    before = current_id(page)
    page.evaluate(_PHASE_INIT)
    start = time.perf_counter()
    page.keyboard.press(key)
    page.wait_for_function(_mark_done(_MOVED), arg=[before, TRAJECTORY_READY],
                           timeout=timeout_ms, polling=10)
    elapsed = time.perf_counter() - start
    _record_phases(page)
    return elapsed


# Playwright's own selector waits poll at growing intervals (up to 500 ms apart once a wait has
# lasted about 0.7 s), so a timed wait on one would add up to half a second that the page never
# took. Inside a measurement, wait with a function polled every 10 ms instead.
_VISIBLE = """(selector) => [...document.querySelectorAll(selector)].some((el) => {
  const box = el.getBoundingClientRect();
  return box.width > 0 && box.height > 0;
})"""


def wait_visible(page: Page, selector: str, timeout_ms: int = 60_000) -> None:
    """Wait until an element matching `selector` is drawn, checked every 10 ms."""
    page.wait_for_function(_VISIBLE, arg=selector, timeout=timeout_ms, polling=10)


def timed_load(page: Page, url: str, ready_text: str, ready_selector: str | None = None) -> float:
    """Seconds from navigation until the app is idle, its main area shows `ready_text` (the last
    thing the page renders) and no element is still a loading placeholder (Streamlit draws
    skeletons until an element arrives): the page is complete, not just connected."""
    start = time.perf_counter()
    page.goto(url)
    page.wait_for_function(_mark_done(_SHOWS), arg=ready_text, timeout=60_000, polling=10)
    if ready_selector:  # e.g. a chart, drawn by the browser after the script run
        wait_visible(page, ready_selector)
    elapsed = time.perf_counter() - start
    _record_phases(page)
    return elapsed


#: Measurements to take (all unless --only names some).
ONLY: set[str] = set()


def section(results: dict[str, Any], name: str, run: Callable[[], dict[str, Any]]) -> None:
    """One measurement; a failure is recorded (and the rest still measured), never fatal."""
    if ONLY and name not in ONLY:
        return
    PHASES.clear()
    try:
        results[name] = run()
        if PHASES and "error" not in results[name]:
            results[name]["phases"] = phase_figures(PHASES)
    except Exception as err:  # a timed-out action says so in the figures, and where it was
        frames = traceback.extract_tb(err.__traceback__)
        here = [f for f in frames if f.filename == __file__][-1:]
        results[name] = {"error": f"{type(err).__name__}: {str(err).splitlines()[0]}",
                         "at_line": here[0].lineno if here else None}
    print(name, json.dumps(results[name]), file=sys.stderr, flush=True)


def figures(seconds: list[float]) -> dict[str, Any]:
    ordered = sorted(seconds)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"n": len(seconds), "median_s": round(statistics.median(seconds), 3),
            "p95_s": round(p95, 3), "max_s": round(ordered[-1], 3)}


def phase_figures(phases: list[dict[str, float | None]]) -> dict[str, float | None]:
    """Median seconds of each part of an action, on the browser's clock:

    - ``to_run_start``: from the action (or navigation) to the first script run starting
      (a page load: fetching the page and its scripts, the websocket handshake);
    - ``script_runs``: from that start to the last run finishing (the server's script runs,
      as the browser receives them, including drawing what arrives meanwhile);
    - ``after_runs``: from the last run finishing to the finished content seen (drawing what
      is left)."""
    def median_of(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return round(statistics.median(known), 3) if known else None

    def part(p: dict[str, float | None], a: str | None, b: str) -> float | None:
        start = 0.0 if a is None else p[a]
        end = p[b]
        return None if start is None or end is None else end - start

    return {
        "to_run_start": median_of([part(p, None, "run_start") for p in phases]),
        "script_runs": median_of([part(p, "run_start", "run_end") for p in phases]),
        "after_runs": median_of([part(p, "run_end", "done") for p in phases]),
    }


def failed_ids(workspace: Path, n: int) -> list[str]:
    sys.path.insert(0, str(ROOT))
    from trajectories.workspace import Workspace

    rows = Workspace(workspace).list(failed=True, limit=n)
    return [str(r["id"]) for r in rows]


def identify(page: Page, name: str) -> None:
    """Local mode: choose who is working, once, through the sidebar's identity form."""
    page.get_by_label("Your name", exact=True).and_(page.locator("input")).fill(name)
    page.get_by_role("button", name="Use this name").click()
    wait_idle(page)


def bench(url: str, workspace: Path, repeat: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    # The first `repeat` for the deep links, the rest for deep links in a cold browser: each
    # trajectory is new to the server's caches in both rows.
    ids = failed_ids(workspace, 2 * repeat + 1)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)

        def new_page() -> Page:
            context = browser.new_context(viewport=VIEWPORT)
            context.add_init_script(_PHASE_INIT_LOAD)  # every navigation records its phases
            return context.new_page()

        # Warm the server once (first imports, caches), as a team server would be.
        warm = new_page()
        timed_load(warm, f"{url}/trajectory?id={ids[0]}", TRAJECTORY_READY)
        warm.context.close()

        page = new_page()
        # The floor of any page in a new session (websocket, main.py, the sidebar, a script
        # run): the trajectory page for an id that does not exist draws one error line.
        section(results, "near_empty_page", lambda: figures(
            [timed_load(page, f"{url}/trajectory?id=no-such-id-{i}", "No trajectory with id")
             for i in range(repeat)]))
        def deep_link() -> dict[str, Any]:
            cpu = _process_tree_cpu()
            out = figures([timed_load(page, f"{url}/trajectory?id={tid}", TRAJECTORY_READY)
                           for tid in ids[:repeat]])
            out["cpu"] = cpu_per_action(cpu, repeat)
            out["page"] = page.evaluate(_DOM_FACTS)  # what the browser drew for the last one
            return out

        section(results, "trajectory_deep_link", deep_link)

        def deep_link_cold() -> dict[str, Any]:
            # The row above reuses one tab, so from the second link on the app's scripts come
            # from the browser's HTTP cache (Streamlit serves its hashed bundles as immutable):
            # a returning user. Here every link opens in a fresh browser profile, as a first
            # visit does, and pays fetching and compiling the scripts too.
            loads = []
            for tid in ids[repeat + 1:][:max(3, repeat // 4)]:
                fresh = new_page()
                loads.append(timed_load(fresh, f"{url}/trajectory?id={tid}", TRAJECTORY_READY))
                fresh.context.close()
            return figures(loads)

        section(results, "trajectory_deep_link_cold_cache", deep_link_cold)

        def next_prev_failure() -> dict[str, Any]:
            # Without an id the page opens the first failure in browse order, so ] (next)
            # and [ (previous) both have somewhere to go (J/K move between steps: keymap).
            # Wait for the whole page: at 50,000 trajectories "idle" was seen before the
            # first script run had drawn the buttons, so the first key went nowhere.
            timed_load(page, f"{url}/trajectory", TRAJECTORY_READY)
            page.get_by_role("button", name="Next failure").wait_for(timeout=30_000)
            page.evaluate("() => document.activeElement && document.activeElement.blur()")
            moves = []
            for i in range(repeat):
                moves.append(timed_move(page, ITEM_NEXT if i % 2 == 0 else ITEM_PREVIOUS))
            return figures(moves)

        section(results, "trajectory_next_prev_failure", next_prev_failure)

        def first_rerun() -> dict[str, Any]:
            rerun_page = new_page()
            first_reruns, box_opens = [], []
            for tid in ids[:max(3, repeat // 4)]:
                timed_load(rerun_page, f"{url}/trajectory?id={tid}", TRAJECTORY_READY)
                # The steps' Re-run buttons are in a box built when opened (timed apart);
                # a page without the box has them in the steps.
                box = rerun_page.get_by_text(re.compile(r"^Re-run a step's SQL"))
                button = rerun_page.get_by_role("button", name=re.compile(r"^Re-run (step|SQL)"))
                if box.count():
                    start = time.perf_counter()
                    box.first.click()
                    rerun_page.wait_for_function(
                        """() => [...document.querySelectorAll('button')]
                            .some((b) => /Re-run (step|SQL)/.test(b.innerText))""",
                        timeout=30_000, polling=10)
                    wait_idle(rerun_page)
                    box_opens.append(time.perf_counter() - start)
                if button.count():
                    first_reruns.append(timed_rerun(rerun_page, button.first.click))
            out = figures(first_reruns)
            if box_opens:
                out["opening_the_box"] = figures(box_opens)
            return out

        section(results, "first_sql_rerun", first_rerun)

        def browse_next() -> dict[str, Any]:
            timed_load(page, f"{url}/browse", "Search question")
            next_page = page.get_by_role("button", name="Next ▶").first
            return figures([timed_rerun(page, next_page.click) for _ in range(repeat)])

        def browse_sort() -> dict[str, Any]:
            # After twenty page moves the menu once did not open within 30 s: the click had
            # landed while the last move's run was still redrawing the box. Wait for the page
            # to be idle, then open it, and try again if no option shows.
            wait_idle(page)
            option = page.get_by_role("option", name="turns", exact=True)
            for attempt in range(3):
                box = page.get_by_label("Sort by", exact=True).first
                box.scroll_into_view_if_needed(timeout=30_000)
                box.click(timeout=30_000)
                try:
                    option.wait_for(timeout=10_000)
                    break
                except Exception:  # the menu did not open: close whatever is open, retry
                    if attempt == 2:
                        raise
                    page.keyboard.press("Escape")
                    wait_idle(page)
            option.click()
            # "Idle" can hold before the sort's run has started; the URL changes at its end.
            page.wait_for_url(re.compile(r".*sort=n_turns"), timeout=60_000)
            wait_idle(page)
            descending = page.get_by_text("Descending", exact=True).first
            return figures([timed_run(page, descending.click) for _ in range(repeat)])

        def browse_filter() -> dict[str, Any]:
            search = page.get_by_label("Search question", exact=False).and_(
                page.locator("input")).first
            filters = []
            for i in range(repeat):
                text = f"patients {i}" if i % 2 else "admission"
                filters.append(timed_rerun(page, lambda text=text: (
                    search.fill(text), search.press("Enter"))[-1]))
            return figures(filters)

        section(results, "browse_next_page", browse_next)
        section(results, "browse_sort", browse_sort)
        section(results, "browse_filter", browse_filter)

        # Statistics: a chart is either the page's light HTML picture or a plotly chart drawn
        # by the browser; the page is complete when its last download button ("LaTeX") is
        # there, no placeholder is left and every plotly chart on it has drawn its SVG.
        any_chart = ".faillab-quick-chart, .js-plotly-plot .main-svg"
        all_drawn = """() => [...document.querySelectorAll('.js-plotly-plot')]
            .every((p) => p.querySelector('.main-svg'))"""
        page_facts = """() => {
          const js = performance.getEntriesByType('resource').filter((r) => /\\.js(\\?|$)/
              .test(r.name));
          const main = document.querySelector("[data-testid='stMain']");
          return {js_files: js.length,
                  js_transferred_kb: Math.round(js.reduce((a, r) => a + r.transferSize, 0) / 1024),
                  js_decoded_kb: Math.round(js.reduce((a, r) => a + r.decodedBodySize, 0) / 1024),
                  plotly_charts: document.querySelectorAll('.js-plotly-plot').length,
                  html_charts: document.querySelectorAll('.faillab-quick-chart').length,
                  main_elements: main ? main.querySelectorAll('*').length : 0};
        }"""

        def stats_visit(tab: Page) -> dict[str, Any]:
            start = time.perf_counter()
            tab.goto(f"{url}/statistics")
            wait_visible(tab, any_chart)
            first_chart = time.perf_counter() - start
            tab.wait_for_function(_mark_done(_SHOWS), arg=STATISTICS_READY, timeout=60_000,
                                  polling=10)
            tab.wait_for_function(all_drawn, timeout=60_000, polling=10)
            complete = time.perf_counter() - start
            _record_phases(tab)
            return {"first_chart_s": first_chart, "complete_s": complete,
                    **tab.evaluate(page_facts)}

        def stats_figures(visits: list[dict[str, Any]]) -> dict[str, Any]:
            out = figures([v["complete_s"] for v in visits])
            out["first_chart"] = figures([v["first_chart_s"] for v in visits])
            out["page"] = {k: v for k, v in visits[-1].items() if not k.endswith("_s")}
            return out

        def statistics_first() -> dict[str, Any]:
            # Each visit follows a near-empty page in a fresh browser profile too: what any
            # first visit costs (fetching and compiling Streamlit's scripts, the websocket, one
            # run), measured beside it so the two see the same machine.
            visits, floor, floor_phases = [], [], []
            for i in range(max(3, repeat // 4)):
                fresh = new_page()
                floor.append(timed_load(fresh, f"{url}/trajectory?id=no-such-id-cold-{i}",
                                        "No trajectory with id"))
                floor_phases.extend(PHASES[-1:])  # kept apart from the visits' own phases
                del PHASES[-1:]
                fresh.context.close()
                fresh = new_page()
                visits.append(stats_visit(fresh))
                fresh.context.close()
            out = stats_figures(visits)
            out["near_empty_page_cold_cache"] = {**figures(floor),
                                                 "phases": phase_figures(floor_phases)}
            return out

        section(results, "statistics_first_visit", statistics_first)

        def statistics_cached_assets() -> dict[str, Any]:
            # A new session (a new tab) in a browser that has loaded the app before: the
            # scripts, plotly's among them, come from the browser's cache, as for a returning
            # user. The difference to the first visit above is the cost of fetching them.
            context = browser.new_context(viewport=VIEWPORT)
            stats_visit(context.new_page())
            visits = []
            for _ in range(max(3, repeat // 4)):
                tab = context.new_page()
                visits.append(stats_visit(tab))
                tab.close()
            context.close()
            return stats_figures(visits)

        def statistics_interactive() -> dict[str, Any]:
            # Asking for the plotly chart of the open tab (when the page has such a toggle):
            # the first one in a new browser fetches plotly's scripts.
            opened = []
            for _ in range(max(3, repeat // 4)):
                fresh = new_page()
                stats_visit(fresh)
                toggle = fresh.get_by_text("Interactive chart", exact=True).first
                start = time.perf_counter()
                toggle.click()
                wait_visible(fresh, ".js-plotly-plot .main-svg")
                fresh.wait_for_function(_IDLE, timeout=60_000, polling=10)
                opened.append(time.perf_counter() - start)
                fresh.context.close()
            PHASES.clear()  # the visits' phases, not the toggle's
            return figures(opened)

        section(results, "statistics_interactive_chart", statistics_interactive)
        section(results, "statistics_new_tab_cached_assets", statistics_cached_assets)

        def label_keys() -> dict[str, Any]:
            annotate = new_page()
            annotate.goto(f"{url}/annotate")
            wait_idle(annotate)
            identify(annotate, "bench-annotator")
            # Solo local use: take a batch of unassigned failures into this annotator's queue.
            annotate.get_by_role("button", name="Take").first.click(timeout=30_000)
            wait_idle(annotate)
            annotate.wait_for_selector("[class*='st-key-annotate_item_']", timeout=60_000)
            annotate.evaluate("() => document.activeElement && document.activeElement.blur()")
            keys = []
            for i in range(repeat):
                if annotate.evaluate(ITEM_KEY) is None:  # the batch taken is all labelled
                    break
                key = str(1 + i % 6)
                keys.append(timed_rerun(annotate,
                                        lambda key=key: annotate.locator("body").press(key)))
            return figures(keys)

        section(results, "label_key_to_next_item", label_keys)

        def label_with_step() -> dict[str, Any]:
            annotate = new_page()
            annotate.goto(f"{url}/annotate")
            wait_idle(annotate)
            identify(annotate, "bench-step-annotator")
            annotate.get_by_role("button", name="Take").first.click(timeout=30_000)
            wait_idle(annotate)
            annotate.wait_for_selector("[class*='st-key-annotate_item_']", timeout=60_000)
            annotate.evaluate("() => document.activeElement && document.activeElement.blur()")
            seconds = []
            for i in range(repeat):
                if annotate.evaluate(ITEM_KEY) is None:
                    break
                seconds.append(timed_two_keys(annotate, "f", str(1 + i % 6)))
            return figures(seconds)

        section(results, "label_with_step_to_next_item", label_with_step)
        browser.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--workspace", type=Path)
    where.add_argument("--build", type=int, metavar="N",
                       help="Build a scratch workspace of N synthetic trajectories.")
    parser.add_argument("--ehr", type=Path, help="EHR database for re-runs (with --build).")
    parser.add_argument("--keep", type=Path,
                        help="With --build: build the workspace here and keep it.")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--only", default="", help="Comma-separated measurement names.")
    parser.add_argument("--port", type=int, default=0,
                        help="Serve on this port (default: any free one).")
    args = parser.parse_args()
    ONLY.update(n for n in args.only.split(",") if n)
    # Labels go to a scratch copy of the store so the benchmark never touches real annotations.
    scratch = Path(tempfile.mkdtemp(prefix="faillab-bench-store-"))
    env = {"FAILLAB_AUTH": "none", "FAILLAB_DATABASE_URL": f"sqlite:///{scratch}/labels.sqlite"}
    try:
        workspace = args.workspace or build_workspace(scratch, args.build, args.ehr, args.keep)
        with serve(workspace, env, args.port) as url:
            results = bench(url, workspace, args.repeat)
        results["workspace_trajectories"] = workspace_size(workspace)
        results["labels_with_a_step"] = labels_with_a_step(env["FAILLAB_DATABASE_URL"])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps(results, indent=2))


def labels_with_a_step(store_url: str) -> dict[str, int]:
    """Per bench annotator, labels stored and how many carry a first faulty step: the step
    action counts only if its labels do."""
    from labeling.store import open_store

    store = open_store(store_url)
    try:
        out: dict[str, int] = {}
        for label in store.labels.all():
            out[f"{label.annotator}: labels"] = out.get(f"{label.annotator}: labels", 0) + 1
            if label.first_error_step is not None:
                key = f"{label.annotator}: with a step"
                out[key] = out.get(key, 0) + 1
        return out
    finally:
        store.close()


def build_workspace(scratch: Path, n: int, ehr: Path | None, keep: Path | None) -> Path:
    """N generated trajectories imported into a fresh workspace (under `scratch` unless kept)."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    from synthetic import write_files

    from trajectories.workspace import Workspace

    files = write_files(scratch / "src", n)
    root = keep or scratch / "ws"
    ws = Workspace(root)
    ws.import_files(files)
    if ehr is not None:
        ws.set_ehr_database(ehr)
    shutil.rmtree(scratch / "src", ignore_errors=True)
    return root


def workspace_size(workspace: Path) -> int:
    sys.path.insert(0, str(ROOT))
    from trajectories.workspace import Workspace

    return int(Workspace(workspace).summary()["trajectories"])


if __name__ == "__main__":
    main()
