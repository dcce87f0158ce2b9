"""The connection to the broker: paho-mqtt's client on its own network thread.

paho-mqtt (Eclipse, pure Python, no dependencies, a wheel for every platform, the Pi included) does the
protocol, keep-alive and reconnects; here is what frame asks of it. A persistent session (fixed client
id, ``clean_session=False``) with QoS 1 subscriptions, so that a command Home Assistant sent while the
frame was away (broker restart, Wi-Fi gap, frame restart) is delivered when it is back. Commands are
acknowledged by hand (``manual_ack``) only once they were carried out (``Link.ack``), so one the broker
accepted is never lost between the socket and the owner action; a redelivery of one already carried
out is recognised and skipped (``Redeliveries``). The last will and the retained availability topic
say ``offline`` / ``online``. Reconnects wait 1 s, doubling to 2 minutes; a refused login or an
unreachable broker is logged once per distinct cause, not at every try (the frame may run for weeks
against a broker that is down).
"""

from __future__ import annotations

import hashlib
import logging
import socket
import ssl
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import paho.mqtt.client as paho

from frame.config.schema import MqttConfig
from frame.daemon.mqtt.discovery import AVAILABLE, NOT_AVAILABLE
from frame.daemon.mqtt.topics import Topics
from frame.errors import FrameError

log = logging.getLogger(__name__)

KEEPALIVE_SECONDS = 60
RECONNECT_MIN_SECONDS, RECONNECT_MAX_SECONDS = 1, 120
MAX_OUTGOING = 200  # messages paho keeps while the broker is away (state updates replace each other)
MAX_PASSWORD_FILE_BYTES = 4096


class MqttSetupError(FrameError):
    """The ``mqtt`` section cannot be used as it is (password file, TLS file): one line naming it."""


@dataclass(frozen=True)
class LinkSettings:
    host: str
    port: int
    username: str
    password: str | None
    tls: bool
    ca_file: str | None
    client_id: str


def read_password_file(path: str) -> str:
    """The password in ``mqtt.password_file``: its first line, capped before reading."""
    file = Path(path).expanduser()
    try:
        with file.open("rb") as handle:
            raw = handle.read(MAX_PASSWORD_FILE_BYTES + 1)
    except OSError as exc:
        raise MqttSetupError(f"mqtt.password_file: cannot read {file}: {exc.strerror or exc}") from None
    if len(raw) > MAX_PASSWORD_FILE_BYTES:
        raise MqttSetupError(f"mqtt.password_file: {file} is larger than {MAX_PASSWORD_FILE_BYTES} bytes; "
                             "it must hold only the password")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise MqttSetupError(f"mqtt.password_file: {file} is not UTF-8 text") from None
    lines = text.splitlines()
    if not lines or not lines[0]:
        raise MqttSetupError(f"mqtt.password_file: {file} is empty; its first line must be the password")
    return lines[0]


def link_settings(config: MqttConfig, topics: Topics) -> LinkSettings:
    """The connection's settings; ``MqttSetupError`` for a section that cannot be used."""
    if config.password and config.password_file:
        raise MqttSetupError("mqtt: give password or password_file, not both")
    password = read_password_file(config.password_file) if config.password_file else (config.password or None)
    ca_file = config.tls.ca_file or None
    if config.tls.enabled and ca_file and not Path(ca_file).expanduser().is_file():
        raise MqttSetupError(f"mqtt.tls.ca_file: {ca_file} is not a file")
    client_id = f"frame-{topics.node}-{socket.gethostname()}"[:64]
    return LinkSettings(config.host, config.port, config.username, password, config.tls.enabled,
                        str(Path(ca_file).expanduser()) if ca_file else None, client_id)


class Redeliveries:
    """The last commands carried out, to skip a redelivery of one (a QoS 1 message whose acknowledgement
    the broker never got comes again, marked ``dup``, with its packet id)."""

    def __init__(self, size: int = 256) -> None:
        self._seen: OrderedDict[tuple[int, str, str], None] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    @staticmethod
    def _key(message: paho.MQTTMessage) -> tuple[int, str, str]:
        return message.mid, message.topic, hashlib.sha256(message.payload).hexdigest()

    def done(self, message: paho.MQTTMessage) -> None:
        with self._lock:
            self._seen[self._key(message)] = None
            while len(self._seen) > self._size:
                self._seen.popitem(last=False)

    def again(self, message: paho.MQTTMessage) -> bool:
        with self._lock:
            return bool(message.dup) and self._key(message) in self._seen


class Link:
    """One frame's connection. ``on_message`` gets every command message (on paho's thread: it must
    return at once and call ``ack`` later); ``on_connected`` runs after each (re)connection, subscribed."""

    def __init__(self, settings: LinkSettings, topics: Topics, on_message: Callable[[paho.MQTTMessage], None],
                 on_connected: Callable[[], None]) -> None:
        self.settings, self.topics = settings, topics
        self._on_message, self._on_connected = on_message, on_connected
        self.connected = threading.Event()
        self.attempts = 0  # connection attempts that failed
        self.failed_at: deque[float] = deque(maxlen=16)  # when the last ones failed (monotonic): the backoff
        self._last_problem: str | None = None
        self._stopping = False
        client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=settings.client_id, clean_session=False,
                             protocol=paho.MQTTv311, manual_ack=True)
        client.will_set(topics.availability, NOT_AVAILABLE, qos=1, retain=True)
        if settings.username or settings.password:
            client.username_pw_set(settings.username or None, settings.password)
        if settings.tls:
            try:
                client.tls_set(ca_certs=settings.ca_file, cert_reqs=ssl.CERT_REQUIRED)
            except (OSError, ssl.SSLError) as exc:
                raise MqttSetupError(f"mqtt.tls.ca_file: cannot use {settings.ca_file}: {exc}") from None
        client.reconnect_delay_set(RECONNECT_MIN_SECONDS, RECONNECT_MAX_SECONDS)
        client.max_queued_messages_set(MAX_OUTGOING)
        client.on_connect = self._connected
        client.on_connect_fail = self._connect_failed
        client.on_disconnect = self._disconnected
        client.on_message = self._message
        self.client = client

    def start(self) -> None:
        self.client.connect_async(self.settings.host, self.settings.port, KEEPALIVE_SECONDS)
        self.client.loop_start()

    def stop(self, timeout: float = 2.0) -> None:
        """Say ``offline`` (retained) and leave; the persistent session keeps what comes meanwhile."""
        self._stopping = True
        if self.connected.is_set():
            info = self.client.publish(self.topics.availability, NOT_AVAILABLE, qos=1, retain=True)
            try:
                info.wait_for_publish(timeout)
            except (RuntimeError, ValueError):
                pass
        self.client.disconnect()
        self.client.loop_stop()

    def publish(self, topic: str, payload: str | bytes, *, retain: bool = False, qos: int = 1) -> None:
        self.client.publish(topic, payload, qos=qos, retain=retain)

    def ack(self, message: paho.MQTTMessage) -> None:
        if message.qos:
            self.client.ack(message.mid, message.qos)

    def _problem(self, text: str) -> None:
        """One log line per distinct cause; a repeat of the same is counted, not logged."""
        self.attempts += 1
        self.failed_at.append(time.monotonic())
        if text != self._last_problem:
            self._last_problem = text
            log.error("mqtt: %s; trying again with backoff (up to every %d s)", text, RECONNECT_MAX_SECONDS)

    def _where(self) -> str:
        return f"{self.settings.host}:{self.settings.port}"

    def _connected(self, client, userdata, flags, reason, properties) -> None:
        if reason.is_failure:
            hint = " (check mqtt.username and the password)" if reason.value in (4, 5, 134, 135) else ""
            self._problem(f"the broker at {self._where()} refused the connection: {reason}{hint}")
            return
        if self._last_problem is not None or not self.connected.is_set():
            log.info("mqtt: connected to %s as %s", self._where(), self.settings.client_id)
        self._last_problem = None
        client.subscribe(self.topics.commands, qos=1)
        client.publish(self.topics.availability, AVAILABLE, qos=1, retain=True)
        self.connected.set()
        try:
            self._on_connected()
        except Exception:
            log.exception("mqtt: publishing the frame's entities failed")

    def _connect_failed(self, client, userdata) -> None:
        hint = (" over TLS (is mqtt.tls.ca_file the authority that signed the broker's certificate, for this "
                "host name, and the port the broker's TLS port?)" if self.settings.tls else "")
        self._problem(f"cannot reach the broker at {self._where()}{hint}")

    def _disconnected(self, client, userdata, flags, reason, properties) -> None:
        if self.connected.is_set():
            self.connected.clear()
            if self._stopping:
                return
            log.warning("mqtt: lost the broker at %s (%s); reconnecting", self._where(), reason)

    def _message(self, client, userdata, message: paho.MQTTMessage) -> None:
        try:
            self._on_message(message)
        except Exception:  # never into paho's thread: the connection must outlive any bad message
            log.exception("mqtt: a message on %s could not be taken", message.topic)
            self.ack(message)
