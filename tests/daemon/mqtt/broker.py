"""A real mosquitto broker for the MQTT tests, on a free 127.0.0.1 port with a generated configuration.

Debian's ``mosquitto`` package (``/usr/sbin/mosquitto``; ``.ci/run`` installs it). Without it the
tests skip, unless ``REQUIRE_MQTT_BROKER=1`` (CI) makes that a failure. Persistence is on, as on a Home
Assistant box: a restart keeps the retained messages and the frame's session with what waits in it.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.ports import free_port

MOSQUITTO = shutil.which("mosquitto") or ("/usr/sbin/mosquitto" if Path("/usr/sbin/mosquitto").exists() else None)
PASSWD = shutil.which("mosquitto_passwd")


def need_broker() -> str:
    """mosquitto's path, or a skip (a failure when ``REQUIRE_MQTT_BROKER=1``)."""
    if MOSQUITTO is None:
        if os.environ.get("REQUIRE_MQTT_BROKER") == "1":
            pytest.fail("REQUIRE_MQTT_BROKER=1 but mosquitto is not installed (apt-get install mosquitto)")
        pytest.skip("mosquitto is not installed (apt-get install mosquitto)")
    return MOSQUITTO


class Broker:
    """One mosquitto; ``stop`` and ``start`` again keep its port, files and persistence."""

    def __init__(self, folder: Path, users: dict[str, str] | None = None, tls: dict[str, Path] | None = None) -> None:
        self.binary = need_broker()
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.log = folder / "mosquitto.log"
        lines = [f"listener {self.port} 127.0.0.1", "persistence true", f"persistence_location {folder}/",
                 "autosave_interval 1", f"log_dest file {self.log}", "log_type all", "connection_messages true",
                 f"user {pwd.getpwuid(os.getuid()).pw_name}", "max_queued_messages 20000"]
        if users:
            if PASSWD is None:
                pytest.skip("mosquitto_passwd is not installed")
            passwords = folder / "passwords"
            passwords.touch(mode=0o600)
            for user, password in users.items():
                subprocess.run([PASSWD, "-b", str(passwords), user, password], check=True, capture_output=True)
            lines += ["allow_anonymous false", f"password_file {passwords}"]
        else:
            lines.append("allow_anonymous true")
        if tls:
            lines += [f"cafile {tls['ca']}", f"certfile {tls['cert']}", f"keyfile {tls['key']}"]
        self.config = folder / "mosquitto.conf"
        self.config.write_text("\n".join(lines) + "\n")
        self.proc: subprocess.Popen | None = None
        self.start()

    def start(self, timeout: float = 10) -> None:
        self.proc = subprocess.Popen([self.binary, "-c", str(self.config)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mosquitto exited with {self.proc.returncode}; see {self.log}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("mosquitto did not start listening")

    def stop(self) -> None:
        """A clean stop (SIGTERM): mosquitto writes its persistence file and closes every connection."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=10)
        self.proc = None

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""
