"""Panel drivers: one module per controller, all behind ``drivers.base.Driver``."""

import importlib

from frame.display.drivers.base import Driver


def driver_class(module: str) -> type[Driver]:
    """The driver class in ``frame.display.drivers.<module>`` (its ``DRIVER`` attribute)."""
    return importlib.import_module(f"frame.display.drivers.{module}").DRIVER
