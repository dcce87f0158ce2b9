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
from pathlib import Path

# The wheels of each extra in setup.cfg (tests/test_install_hints.py keeps the two in step).
EXTRAS = {
    "pi": ("gpiod>=2.0", "gpiozero>=2.0", "matplotlib>=3.7"),
    "inky": ("gpiod>=2.0", "gpiodevice>=0.1", "smbus2>=0.4"),
    "buttons": ("gpiozero>=2.0", "gpiod>=2.0"),
    "plots": ("matplotlib>=3.7",),
}


def pip_command(*requirements: str, no_deps: bool = False) -> str:
    """``<this python> -m pip install ...``, quoted for a shell."""
    words = [sys.executable, "-m", "pip", "install", *(["--no-deps"] if no_deps else []), *requirements]
    return " ".join(shlex.quote(word) for word in words)


def extra_hint(extra: str) -> str:
    """One clause telling the owner how to add extra ``extra`` to the Python running frame."""
    return (f"install frame's '{extra}' extra into the Python this frame runs from: {pip_command(*EXTRAS[extra])} "
            "(on a Pi, sudo tools/install-pi.sh installs everything)")


def checkout() -> Path | None:
    """The source checkout frame runs from (``pip install -e .``), or None for an installed wheel."""
    root = Path(__file__).resolve().parents[1]
    return root if (root / "setup.cfg").is_file() and (root / "frame" / "__init__.py").is_file() else None


def extra_install(extra: str) -> str:
    """The command that adds extra ``extra`` to the Python running frame: from the checkout it runs from
    (``python -m pip install -e '/path/to/frame[plots]'``, what the quick start installed), else its
    wheels. A bare ``pip install 'frame[plots]'`` named a package of the registry, not this frame."""
    root = checkout()
    if root is None:
        return pip_command(*EXTRAS[extra])
    return pip_command("-e", f"{root}[{extra}]")
