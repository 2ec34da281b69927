"""The local S3-compatible server the deployment tests run against (moto in server mode)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

import pyarrow.fs as pafs

from faillab_core.settings import Settings
from tests.support import free_port_in
from trajectories.objectstore import s3_filesystem
from trajectories.workspace import Workspace

PORTS = range(8700, 8710)
REGION = "us-east-1"
# moto accepts any credentials; real ones never appear in tests.
ACCESS_KEY, SECRET_KEY = "testing-key", "testing-secret"


def free_port() -> int:
    return free_port_in(PORTS)


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


def s3_workspace(root: Path, url: str) -> Workspace:
    """The workspace at ``url`` with the S3 client the environment's settings describe (the
    test's S3 server), as the faces build it."""
    return Workspace(root, trajectories_url=url, settings=Settings.from_env())
