"""A PostgreSQL server of a test's own: initdb into a temporary directory, started on a free
port and stopped by its process id. For tests that take the database away (an outage), which
must never touch the shared server on 5432."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest


def _binaries() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    return versions[-1].parent if versions else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Instance:
    """One server: ``start()`` and ``stop()`` as often as a test likes, on the same data."""

    def __init__(self, root: Path, settings: dict[str, str] | None = None) -> None:
        #: Server settings beyond the defaults (``-c name=value``).
        self.settings = settings or {}
        bin_dir = _binaries()
        if bin_dir is None:
            pytest.fail("PostgreSQL's initdb is not installed; it is needed for outage tests")
        self.bin = bin_dir
        self.data = root / "data"
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self._as_user: list[str] = []
        if os.geteuid() == 0:  # the server refuses to run as root: run it as postgres
            self._as_user = ["runuser", "-u", "postgres", "--"]
            root.chmod(0o777)
        self.data.mkdir()
        if self._as_user:
            shutil.chown(self.data, "postgres")
        subprocess.run(
            [*self._as_user, str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust",
             "-U", "postgres", "--no-sync"],
            check=True, capture_output=True,
        )  # fmt: skip

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres?connect_timeout=2"

    def start(self) -> None:
        command = [
            *self._as_user, str(self.bin / "postgres"), "-D", str(self.data),
            "-p", str(self.port), "-c", "listen_addresses=127.0.0.1",
            "-c", f"unix_socket_directories={self.data}", "-c", "fsync=off",
            *(part for name, value in self.settings.items() for part in ("-c", f"{name}={value}")),
        ]  # fmt: skip
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if self.process.poll() is not None:
                    raise RuntimeError(self.process.stderr.read().decode()) from None  # type: ignore[union-attr]
                time.sleep(0.05)
        raise RuntimeError("the test's PostgreSQL did not start within 30 s")

    def stop(self) -> None:
        """An immediate shutdown, as a crash or a network cut looks to a client."""
        if self.process is not None and self.process.poll() is None:
            self._signal(signal.SIGQUIT)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.process.wait()
        self.process = None

    def _signal(self, sig: signal.Signals) -> None:
        assert self.process is not None
        # under runuser the server is the child of the process started; signal the server
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        pids = children.read_text().split() if children.exists() and self._as_user else []
        for pid in pids or [str(self.process.pid)]:
            with suppress(ProcessLookupError):
                os.kill(int(pid), sig)


@contextmanager
def postgres_instance(**settings: str) -> Iterator[Instance]:
    """A started server of the test's own (with ``settings``), stopped (by process id) when
    the block ends, its data in a temporary directory of its own (a server run as
    ``postgres`` cannot enter pytest's, which only root may)."""
    root = Path(tempfile.mkdtemp(prefix="mcp-state-versions-pg-"))
    try:
        instance = Instance(root, settings)
        instance.start()
        try:
            yield instance
        finally:
            instance.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
