"""Trajectory parts in an S3-compatible object store (``s3://bucket/prefix``).

A team whose trajectories outgrow one disk keeps the Parquet parts and their manifest in an
object store; the workspace folder keeps what is per machine (settings, the write lock,
rejects files). The parts are read and written with pyarrow's S3 filesystem and handed to
DuckDB as Arrow datasets. DuckDB's own ``httpfs`` extension would read them directly, but the
extension is downloaded at first use and no build of it matches the DuckDB this project pins
when the machine is offline; pyarrow ships its S3 client inside the wheel.

Object stores have no rename, so a part is written once under its final name and becomes
visible only when the manifest (one object, replaced by a single PUT, which readers see whole
or not at all) lists it. Parts nobody listed are deleted by a later writer once they are older
than the grace period, so an import still running on another machine keeps its parts.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

from faillab_core.errors import FaillabError

if TYPE_CHECKING:
    from faillab_core.settings import Settings

SCHEME = "s3://"


class ObjectStoreError(FaillabError):
    """A bad object-store URL or an object store that does not answer."""


class ObjectStoreUnreachableError(ObjectStoreError):
    """The object store did not answer: trying again later is the remedy."""


def is_remote(url: str) -> bool:
    return url.startswith(SCHEME)


@dataclass(frozen=True)
class S3Location:
    """Where the parts are: a bucket and a key prefix (no leading or trailing slash)."""

    bucket: str
    prefix: str

    @classmethod
    def parse(cls, url: str) -> S3Location:
        if not is_remote(url):
            raise ObjectStoreError(f"{url!r}: expected s3://bucket/prefix")
        bucket, _, prefix = url[len(SCHEME):].partition("/")
        if not bucket:
            raise ObjectStoreError(f"{url!r}: no bucket name")
        return cls(bucket, prefix.strip("/"))

    @property
    def base(self) -> str:
        """The path pyarrow's filesystem uses for the prefix (``bucket/prefix``)."""
        return f"{self.bucket}/{self.prefix}" if self.prefix else self.bucket

    @property
    def url(self) -> str:
        return SCHEME + self.base


def s3_filesystem(*, endpoint: str = "", region: str = "", access_key: str = "",
                  secret_key: str = "", session_token: str = "") -> pafs.S3FileSystem:
    """pyarrow's S3 client; empty values fall back to the AWS SDK's own sources."""
    kwargs: dict[str, Any] = {}
    if endpoint:
        kwargs["endpoint_override"] = endpoint
        # A plain-HTTP endpoint (a test server, MinIO on a private network) needs its scheme.
        if endpoint.startswith("http://"):
            kwargs["scheme"] = "http"
    if region:
        kwargs["region"] = region
    if access_key or secret_key:
        kwargs["access_key"] = access_key
        kwargs["secret_key"] = secret_key
        if session_token:
            kwargs["session_token"] = session_token
    return pafs.S3FileSystem(**kwargs)


def filesystem_from_settings(s: Settings) -> pafs.S3FileSystem:
    """The S3 client the settings describe (endpoint, region, AWS credentials). The settings
    are passed in by the faces: nothing in the domain reads the environment."""
    return s3_filesystem(endpoint=s.s3_endpoint, region=s.s3_region,
                         access_key=s.s3_access_key_id, secret_key=s.s3_secret_access_key,
                         session_token=s.s3_session_token)


class RemoteParts:
    """The parts folder's operations on an object store: text objects (the manifest), listing,
    deleting. Parquet reads and writes go through ``filesystem`` directly."""

    def __init__(self, location: S3Location, filesystem: pafs.FileSystem) -> None:
        self.location = location
        self.filesystem = filesystem

    def path(self, name: str) -> str:
        return f"{self.location.base}/{name}"

    def read_text(self, name: str) -> str | None:
        """The object's text; None when it does not exist (but the bucket does)."""
        try:
            with self.filesystem.open_input_stream(self.path(name)) as stream:
                return bytes(stream.read()).decode("utf-8")
        except FileNotFoundError:
            self.check_bucket()
            return None
        except OSError as err:
            raise failure(f"{self.location.url}: cannot read {name}: ", err) from None

    def check_bucket(self) -> None:
        """A missing bucket is a mistake (a typo, the wrong endpoint), not an empty workspace."""
        try:
            info = self.filesystem.get_file_info(self.location.bucket)
        except OSError as err:
            raise failure(f"{self.location.url}: ", err) from None
        if info.type == pafs.FileType.NotFound:
            raise ObjectStoreError(
                f"{self.location.url}: bucket {self.location.bucket!r} does not exist at this "
                "endpoint (faillab never creates buckets; check FAILLAB_TRAJECTORIES_URL and "
                "AWS_ENDPOINT_URL)")

    def write_text(self, name: str, text: str) -> None:
        """One PUT: readers see the old object or the new one, never a mix."""
        try:
            with self.filesystem.open_output_stream(self.path(name)) as stream:
                stream.write(text.encode("utf-8"))
        except OSError as err:
            raise failure(f"{self.location.url}: cannot write {name}: ", err) from None

    def sizes(self, suffix: str = ".parquet") -> dict[str, int]:
        """Each object's size in bytes (one LIST request): readers then skip a HEAD per part."""
        return {name: size for name, _, size in self.infos(suffix)}

    def objects(self, suffix: str = ".parquet") -> list[tuple[str, float]]:
        """(name, modification time in seconds) of each object directly under the prefix."""
        return [(name, mtime) for name, mtime, _ in self.infos(suffix)]

    def infos(self, suffix: str) -> list[tuple[str, float, int]]:
        """(name, modification time in seconds, bytes) of each object directly under the
        prefix whose name ends with ``suffix``."""
        selector = pafs.FileSelector(self.location.base, allow_not_found=True, recursive=False)
        try:
            infos = self.filesystem.get_file_info(selector)
        except OSError as err:
            raise failure(f"{self.location.url}: cannot list: ", err) from None
        out = []
        for info in infos:
            if info.type == pafs.FileType.File and info.base_name.endswith(suffix):
                mtime = info.mtime.timestamp() if info.mtime is not None else 0.0
                out.append((info.base_name, mtime, int(info.size or 0)))
        return sorted(out)

    def delete(self, name: str) -> None:
        try:
            with contextlib.suppress(FileNotFoundError):
                self.filesystem.delete_file(self.path(name))
        except OSError as err:
            raise failure(f"{self.location.url}: cannot delete {name}: ", err) from None

    def exists(self, name: str) -> bool:
        try:
            info = self.filesystem.get_file_info(self.path(name))
        except OSError as err:
            raise failure(f"{self.location.url}: cannot look up {name}: ", err) from None
        return bool(info.type == pafs.FileType.File)


def failure(context: str, err: OSError) -> ObjectStoreError:
    """``context: what the store said`` as the error to raise: an unreachable store gets its
    own class, so an import can say that running it again will do."""
    text = describe(err)
    unreachable = text.startswith("the object store is not answering")
    return (ObjectStoreUnreachableError if unreachable else ObjectStoreError)(f"{context}{text}")


def describe(err: OSError) -> str:
    """The S3 client's error in a few words: a store that does not answer says so (the SDK's
    text repeats the bucket, key and curl codes)."""
    text = str(err)
    if "NETWORK_CONNECTION" in text or "Could not connect" in text:
        detail = text.rpartition("Details: ")[2] if "Details: " in text else text
        return f"the object store is not answering ({detail.strip()})"
    return text
