"""Every topic of one frame on the broker, named once from ``mqtt.base_topic`` and ``discovery_prefix``.

Why a table of its own: Home Assistant's discovery messages, the subscriptions, the state publisher and
the tests all name the same topics, and a topic spelled twice is a command nobody hears.
"""

from __future__ import annotations

from dataclasses import dataclass

from frame.config.schema import MqttConfig

# the commands Home Assistant can send: command -> what its payload is (docs/home-assistant.md)
COMMANDS = ("paint", "next", "favourite", "prompt", "theme", "rate", "quiet")


@dataclass(frozen=True)
class Topics:
    base: str
    discovery_prefix: str

    @classmethod
    def of(cls, config: MqttConfig) -> Topics:
        return cls(config.base_topic, config.discovery_prefix)

    @property
    def node(self) -> str:
        """The frame's id in Home Assistant (device identifier, unique_id prefix, discovery node id)."""
        return self.base.replace("/", "_")

    @property
    def availability(self) -> str:
        return f"{self.base}/availability"

    @property
    def state(self) -> str:
        return f"{self.base}/state"

    @property
    def picture_url(self) -> str:
        return f"{self.base}/picture_url"

    @property
    def answer(self) -> str:
        return f"{self.base}/answer"

    def command(self, name: str) -> str:
        return f"{self.base}/cmd/{name}"

    @property
    def commands(self) -> str:
        """The subscription that takes every command (and nothing else of the frame's)."""
        return f"{self.base}/cmd/+"

    def command_name(self, topic: str) -> str | None:
        """The command a message's topic names, or None for a topic that is not one of ours."""
        prefix = f"{self.base}/cmd/"
        name = topic[len(prefix):] if topic.startswith(prefix) else None
        return name if name in COMMANDS else None

    def discovery(self, component: str, key: str) -> str:
        return f"{self.discovery_prefix}/{component}/{self.node}/{key}/config"
