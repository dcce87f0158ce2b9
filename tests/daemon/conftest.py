"""Shared fixtures for the daemon tests: a configuration in a temp state dir and an open store."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from frame.config import Config
from frame.daemon.store.database import Store


def make_config(tmp_path, **sections) -> Config:
    """A default Config whose state_dir is ``tmp_path``; ``sections`` replace fields per section,
    e.g. ``make_config(tmp_path, feeds={"max_bytes": 100})``."""
    config = Config(state_dir=str(tmp_path))
    changes = {}
    for name, fields in sections.items():
        changes[name] = dataclasses.replace(getattr(config, name), **fields)
    return dataclasses.replace(config, **changes)


@pytest.fixture
def config(tmp_path):
    return make_config(tmp_path)


@pytest.fixture
def store(tmp_path):
    opened = Store.open(tmp_path)
    yield opened
    opened.close()


def add_picture(store: Store, prompt: str = "a lighthouse", **fields) -> int:
    values = {"file": "x.png", "prompt": prompt, "seed": 1, "bytes": 10}
    values.update(fields)
    return store.add_picture(**values)


def clock(offset_minutes: float) -> str:
    """``HH:MM`` in UTC, ``offset_minutes`` from now: schedule times relative to the test's start."""
    return (datetime.now(UTC) + timedelta(minutes=offset_minutes)).strftime("%H:%M")
