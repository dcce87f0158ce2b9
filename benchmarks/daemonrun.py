"""What the daemon benchmarks share (``daemon_memory.py``, ``daemon_soak.py``): the real daemon
(``python -m frame --config FILE run``) on a temporary state folder with seeded pictures, an owner
session like a phone's, and a sampler of the resident memory of the daemon and of each process it
starts (render/show workers, short children), read from /proc.
"""

from __future__ import annotations

import html
import io
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests
import yaml

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "bench-owner-token-0123456789"
OWNER = {"Authorization": f"Bearer {TOKEN}"}  # every route needs the owner, reads too (issue 40)
CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')
WORKER_ENTRIES = ("render", "show", "infoscreen", "imagechild", "checkchild")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def proc_kib(pid: int, field_name: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def seed_pictures(state_dir: Path, count: int) -> list[int]:
    """``count`` painted-like 800×480 PNGs in the gallery and the store (before the daemon starts)."""
    from PIL import Image

    from frame.daemon.store.database import Store

    gallery = state_dir / "gallery"
    gallery.mkdir(parents=True, exist_ok=True)
    store = Store.open(state_dir)
    ids = []
    try:
        for i in range(count):
            name = f"seed-{i:03d}.png"
            Image.linear_gradient("L").resize((800, 480)).convert("RGB").rotate(i * 7).save(gallery / name)
            ids.append(store.add_picture(file=name, prompt=f"seeded picture {i}", theme="a lake", style="oil",
                                         seed=i, width=800, height=480, model="demo"))
    finally:
        store.close()
    return ids


def write_config(folder: Path, port: int, extra: dict | None = None) -> Path:
    data = {"state_dir": str(folder / "state"), "web": {"listen": f"127.0.0.1:{port}", "token": TOKEN},
            "model": {"source": "demo", "steps": 8, "size": "256x160"}, "display": {"panel": "virtual"},
            "schedule": {"timezone": "UTC", "render_at": "03:00", "deadline": "03:01", "show_at": "03:01",
                         "misfire_grace_minutes": 0}}
    for key, value in (extra or {}).items():
        data.setdefault(key, {}).update(value) if isinstance(value, dict) else data.update({key: value})
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@dataclass
class Sampler:
    """Polls /proc every ``interval`` s: the daemon's VmRSS, each child's VmHWM (by pid, with its
    entry point), and the largest sum of all of them at one moment."""

    daemon_pid: int
    interval: float = 0.05
    daemon_series: list[tuple[float, float]] = field(default_factory=list)
    children: dict[int, dict] = field(default_factory=dict)
    max_sum_mb: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> Sampler:
        threading.Thread(target=self._run, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _kids(self) -> list[int]:
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as handle:
                        if int(handle.read().rsplit(")", 1)[1].split()[1]) == self.daemon_pid:
                            found.append(int(entry))
                except (OSError, ValueError, IndexError):
                    continue
        return found

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = proc_kib(self.daemon_pid, "VmRSS")
            if rss is None:
                return
            total = rss / 1024
            self.daemon_series.append((time.monotonic(), rss / 1024))
            for pid in self._kids():
                info = self.children.setdefault(pid, {"entry": _entry(pid), "peak_mb": 0.0})
                if info["entry"] not in WORKER_ENTRIES:  # seen between fork and exec: name it again
                    info["entry"] = _entry(pid)
                hwm, now = proc_kib(pid, "VmHWM"), proc_kib(pid, "VmRSS")
                if hwm is not None:
                    info["peak_mb"] = max(info["peak_mb"], hwm / 1024)
                total += (now or 0) / 1024
            self.max_sum_mb = max(self.max_sum_mb, total)
            self._stop.wait(self.interval)


def _entry(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv = handle.read().split(b"\0")
    except OSError:
        return "?"
    module = next((a.decode() for a in argv if a.startswith(b"frame.worker.")), "")
    return module.removeprefix("frame.worker.") or " ".join(a.decode(errors="replace") for a in argv[:3])


class Daemon:
    """``frame run`` in a subprocess, its log in ``folder/daemon.log``; ``entry`` is what the interpreter
    runs to reach frame's CLI (``-m frame``, or ``-c`` and a wrapper script)."""

    def __init__(self, folder: Path, port: int, config: Path, entry: tuple[str, ...] = ("-m", "frame")) -> None:
        self.folder, self.port, self.base = folder, port, f"http://127.0.0.1:{port}"
        self.log_path = folder / "daemon.log"
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen([sys.executable, *entry, "--config", str(config), "run"], cwd=ROOT,
                                     env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=self._log,
                                     stderr=subprocess.STDOUT)
        for _ in range(300):
            try:
                requests.get(f"{self.base}/api/status", timeout=1)
                break
            except requests.ConnectionError:
                time.sleep(0.1)
        else:
            raise RuntimeError(f"the daemon did not answer; see {self.log_path}")

    def rss_mb(self) -> float:
        return (proc_kib(self.proc.pid, "VmRSS") or 0) / 1024

    def hwm_mb(self) -> float:
        return (proc_kib(self.proc.pid, "VmHWM") or 0) / 1024

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._log.close()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")


def owner_session(base: str) -> requests.Session:
    """A logged-in phone: the session cookie and the page's CSRF token (``session.csrf``)."""
    session = requests.Session()
    token = CSRF.search(session.get(f"{base}/login", timeout=10).text).group(1)
    answer = session.post(f"{base}/login", data={"token": TOKEN, "csrf_token": token, "next": "/"}, timeout=10,
                          allow_redirects=False)
    if answer.status_code != 303:
        raise RuntimeError(f"login failed: {answer.status_code}")
    session.csrf = CSRF.search(session.get(f"{base}/upload", timeout=10).text).group(1)
    return session


def upload(session: requests.Session, base: str, name: str, data: bytes) -> tuple[int, str]:
    """POST one photo through the form; (status, the field's message or the picture's address)."""
    answer = session.post(f"{base}/upload", data={"csrf_token": session.csrf, "caption": name},
                          files={"photo": (name, io.BytesIO(data))}, timeout=600, allow_redirects=False)
    if answer.status_code == 303:
        return 303, answer.headers.get("Location", "")
    found = re.search(r'role="alert"[^>]*>(.*?)</', answer.text, re.S)
    return answer.status_code, html.unescape(found.group(1).strip() if found else answer.text[:160])
