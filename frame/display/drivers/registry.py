"""The driver table: each driver class registers the id that panel rows name (``Panel.driver``).

Panel rows (``frame.config.panels``) name their driver by id, not by class, because the panel table is
read wherever ``config.yaml`` is loaded (the daemon too) and the driver classes import numpy and Pillow.
``DriverName`` there is the list of ids; ``DRIVERS`` (a ``frame.registry.Registry``) refuses an
id it does not list at import, and ``tests/display/test_panel_registry.py`` checks every row's driver
is registered and every driver drives a row.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from frame.config.panels import DriverName
from frame.registry import Registry

if TYPE_CHECKING:
    from frame.display.drivers.base import Driver

D = TypeVar("D", bound=type)

DRIVERS: Registry[type[Driver]] = Registry("driver", DriverName, "frame.config.panels.DriverName")


def register_driver(name: str) -> Callable[[D], D]:
    """Class decorator: the driver for panel rows whose ``driver`` is ``name``."""
    return DRIVERS.register(name)


def driver_for(name: str) -> type[Driver]:
    """The driver class registered as ``name`` (an id from ``DriverName``)."""
    return DRIVERS[name]
