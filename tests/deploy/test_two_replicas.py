"""Two `faillab serve` replicas against one PostgreSQL database and one object-store workspace
(docs/deploy.md): two annotators label the same failures at the same time, each through their
own replica in a real Chromium, and every label arrives exactly once."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from labeling.queue import failed_frame
from labeling.store import open_store
from tests.browser.support import wait_idle
from tests.deploy.support import S3Server
from tests.support import free_port_in, postgres_database, wait_for_health
from trajectories.demo import generate_demo
from trajectories.workspace import Workspace

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.slow]

SERVER_PORTS = range(8710, 8720)
ITEMS = 4


@pytest.fixture
def database() -> Iterator[str]:
    """A database of its own on the shared server, dropped afterwards."""
    with postgres_database("faillab_replicas") as url:
        yield url




class Replica:
    """One `faillab serve` process with its own workspace folder."""

    def __init__(self, root: Path, port: int, env: dict[str, str]) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = root.parent / f"replica-{port}.log"
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        faillab = str(Path(sys.executable).parent / "faillab")
        self.proc = subprocess.Popen(
            [faillab, "serve", "--workspace", str(root), "--port", str(port)],
            env={**os.environ, **env}, stdout=self._log, stderr=subprocess.STDOUT)

    def wait_ready(self) -> None:
        wait_for_health(self.url, self.proc, self.log_path, 90)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._log.close()


def sign_in(browser: Browser, replica: Replica, name: str) -> Page:
    page = browser.new_context(viewport={"width": 1500, "height": 1000}).new_page()
    page.goto(f"{replica.url}/annotate")
    wait_idle(page, 60_000)
    field = page.get_by_label("Your name", exact=True).and_(page.locator("input"))
    field.fill(name)
    field.press("Enter")
    wait_idle(page, 60_000)
    return page


def label_one(page: Page, category: str) -> bool:
    """Save ``category`` on the item shown; False when the queue is empty."""
    if page.get_by_text("Your queue is empty").count():
        return False
    page.get_by_role("button", name=re.compile(f"^{category}")).click()
    wait_idle(page, 60_000)
    expect(page.get_by_text(f"Saved {category}")).to_be_visible()
    return True


def test_two_replicas_two_annotators_no_label_lost_or_duplicated(
        tmp_path: Path, s3_server: S3Server, database: str,
        browser: Browser) -> None:
    url = s3_server.new_bucket()
    env = {**s3_server.env(), "FAILLAB_TRAJECTORIES_URL": url, "FAILLAB_DATABASE_URL": database,
           "FAILLAB_AUTH": "none", "FAILLAB_BLIND": "1"}
    env.pop("AWS_SESSION_TOKEN", None)
    # The import host: the demo's trajectories go to the object store, nothing to the folders.
    importer = Workspace(tmp_path / "import-host", trajectories_url=url,
                         filesystem=s3_server.filesystem())
    demo = generate_demo(importer.root, seed=3, n_tasks=12, rollouts=2, n_patients=100)
    importer.add((t, "demo") for t in demo.trajectories)
    items = [str(i) for i in failed_frame(importer)["id"].head(ITEMS)]
    assert len(items) == ITEMS

    store = open_store(database)
    store.users.add("ana", "annotator")
    store.users.add("ben", "annotator")
    store.queues.assign(items, ["ana", "ben"], overlap=2, double_share=1.0)

    taken: set[int] = set()
    replicas = []
    try:
        for name in ("one", "two"):
            port = free_port_in(SERVER_PORTS, taken)
            taken.add(port)
            root = tmp_path / f"replica-{name}"
            root.mkdir()
            replicas.append(Replica(root, port, env))
        for replica in replicas:
            replica.wait_ready()
        ana = sign_in(browser, replicas[0], "ana")
        ben = sign_in(browser, replicas[1], "ben")
        for page in (ana, ben):
            # Each replica shows a queued trajectory, read from the object store.
            expect(page.get_by_text(re.compile("|".join(items))).first).to_be_visible()
            assert not page.locator("[data-testid='stException']").count()
        # Interleaved: each save lands while the other replica has the same items open.
        saved = {"ana": 0, "ben": 0}
        for _ in range(ITEMS + 1):
            saved["ana"] += label_one(ana, "SQL Logic Error")
            saved["ben"] += label_one(ben, "Answer Format Error")
        assert saved == {"ana": ITEMS, "ben": ITEMS}
        for page in (ana, ben):
            expect(page.get_by_text("Your queue is empty")).to_be_visible()
            page.context.close()
    finally:
        for replica in replicas:
            replica.stop()

    # The replicas' own folders never held a trajectory part.
    assert not [p for p in tmp_path.rglob("*.parquet") if "replica-" in str(p)]
    labels = [lab for lab in store.labels.all() if lab.annotator in ("ana", "ben")]
    store.close()
    got = sorted((lab.trajectory_id, lab.annotator, lab.category) for lab in labels)
    want = sorted([(i, "ana", "sql_logic_error") for i in items]
                  + [(i, "ben", "answer_format_error") for i in items])
    assert got == want  # every label once: none lost, none twice
