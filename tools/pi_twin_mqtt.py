"""The Pi twin's Home Assistant: a host mosquitto on 127.0.0.1 and a paho client playing HA (issue 42).

Used by tools/pi_twin.py. The chroot shares the host's network namespace, so the frame inside it
reaches a broker on the host's 127.0.0.1 as a Pi reaches the Mosquitto add-on on the LAN; mosquitto
is Debian's (``.ci/run`` installs it on the host). Through the whole night the client reads the
discovery and state topics and sends a harmless command every ``EVERY_SECONDS`` ("theme auto",
"quiet OFF": neither changes what the twin's nights paint, which are compared with x86), so the
daemon's MQTT side is busy in the same memory cgroup as everything else. ``problems`` says what
Home Assistant would have missed: the 14 entities, a state that went through ``rendering`` with a
progress above 0, an answer to every command, ``online`` while the frame ran.
"""

from __future__ import annotations

import itertools
import json
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import paho.mqtt.client as paho

PORT = 18883  # fixed like the twin's 18080, below the ephemeral range
ENTITIES = 14
EVERY_SECONDS = 20.0
COMMANDS = (("theme", "auto"), ("quiet", "OFF"))


def mqtt_config(config: dict) -> dict:
    """The twin's config.yaml with MQTT on, pointing at the host's broker."""
    return {**config, "mqtt": {**(config.get("mqtt") or {}), "host": "127.0.0.1", "port": PORT}}


class HomeAssistant:
    def __init__(self, work: Path, port: int = PORT) -> None:
        binary = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
        if not Path(binary).exists():
            raise RuntimeError("the twin's night runs with MQTT on and needs mosquitto on the host "
                               "(apt-get install mosquitto; .ci/run does)")
        conf = work / "mosquitto.conf"
        conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\nuser root\n"
                        f"log_dest file {work / 'mosquitto.log'}\n")
        self.broker = subprocess.Popen([binary, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.port = port
        self._wait_listening()
        self.discovery: set[str] = set()
        self.states: list[dict] = []
        self.answers: list[dict] = []
        self.availability: list[str] = []
        self.sent = 0
        self.client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="pi-twin-ha")
        self.client.on_connect = lambda c, u, f, r, p: (c.subscribe("homeassistant/#"), c.subscribe("frame/#"))
        self.client.on_message = self._message
        self.client.connect("127.0.0.1", port, 30)
        self.client.loop_start()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._send, daemon=True)
        self._thread.start()

    def _wait_listening(self) -> None:
        for _ in range(200):
            if self.broker.poll() is not None:
                raise RuntimeError(f"mosquitto exited with {self.broker.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"mosquitto did not listen on 127.0.0.1:{self.port}")

    def _message(self, client, userdata, message) -> None:
        topic, payload = message.topic, message.payload.decode(errors="replace")
        if topic.startswith("homeassistant/") and payload:
            self.discovery.add(topic)
        elif topic == "frame/state":
            self.states.append(json.loads(payload))
        elif topic == "frame/answer":
            self.answers.append(json.loads(payload))
        elif topic == "frame/availability":
            self.availability.append(payload)

    def _send(self) -> None:
        for name, payload in itertools.cycle(COMMANDS):
            if self._stop.wait(EVERY_SECONDS):
                return
            if self.availability[-1:] == ["online"]:
                self.client.publish(f"frame/cmd/{name}", payload, qos=1)
                self.sent += 1

    def problems(self) -> list[str]:
        """What Home Assistant would have missed, read before the daemon stops."""
        found = []
        if len(self.discovery) != ENTITIES:
            found.append(f"{len(self.discovery)} discovery messages, not {ENTITIES}")
        if not any(s.get("state") == "rendering" and (s.get("progress") or 0) > 0 for s in self.states):
            found.append("no state showed a render in progress")
        failed = [a for a in self.answers if not a.get("ok")]
        if failed or len(self.answers) < self.sent - 1 or not self.sent:
            found.append(f"{self.sent} commands sent, {len(self.answers)} answered, refused: {failed[:3]}")
        if self.availability[-1:] != ["online"]:
            found.append(f"availability {self.availability[-1:]}, not online")
        return found

    def describe(self) -> str:
        return (f"mqtt: {len(self.discovery)} entities discovered, {len(self.states)} state messages, "
                f"{self.sent} commands sent, {len(self.answers)} answered")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.client.disconnect()
        self.client.loop_stop()
        self.broker.terminate()
        try:
            self.broker.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.broker.kill()
