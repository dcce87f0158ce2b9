"""Starting the real daemon (``python -m frame --config FILE run``) as a child process for tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests
import yaml

from tests.daemon.conftest import clock
from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used so far (from /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_cpu_share(pid: int, seconds: float) -> float:
    """The share of one core the process used over ``seconds`` of wall time."""
    used, started = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(pid) - used) / (time.monotonic() - started)


def write_config(tmp_path: Path, **sections) -> tuple[Path, str]:
    """A config file whose night is well away from now (no catch-up render) unless overridden."""
    port = free_port()
    data = {"state_dir": str(tmp_path / "state"), "web": {"listen": f"127.0.0.1:{port}", "token": "test-token-123456"},
            "schedule": {"timezone": "UTC", "render_at": clock(180), "deadline": clock(240), "show_at": clock(240)},
            "model": {"size": "64x64", "steps": 2}}
    for name, fields in sections.items():
        if isinstance(fields, dict):
            data.setdefault(name, {}).update(fields)
        else:
            data[name] = fields
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return path, f"http://127.0.0.1:{port}"


class DaemonProcess:
    def __init__(self, config_path: Path, url: str, env: dict | None = None) -> None:
        self.url = url
        self.log = config_path.with_suffix(".log").open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "frame", "--config", str(config_path), "run"], cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, stdout=self.log, stderr=subprocess.STDOUT)
        self.wait_ready()

    def wait_ready(self, timeout: float = 20) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited with {self.proc.returncode}; see {self.log.name}")
            try:
                requests.get(self.url + "/api/status", timeout=1)
                return
            except requests.ConnectionError:
                time.sleep(0.1)
        raise RuntimeError("daemon did not start listening")

    def get(self, path: str, token: str | None = "test-token-123456", timeout: float = 5):
        """GET as the owner (every route needs the token: issue 40); ``token=None`` as a visitor."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return requests.get(self.url + path, timeout=timeout, headers=headers)

    def post(self, path: str, body=None, token="test-token-123456"):
        return requests.post(self.url + path, json=body, timeout=5, headers={"Authorization": f"Bearer {token}"})

    def terminate(self, timeout: float = 10) -> tuple[int, float]:
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=timeout)
        return code, time.monotonic() - started

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()

    def wait_for(self, predicate, timeout: float = 60, interval: float = 0.2):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            value = predicate()
            if value:
                return value
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited with {self.proc.returncode}")
            time.sleep(interval)
        raise TimeoutError("condition not reached")
