"""Configuration: schema (frozen dataclasses), layered loading and validation.

``load_config(path)`` is what every command and the daemon call; it raises ``ConfigError`` listing all
problems as ``section.key: message (line N)``.
"""

from pathlib import Path

from frame.config.loader import load_config, to_plain
from frame.config.schema import (
    ButtonsConfig,
    Config,
    DisplayConfig,
    FeedsConfig,
    FeedSource,
    GalleryConfig,
    LoggingConfig,
    ModelConfig,
    ScheduleConfig,
    TasteConfig,
    WebConfig,
    WorkerConfig,
)


def state_dir(config: Config) -> Path:
    """The state directory with ``~`` expanded (created by whoever writes into it)."""
    return Path(config.state_dir).expanduser()


__all__ = [
    "load_config", "to_plain", "state_dir", "Config", "ModelConfig", "DisplayConfig", "TasteConfig",
    "FeedsConfig", "FeedSource", "ScheduleConfig", "WorkerConfig", "WebConfig", "ButtonsConfig",
    "GalleryConfig", "LoggingConfig",
]
