"""``faillab serve`` closes Streamlit's metrics endpoint: before any sign-in it told anyone who
could reach the server how many sessions were open (who is at work, and when). A real server,
started as people start it, on loopback."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support import free_port_in, wait_for_health

# This test's own ports, apart from the other server tests'.
PORTS = range(8730, 8740)


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode("utf-8", "replace")


@pytest.mark.slow
def test_the_metrics_endpoint_is_closed_to_everyone(tmp_path: Path) -> None:
    port = free_port_in(PORTS)
    log_path = tmp_path / "serve.log"
    faillab = str(Path(sys.executable).parent / "faillab")
    env = {**os.environ, "FAILLAB_AUTH": "password", "FAILLAB_DATABASE_URL": ""}
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [faillab, "serve", "--workspace", str(tmp_path / "ws"), "--port", str(port)],
            env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_for_health(url, proc, log_path, 90)
            # A page was opened, so there is a session to count.
            assert get(f"{url}/")[0] == 200
            status, body = get(f"{url}/_stcore/metrics")
            assert status == 404, body[:300]
            assert "session" not in body.lower()
            assert get(f"{url}/_stcore/metrics?families=session_events_total")[0] == 404
            assert get(f"{url}/_stcore/health")[0] == 200  # the rest is served as before
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
