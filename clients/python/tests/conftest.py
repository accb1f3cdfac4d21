"""A real `signalbus serve` (embedded) per test, started from the built binary."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Iterator, Optional, Sequence

import pytest

from signalbus_client import AdminClient

HERE = Path(__file__).resolve().parent
CLIENT_DIR = HERE.parent
ADMIN_TOKEN = "sbtest-admin-token"
STALE_AFTER = "3s"


def _binary() -> Path:
    configured = os.environ.get("SIGNALBUS_BIN")
    path = Path(configured) if configured else (CLIENT_DIR / "../../target/debug/signalbus")
    return path.resolve()


def pytest_sessionstart(session: pytest.Session) -> None:
    path = _binary()
    if not path.is_file() or not os.access(path, os.X_OK) or path.stat().st_size == 0:
        raise pytest.UsageError(
            f"the signalbus binary {path} is missing or empty: build it with `cargo build --bin signalbus` "
            "or point SIGNALBUS_BIN at one"
        )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Bus:
    """One `signalbus serve` process; stop() and start() keep the port and the data dir."""

    def __init__(
        self, data_dir: Path, port: Optional[int] = None, stale_after: str = STALE_AFTER, extra_args: Sequence[str] = ()
    ) -> None:
        self.data_dir = data_dir
        self.extra_args = list(extra_args)
        self.port = port or free_port()
        self.stale_after = stale_after
        self.url = f"http://127.0.0.1:{self.port}"
        self.admin_token = ADMIN_TOKEN
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.log_path = data_dir / "serve.log"
        self.starts = 0

    def start(self) -> None:
        assert self.proc is None, "already running"
        self.starts += 1
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [
                str(_binary()), "serve",
                "--listen", f"127.0.0.1:{self.port}",
                "--data-dir", str(self.data_dir / "data"),
                "--admin-token", self.admin_token,
                "--stale-after", self.stale_after,
                *self.extra_args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "info")},
        )
        log.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"signalbus serve exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/readyz", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"signalbus serve not ready within 30s:\n{self.log_tail()}")

    def stop(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(sig)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


@pytest.fixture
def bus(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Bus]:
    b = Bus(tmp_path)
    b.start()
    yield b
    b.stop(signal.SIGTERM)
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        print(f"--- signalbus serve log ({b.log_path}) ---\n{b.log_tail(80)}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


@pytest.fixture
async def admin(bus: Bus) -> AdminClient:
    async with AdminClient(bus.url, bus.admin_token) as a:
        yield a  # type: ignore[misc]
