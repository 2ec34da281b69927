"""A team labelling at once: N annotators in Chromium through R `faillab serve` replicas, against
one PostgreSQL database and one object-store workspace, for a bounded time.

Each annotator signs in on a replica (annotator i on replica i mod R), then presses category
keys as fast as the page lets them: a key, wait until the next item is on screen, the next key.
Every key the page acknowledges (the next item shown) is counted; at the end the store's labels
are compared with the acknowledged keys. Reported: labels acknowledged, stored, lost (an
acknowledged key without a label) and duplicated (two live labels of one person on one item),
and the key-to-next-item latency (p50, p95, max) over all annotators.

    .venv/bin/python bench/bench_team.py --annotators 8 --replicas 2 --seconds 180

Needs PostgreSQL (FAILLAB_TEST_POSTGRES_URL, default postgresql+psycopg://postgres@127.0.0.1:
5432/test: a scratch database is created and dropped) and moto (the dev extra) for the
S3-compatible server, which runs in this process. Not a test: figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from playwright.async_api import Browser, Page, async_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from annotate_marks import ITEM_KEY, NEXT_ITEM  # noqa: E402 - bench/ is on the path
from proc_cpu import tree_cpu  # noqa: E402 - bench/ itself is on the path when run as a script

CHROMIUM = os.environ.get("FAILLAB_CHROMIUM", "/usr/bin/chromium")
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run",
               "--disable-dev-shm-usage"]
POSTGRES_URL = os.environ.get("FAILLAB_TEST_POSTGRES_URL",
                              "postgresql+psycopg://postgres@127.0.0.1:5432/test")
REGION, ACCESS_KEY, SECRET_KEY = "us-east-1", "bench-key", "bench-secret"
#: The annotator of an earlier session (``--labelled-before``), not one of the team timed.
EARLIER = "earlier-session"

_IDLE = """() => {
  const app = document.querySelector("[data-testid='stApp']");
  return app && app.getAttribute('data-test-connection-state') === 'CONNECTED'
      && app.getAttribute('data-test-script-state') === 'notRunning';
}"""
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def scratch_database(admin_url: str = POSTGRES_URL) -> tuple[str, Any]:
    """A new database on the server of `admin_url`: its URL, and a function that drops it."""
    from sqlalchemy import create_engine, make_url, text

    # Pre-pinged: the server may have been restarted since (bench_soak.py does).
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT", pool_pre_ping=True)
    name = f"faillab_team_bench_{uuid.uuid4().hex[:12]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)

    def drop() -> None:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    return url, drop


def wait_health(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"a replica stopped at start (exit {proc.returncode})")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise SystemExit(f"{url} did not answer in {timeout_s:.0f} s")


async def wait_idle(page: Page) -> None:
    await page.wait_for_selector("[data-testid='stApp']", timeout=120_000)
    await page.wait_for_timeout(150)
    await page.wait_for_function(_IDLE, timeout=120_000, polling=20)


async def sign_in(browser: Browser, url: str, name: str) -> Page:
    """A new browser context on Annotate at `url`, signed in as `name` (local mode's "Your
    name"), with the first item on screen."""
    context = await browser.new_context(viewport={"width": 1440, "height": 900})
    page = await context.new_page()
    await page.goto(f"{url}/annotate")
    await wait_idle(page)
    await type_name(page, name)
    await page.wait_for_selector("[class*='st-key-annotate_item_']", timeout=120_000)
    await page.evaluate("() => document.activeElement && document.activeElement.blur()")
    return page


async def type_name(page: Page, name: str) -> None:
    field = page.get_by_label("Your name", exact=True).and_(page.locator("input"))
    await field.fill(name)
    await field.press("Enter")
    await wait_idle(page)


@dataclass
class Keys:
    """One annotator's keys: each acknowledged key's press and acknowledgement (monotonic
    seconds) and the item it was pressed on (its container's class), and the keys the page
    never acknowledged."""

    name: str
    pressed_acked: list[tuple[float, float]] = field(default_factory=list)
    items: list[str] = field(default_factory=list)
    unacknowledged: int = 0
    #: Keys after which the page ended its run without the next item (an error shown instead).
    answered_otherwise: int = 0

    @property
    def seconds(self) -> list[float]:
        return [acked - pressed for pressed, acked in self.pressed_acked]


async def press_key(page: Page, keys: Keys, n: int, before: str, timeout_s: float = 60.0,
                    shown_next: str | None = None) -> bool:
    """Press the `n`-th category key on the item `before` and wait until the next item is on
    screen: recorded in `keys` as acknowledged, or as unacknowledged after `timeout_s`. With
    `shown_next` (a page function of `before`), a run that ended without it being true is
    counted apart (`answered_otherwise`), not as acknowledged."""
    start = time.monotonic()
    await page.keyboard.press(str(1 + n % 6))
    try:
        await page.wait_for_function(NEXT_ITEM, arg=before, timeout=timeout_s * 1000,
                                     polling=10)
    except Exception:  # a key the page never acknowledged is not counted
        keys.unacknowledged += 1
        return False
    if shown_next is not None and not await page.evaluate(shown_next, before):
        keys.answered_otherwise += 1
        return False
    keys.pressed_acked.append((start, time.monotonic()))
    keys.items.append(before)
    return True


async def annotator(browser: Browser, url: str, name: str, seconds: float,
                    everyone_in: asyncio.Barrier, think: float, seed: int) -> dict[str, Any]:
    page = await sign_in(browser, url, name)
    # Everyone signs in first; then the clock starts for all at once.
    await everyone_in.wait()
    deadline = time.monotonic() + seconds
    keys = Keys(name)
    pace = random.Random(seed)
    while time.monotonic() < deadline:
        before = await page.evaluate(ITEM_KEY)
        if before is None:
            break  # the queue is done
        if think > 0:  # reading the item before the key: between half and one and a half times
            await asyncio.sleep(pace.uniform(0.5 * think, 1.5 * think))
            if time.monotonic() >= deadline:
                break
        await press_key(page, keys, len(keys.pressed_acked), before)
    errors = keys.unacknowledged + await page.locator("[data-testid='stException']").count()
    await page.context.close()
    return {"name": name, "acknowledged": len(keys.pressed_acked), "seconds": keys.seconds,
            "errors": errors}


async def warm_up(urls: list[str], servers: list[int], annotator: str | None,
                  idle_share: float = 0.05, window_s: float = 3.0,
                  limit_s: float = 300.0) -> float:
    """Open Annotate on each replica (signed in as `annotator`, when given: the queue's
    ranking is then fitted there), then wait until the replicas use under `idle_share` of a
    core over `window_s` (a server starts its warm-ups at its first page run): the seconds
    that took. A running team's server has long done them."""
    started = time.monotonic()
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        for url in urls:
            page = await browser.new_page()
            await page.goto(f"{url}/annotate")
            await wait_idle(page)
            if annotator is not None:
                await type_name(page, annotator)
            await page.close()
        await browser.close()
    before = tree_cpu(servers)["server"]
    while time.monotonic() - started < limit_s:
        await asyncio.sleep(window_s)
        now = tree_cpu(servers)["server"]
        if now - before < idle_share * window_s:
            break
        before = now
    return time.monotonic() - started


async def team(urls: list[str], names: list[str], seconds: float, think: float,
               servers: list[int]) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Each annotator's results, and the CPU seconds so far of the servers and of the browsers
    (read before the browser closes: a process that has ended is no longer counted)."""
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        everyone_in = asyncio.Barrier(len(names))
        tasks = [annotator(browser, urls[i % len(urls)], name, seconds, everyone_in, think, i)
                 for i, name in enumerate(names)]
        results = await asyncio.gather(*tasks)
        cpu = tree_cpu(servers)
        await browser.close()
    return list(results), cpu


def percentile(values: list[float], share: float) -> float | None:
    """The `share` quantile of `values` (the nearest lower rank), rounded to milliseconds."""
    ordered = sorted(values)
    return round(ordered[int(share * (len(ordered) - 1))], 3) if ordered else None


def latency(values: list[float]) -> dict[str, float | None]:
    return {"keys": len(values), "p50": round(statistics.median(values), 3) if values else None,
            "p95": percentile(values, 0.95), "max": round(max(values), 3) if values else None}


@dataclass
class TeamWorkspace:
    """An object-store workspace (moto's S3 server in this process) with a demo's failures
    queued to a team, and an annotation database on PostgreSQL: what every replica serves."""

    endpoint: str
    env: dict[str, str]
    database: str
    items: list[str]
    names: list[str]
    scratch: Path
    moto: Any
    faillab: str = str(Path(sys.executable).parent / "faillab")

    def start_replica(self, r: int, port: int, root: Path | None = None,
                      extra_env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """`faillab serve` number `r` on `port` (its local folder `root`, by default a new one
        in the scratch folder), its output appended to replica-`r`.log."""
        root = root or self.scratch / f"replica-{r}"
        root.mkdir(parents=True, exist_ok=True)
        log = open(self.scratch / f"replica-{r}.log", "a")  # noqa: SIM115 - lives with the run
        return subprocess.Popen(
            [self.faillab, "serve", "--workspace", str(root), "--port", str(port)],
            env={**os.environ, **self.env, **(extra_env or {})}, stdout=log,
            stderr=subprocess.STDOUT)

    def stored_labels(self) -> list[Any]:
        """The team's labels in the store now."""
        from labeling.store import open_store

        store = open_store(self.database)
        try:
            return [lab for lab in store.labels.all() if lab.annotator in self.names]
        finally:
            store.close()


@contextmanager
def team_workspace(annotators: int, tasks: int, prelabel: bool, labelled_before: int,
                   admin_url: str = POSTGRES_URL) -> Iterator[TeamWorkspace]:
    """Start the S3 server, create a scratch database on `admin_url`'s server, import a demo of
    `tasks` tasks, pre-label it (heuristic) when asked, store what an earlier session labelled,
    and queue every failure to two of `annotators` people; everything is removed at the end."""
    import logging

    import pyarrow.fs as pafs
    from moto.server import ThreadedMotoServer

    from labeling.queue import failed_frame
    from labeling.store import open_store
    from trajectories.demo import generate_demo
    from trajectories.objectstore import s3_filesystem
    from trajectories.workspace import Workspace

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per S3 request otherwise
    s3_port = free_port()
    endpoint = f"http://127.0.0.1:{s3_port}"
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=s3_port, verbose=False)
    moto.start()
    drop_database = None
    try:
        database, drop_database = scratch_database(admin_url)
        scratch = Path(tempfile.mkdtemp(prefix="faillab-team-bench-"))
        bucket = f"faillab-bench-{uuid.uuid4().hex[:8]}"
        pafs.S3FileSystem(endpoint_override=endpoint, scheme="http", region=REGION,
                          access_key=ACCESS_KEY, secret_key=SECRET_KEY,
                          allow_bucket_creation=True).create_dir(bucket)
        url = f"s3://{bucket}/team/trajectories"
        env = {"AWS_ENDPOINT_URL": endpoint, "AWS_REGION": REGION,
               "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
               "FAILLAB_TRAJECTORIES_URL": url, "FAILLAB_DATABASE_URL": database,
               "FAILLAB_AUTH": "none", "FAILLAB_BLIND": "1"}
        importer = Workspace(scratch / "import-host", trajectories_url=url,
                             filesystem=s3_filesystem(endpoint=endpoint, region=REGION,
                                                      access_key=ACCESS_KEY,
                                                      secret_key=SECRET_KEY))
        demo = generate_demo(importer.root, seed=5, n_tasks=tasks, rollouts=2,
                             n_patients=300)
        importer.add((t, "demo") for t in demo.trajectories)
        team = TeamWorkspace(endpoint, env, database, [], [], scratch, moto)
        if prelabel:
            # As a team works (and `make run` does): failures pre-labelled before anyone
            # annotates, their evidence stored beside the pre-labels for the servers to reuse.
            subprocess.run([team.faillab, "prelabel", "--workspace", str(importer.root),
                            "--labeler", "heuristic", "--json"],
                           env={**os.environ, **env}, check=True, stdout=subprocess.DEVNULL)
        team.items = [str(i) for i in failed_frame(importer)["id"]]
        team.names = [f"annotator-{i + 1}" for i in range(annotators)]
        if labelled_before:
            # What an earlier session left: enough confirmed labels for the queue's ranking to
            # be on (a running team's servers have fitted it long ago).
            from taxonomy import default_taxonomy

            taxonomy = default_taxonomy()
            earlier = open_store(database)
            earlier.taxonomies.save(taxonomy.version, taxonomy.name, taxonomy.to_dict())
            earlier.users.add(EARLIER, "annotator")
            keys = [c.key for c in taxonomy.categories]
            for n, tid in enumerate(team.items[:labelled_before]):
                earlier.labels.add(tid, keys[n % len(keys)], annotator=EARLIER,
                                   taxonomy_version=taxonomy.version)
            earlier.close()
        store = open_store(database)
        for name in team.names:
            store.users.add(name, "annotator")
        # Two people on every item: the same items are open on both replicas at once.
        store.queues.assign(team.items, team.names, overlap=2, double_share=1.0)
        store.close()
        yield team
    finally:
        if drop_database is not None:
            drop_database()
        moto.stop()


def stop_replicas(replicas: list[subprocess.Popen[bytes]]) -> None:
    for proc in replicas:
        if proc.poll() is None:
            proc.terminate()
    for proc in replicas:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


def label_counts(labels: list[Any], acknowledged: dict[str, int]) -> dict[str, int]:
    """Labels acknowledged (per person, in `acknowledged`) against the store's `labels`:
    stored, lost (acknowledged without a label), stored without an acknowledgement, and
    duplicated (a second live label of one person on one item)."""
    stored = Counter(str(lab.annotator) for lab in labels)
    pairs = Counter((lab.annotator, lab.trajectory_id) for lab in labels)
    return {
        "acknowledged": sum(acknowledged.values()), "stored": sum(stored.values()),
        "lost": sum(max(0, n - stored[name]) for name, n in acknowledged.items()),
        "stored_without_acknowledgement": sum(
            max(0, stored[name] - n) for name, n in acknowledged.items()),
        "duplicated": sum(n - 1 for n in pairs.values() if n > 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--annotators", type=int, default=8)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=180)
    parser.add_argument("--tasks", type=int, default=240, help="Demo tasks (sets the items).")
    parser.add_argument("--prelabel", action=argparse.BooleanOptionalAction, default=True,
                        help="Pre-label the failures (heuristic) before serving, as a team "
                             "does; without, each replica runs the evidence finder over every "
                             "failure at start for the Clusters view and the queue's ranking.")
    parser.add_argument("--warm", action=argparse.BooleanOptionalAction, default=True,
                        help="Open a page on each replica and wait until the replicas are "
                             "idle (their start-up warm-ups done) before anyone signs in: the "
                             "figures are then a running server's; without, its first minutes.")
    parser.add_argument("--labelled-before", type=int, default=40,
                        help="Items an earlier session labelled (confirmed labels, so the "
                             "queue's ranking is on from the start); 0 for none.")
    parser.add_argument("--think", type=float, default=0.0,
                        help="Mean seconds each annotator spends on an item before its key "
                             "(each wait drawn between half and one and a half times it); 0 "
                             "presses the next key as soon as the item shows (a stress test: "
                             "the machine is then saturated whatever its speed).")
    args = parser.parse_args()

    with team_workspace(args.annotators, args.tasks, args.prelabel,
                        args.labelled_before) as workspace:
        replicas: list[subprocess.Popen[bytes]] = []
        try:
            urls = []
            for r in range(args.replicas):
                port = free_port()
                replicas.append(workspace.start_replica(r, port))
                urls.append(f"http://127.0.0.1:{port}")
            for proc, replica_url in zip(replicas, urls, strict=True):
                wait_health(replica_url, proc)
            warm_up_s = 0.0
            if args.warm:
                warm_up_s = asyncio.run(warm_up(urls, [p.pid for p in replicas],
                                                EARLIER if args.labelled_before else None))
            started = time.monotonic()
            cpu_before = tree_cpu(p.pid for p in replicas)
            results, cpu_after = asyncio.run(team(urls, workspace.names, args.seconds,
                                                  args.think, [p.pid for p in replicas]))
            elapsed = time.monotonic() - started
            cpu = {k: v - cpu_before[k] for k, v in cpu_after.items()}
            counts = label_counts(workspace.stored_labels(),
                                  {r["name"]: r["acknowledged"] for r in results})
        finally:
            stop_replicas(replicas)
    latencies = [s for r in results for s in r["seconds"]]
    acknowledged = counts["acknowledged"]
    out = {
        "annotators": args.annotators, "replicas": args.replicas, "think_s": args.think,
        "prelabelled": args.prelabel, "labelled_before": args.labelled_before,
        "warm_up_s": round(warm_up_s, 1),
        "seconds_requested": args.seconds, "seconds_elapsed": round(elapsed, 1),
        "items": len(workspace.items),
        **counts,
        "page_errors": sum(r["errors"] for r in results),
        "per_annotator": {r["name"]: r["acknowledged"] for r in results},
        "latency_s": {k: v for k, v in latency(latencies).items() if k != "keys"},
        # The replicas' share of the machine (sign-ins and their start-up warm-ups
        # included), and the browsers' (Chromium and Playwright's driver, sign-ins
        # included), per acknowledged label.
        "replica_cpu_s_per_label": round(cpu["server"] / max(acknowledged, 1), 3),
        "browser_cpu_s_per_label": round(cpu["browser"] / max(acknowledged, 1), 3),
        "labels_per_s": round(acknowledged / args.seconds, 2),  # over the labelling time
        "cores": os.cpu_count(),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
