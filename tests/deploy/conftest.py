"""A real S3-compatible server for the object-store tests: moto's HTTP server, started in this
process on a loopback port (8700-8709) and stopped at the end of the module.

moto is a pip package (the dev extra) speaking the S3 REST protocol over real HTTP, so pyarrow's
S3 client, worker processes and separate server processes all reach it exactly as they would
reach MinIO or AWS; MinIO's server is a separate binary that an offline machine cannot fetch.
"""

from __future__ import annotations

import logging
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow.fs as pafs
import pytest

from trajectories.objectstore import s3_filesystem

PORTS = range(8700, 8710)
REGION = "us-east-1"
# moto accepts any credentials; real ones never appear in tests.
ACCESS_KEY, SECRET_KEY = "testing-key", "testing-secret"


def _free_port() -> int:
    for port in PORTS:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {PORTS.start}-{PORTS.stop - 1}")


@dataclass(frozen=True)
class S3Server:
    endpoint: str

    def env(self) -> dict[str, str]:
        """The settings' environment variables pointing at this server."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_REGION": REGION,
                "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}

    def filesystem(self) -> pafs.S3FileSystem:
        return s3_filesystem(endpoint=self.endpoint, region=REGION, access_key=ACCESS_KEY,
                             secret_key=SECRET_KEY)

    def new_bucket(self) -> str:
        """A fresh bucket's s3:// URL with a prefix: tests never share objects."""
        bucket = f"faillab-{uuid.uuid4().hex[:12]}"
        # The product never creates buckets (an operator does); only the tests may.
        fs = pafs.S3FileSystem(endpoint_override=self.endpoint, scheme="http", region=REGION,
                               access_key=ACCESS_KEY, secret_key=SECRET_KEY,
                               allow_bucket_creation=True)
        fs.create_dir(bucket)
        return f"s3://{bucket}/team/trajectories"


@pytest.fixture(scope="module")
def s3_server() -> Iterator[S3Server]:
    from moto.server import ThreadedMotoServer

    # One access-log line per request would bury a failure's report.
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = _free_port()
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
