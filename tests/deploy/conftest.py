"""A real S3-compatible server for the object-store tests: moto's HTTP server, started in this
process on a loopback port (8700-8709) and stopped at the end of the module.

moto is a pip package (the dev extra) speaking the S3 REST protocol over real HTTP, so pyarrow's
S3 client, worker processes and separate server processes all reach it exactly as they would
reach MinIO or AWS; MinIO's server is a separate binary that an offline machine cannot fetch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from tests.deploy.support import S3Server, free_port


@pytest.fixture(scope="module")
def s3_server() -> Iterator[S3Server]:
    from moto.server import ThreadedMotoServer

    # One access-log line per request would bury a failure's report.
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield S3Server(f"http://127.0.0.1:{port}")
    finally:
        server.stop()


@pytest.fixture
def s3_env(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """The settings point at the test server (as a deployment's environment would)."""
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    return s3_server
