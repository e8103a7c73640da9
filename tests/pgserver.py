"""A real, throwaway PostgreSQL cluster for the tests (issue 20): never a mock.

Debian's server binaries (`postgresql` package: /usr/lib/postgresql/<v>/bin) run an initdb'd
cluster in a private temporary directory, listening only on a unix socket in that directory
(no TCP port at all: nothing else on the machine can reach it), started and stopped by the test
session. PostgreSQL refuses to run as root, so under root (CI) the cluster runs as `nobody`
(setpriv) and the directory is handed to that user; otherwise it runs as the current user.

The test session's cluster is shared; each test gets its own database (`fresh_database`).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

SUPERUSER = "taskgate"


def server_bin() -> Path | None:
    """The newest installed PostgreSQL server's bin directory, or None."""
    override = os.environ.get("TASKGATE_PG_BIN")
    if override:
        return Path(override)
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=_version)
    return Path(found[-1]).parent if found else None


def _version(path: str) -> int:
    try:
        return int(Path(path).parent.parent.name)
    except ValueError:
        return 0


def _free_port() -> int:
    # Only the socket file's name uses the port (listen_addresses is empty); a free TCP port
    # number keeps two clusters on one machine from ever choosing the same file name.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgServer:
    """One running cluster: its directory, socket directory and port."""

    bin: Path
    root: Path
    port: int
    run_as: str | None  # the unprivileged user under root, else None

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def sockets(self) -> Path:
        return self.root / "sock"

    def url(self, dbname: str = "postgres") -> str:
        """A libpq URL for `dbname` over the private socket (no password: trust on the socket,
        which only this directory's owner and root can reach)."""
        return f"postgresql:///{dbname}?host={self.sockets}&port={self.port}&user={SUPERUSER}"

    def _run(self, args: Sequence[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = list(args)
        if self.run_as is not None:
            argv = ["setpriv", f"--reuid={self.run_as}", f"--regid={self._gid()}",
                    "--clear-groups", "--", *argv]  # fmt: skip
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "TZ": "UTC"}
        return subprocess.run(argv, env=env, text=True, capture_output=True, check=check,
                              cwd=self.root, timeout=120)  # fmt: skip

    def _gid(self) -> int:
        assert self.run_as is not None
        return pwd.getpwnam(self.run_as).pw_gid

    def init(self) -> None:
        self.data.mkdir()
        self.sockets.mkdir()
        if self.run_as is not None:
            entry = pwd.getpwnam(self.run_as)
            for p in (self.root, self.data, self.sockets):
                os.chown(p, entry.pw_uid, entry.pw_gid)
        os.chmod(self.data, 0o700)
        self._run([str(self.bin / "initdb"), "-D", str(self.data), "-U", SUPERUSER,
                   "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"])  # fmt: skip

    def start(self, max_connections: int = 120) -> None:
        options = (
            f"-c listen_addresses='' -c unix_socket_directories={self.sockets} "
            f"-p {self.port} -c fsync=off -c full_page_writes=off "
            f"-c max_connections={max_connections}"
        )
        done = self._run(
            [str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options, "-w", "-t", "60",
             "-l", str(self.root / "server.log"), "start"],
            check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed: {done.stderr}\n{self.log()}")

    def stop(self, mode: str = "fast") -> None:
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"],
                  check=False)  # fmt: skip

    def running(self) -> bool:
        done = self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "status"], check=False)
        return done.returncode == 0

    def log(self) -> str:
        try:
            return (self.root / "server.log").read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def fresh_database(self) -> str:
        """A new empty database on this cluster; its URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name} TEMPLATE template0")  # type: ignore[arg-type]
        return self.url(name)


def start_server() -> PgServer:
    """Create and start a throwaway cluster (the caller stops it and removes `root`)."""
    binary = server_bin()
    if binary is None:
        raise RuntimeError(
            "PostgreSQL server binaries not found (apt-get install postgresql, or set "
            "TASKGATE_PG_BIN to the directory holding initdb and pg_ctl)"
        )
    run_as = None
    if os.geteuid() == 0:
        run_as = os.environ.get("TASKGATE_PG_USER", "nobody")
        if shutil.which("setpriv") is None:
            raise RuntimeError("running as root needs setpriv (util-linux) to drop privileges")
    root = Path(tempfile.mkdtemp(prefix="taskgate-pg-"))
    server = PgServer(binary, root, _free_port(), run_as)
    try:
        server.init()
        server.start()
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return server


def remove(server: PgServer) -> None:
    """Stop the cluster (immediately) and delete its directory."""
    server.stop("immediate")
    shutil.rmtree(server.root, ignore_errors=True)
