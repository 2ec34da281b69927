"""The annotation database going away: every call says which database is not answering, in
one line (the CLI too), nothing half-saved, and the same store works again once it is back.
Run against a throwaway PostgreSQL cluster this test starts and stops itself (never the
shared server)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from faillab.cli import main
from labeling.store import StoreUnavailableError, open_store
from tests.pg_cluster import PG_BIN, Cluster


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    if PG_BIN is None:
        pytest.fail("PostgreSQL's initdb is not installed (/usr/lib/postgresql/*/bin)")
    server = Cluster.create(prefix="faillab-outage-")
    try:
        yield server
    finally:
        server.remove()


def test_an_outage_is_one_message_and_the_store_comes_back(cluster: Cluster,
                                                          tmp_path: Path) -> None:
    store = open_store(cluster.url)
    try:
        store.users.add("ana", role="annotator")
        cluster.stop()
        with pytest.raises(StoreUnavailableError) as caught:
            store.users.add("ben", role="annotator")
        assert str(caught.value) == (
            f"the annotation database at 127.0.0.1:{cluster.port}/postgres is not answering")
        with pytest.raises(StoreUnavailableError):
            store.users.all()
        # The CLI says the same in one line.
        env = {"FAILLAB_DATABASE_URL": cluster.url, "FAILLAB_WORKSPACE": str(tmp_path)}
        result = CliRunner().invoke(main, ["users", "list"], env=env)
        assert result.exit_code == 1, result.exception
        assert "Traceback" not in result.output + result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "is not answering" in lines[0], lines
        cluster.start()
        # Back: the same store object reconnects; what failed was not half-saved.
        names = [u.name for u in store.users.all()]
        assert "ana" in names and "ben" not in names
        store.users.add("ben", role="annotator")
        assert "ben" in [u.name for u in store.users.all()]
    finally:
        store.close()


def test_the_cli_outside_python_says_it_in_one_line(cluster: Cluster, tmp_path: Path) -> None:
    cluster.stop()
    faillab = str(Path(sys.executable).parent / "faillab")
    result = subprocess.run([faillab, "users", "list"], capture_output=True, text=True,
                            env={**os.environ, "FAILLAB_DATABASE_URL": cluster.url,
                                 "FAILLAB_WORKSPACE": str(tmp_path)}, timeout=120)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "is not answering" in lines[0], result.stderr
