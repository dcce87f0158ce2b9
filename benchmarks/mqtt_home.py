"""A broker and a Home Assistant for the daemon benchmarks' MQTT-on runs (``daemon_memory.py --mqtt``).

Starts Debian's mosquitto on a free 127.0.0.1 port and a paho client that plays Home Assistant as a
busy household would have it: subscribed to the discovery and state topics, and sending a command
every ``every`` seconds (rate the picture, choose tonight's theme, the quiet hold off, queue a prompt),
never "paint" (the benchmark paints its own night). Counts what came back.
"""

from __future__ import annotations

import itertools
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import paho.mqtt.client as paho

COMMANDS = (("rate", "like"), ("theme", "auto"), ("quiet", "OFF"), ("rate", "4 stars"),
            ("prompt", "a lighthouse in a storm, linocut print"))


def start_broker(folder: Path, port: int) -> subprocess.Popen:
    binary = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    if not Path(binary).exists():
        raise SystemExit("--mqtt needs mosquitto (apt-get install mosquitto)")
    config = folder / "mosquitto.conf"
    config.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
                      f"log_dest file {folder / 'mosquitto.log'}\n")
    proc = subprocess.Popen([binary, "-c", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("mosquitto did not start")


class HomeAssistant:
    def __init__(self, port: int, every: float = 2.0) -> None:
        self.counts = {"discovery": 0, "state": 0, "answers": 0, "sent": 0}
        self.client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="benchmark-ha")
        self.client.on_connect = lambda c, u, f, r, p: (c.subscribe("homeassistant/#"), c.subscribe("frame/#"))
        self.client.on_message = self._message
        self.client.connect("127.0.0.1", port, 30)
        self.client.loop_start()
        self._every, self._stop = every, threading.Event()
        self._thread = threading.Thread(target=self._send, daemon=True)
        self._thread.start()

    def _message(self, client, userdata, message) -> None:
        topic = message.topic
        key = ("discovery" if topic.startswith("homeassistant/") else "state" if topic == "frame/state"
               else "answers" if topic == "frame/answer" else None)
        if key:
            self.counts[key] += 1

    def _send(self) -> None:
        for name, payload in itertools.cycle(COMMANDS):
            if self._stop.wait(self._every):
                return
            self.client.publish(f"frame/cmd/{name}", payload, qos=1)
            self.counts["sent"] += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.client.disconnect()
        self.client.loop_stop()
