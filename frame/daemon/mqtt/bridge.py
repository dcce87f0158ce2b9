"""The running daemon on the broker: discovery and state out, commands in.

Threads: paho's network thread (``link``) only sorts incoming messages into a bounded inbox; one
command thread carries them out in order (each an owner action, ``commands.run``) and acknowledges
each once done; one publisher thread sends the state document when the daemon's live status or a
command changed it (at most once a second) and every ``RECHECK_SECONDS`` compares it again (the
phone page, a rating from a button, the next night's time change it too). A command that arrives
faster than ``commands.CommandRate`` admits, or when the inbox is full, is acknowledged and dropped:
Home Assistant sends a handful per minute, and a flood must not grow the daemon's memory.

Retained command messages are refused: a retained "paint" would start a render at every reconnect.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from typing import Any, Protocol

import paho.mqtt.client as paho

from frame.config.schema import MqttConfig
from frame.daemon.jobs.info import page_url
from frame.daemon.mqtt import commands, discovery, state
from frame.daemon.mqtt.link import Link, MqttSetupError, Redeliveries, link_settings
from frame.daemon.mqtt.topics import Topics
from frame.daemon.status import LiveStatus
from frame.net.server import HttpServer

log = logging.getLogger(__name__)

INBOX = 32  # commands waiting for the command thread
MIN_PUBLISH_SECONDS = 1.0
RECHECK_SECONDS = 30.0


class BridgeHost(state.StateHost, Protocol):
    live: LiveStatus
    server: HttpServer | None


class MqttBridge:
    """One daemon's MQTT side; ``start`` connects (in the background), ``stop`` says offline and leaves."""

    def __init__(self, host: BridgeHost, config: MqttConfig) -> None:
        self.host = host
        self.topics = Topics.of(config)
        self.link = Link(link_settings(config, self.topics), self.topics, self._received, self._connected)
        server = host.server
        self.frame_url = (config.frame_url or page_url(host.config.web.listen, server.port if server else None)
                          ).rstrip("/")
        self.rate = commands.CommandRate()
        self.redeliveries = Redeliveries()
        self.inbox: queue.Queue[paho.MQTTMessage] = queue.Queue(maxsize=INBOX)
        self.refused = 0  # messages acknowledged without being carried out (rate, inbox, retained, unknown)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._sent: dict[str, Any] = {}  # what was last published per topic (a reconnect clears it)
        self._themes: tuple[str, ...] | None = None
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for name, target in (("mqtt-commands", self._work), ("mqtt-state", self._publish_loop)):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        self.host.live.add_listener(lambda _line: self._wake.set())
        self.link.start()
        log.info("mqtt: connecting to %s:%d (topics %s/..., discovery under %s/)", self.link.settings.host,
                 self.link.settings.port, self.topics.base, self.topics.discovery_prefix)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout=3)
        self.link.stop()

    # incoming (paho's thread: sort and return) -------------------------------------------------------

    def _refuse(self, message: paho.MQTTMessage) -> None:
        self.refused += 1
        self.link.ack(message)

    def _received(self, message: paho.MQTTMessage) -> None:
        name = self.topics.command_name(message.topic)
        if name is None or not self.rate.admit():
            self._refuse(message)
            return
        if message.retain:
            self._refuse(message)
            self._answer(commands.Answer(name, False, "a retained command is ignored: publish it without retain"))
            log.warning("mqtt: retained %s command ignored (a retained command would run at every reconnect)", name)
            return
        try:
            self.inbox.put_nowait(message)
        except queue.Full:
            self._refuse(message)

    def _work(self) -> None:
        while not self._stop.is_set():
            try:
                message = self.inbox.get(timeout=0.5)
            except queue.Empty:
                continue
            if self.redeliveries.again(message):
                log.info("mqtt: %s redelivered by the broker after it was carried out; skipped", message.topic)
                self.link.ack(message)
                continue
            name = self.topics.command_name(message.topic) or "?"
            answer = commands.run(self.host, name, message.payload)
            self.redeliveries.done(message)
            self.link.ack(message)
            self._answer(answer)
            self._wake.set()

    def _answer(self, answer: commands.Answer) -> None:
        self.link.publish(self.topics.answer, json.dumps(answer.to_json(), ensure_ascii=False))

    # outgoing ---------------------------------------------------------------------------------------

    def _connected(self) -> None:
        with self._lock:
            self._sent.clear()
            self._themes = None
        self._wake.set()

    def _publish_loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(RECHECK_SECONDS)
            self._wake.clear()
            if self._stop.is_set():
                return
            if self.link.connected.is_set():
                try:
                    self.publish_now()
                except Exception:
                    log.exception("mqtt: publishing the state failed")
            self._stop.wait(MIN_PUBLISH_SECONDS)

    def publish_now(self) -> None:
        """Publish whatever changed since the last time: discovery (themes), state, picture URL."""
        themes = tuple(self.host.config.taste.themes)
        if themes != self._themes:
            for topic, payload in discovery.messages(self.topics, themes, self.frame_url):
                self.link.publish(topic, json.dumps(payload, ensure_ascii=False), retain=True)
            self._themes = themes
        document = state.document(self.host)
        self._send(self.topics.state, json.dumps(document, ensure_ascii=False, sort_keys=True))
        url = state.picture_url(self.frame_url, document["picture"]["picture_id"])
        if url is not None:
            self._send(self.topics.picture_url, url)

    def _send(self, topic: str, payload: str) -> None:
        with self._lock:
            if self._sent.get(topic) == payload:
                return
            self._sent[topic] = payload
        self.link.publish(topic, payload, retain=True)


def start(host: BridgeHost, config: MqttConfig) -> MqttBridge | None:
    """The bridge, started, when ``mqtt.host`` is set; a section that cannot be used is one error line
    and the daemon runs on without MQTT (the nightly picture matters more)."""
    if not config.host:
        return None
    try:
        bridge = MqttBridge(host, config)
        bridge.start()
    except MqttSetupError as exc:
        log.error("%s; MQTT is off until this is fixed", exc)
        return None
    return bridge
