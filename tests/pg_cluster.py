"""A throwaway PostgreSQL cluster in its own folder on its own loopback port, for what must stop
and restart a server (outage tests, the soak bench): never the shared server on 5432."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

#: The server's programs (Debian's layout), or None where PostgreSQL is not installed.
PG_BIN = next((p.parent for p in sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))),
              None)


def as_postgres(command: list[str]) -> list[str]:
    """`command` run as the postgres user when this is root (PostgreSQL refuses root)."""
    if os.geteuid() != 0:
        return command
    return ["su", "postgres", "-c", " ".join(command)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    """A PostgreSQL cluster of this run in its own folder, on its own loopback port."""

    data: Path
    port: int

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    @classmethod
    def create(cls, prefix: str = "faillab-pg-") -> Cluster:
        """A new cluster, started; RuntimeError where PostgreSQL is not installed."""
        if PG_BIN is None:
            raise RuntimeError("PostgreSQL's pg_ctl is not installed (/usr/lib/postgresql/*/bin)")
        data = Path(tempfile.mkdtemp(prefix=prefix))
        if os.geteuid() == 0:
            shutil.chown(data, "postgres")
        subprocess.run(as_postgres([str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust",
                                    "-U", "postgres"]), check=True, capture_output=True,
                       timeout=120)
        cluster = cls(data, free_port())
        cluster.start()
        return cluster

    def _ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        assert PG_BIN is not None
        return subprocess.run(as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.data),
                                           *args]), capture_output=True, text=True, timeout=180)

    def start(self) -> None:
        done = self._ctl("-w", "-t", "120", "-l", str(self.data / "log"), "-o",
                         f"'-p {self.port} -k /tmp -c listen_addresses=127.0.0.1'", "start")
        if done.returncode != 0 and not self.running():
            raise RuntimeError(f"PostgreSQL did not start: {done.stdout}{done.stderr}")

    def stop(self, mode: str = "fast") -> None:
        self._ctl("-w", "-m", mode, "stop")

    def running(self) -> bool:
        return self._ctl("status").returncode == 0

    def ensure_running(self) -> None:
        if not self.running():
            self.start()

    def remove(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.data, ignore_errors=True)
