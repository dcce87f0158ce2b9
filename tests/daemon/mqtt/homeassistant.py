"""A real paho-mqtt client playing Home Assistant: it reads the discovery messages and the frame's
topics as HA's MQTT integration does (subscribed to ``homeassistant/#`` and ``frame/#``) and sends
commands with QoS 1, waiting for the broker's acknowledgement (the guarantee HA's own publish has)."""

from __future__ import annotations

import json
import threading
import time
import uuid

import paho.mqtt.client as paho


class HomeAssistant:
    def __init__(self, port: int, username: str | None = None, password: str | None = None,
                 prefixes: tuple[str, ...] = ("homeassistant", "frame"), ca_file: str | None = None) -> None:
        self.client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"ha-{uuid.uuid4().hex[:8]}",
                                  protocol=paho.MQTTv311)
        if username:
            self.client.username_pw_set(username, password)
        if ca_file:
            self.client.tls_set(ca_certs=ca_file)
        self.retained: dict[str, bytes] = {}
        self.messages: list[tuple[str, bytes, bool]] = []
        self._lock = threading.Lock()
        self._prefixes = prefixes
        self.client.on_message = self._message
        self.client.on_connect = lambda c, u, f, r, p: [c.subscribe(f"{x}/#", qos=1) for x in prefixes]
        self.client.reconnect_delay_set(0.2, 1)
        self.client.connect("127.0.0.1", port, 30)
        self.client.loop_start()

    def _message(self, client, userdata, message) -> None:
        with self._lock:
            self.messages.append((message.topic, message.payload, message.retain))
            if message.payload:
                self.retained[message.topic] = message.payload
            else:
                self.retained.pop(message.topic, None)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()

    def send(self, topic: str, payload: str | bytes, timeout: float = 10, retain: bool = False) -> None:
        """Publish with QoS 1 and wait until the broker acknowledged it."""
        info = self.client.publish(topic, payload, qos=1, retain=retain)
        info.wait_for_publish(timeout)
        assert info.is_published(), f"the broker did not acknowledge {topic}"

    def wait_for(self, predicate, timeout: float = 15, what: str = "a condition"):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            found = predicate()
            if found:
                return found
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}")

    def latest(self, topic: str) -> bytes | None:
        with self._lock:
            for got, payload, _retain in reversed(self.messages):
                if got == topic:
                    return payload
        return None

    def state(self) -> dict:
        raw = self.latest("frame/state")
        return json.loads(raw) if raw else {}

    def answers(self) -> list[dict]:
        with self._lock:
            return [json.loads(p) for t, p, _r in self.messages if t == "frame/answer"]

    def command(self, name: str, payload: str | bytes, timeout: float = 15) -> dict:
        """Send one command and wait for its answer on ``frame/answer``."""
        before = len(self.answers())
        self.send(f"frame/cmd/{name}", payload)
        return self.wait_for(lambda: next((a for a in self.answers()[before:] if a["command"] == name), None),
                             timeout, f"the answer to {name}")

    def discovery(self) -> dict[str, dict]:
        with self._lock:
            return {t: json.loads(p) for t, p in self.retained.items() if t.startswith("homeassistant/")}
