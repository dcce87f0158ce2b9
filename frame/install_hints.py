"""How to install an optional package so that the frame that asked for it can import it.

frame runs from a virtualenv on the Pi (``/opt/frame`` from ``tools/install-pi.sh``): a package
installed with ``apt`` or another Python's pip is invisible to it. So a hint names the interpreter
running frame (``sys.executable``, the service's venv when the service asks) and the wheels of the
matching ``setup.cfg`` extra — never an apt package or a bare ``pip``. SPI needs nothing: frame talks to
``/dev/spidevB.C`` with ioctls.
"""

from __future__ import annotations

import shlex
import sys

# The wheels of each extra in setup.cfg (tests/test_install_hints.py keeps the two in step).
EXTRAS = {
    "pi": ("gpiod>=2.0", "gpiozero>=2.0", "matplotlib>=3.7"),
    "inky": ("gpiod>=2.0", "gpiodevice>=0.1", "smbus2>=0.4"),
    "buttons": ("gpiozero>=2.0", "gpiod>=2.0"),
}


def pip_command(*requirements: str, no_deps: bool = False) -> str:
    """``<this python> -m pip install ...``, quoted for a shell."""
    words = [sys.executable, "-m", "pip", "install", *(["--no-deps"] if no_deps else []), *requirements]
    return " ".join(shlex.quote(word) for word in words)


def extra_hint(extra: str) -> str:
    """One clause telling the owner how to add extra ``extra`` to the Python running frame."""
    return (f"install frame's '{extra}' extra into the Python this frame runs from: {pip_command(*EXTRAS[extra])} "
            "(on a Pi, sudo tools/install-pi.sh installs everything)")
