"""A soak with every part failing: N annotators in Chromium through R `faillab serve` replicas
against PostgreSQL and an S3-compatible server for a bounded time, while a fault script
restarts PostgreSQL, stops the object store, kill -9s a replica and starts it again on its
port, fills and frees the disk of a replica's temp folder, and runs an import and a pre-label
run (offline heuristic) against the same workspace beside the people.

    .venv/bin/python bench/bench_soak.py --minutes 30

The team, the workspace and the replicas are bench_team.py's (imported, not copied): a demo in
moto's S3 server in this process, every failure queued to two people, blind mode, each person
pressing a category key after a think time and waiting for the next item. Loopback only.

Faults, in this order, `--rounds` times over the run (each round's faults spread over it):

- PostgreSQL: a throwaway cluster of this run (initdb + pg_ctl, as scripts/ensure_postgres.sh
  starts one; the machine's own server is left alone) stopped (fast) for `--pg-down` seconds
  and started again;
- the object store: the S3 server stopped for `--outage` seconds and started on its port;
- a replica: kill -9 and started again on the same port;
- a full disk: the last replica's local folder and TMPDIR are on a small tmpfs this bench
  mounts (root only), filled to the last byte for `--outage` seconds, then freed;
- an import of new trajectories and a pre-label run beside the people.

Each fault's window runs from its start until the part answers again. Reported: labels
acknowledged / stored / lost / duplicated (and compared item by item), key latency (key to the
next item on screen) outside and inside the windows, and for every window and every person
whether that page acknowledged a key after the window without a reload, and how long after.
PostgreSQL and the S3 server are running again at the end, also on error. Not a test: figures
go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from playwright.async_api import Browser, Page, async_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent))

from annotate_marks import ITEM_KEY
from bench_team import (
    CHROMIUM,
    EARLIER,
    LAUNCH_ARGS,
    Keys,
    TeamWorkspace,
    free_port,
    label_counts,
    latency,
    press_key,
    sign_in,
    stop_replicas,
    team_workspace,
    type_name,
    wait_health,
    warm_up,
)
from synthetic import write_files

from tests.pg_cluster import Cluster

#: The page is connected, idle and shows an item: what a person waits for before a key.
READY = """() => {
  const app = document.querySelector("[data-testid='stApp']");
  return !!app && app.getAttribute('data-test-connection-state') === 'CONNECTED'
      && app.getAttribute('data-test-script-state') === 'notRunning'
      && !!document.querySelector("[class*='st-key-annotate_item_']");
}"""
#: Another item is on screen: a key is acknowledged only so here (an error box in the item's
#: place, which also ends the run without the item, is not an acknowledgement).
NEW_ITEM = """(before) => {
  const el = document.querySelector("[class*='st-key-annotate_item_']");
  return !!el && el.className !== before;
}"""
#: What the page shows when it is not ready: its connection state and any error text.
PAGE_STATE = """() => {
  const app = document.querySelector("[data-testid='stApp']");
  const shown = [...document.querySelectorAll(
      "[data-testid='stException'], [data-testid='stAlertContentError'], "
      + "[data-testid='stStatusWidget'], [role='dialog']")];
  return (app ? app.getAttribute('data-test-connection-state') : 'no app') + ' | '
      + shown.map(e => e.innerText.replace(/\\s+/g, ' ').slice(0, 160)).join(' / ');
}"""
#: Seconds after a window still counted apart (the pages catching up) in the latency split.
AFTER_S = 30.0


@dataclass
class TmpDisk:
    """A small tmpfs at `path` (mounting needs root): a replica's folder and TMPDIR live on it,
    and `fill` takes its last byte."""

    path: Path
    size: str
    mounted: bool = False

    def mount(self) -> str | None:
        """None when mounted, else why not."""
        self.path.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size}", "tmpfs",
                               str(self.path)], capture_output=True, text=True)
        self.mounted = done.returncode == 0
        return None if self.mounted else (done.stderr.strip() or "mount failed")

    def fill(self) -> int:
        """Write zeros until the disk is full: the bytes written."""
        written = 0
        chunk = b"\0" * (1 << 20)
        with open(self.path / "filler", "wb", buffering=0) as out:
            while True:
                try:
                    written += out.write(chunk)
                except OSError as err:
                    if err.errno != errno.ENOSPC:
                        raise
                    break
                if len(chunk) > 4096 and shutil.disk_usage(self.path).free < len(chunk):
                    chunk = b"\0" * 4096  # the last pages too
        return written

    def free(self) -> None:
        (self.path / "filler").unlink(missing_ok=True)

    def unmount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True)
            self.mounted = False


@dataclass
class Window:
    fault: str
    start: float
    end: float = 0.0
    notes: dict[str, Any] = field(default_factory=dict)


@dataclass
class Soak:
    """What the fault script acts on, and the windows it recorded."""

    team: TeamWorkspace
    cluster: Cluster
    replicas: list[subprocess.Popen[bytes]]
    ports: list[int]
    disk: TmpDisk | None
    disk_replica: int
    outage_s: float
    pg_down_s: float
    windows: list[Window] = field(default_factory=list)
    import_runs: int = 0

    def replica_env(self, r: int) -> tuple[Path | None, dict[str, str]]:
        if self.disk is not None and r == self.disk_replica:
            (self.disk.path / "tmp").mkdir(exist_ok=True)
            return self.disk.path / "root", {"TMPDIR": str(self.disk.path / "tmp")}
        return None, {}

    # Each fault blocks until its part answers again; run in a thread beside the pages.
    def restart_postgres(self, w: Window) -> None:
        try:
            self.cluster.stop("fast")
            w.notes["stopped"] = not self.cluster.running()
            time.sleep(self.pg_down_s)
        finally:
            self.cluster.start()

    def stop_object_store(self, w: Window) -> None:
        try:
            self.team.moto.stop()  # werkzeug closes its socket: connections are refused
            time.sleep(self.outage_s)
        finally:
            self.team.moto.start()
        port = int(self.team.endpoint.rsplit(":", 1)[1])
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)

    def kill_replica(self, w: Window, r: int = 0) -> None:
        proc = self.replicas[r]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        w.notes["replica"] = r
        root, extra = self.replica_env(r)
        self.replicas[r] = self.team.start_replica(r, self.ports[r], root, extra)
        wait_health(f"http://127.0.0.1:{self.ports[r]}", self.replicas[r])

    def fill_disk(self, w: Window) -> None:
        if self.disk is None:
            w.notes["skipped"] = "no tmpfs (mounting needs root)"
            return
        w.notes["replica"] = self.disk_replica
        try:
            w.notes["filled_bytes"] = self.disk.fill()
            w.notes["free_bytes_when_full"] = shutil.disk_usage(self.disk.path).free
            time.sleep(self.outage_s)
        finally:
            self.disk.free()

    def import_and_prelabel(self, w: Window) -> None:
        self.import_runs += 1
        source = self.team.scratch / f"import-{self.import_runs}"
        files = write_files(source, 400, files=2, seed=1000 + self.import_runs)
        env = {**os.environ, **self.team.env}
        folder = str(self.team.scratch / "import-runner")
        for what, command in (
                ("import", [self.team.faillab, "import", *map(str, files), "--workspace",
                            folder, "--json"]),
                ("prelabel", [self.team.faillab, "prelabel", "--workspace", folder,
                              "--labeler", "heuristic", "--json"])):
            started = time.monotonic()
            done = subprocess.run(command, env=env, capture_output=True, text=True)
            w.notes[what] = {"exit": done.returncode,
                             "seconds": round(time.monotonic() - started, 1),
                             "out": done.stdout.strip()[-300:],
                             "err": done.stderr.strip()[-300:]}


FAULTS = ("postgres_restart", "object_store_stopped", "replica_kill_9", "disk_full",
          "import_and_prelabel")


async def run_faults(soak: Soak, seconds: float, rounds: int,
                     everyone_in: asyncio.Barrier) -> None:
    actions = {"postgres_restart": soak.restart_postgres,
               "object_store_stopped": soak.stop_object_store,
               "replica_kill_9": soak.kill_replica, "disk_full": soak.fill_disk,
               "import_and_prelabel": soak.import_and_prelabel}
    await everyone_in.wait()
    t0 = time.monotonic()
    span = seconds / rounds
    for k in range(rounds):
        for i, fault in enumerate(FAULTS):
            at = t0 + k * span + span * (0.08 + 0.18 * i)
            await asyncio.sleep(max(0.0, at - time.monotonic()))
            window = Window(fault, time.monotonic())
            soak.windows.append(window)
            try:
                await asyncio.to_thread(actions[fault], window)
            except Exception as err:  # recorded, and the soak goes on
                window.notes["error"] = f"{type(err).__name__}: {err}"
            window.end = time.monotonic()
            print(f"{window.end - t0:7.1f} s  {fault}: {window.end - window.start:.1f} s "
                  f"{json.dumps(window.notes)[:300]}", file=sys.stderr, flush=True)


async def soak_annotator(browser: Browser, url: str, name: str, seconds: float,
                         everyone_in: asyncio.Barrier, think: float, seed: int,
                         key_timeout_s: float) -> dict[str, Any]:
    """bench_team's annotator, as a person waits through an outage: before each key the page
    must be connected, idle and show an item (waited for, never reloaded); a name asked for
    again is typed again and counted."""
    page = await sign_in(browser, url, name)
    loads = {"n": 0}
    page.on("load", lambda _: loads.__setitem__("n", loads["n"] + 1))
    await everyone_in.wait()
    deadline = time.monotonic() + seconds
    keys = Keys(name)
    pace = random.Random(seed)
    not_ready = 0
    names_again = 0
    seen: list[str] = []
    while time.monotonic() < deadline:
        if not await _ready(page, min(15.0, max(0.1, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                break
            if await page.get_by_label("Your name", exact=True).count():
                names_again += 1
                await type_name(page, name)
                continue
            not_ready += 1
            state = await _page_state(page)
            if state not in seen and len(seen) < 8:
                seen.append(state)
            continue
        before = await page.evaluate(ITEM_KEY)
        if before is None:
            continue
        if think > 0:
            await asyncio.sleep(pace.uniform(0.5 * think, 1.5 * think))
            if time.monotonic() >= deadline:
                break
        await press_key(page, keys, len(keys.pressed_acked), before, key_timeout_s,
                        shown_next=NEW_ITEM)
    exceptions = await page.locator("[data-testid='stException']").count()
    await page.context.close()
    return {"keys": keys, "not_ready_15s": not_ready, "names_asked_again": names_again,
            "page_loads_after_sign_in": loads["n"], "exceptions_on_page_at_end": exceptions,
            "states_seen_when_not_ready": seen}


async def _ready(page: Page, timeout_s: float) -> bool:
    try:
        await page.wait_for_function(READY, timeout=timeout_s * 1000, polling=100)
        return True
    except Exception:
        return False


async def _page_state(page: Page) -> str:
    try:
        return str(await page.evaluate(PAGE_STATE))
    except Exception as err:
        return f"unreadable: {type(err).__name__}"


async def soak_team(soak: Soak, urls: list[str], seconds: float, rounds: int, think: float,
                    key_timeout_s: float) -> list[dict[str, Any]]:
    names = soak.team.names
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        everyone_in = asyncio.Barrier(len(names) + 1)
        people = [soak_annotator(browser, urls[i % len(urls)], name, seconds, everyone_in,
                                 think, i, key_timeout_s) for i, name in enumerate(names)]
        faults = asyncio.ensure_future(run_faults(soak, seconds, rounds, everyone_in))
        results = await asyncio.gather(*people)
        await faults  # a fault still running at the end finishes (its part answers again)
        await browser.close()
    return list(results)


def _item_class(trajectory_id: str) -> str:
    return "st-key-annotate_item_" + re.sub(r"[^a-zA-Z0-9_-]", "-", trajectory_id)


def report(soak: Soak, results: list[dict[str, Any]], urls: list[str]) -> dict[str, Any]:
    windows = soak.windows
    keys: list[Keys] = [r["keys"] for r in results]
    labels = soak.team.stored_labels()
    counts = label_counts(labels, {k.name: len(k.pressed_acked) for k in keys})
    # Item by item: each acknowledged key's item against the person's stored labels.
    stored_items: dict[str, list[str]] = {}
    for lab in labels:
        stored_items.setdefault(str(lab.annotator), []).append(_item_class(lab.trajectory_id))
    acked_not_stored = stored_not_acked = acked_twice = 0
    t0 = min((p for k in keys for p, _ in k.pressed_acked), default=0.0)
    repeats = []  # each item that came back to a person after an acknowledged key on it
    for k in keys:
        acked = [re.search(r"st-key-annotate_item_\S+", c) for c in k.items]
        acked_ids = [m.group(0) if m else "" for m in acked]
        acked_twice += len(acked_ids) - len(set(acked_ids))
        mine = set(stored_items.get(k.name, []))
        acked_not_stored += len(set(acked_ids) - mine)
        stored_not_acked += len(mine - set(acked_ids))
        for item in {i for i in acked_ids if acked_ids.count(i) > 1}:
            at = [k.pressed_acked[n][1] for n, i in enumerate(acked_ids) if i == item]
            repeats.append({"person": k.name,
                            "acknowledged_at_s": [round(a - t0, 1) for a in at],
                            "stored_rows": stored_items.get(k.name, []).count(item),
                            "windows_before": [
                                f"{w.fault} ended {a - w.end:.0f} s before" for a in at
                                for w in windows if w.start - w.end <= a - w.end < 120]})

    inside: list[float] = []
    after: list[float] = []
    clear: list[float] = []
    for k in keys:
        for pressed, acked in k.pressed_acked:
            if any(pressed <= w.end and acked >= w.start for w in windows):
                inside.append(acked - pressed)
            elif any(w.end < pressed <= w.end + AFTER_S for w in windows):
                after.append(acked - pressed)
            else:
                clear.append(acked - pressed)

    per_window = []
    for n, w in enumerate(windows):
        until = windows[n + 1].start if n + 1 < len(windows) else float("inf")
        recovery: dict[str, float | None] = {}
        for k in keys:
            first = min((a for p, a in k.pressed_acked if p >= w.end and a < until),
                        default=None)
            recovery[k.name] = None if first is None else round(first - w.end, 1)
        during = [a - p for k in keys for p, a in k.pressed_acked
                  if p <= w.end and a >= w.start]
        per_window.append({
            "fault": w.fault, "at_s": round(w.start - t0, 1),
            "seconds": round(w.end - w.start, 1), "notes": w.notes,
            "keys_overlapping": len(during),
            "slowest_overlapping_s": round(max(during), 1) if during else None,
            "every_page_acknowledged_after": all(v is not None for v in recovery.values()),
            "seconds_to_first_key_after": recovery})
    logs = {}
    for r in range(len(urls)):
        text = (soak.team.scratch / f"replica-{r}.log").read_text(errors="replace")
        logs[f"replica-{r}"] = {"tracebacks": text.count("Traceback"),
                                "error_lines": sum("error" in line.lower()
                                                   for line in text.splitlines())}
    outside = after + clear
    return {
        **counts,
        "item_by_item": {"acknowledged_not_stored": acked_not_stored,
                         "stored_not_acknowledged": stored_not_acked,
                         "acknowledged_twice_on_one_item": acked_twice,
                         "items_that_came_back": repeats},
        "unacknowledged_keys": sum(k.unacknowledged for k in keys),
        "keys_answered_by_something_else": sum(k.answered_otherwise for k in keys),
        "latency_s": {"outside_windows": latency(outside),
                      f"outside_windows_and_{AFTER_S:.0f}s_after": latency(clear),
                      f"first_{AFTER_S:.0f}s_after_a_window": latency(after),
                      "overlapping_a_window": latency(inside)},
        "pages": {r["keys"].name: {k: v for k, v in r.items() if k != "keys"}
                  | {"acknowledged": len(r["keys"].pressed_acked),
                     "unacknowledged": r["keys"].unacknowledged,
                     "answered_otherwise": r["keys"].answered_otherwise} for r in results},
        "every_page_recovered_after_every_window": all(
            w["every_page_acknowledged_after"] for w in per_window),
        "page_reloads": sum(r["page_loads_after_sign_in"] for r in results),
        "windows": per_window,
        "replica_logs": logs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--annotators", type=int, default=6)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=0,
                        help="Times every fault runs (default: one round per 15 minutes).")
    parser.add_argument("--outage", type=float, default=60,
                        help="Seconds the object store is stopped and the disk stays full.")
    parser.add_argument("--pg-down", type=float, default=10,
                        help="Seconds PostgreSQL stays stopped in its restart.")
    parser.add_argument("--think", type=float, default=3.0,
                        help="Mean seconds a person spends on an item before the key.")
    parser.add_argument("--key-timeout", type=float, default=30,
                        help="Seconds a key may wait for the next item before it counts as "
                             "unacknowledged (the person then waits for the page and presses "
                             "again).")
    parser.add_argument("--tasks", type=int, default=0,
                        help="Demo tasks (default: enough items for the run at this pace).")
    parser.add_argument("--disk", default="256m", help="Size of the replica's tmpfs.")
    parser.add_argument("--out", type=Path, help="Also write the JSON report here.")
    args = parser.parse_args()
    seconds = args.minutes * 60
    rounds = args.rounds or max(1, round(args.minutes / 15))
    # About 8 failures a task, two people an item: a queue that lasts the run.
    tasks = args.tasks or max(120, int(seconds / max(args.think, 0.5) * args.annotators / 8))

    cluster = Cluster.create(prefix="faillab-soak-pg-")
    try:
        with team_workspace(args.annotators, tasks, True, 40,
                            admin_url=cluster.url) as team:
            disk: TmpDisk | None = TmpDisk(team.scratch / "replica-disk", args.disk)
            why = disk.mount() if disk is not None else None
            if why is not None:  # not root: no tmpfs, and that fault is recorded as skipped
                print(f"no tmpfs for the disk fault ({why}): that fault is skipped",
                      file=sys.stderr)
                disk = None
            soak = Soak(team, cluster, [], [], disk, args.replicas - 1, args.outage,
                        args.pg_down)
            try:
                for r in range(args.replicas):
                    soak.ports.append(free_port())
                    root, extra = soak.replica_env(r)
                    soak.replicas.append(team.start_replica(r, soak.ports[r], root, extra))
                urls = [f"http://127.0.0.1:{port}" for port in soak.ports]
                for proc, url in zip(soak.replicas, urls, strict=True):
                    wait_health(url, proc)
                warm_s = asyncio.run(warm_up(urls, [p.pid for p in soak.replicas], EARLIER))
                print(f"warmed up in {warm_s:.0f} s; {len(team.items)} items; soak of "
                      f"{seconds:.0f} s, {rounds} round(s) of faults", file=sys.stderr,
                      flush=True)
                results = asyncio.run(soak_team(soak, urls, seconds, rounds, args.think,
                                                args.key_timeout))
                cluster.ensure_running()
                out = {"minutes": args.minutes, "annotators": args.annotators,
                       "replicas": args.replicas, "think_s": args.think, "rounds": rounds,
                       "items": len(team.items), "warm_up_s": round(warm_s, 1),
                       "cores": os.cpu_count(), **report(soak, results, urls)}
                text = json.dumps(out, indent=2)
                if args.out:
                    args.out.write_text(text + "\n")
                print(text, flush=True)
            finally:
                stop_replicas(soak.replicas)
                cluster.ensure_running()  # the scratch database is dropped on it
                if disk is not None:
                    disk.unmount()
    finally:
        cluster.remove()


if __name__ == "__main__":
    main()
