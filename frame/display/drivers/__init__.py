"""Panel drivers: one module per controller, all behind ``drivers.base.Driver``.

Importing this package imports every driver module, whose ``@register_driver`` fills the table in
``registry`` (``driver_for(panel.driver)`` reads it).
"""

from frame.display.drivers import (  # noqa: F401  (imported to register their drivers)
    inky,
    virtual,
    waveshare_7in3,
    waveshare_7in5_v2,
)
from frame.display.drivers.registry import DRIVERS, driver_for

__all__ = ["DRIVERS", "driver_for"]
