"""The real daemon process: API over HTTP, sd_notify, SIGTERM, failures that must not stop it."""

import socket
import threading
import time

import pytest

from tests.daemon.daemonproc import DaemonProcess, write_config


@pytest.fixture
def notify_socket(tmp_path):
    path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(5)
    yield path, sock
    sock.close()


class _Listener:
    """Reads the notify socket all along, as systemd does: the kernel keeps only
    ``net.unix.max_dgram_qlen`` datagrams (10 here), and a daemon that pings every 0.2 s while a
    request takes seconds (a queued prompt is checked in the check child) would fill it and have
    STOPPING=1 dropped by a reader that waits."""

    def __init__(self, sock: socket.socket) -> None:
        self.got: list[str] = []
        self._sock = sock
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                self.got.append(self._sock.recv(4096).decode())
            except (TimeoutError, OSError):
                continue

    def wait_for(self, text: str, timeout: float = 10) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if any(text in m for m in list(self.got)):
                return True
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)


def test_daemon_serves_notifies_and_stops_cleanly_on_sigterm(tmp_path, notify_socket):
    path, sock = notify_socket
    config, url = write_config(tmp_path)
    listener = _Listener(sock)
    daemon = DaemonProcess(config, url, env={"NOTIFY_SOCKET": str(path), "WATCHDOG_USEC": "400000"})
    try:
        assert listener.wait_for("READY=1") and listener.wait_for("WATCHDOG=1")
        status = daemon.get("/api/status").json()
        assert status["state"] == "idle" and {"night", "deadline", "show"} <= set(status["next_runs"])
        assert daemon.post("/api/prompts", {"prompt": "a red fox"}).status_code == 201
        assert daemon.post("/api/prompts", {"prompt": "x"}, token="wrong-token-0000").status_code == 401
        code, seconds = daemon.terminate()
        assert code == 0 and seconds < 10
        assert listener.wait_for("STOPPING=1", timeout=2)
    finally:
        listener.stop()
        daemon.kill()


def test_daemon_process_imports_no_heavy_modules(tmp_path):
    """numpy, scikit-learn, matplotlib, Pillow, onnx belong in workers only (the daemon stays small)."""
    import subprocess
    import sys

    from tests.daemon.daemonproc import ROOT

    config, _ = write_config(tmp_path)
    script = (
        "import sys\n"
        "from frame.config import load_config\n"
        "from frame.daemon.service import Daemon\n"
        "from frame.web import create_blueprint\n"
        f"d = Daemon(load_config({str(config)!r}), pages=create_blueprint)\n"
        "d.start(); d.refresh_feeds(); d.rotate(); d.stop()\n"
        "heavy = ('numpy', 'sklearn', 'matplotlib', 'PIL', 'onnx', 'onnxruntime', 'scipy')\n"
        "print(' '.join(m for m in heavy if m in sys.modules))\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


def test_notifier_never_blocks_when_nobody_reads(notify_socket):
    from frame.daemon.sdnotify import Notifier

    path, _ = notify_socket
    notifier = Notifier(str(path))
    started = time.monotonic()
    delivered = [notifier.status(f"line {n}") for n in range(500)]
    assert time.monotonic() - started < 2 and delivered[0] and not all(delivered)
    notifier.close()
