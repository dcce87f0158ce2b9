"""Configuration: schema (frozen dataclasses), layered loading and validation.

``load_config(path)`` is what every command and the daemon call; it raises ``ConfigError`` listing all
problems as ``section.key: message (line N)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from frame.lazy import lazy_exports

if TYPE_CHECKING:
    from frame.config.loader import load_config, state_dir, to_plain
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

__all__ = ["ButtonsConfig", "Config", "DisplayConfig", "FeedSource", "FeedsConfig", "GalleryConfig",
           "LoggingConfig", "ModelConfig", "ScheduleConfig", "TasteConfig", "WebConfig", "WorkerConfig",
           "load_config", "state_dir", "to_plain"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "ButtonsConfig": "frame.config.schema",
    "Config": "frame.config.schema",
    "DisplayConfig": "frame.config.schema",
    "FeedSource": "frame.config.schema",
    "FeedsConfig": "frame.config.schema",
    "GalleryConfig": "frame.config.schema",
    "LoggingConfig": "frame.config.schema",
    "ModelConfig": "frame.config.schema",
    "ScheduleConfig": "frame.config.schema",
    "TasteConfig": "frame.config.schema",
    "WebConfig": "frame.config.schema",
    "WorkerConfig": "frame.config.schema",
    "load_config": "frame.config.loader",
    "state_dir": "frame.config.loader",
    "to_plain": "frame.config.loader",
})
